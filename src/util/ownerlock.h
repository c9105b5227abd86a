/* ownerlock.h — the OS half of the sliding window's lock (limit.h's
 * struct rl_lock_ops): a robust, process-shared pthread mutex kept in the
 * window's first RL_WINDOW_LOCK_WORDS state words.
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

#include "limit/limit.h"

/* Prepare the lock's one-time state (the mutex image) now, so that a
 * signal handler deciding a send never does it. Returns a non-zero id of
 * the calling thread ((pid << 32) | tid), for logs and tests. */
uint64_t rl_ownerlock_self(void);

/* The default ops: lock, unlock. */
int rl_ownerlock_lock(rl_word *lk);
void rl_ownerlock_unlock(rl_word *lk);

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
