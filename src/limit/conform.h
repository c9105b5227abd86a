/* conform.h — does a record of admitted units obey a limit? (rlshim
 * verify). Pure: events in, verdict out.
 *
 * Token bucket of `count` per `period_ns` with depth `burst`, starting
 * full: a sequence obeys it exactly when every interval [t_i, t_j] of its
 * events holds at most burst + count * (t_j - t_i) / period_ns units (the
 * bucket's arrival curve). `slack_ns` widens each interval by that much,
 * for a limiter that reads time in ticks: gcra.c admits within a tick
 * (< 1 ns) of the exact time.
 *
 * Window: at most `count` units in any half-open [t, t + period_ns),
 * the window narrowed by `slack_ns` for the same reason. */
#ifndef RL_LIMIT_CONFORM_H
#define RL_LIMIT_CONFORM_H

#include <stdbool.h>
#include <stdint.h>

struct rl_conform_ev {
    uint64_t t;     /* when the units went (ns) */
    uint64_t units;
};

/* The worst interval found: events first..last (indices into the input),
 * the units in it, and what the limit allows in it. */
struct rl_conform_result {
    bool ok;
    uint64_t first, last;
    uint64_t units, allowed;
};

/* Events must be sorted by t (ties in any order). n == 0 is ok. */
void rl_conform_bucket(const struct rl_conform_ev *ev, uint64_t n,
                       uint64_t count, uint64_t period_ns, uint64_t burst,
                       uint64_t slack_ns, struct rl_conform_result *res);
void rl_conform_window(const struct rl_conform_ev *ev, uint64_t n,
                       uint64_t count, uint64_t period_ns, uint64_t slack_ns,
                       struct rl_conform_result *res);

#endif
