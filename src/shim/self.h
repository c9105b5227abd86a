/* self.h — the shim's one owner of state: struct rl_shim.
 *
 * It holds the process's struct rl_proc (policy/proc.h: config, gate,
 * budgets, the policy's tables) and, beside it, the shim's own tables and
 * words. shim/init.c holds the only instance and the only global pointer
 * to it, rl_shim_self, fixed at link time: a hook reaches any member
 * through one load of that pointer. The hooks are entered through libc's
 * names, with no argument to carry an owner in, so shim/ reaches its
 * members through that pointer (a module's functions keep their shape);
 * policy/ never sees this header and gets its struct rl_proc as an
 * argument.
 *
 * What is not here: the thread-locals (the re-entry guard, the signal
 * depth, the vfork flag, a thread's wait buffers: per thread, not per
 * process) and the real functions found by dlsym (real.c, wreal.c,
 * tlsreal.c, hook_resolve.c, hook_signal.c's sigaction: symbol
 * resolution, the same for any owner). */
#ifndef RL_SHIM_SELF_H
#define RL_SHIM_SELF_H

#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "policy/proc.h"
#include "shim/conntab.h"
#include "shim/epreg.h"
#include "shim/fdtab.h"
#include "shim/readers.h"
#include "shim/tlstab.h"
#include "shim/waitbuf.h"

/* The connected sockets found at start-up (inherit.c): the highest fd
 * given a provisional mark, for rl_hook_inherited_drop; written by the
 * scan only (once, before anyone reads them). */
struct rl_inherit {
    unsigned highest;
    bool any;
};

/* What the program installed for each signal (hook_signal.c). A handler
 * is written here before the kernel is told, so the trampoline always
 * finds one. Two threads installing different handlers for one signal at
 * once may leave the kernel's flags and this entry from different calls
 * (the program's own race; each is a handler it installed). */
struct rl_prog_action {
    _Atomic(uintptr_t) fn;
    atomic_int flags; /* the program's sa_flags */
};
struct rl_sigprog {
    struct rl_prog_action prog[_NSIG];
};

struct rl_shim {
    /* The words every hook reads first (shim.h): where the shim stands
     * (enum rl_shim_state), the look at inherited sockets (RL_SCAN_*),
     * the pid this image runs as; and init.c's own. First, and the head
     * of the process's state right after them: what the constructor and
     * the destructor touch shares one page with the library's data
     * (every page a process touches at start-up costs it a fault). */
    int state;
    int scan;
    int pid;
    /* Children clone(CLONE_VM) made that may still run in this memory
     * with a pid of their own (vfork.c; shim.h's rl_shim_in_vfork_child):
     * atomic. */
    int vm_clones;
    bool constructed;    /* the constructor ran (it is run once) */
    struct rl_proc proc; /* the process's state (policy/proc.h) */
    struct rl_fdtab fdtab;     /* which fd carries which mark */
    struct rl_epreg epreg;     /* the program's epoll registrations */
    struct rl_conntab conntab; /* fd → the connection whose requests count */
    struct rl_tlstab tlstab;   /* TLS session → connection */
    struct rl_waitbufs waitbufs; /* the wait calls' buffers */
    struct rl_inherit inherit;   /* sockets inherited across exec */
    struct rl_sigprog sigprog;   /* the program's signal actions */
    /* fds carrying RL_FD_MADEUP (made-up answers queued, SPEC §15): the
     * wait calls look for them while it is not 0 (madeup.c; atomic,
     * relaxed: a count too high costs a look, never a wrong answer). */
    unsigned madeup;
    /* A TLS session of the process was given a made-up answer: its
     * library's reads look for one first (set once, never cleared). */
    int tls_madeup;
    /* The program's reads under way, for the looks of writes asleep for
     * their turns (readers.h). */
    struct rl_readers readers;
};

extern struct rl_shim *const rl_shim_self __attribute__((visibility("hidden")));

/* The process's state, for the calls into policy/. */
static inline struct rl_proc *rl_shim_proc(void)
{
    return &rl_shim_self->proc;
}

/* The mark of `fd`, 0 when none (or fd out of range): the whole cost of a
 * hook on an fd that is not a throttled socket (fdtab.h). */
static inline uint32_t rl_fdtab_get(int fd)
{
    return rl_fdtab_mark(&rl_shim_self->fdtab, fd);
}

/* rl_fdtab_set, inline when the fd's page exists (fdtab.h). */
static inline int rl_fdtab_put(int fd, uint32_t mark)
{
    return rl_fdtab_store(&rl_shim_self->fdtab, fd, mark);
}

/* Where fd's mark is kept, NULL when nothing is marked there (fdtab.h):
 * for a close, which reads the mark and then clears it. */
static inline _Atomic uint32_t *rl_fdtab_at(int fd)
{
    return rl_fdtab_slot(&rl_shim_self->fdtab, fd);
}

/* Forget `fd` (cheap when it has no page; fdtab.h). */
static inline void rl_fdtab_clear(int fd)
{
    rl_fdtab_unstore(&rl_shim_self->fdtab, fd);
}

#endif
