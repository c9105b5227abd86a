/* ownerlock.h — a robust, process-shared pthread mutex kept in
 * RL_OWNERLOCK_WORDS words of shared memory: the sliding window's lock by
 * default (limit.h's struct rl_lock_ops), and the lock of the segment's
 * pause table, the per-destination table and the max_open records.
 *
 * Includes nothing of limit/: limit.h declares the two functions its
 * default ops call, to the same signature and results, and policy/gate.c,
 * which sees both headers, makes the compiler check that they agree.
 *
 * Why a robust mutex: waiters sleep in the kernel (futex) instead of
 * spinning, so a stopped holder costs them nothing; the kernel itself
 * releases a mutex whose holder dies (the thread's robust list, walked at
 * exit whatever killed it), which needs no pid of ours and so works across
 * PID namespaces, where a pid read in one namespace names another process
 * (or none) in the next. */
#ifndef RL_UTIL_OWNERLOCK_H
#define RL_UTIL_OWNERLOCK_H

#include <stdbool.h>
#include <stdint.h>

#include "util/atomics.h"

/* Words of the lock; all zero at first. */
#define RL_OWNERLOCK_WORDS 6u

/* What rl_ownerlock_lock returns. */
enum {
    RL_OWNERLOCK_OK = 0,        /* held */
    RL_OWNERLOCK_RECOVERED = 1, /* held; its previous holder died holding it */
    RL_OWNERLOCK_BUSY = -1,     /* not held: this thread is already inside
                                   such a lock (a signal handler interrupted
                                   it there), or the holder kept it longer
                                   than RL_OWNERLOCK_WAIT_NS (stopped) */
};

#define RL_OWNERLOCK_WAIT_NS 1000000000ull /* 1 s */

/* Prepare the lock's one-time state (the mutex image) now, so that a
 * signal handler deciding a send never does it. Returns a non-zero id of
 * the calling thread ((pid << 32) | tid), for logs and tests. */
uint64_t rl_ownerlock_self(void);

/* Lock and unlock the RL_OWNERLOCK_WORDS words at `lk`. */
int rl_ownerlock_lock(rl_atomic_u64 *lk);
void rl_ownerlock_unlock(rl_atomic_u64 *lk);

/* Holders named by pid: the max_open records of the segment (policy/
 * open.c) and the target processes of the --seccomp supervisor. A pid
 * alone may be reused, so a holder is (pid, start time). */

/* Field 22 of /proc/PID/stat (clock ticks after boot), 0 when unknown;
 * *zombie (when not NULL) set when the process has died and waits to be
 * reaped. Through rl_sys: never a hooked name. */
uint64_t rl_pid_start(int pid, bool *zombie);

/* Is the holder (pid, start) gone: no such process, a zombie, or the pid
 * now another process's (another start time)? Never for the calling
 * process, and never when unsure (start 0 or unreadable: alive). errno is
 * kept. */
bool rl_pid_gone(uint32_t pid, uint64_t start);

#endif
