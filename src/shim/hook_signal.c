/* hook_signal.c — sigaction and signal: knowing that a call comes from a
 * signal handler.
 *
 * A send made from a handler may have interrupted its thread anywhere:
 * in malloc holding the arena lock, in a mutex, in stdio, in hiredis. The
 * decision it takes must then be made of async-signal-safe steps only
 * (policy/gate.h, rl_gate_handler), and the shim has to know it is in a
 * handler. The re-entry guard says so only when the handler interrupted
 * the shim itself; a handler that interrupted the program's malloc looks
 * like any other call. Ways to know:
 *
 *   - ask the kernel: nothing tells "in a handler" (the signal mask is
 *     the program's business; sigaltstack only when one is used);
 *   - look for the kernel's signal frame on the stack (the restorer's
 *     return address): needs an unwinder, not async-signal-safe itself;
 *   - wrap the program's handlers: every handler the program installs
 *     through sigaction or signal runs inside our trampoline, which raises
 *     a thread-local depth around it. One TLS add each way per signal, no
 *     system call, and exact for every handler installed through libc.
 *
 * We wrap. What the program sees is unchanged: SIG_IGN and SIG_DFL go to
 * the kernel untouched; a handler is installed as the trampoline with the
 * program's mask and flags (plus SA_SIGINFO, so the trampoline gets
 * what an SA_SIGINFO handler needs; SA_RESETHAND and SA_NODEFER act in
 * the kernel as before); the old action read back is the program's own
 * handler and flags, never the trampoline. Not wrapped: handlers
 * installed by a raw rt_sigaction system call (Go's runtime; its sends are
 * raw system calls the shim does not see either), and sysv_signal,
 * bsd_signal and sigset, which glibc implements inside libc.
 *
 * A handler that leaves by siglongjmp skips the trampoline's way out: the
 * depth stays raised. The trampoline records its frame, so that a later
 * call on this thread whose own frame lies above it (the stack grows
 * down: the handler's frames are below the trampoline's) knows the
 * handler is gone and lowers the depth (rl_hook_in_handler_slow). */
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "shim/hooks.h"
#include "shim/self.h"

__thread unsigned rl_sig_depth __attribute__((tls_model("initial-exec")));
static __thread uintptr_t frames[RL_SIG_FRAMES]
    __attribute__((tls_model("initial-exec")));

typedef int (*sigaction_fn)(int, const struct sigaction *, struct sigaction *);
static _Atomic(sigaction_fn) real_sigaction;

extern int __sigaction(int, const struct sigaction *, struct sigaction *);

int sigaction(int sig, const struct sigaction *act, struct sigaction *old);

static sigaction_fn resolve(void)
{
    sigaction_fn f = atomic_load_explicit(&real_sigaction, memory_order_acquire);
    if (f != NULL)
        return f;
    f = (sigaction_fn)dlsym(RTLD_NEXT, "sigaction");
    if (f == NULL || f == sigaction)
        f = __sigaction; /* libc's own, never ours */
    atomic_store_explicit(&real_sigaction, f, memory_order_release);
    return f;
}

/* Resolved at the first sigaction or signal, not at load (every process
 * of a host pays what the constructor does, SPEC §13). A handler can only
 * run once one was installed, and installing it came through here: a
 * program installing a handler from inside a handler finds it resolved. */

static void trampoline(int sig, siginfo_t *si, void *uc)
{
    struct rl_sigprog *sp = &rl_shim_self->sigprog;
    if (sig <= 0 || sig >= _NSIG)
        return;
    uintptr_t fn =
        atomic_load_explicit(&sp->prog[sig].fn, memory_order_acquire);
    int flags =
        atomic_load_explicit(&sp->prog[sig].flags, memory_order_relaxed);
    unsigned d = rl_sig_depth;
    if (d < RL_SIG_FRAMES)
        frames[d] = (uintptr_t)__builtin_frame_address(0);
    rl_sig_depth = d + 1;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    if (flags & SA_SIGINFO)
        ((void (*)(int, siginfo_t *, void *))fn)(sig, si, uc);
    else
        ((void (*)(int))fn)(sig);
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    rl_sig_depth = d;
}

bool rl_hook_in_handler_slow(void)
{
    uintptr_t here = (uintptr_t)__builtin_frame_address(0);
    unsigned d = rl_sig_depth;
    /* Levels whose trampoline frame lies below ours were left by a
     * siglongjmp. Deeper than RL_SIG_FRAMES: trusted as they are. */
    while (d > 0 && d <= RL_SIG_FRAMES && here > frames[d - 1])
        d--;
    rl_sig_depth = d;
    return d > 0;
}

/* The kernel's action as the program must see it. */
static void as_program(int sig, struct sigaction *old)
{
    struct rl_sigprog *sp = &rl_shim_self->sigprog;
    if (old == NULL || old->sa_sigaction != trampoline)
        return;
    uintptr_t fn =
        atomic_load_explicit(&sp->prog[sig].fn, memory_order_acquire);
    int flags =
        atomic_load_explicit(&sp->prog[sig].flags, memory_order_relaxed);
    old->sa_flags = flags;
    if (flags & SA_SIGINFO)
        old->sa_sigaction = (void (*)(int, siginfo_t *, void *))fn;
    else
        old->sa_handler = (void (*)(int))fn;
}

RL_EXPORT int sigaction(int sig, const struct sigaction *act,
                        struct sigaction *old)
{
    struct rl_sigprog *sp = &rl_shim_self->sigprog;
    sigaction_fn real = resolve();
    if (act == NULL || sig <= 0 || sig >= _NSIG ||
        act->sa_handler == SIG_DFL || act->sa_handler == SIG_IGN) {
        int r = real(sig, act, old);
        if (r == 0)
            as_program(sig, old);
        return r;
    }
    struct sigaction mine = *act;
    /* Before the kernel is told: a signal delivered from then on finds
     * the new handler (the trampoline may already be installed). Only the
     * fields a handler needs; the old entry is read first for `old`. */
    struct rl_prog_action was = {atomic_load(&sp->prog[sig].fn),
                                 atomic_load(&sp->prog[sig].flags)};
    atomic_store_explicit(&sp->prog[sig].flags, act->sa_flags,
                          memory_order_relaxed);
    atomic_store_explicit(&sp->prog[sig].fn,
                          act->sa_flags & SA_SIGINFO
                              ? (uintptr_t)act->sa_sigaction
                              : (uintptr_t)act->sa_handler,
                          memory_order_release);
    mine.sa_sigaction = trampoline;
    mine.sa_flags |= SA_SIGINFO;
    int r = real(sig, &mine, old);
    if (r != 0) {
        int e = errno;
        atomic_store(&sp->prog[sig].flags, atomic_load(&was.flags));
        atomic_store(&sp->prog[sig].fn, atomic_load(&was.fn));
        errno = e;
        return r;
    }
    if (old != NULL && old->sa_sigaction == trampoline) {
        old->sa_flags = atomic_load(&was.flags);
        if (old->sa_flags & SA_SIGINFO)
            old->sa_sigaction =
                (void (*)(int, siginfo_t *, void *))atomic_load(&was.fn);
        else
            old->sa_handler = (void (*)(int))atomic_load(&was.fn);
    }
    return 0;
}

/* glibc's signal(): BSD semantics (SA_RESTART, the signal blocked in its
 * handler), made through our sigaction so the handler is wrapped. */
RL_EXPORT sighandler_t signal(int sig, sighandler_t h)
{
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = h;
    sigemptyset(&sa.sa_mask);
    if (sig > 0 && sig < _NSIG)
        sigaddset(&sa.sa_mask, sig);
    sa.sa_flags = SA_RESTART;
    if (sigaction(sig, &sa, &old) != 0)
        return SIG_ERR;
    return old.sa_handler;
}
