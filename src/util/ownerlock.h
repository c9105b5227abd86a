/* ownerlock.h — the OS half of the sliding window's lock (limit.h's
 * struct rl_lock_ops): who the calling thread is, and whether a thread that
 * holds a lock in shared memory still exists. */
#ifndef RL_UTIL_OWNERLOCK_H
#define RL_UTIL_OWNERLOCK_H

#include <stdbool.h>
#include <stdint.h>

#include "limit/limit.h"

/* (pid << 32) | tid of the calling thread, cached per thread (and
 * forgotten in the child after fork). Never 0. */
uint64_t rl_ownerlock_self(void);

/* false only when tgkill(pid, tid, 0) says ESRCH: that thread of that
 * process is gone (a tid reused by another process does not match the
 * pid). Any other answer, EPERM included, counts as alive. Keeps errno. */
bool rl_ownerlock_alive(uint64_t owner);

#endif
