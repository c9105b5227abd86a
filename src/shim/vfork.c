/* vfork.c — vfork and __vfork, so that the hooks can tell a vfork child
 * by one thread-local load (shim.h, rl_shim_in_vfork_child); and clone,
 * for a child that runs in our memory however it was made.
 *
 * Written in assembly, as glibc's is: the child returns from vfork and
 * goes on using the stack below the caller's frame, so a C wrapper's own
 * frame (its saved registers, its return address) could be overwritten
 * before the parent returns through it. Like glibc's, this one keeps the
 * return address in a register across the system call (each task has its
 * own registers) and pushes it back afterwards.
 *
 * The flag is the calling thread's rl_shim_vforking: set to 1 before the
 * system call, seen set by the child (which runs on this thread's TLS
 * block), and put back to what it was (0, unless a vfork child vforks
 * again) by the parent when it resumes. No lock, no system call besides
 * vfork itself. */
#include <errno.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <sys/syscall.h>

#include "shim/hooks.h"
#include "shim/real.h"
#include "shim/shim.h"

typedef int (*rl_clone_fn)(int (*)(void *), void *, int, void *, ...);
static _Atomic(rl_clone_fn) real_clone;

/* glibc's clone: a child with CLONE_VM and without CLONE_THREAD is a
 * process in our memory (shim.h): the process's vm_clones is raised
 * before it is made. A CLONE_VFORK child has exec'd or ended when the
 * call returns in the parent; any other may live on, and the word stays
 * raised (its checks ask getpid()). The optional arguments are passed on
 * as they came: glibc reads each only when `flags` asks for it. */
RL_EXPORT int clone(int (*fn)(void *), void *stack, int flags, void *arg, ...)
{
    va_list ap;
    va_start(ap, arg);
    void *ptid = va_arg(ap, void *);
    void *tls = va_arg(ap, void *);
    void *ctid = va_arg(ap, void *);
    va_end(ap);
    rl_clone_fn real = atomic_load_explicit(&real_clone, memory_order_acquire);
    if (real == NULL) {
        real = (rl_clone_fn)rl_real_next("clone", (void *)clone, NULL);
        if (real == NULL) {
            errno = ENOSYS;
            return -1;
        }
        atomic_store_explicit(&real_clone, real, memory_order_release);
    }
    bool vm = (flags & CLONE_VM) && !(flags & CLONE_THREAD);
    if (vm)
        __atomic_add_fetch(&rl_shim_self->vm_clones, 1, __ATOMIC_SEQ_CST);
    int r = real(fn, stack, flags, arg, ptid, tls, ctid);
    if (vm && (r < 0 || (flags & CLONE_VFORK)))
        __atomic_sub_fetch(&rl_shim_self->vm_clones, 1, __ATOMIC_SEQ_CST);
    return r;
}

#if RL_SHIM_VFORK_HOOKED

__thread int rl_shim_vforking __attribute__((tls_model("initial-exec")));

/* The parent's error path (no child was made): errno, -1. Hidden, called
 * by the stub with the stack as it was at vfork's entry. */
__attribute__((used)) long rl_shim_vfork_failed(long r)
{
    errno = (int)-r;
    return -1;
}

#if defined(__CET__) && (__CET__ & 1)
#define RL_ENDBR "endbr64\n"
#else
#define RL_ENDBR ""
#endif

/* Built with shadow stacks (-fcf-protection=return): the child must not
 * pop the shadow stack the parent shares, so it leaves by an indirect
 * jump (glibc does the same). RDSSP reads 0 where shadow stacks are off. */
#if defined(__CET__) && (__CET__ & 2)
#define RL_CHILD_RET                                                           \
    "    xorl %esi, %esi\n"                                                    \
    "    rdsspq %rsi\n"                                                        \
    "    testq %rsi, %rsi\n"                                                   \
    "    je 1f\n"                                                              \
    "    popq %rdi\n"                                                          \
    "    jmp *%rdi\n"                                                          \
    "1:  ret\n"
#else
#define RL_CHILD_RET "    ret\n"
#endif

#define RL_STR_(x) #x
#define RL_STR(x) RL_STR_(x)

__asm__(".text\n"
        ".globl vfork\n"
        ".type vfork, @function\n"
        ".globl __vfork\n"
        ".type __vfork, @function\n"
        ".p2align 4\n"
        "vfork:\n"
        "__vfork:\n"
        "    .cfi_startproc\n" RL_ENDBR
        /* %esi: the flag as it was; then set it. */
        "    movq rl_shim_vforking@gottpoff(%rip), %rcx\n"
        "    movl %fs:(%rcx), %esi\n"
        "    movl $1, %fs:(%rcx)\n"
        /* The return address into %rdi: the child may overwrite its
         * slot. %rdi and %rsi survive the system call (%rcx does not). */
        "    popq %rdi\n"
        "    .cfi_adjust_cfa_offset -8\n"
        "    .cfi_register %rip, %rdi\n"
        "    movl $" RL_STR(SYS_vfork) ", %eax\n"
        "    syscall\n"
        "    pushq %rdi\n"
        "    .cfi_adjust_cfa_offset 8\n"
        "    .cfi_rel_offset %rip, 0\n"
        "    testq %rax, %rax\n"
        "    jz 2f\n"
        /* The parent (or no child): the flag back as it was. */
        "    movq rl_shim_vforking@gottpoff(%rip), %rcx\n"
        "    movl %esi, %fs:(%rcx)\n"
        "    cmpq $-4095, %rax\n"
        "    jae 3f\n"
        "    ret\n"
        "2:\n" RL_CHILD_RET "3:\n"
        "    movq %rax, %rdi\n"
        "    jmp rl_shim_vfork_failed\n"
        "    .cfi_endproc\n"
        ".size vfork, .-vfork\n"
        ".size __vfork, .-__vfork\n");

#endif
