/* shim.h — what every hook file shares: the init state, the re-entry
 * guard, and the sleep of a delayed call.
 *
 * A hook does its own work only between rl_shim_enter() (true) and
 * rl_shim_leave(); it never holds the guard across the real call or a
 * sleep, so a caller that siglongjmps out of either leaves nothing set. */
#ifndef RL_SHIM_SHIM_H
#define RL_SHIM_SHIM_H

#include <stdbool.h>
#include <stdint.h>
#include <unistd.h>

#include "shim/self.h"

/* Where the shim stands in this process image. The constructor parses
 * the config (so a broken one says so, or exits under RLSHIM_STRICT=1, at
 * start-up) and leaves PENDING; the rest of the set-up (identity, segment,
 * budgets) waits for the first call that could be charged, which runs it
 * once (rl_shim_start) while every other thread that needs it waits. Only
 * READY lets hooks act; BOOT (constructor not run yet) and OFF (nothing to
 * enforce) pass everything through. The word is the shim's `state`
 * (shim/self.h), written with release stores, read with acquire loads
 * (pairs in init.c). */
enum rl_shim_state {
    RL_SHIM_BOOT = 0,
    RL_SHIM_OFF = 1,
    RL_SHIM_PENDING = 2,
    RL_SHIM_INIT = 3, /* one thread is running the deferred set-up */
    RL_SHIM_READY = 4,
};

/* The thread's re-entry guard: set while the shim does its own work
 * (config, store, log), so that any hooked call made from inside passes
 * through; except a send on a MATCHED fd (only a signal handler that
 * interrupted the shim makes one: the shim's own writes are raw system
 * calls), which rl_hook_reentered charges. initial-exec: no allocation on
 * first access. */
extern __thread int rl_shim_busy __attribute__((tls_model("initial-exec")));

/* The shim's `pid` (shim/self.h): the pid this image runs as, set by the
 * constructor and in a fork child. */

/* A vfork child (python's subprocess, for one) runs in its parent's memory
 * until it execs: its close/dup calls must not change the parent's marks,
 * so the bookkeeping hooks ask rl_shim_in_vfork_child() before they touch
 * a mark (vfork::a_subprocess_leaves_the_parents_marks_alone).
 *
 * The shim's vfork (shim/vfork.c, x86-64) sets the calling thread's
 * rl_shim_vforking around the system call. The child runs on that
 * thread's TLS block and sees it set; the parent's other threads read
 * their own, 0: a close on a thread that never vforked costs one TLS
 * load. getpid() is asked only when the flag is set, to tell the child
 * from the parent thread just before the system call (a signal handler
 * there). Elsewhere (no vfork of the shim's) every check asks getpid().
 *
 * A child of clone(CLONE_VM) without CLONE_THREAD (posix_spawn's shape; a
 * program's or a library's may call close) runs in our memory too, with a
 * pid of its own: the shim's clone raises the process's vm_clones while
 * one may run, and every check asks getpid() meanwhile
 * (vfork::a_clone_vm_child_closing_the_socket_leaves_it_counted). */
#if defined(__x86_64__)
#define RL_SHIM_VFORK_HOOKED 1
extern __thread int rl_shim_vforking __attribute__((tls_model("initial-exec")));
#else
#define RL_SHIM_VFORK_HOOKED 0
#endif

static inline bool rl_shim_in_vfork_child(void)
{
#if RL_SHIM_VFORK_HOOKED
    if (__builtin_expect(!rl_shim_vforking, 1) &&
        __builtin_expect(
            !__atomic_load_n(&rl_shim_self->vm_clones, __ATOMIC_RELAXED), 1))
        return false;
#endif
    return getpid() != __atomic_load_n(&rl_shim_self->pid, __ATOMIC_RELAXED);
}

/* The deferred set-up, once: true when the shim is READY after it. Never
 * waits on itself (a call from inside the shim, or from a signal handler
 * that interrupted the set-up, passes through), and waits for another
 * thread's set-up at most a bounded time (a handler that interrupted a
 * lock holder the set-up needs must not hang), then passes through. */
bool rl_shim_start(int state);

/* The look at inherited sockets (inherit.c), the shim's `scan` word: DUE
 * from start-up (when there is a config) until the first send-like call
 * on any fd runs it, RUNNING meanwhile, then DONE. */
enum { RL_SCAN_DONE = 0, RL_SCAN_DUE = 1, RL_SCAN_RUNNING = 2 };

/* Run the scan if it is still due (once; others wait, bounded). */
void rl_shim_scan_now(void);

/* Is the scan still to run? One load on the hot path of write and send. */
static inline bool rl_shim_scan_due(void)
{
    return __builtin_expect(
        __atomic_load_n(&rl_shim_self->scan, __ATOMIC_ACQUIRE) != RL_SCAN_DONE,
        0);
}

/* `[rlshim] io_uring = allow` in the config in use (only asked once the
 * shim is READY). */
bool rl_shim_io_uring_allowed(void);

static inline bool rl_shim_ready(void)
{
    return __atomic_load_n(&rl_shim_self->state, __ATOMIC_ACQUIRE) ==
           RL_SHIM_READY;
}

/* May the shim act in this process at all (not OFF)? Bookkeeping hooks
 * skip their marks when it may not. */
static inline bool rl_shim_may_act(void)
{
    return __atomic_load_n(&rl_shim_self->state, __ATOMIC_RELAXED) !=
           RL_SHIM_OFF;
}

static inline bool rl_shim_enter(void)
{
    int s = __atomic_load_n(&rl_shim_self->state, __ATOMIC_ACQUIRE);
    if (__builtin_expect(s != RL_SHIM_READY, 0) && !rl_shim_start(s))
        return false;
    if (rl_shim_busy)
        return false;
    rl_shim_busy = 1;
    /* Keep the compiler from moving the shim's work above the flag: a
     * signal handler on this thread must see it set. */
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    return true;
}

static inline void rl_shim_leave(void)
{
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    rl_shim_busy = 0;
}

/* Sleep until `deadline_ns` on CLOCK_MONOTONIC, resuming after EINTR for
 * the time left (an absolute deadline makes that exact). Holds nothing. */
void rl_shim_sleep_until(uint64_t deadline_ns);

/* The same, for a send that waits its turn on the connected socket fd:
 * woken early when fd hangs up (POLLHUP: the peer reset, or both ways are
 * shut), then true, and the send goes to the kernel, which refuses it
 * (SPEC §2: a client whose server resets the connection while a request
 * waits out a pause learns of it at once). fd < 0, or a socket that
 * reports POLLHUP when the sleep begins (one not connected yet reports
 * it too), sleeps the whole time. Holds nothing; keeps errno. */
bool rl_shim_sleep_on(int fd, uint64_t deadline_ns);

#endif
