/* open.h — `max_open = N`: connections open at once per budget (SPEC §4).
 *
 * A budget with max_open has an *open area* in the segment:
 *   [0] connections open now (the admission word: a connect is admitted by
 *       a CAS that raises it while it is below N)
 *   [1] waiters (sleepers on [2]; a release wakes them only when non-zero)
 *   [2] a sequence bumped at every release: the futex word (low 32 bits)
 *   then RL_OPEN_HOLDERS records of two words: pid << 32 | connections,
 *   and the holder's start time (field 22 of /proc/PID/stat), so that the
 *   connections of a process that died, even by SIGKILL, are taken back
 *   by the next decision that finds the area full (a pid reused by another
 *   process has another start time).
 * A process that holds connections of more areas than it has records for
 * is refused (never over-admitted).
 *
 * In the process, each fd that holds connections maps to a connection
 * record (the areas it holds, and how many fds refer to it: a dup is the
 * same connection); the close paths of the shim forget fds, and the last
 * fd of a connection gives its areas back. A connection open across exec
 * stays counted until that process ends. */
#ifndef RL_POLICY_OPEN_H
#define RL_POLICY_OPEN_H

#include <stdbool.h>
#include <stdint.h>

#include "util/atomics.h"

#define RL_OPEN_HOLDERS 16u
#define RL_OPEN_WORDS (3u + 2u * RL_OPEN_HOLDERS)
#define RL_OPEN_MAX_AREAS 2u /* a connection holds at most this many */
#define RL_OPEN_CONNS 4096u  /* connections tracked at once */

/* A connection record. `state` is gen << 32 | refs: refs counts the fds
 * that refer to it (0: free; FREEING: its last fd's close is giving its
 * areas back); gen changes each time the record is freed, and the fd map
 * names the record with the gen it had when the fd took its reference, so
 * that a dup that read the map before a close freed the record (and the
 * next bind claimed it again) never takes a reference to the wrong
 * connection. n and areas are written by the binder that moved refs from
 * 0, read by the thread whose unref reaches FREEING (the CAS on state
 * orders them). */
struct rl_open_conn {
    _Atomic uint64_t state;
    unsigned n;
    rl_atomic_u64 *areas[RL_OPEN_MAX_AREAS];
};

/* This process's side (a member of struct rl_proc): its connections, the
 * map of the fds that hold them, and who it is. All zero: none, off. */
struct rl_open {
    /* Set by rl_open_enable when some section has max_open: the shim's
     * close paths call in only then. */
    bool on;
    struct rl_open_conn conns[RL_OPEN_CONNS];
    _Atomic(_Atomic uint32_t *) fdmap; /* fd -> record, 0: none (mmap'd) */
    _Atomic unsigned fd_top;           /* highest fd ever bound + 1 */
    /* The process's (pid, start time): pid << 32 | 1 once read, re-read
     * when the pid changes (a fork child). */
    _Atomic uint64_t me_cache, me_start;
};

void rl_open_enable(struct rl_open *o);

/* Admit one connection of o's process to `area` (limit `max`): 0, or
 * -EAGAIN when it holds max already (after taking back the connections
 * of dead holders), with *seq the sequence to wait on (rl_open_wait). */
int rl_open_acquire(struct rl_open *o, rl_atomic_u64 *area, uint32_t max,
                    uint32_t *seq);

/* Give one connection of o's process back to `area`. */
void rl_open_release(struct rl_open *o, rl_atomic_u64 *area);

/* Sleep until `area` releases a connection after `seq`, or until
 * `deadline_ns` (CLOCK_MONOTONIC), or 100 ms (a holder killed wakes
 * nobody: the caller decides again and takes its connections back). */
void rl_open_wait(rl_atomic_u64 *area, uint32_t seq, uint64_t deadline_ns);

/* Has `area` released a connection after `seq`, or did a holder that is
 * gone leave some (taken back now)? For a waiter that cannot sleep on the
 * futex (the --seccomp supervisor's timer queue). */
bool rl_open_freed(rl_atomic_u64 *area, uint32_t seq);

/* fd now holds the connections of areas[0..n): bind them to it. When fd
 * cannot be tracked, the areas are given back at once (never a leak that
 * blocks others for ever). */
void rl_open_bind(struct rl_open *o, int fd, rl_atomic_u64 *const *areas,
                  unsigned n);

/* The close paths: fd is gone; [first, last] are gone; `to` now refers to
 * what `from` does (dup2, dup3, F_DUPFD). */
void rl_open_forget(struct rl_open *o, int fd);
void rl_open_forget_range(struct rl_open *o, unsigned first, unsigned last);
void rl_open_dup(struct rl_open *o, int from, int to);

/* The release sequence of `area` now (the word rl_open_wait sleeps on):
 * a waiter that cannot sleep on it (a deferred connect) compares it with
 * the one rl_open_acquire gave it. */
uint32_t rl_open_seq(rl_atomic_u64 *area);

/* A holder other than this process: the supervisor of `rlshim run
 * --seccomp` holds connections for the target processes it connects for,
 * so that a target that dies (even by SIGKILL) gives them back as a
 * preloaded process would, while the supervisor lives on. */
struct rl_open_holder {
    uint32_t pid;   /* a process (thread group) id */
    uint64_t start; /* its start time (rl_open_start_of) */
};

/* Who an acquire of this thread names as the holder now: this process
 * (pid and start time), or the holder it acts for (rl_open_act_for). */
void rl_open_holder_now(struct rl_open *o, uint32_t *pid, uint64_t *start);

/* Field 22 of /proc/PID/stat, 0 when unknown. */
uint64_t rl_open_start_of(int pid);

/* Until called again with NULL, this thread's acquires and releases (and
 * the gate's, which make them) name `h` as the holder, not this process.
 * `h` must outlive that. */
void rl_open_act_for(const struct rl_open_holder *h);

/* Give back one connection that `h` holds in `area`: nothing when `h` holds
 * none there any more (a decision took back the connections of `h` after
 * it died). */
void rl_open_release_as(rl_atomic_u64 *area, const struct rl_open_holder *h);

/* For tests: connections o's process holds in `area`. */
uint32_t rl_open_held(struct rl_open *o, rl_atomic_u64 *area);

#endif
