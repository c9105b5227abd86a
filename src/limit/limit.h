/* limit.h — the limiter algorithms: pure, exact, lock-free where they can be.
 *
 * An algorithm owns nothing but its state words, which the caller provides
 * (in the shared segment, or in process memory: the algorithm cannot tell).
 * It does no I/O, reads no clock and takes no lock of the process's: the
 * caller passes `now` (CLOCK_MONOTONIC nanoseconds) and the cost. State words
 * all start at zero, and zero means "full budget, never used".
 *
 * Includes nothing but <stdint.h>, <stdbool.h> and <stdatomic.h>.
 *
 * Two algorithms stand behind one interface (struct rl_algorithm):
 *   token bucket — GCRA on a single 64-bit word updated by compare-and-swap;
 *   sliding window — at most N in any rolling period, a ring of N stamps
 *                    under a lock that a dead holder cannot leave locked.
 * Swapping the algorithm of a limit is choosing another table. */
#ifndef RL_LIMIT_H
#define RL_LIMIT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

typedef _Atomic uint64_t rl_word;

enum rl_algo_id {
    RL_ALGO_TOKEN_BUCKET = 0,
    RL_ALGO_SLIDING_WINDOW = 1,
};

/* Sliding-window rings hold one stamp per admitted unit; beyond this the
 * config is refused. */
#define RL_WINDOW_MAX_COUNT 65536u

/* A window's state: the lock (RL_WINDOW_LOCK_WORDS words, struct
 * rl_lock_ops), then head, job and job stamp, then the ring of N stamps
 * (window.c). */
#define RL_WINDOW_LOCK_WORDS 6u
#define RL_WINDOW_STATE_WORDS (RL_WINDOW_LOCK_WORDS + 3u)

/* What rl_limit_prepare returns; limit/ cannot include <errno.h>, so these
 * are spelled out: they equal -EINVAL and -ERANGE on Linux (a test checks). */
#define RL_LIMIT_EINVAL (-22)
#define RL_LIMIT_ERANGE (-34)

/* The token bucket's fastest rate: 16 units per nanosecond (16 GB/s). At
 * that rate its clock of ticks lasts 2^58 ns (9 years) of CLOCK_MONOTONIC;
 * at 1 unit/ns or slower, 2^62 ns (146 years). */
#define RL_GCRA_MAX_UNITS_PER_NS 16u

/* The immutable description of one limit ("5/s, burst 5"), prepared once
 * from the config by rl_limit_prepare and then only read. Fixed-width only:
 * the config hash covers it. */
struct rl_limit {
    uint32_t algo; /* enum rl_algo_id */
    uint32_t pad_;
    uint64_t count;     /* N: units admitted per period */
    uint64_t period_ns; /* the period, nanoseconds */
    uint64_t burst;     /* token bucket capacity (default N); window: N */
    /* Derived by rl_limit_prepare; algorithm-private. */
    uint64_t derived[6];
};

/* What one call to take() decided. */
struct rl_verdict {
    uint64_t granted; /* units taken now; 0 = denied, nothing changed */
    uint64_t wait_ns; /* granted: ns the caller must sleep before it may go
                         (a reservation; 0 = go now). denied: ns until
                         `min` units could be granted (UINT64_MAX: never) */
    uint64_t stamp;   /* algorithm-private: what refund() needs to find
                         this grant (the window's stamp, the token
                         bucket's word as this grant left it); 0 when
                         nothing was granted */
};

struct rl_algorithm {
    const char *name; /* "token_bucket", "sliding_window": the config word */

    /* Number of state words one limit needs (1 for the token bucket,
     * RL_WINDOW_STATE_WORDS + N for the window). */
    uint32_t (*state_words)(const struct rl_limit *lim);

    /* Take between `min` and `want` units at time `now` (1 <= min <= want).
     * Grants as many as are available now, up to want, if at least min are.
     * Otherwise, if the caller is willing to wait up to max_wait_ns (> 0),
     * reserves `want` units (at most the capacity: the burst, or the
     * window's N, since no more can ever be available at once) when they
     * will be available within max_wait_ns, and returns how long to sleep:
     * reservations are served in the order they were taken. Otherwise
     * denies and changes nothing. A `min` above the capacity is denied
     * with wait UINT64_MAX. Never moves state backwards, whatever `now` a
     * caller passes. */
    struct rl_verdict (*take)(rl_word *st, const struct rl_limit *lim,
                              uint64_t now, uint64_t want, uint64_t min,
                              uint64_t max_wait_ns);

    /* Give back `units` of a grant (another limit denied, the kernel sent
     * less, a reserved turn was not used): `verdict` is what take()
     * returned, and is updated (granted less the units; what a later give-
     * back of the rest must find), so that the rest can be given back
     * later with the same verdict. Never gives back more than was taken.
     *
     * The rule of every give-back: it never admits more than if the take
     * had not happened. A turn given back is only exact while it is still
     * the newest one taken; once another caller has taken after it (a
     * reservation of a later turn, or a take that found the budget full),
     * that caller's verdict was built on it and cannot be moved. Then as
     * much as cannot be given back exactly is lost: under-use, never
     * over-admission. Token bucket: the units go back only if the word
     * still holds what this grant wrote (one CAS), else none. Window: the
     * newest stamps that are still this grant's are taken out again, and
     * the slots they had replaced get a stamp no younger than the one each
     * held before the take (the grant's stamp less W, or the oldest stamp
     * left, the earlier of the two), so the window never looks emptier
     * than before. A verdict that take() did not return (stamp 0) gives
     * nothing back. */
    void (*refund)(rl_word *st, const struct rl_limit *lim, uint64_t now,
                   struct rl_verdict *verdict, uint64_t units);

    /* Units that could be taken at `now` without waiting (for stat). */
    uint64_t (*available)(rl_word *st, const struct rl_limit *lim,
                          uint64_t now);

    /* ns from `now` until `units` could be taken without waiting: 0 when
     * they can now, UINT64_MAX when never (more than the capacity, or the
     * lock could not be had). Reads only: asking takes nothing, so it needs
     * no give-back (a take followed by a refund would lose the units
     * whenever another caller took in between). */
    uint64_t (*eta)(rl_word *st, const struct rl_limit *lim, uint64_t now,
                    uint64_t units);

    /* A full budget again (`rlshim reset`), while other processes may be
     * deciding on the same words: the token bucket stores 0 in its word;
     * the window empties its ring under its lock. Returns 0, or -1 when
     * the lock could not be had (RL_LOCK_BUSY): nothing was changed. */
    int (*reset)(rl_word *st, const struct rl_limit *lim);
};

extern const struct rl_algorithm rl_token_bucket;
extern const struct rl_algorithm rl_sliding_window;

/* The sliding window's lock: RL_WINDOW_LOCK_WORDS words at the start of
 * its state, all zero at first, whose meaning belongs to the ops (the
 * default ones keep a robust process-shared mutex there, util/ownerlock.c:
 * waiters sleep, and a holder killed anywhere is taken over at once, in
 * any PID namespace). What needs the OS sits behind these ops, so that
 * limit/ stays free of system headers. A holder killed half-way through
 * an update leaves a job record that the next holder finishes
 * (window.c). */
enum {
    RL_LOCK_OK = 0,        /* held */
    RL_LOCK_RECOVERED = 1, /* held; its previous holder died holding it */
    RL_LOCK_BUSY = -1,     /* not held: this thread is already inside a
                              window's lock (a signal handler interrupted
                              it there), or the holder kept it longer than
                              the ops wait (stopped): the caller denies */
};

struct rl_lock_ops {
    int (*lock)(rl_word *lk);
    void (*unlock)(rl_word *lk);
    /* Tests only (NULL otherwise): called with the lock held, between
     * stores of the ring, so a test can park or kill the holder there. */
    void (*in_critical)(rl_word *st);
};

/* The default ops (window.c): the two functions below, with system
 * calls, defined by util/ownerlock.c. Declared here rather than included,
 * so that limit/ includes nothing of ours and util/ nothing of limit/: the
 * one arrow between them is this link, from limit down to util.
 * util/ownerlock.h declares them too (its RL_OWNERLOCK_* are the
 * RL_LOCK_* above), and policy/gate.c, which includes both, has the
 * compiler check that the two agree. */
int rl_ownerlock_lock(rl_word *lk);
void rl_ownerlock_unlock(rl_word *lk);
extern const struct rl_lock_ops rl_ownerlock_ops;

/* Set the ops every sliding window of this process uses from now on; NULL
 * restores rl_ownerlock_ops, the default that needs no call. Thread-safe
 * (one atomic pointer), meant for tests. */
void rl_window_set_lock_ops(const struct rl_lock_ops *ops);

/* The algorithm for an id; NULL for an unknown id. */
const struct rl_algorithm *rl_algorithm_get(uint32_t algo);

/* Fill `lim` for `count` units per `period_ns` with capacity `burst`
 * (0 = count). Returns 0, or RL_LIMIT_EINVAL for an unknown algorithm, a
 * zero count or period, a window count over RL_WINDOW_MAX_COUNT or a
 * window burst other than 0 or count, or RL_LIMIT_ERANGE for a rate the
 * arithmetic cannot hold exactly (token bucket: more than
 * RL_GCRA_MAX_UNITS_PER_NS, or a burst over 2^60). */
int rl_limit_prepare(struct rl_limit *lim, uint32_t algo, uint64_t count,
                     uint64_t period_ns, uint64_t burst);

/* The token bucket's word moved back by `units` (at most the burst)
 * whatever was taken since: the give-back of units a lease took ahead
 * (policy/lease.c keeps no verdict; SPEC: leased units not spent go back
 * within 10 ms). NOT bound by refund()'s rule: when, since the units were
 * taken, a caller reserved a later turn or found the bucket full, it can
 * admit up to `units` more than if they had never been taken. Only for
 * the lease, whose units are few (a small part of the burst, taken only
 * while the bucket holds half of it). */
void rl_token_bucket_credit(rl_word *st, const struct rl_limit *lim,
                            uint64_t units);

/* Several limits on one budget (`connect = 5/s, 100/min`): all must allow.
 * Takes from each in turn; when one denies, what the others granted is
 * given back (by the rule of refund() above: exactly, or lost); a partial
 * grant is the smallest of the grants. `states[i]` holds lim[i]'s words.
 * `verdicts` (n entries) receives each limit's own verdict so the caller
 * can give back later (rl_multi_refund; their waits are from `now`). The
 * returned verdict's wait is the one turn at which every limit counted
 * the units: when one reserves a later turn, the others are asked again
 * at that turn (multi.c). Never admits more than every single limit
 * allows: each limit's give-back admits no more than if its take had not
 * happened. */
struct rl_verdict rl_multi_take(rl_word *const *states,
                                const struct rl_limit *lims, unsigned n,
                                uint64_t now, uint64_t want, uint64_t min,
                                uint64_t max_wait_ns,
                                struct rl_verdict *verdicts);

/* Give back `units` of a grant made by rl_multi_take to every limit;
 * `verdicts` are updated as refund() does. */
void rl_multi_refund(rl_word *const *states, const struct rl_limit *lims,
                     unsigned n, uint64_t now, struct rl_verdict *verdicts,
                     uint64_t units);

#endif
