/* multi.c — several limits on one budget: all must allow.
 *
 * Limits are asked in turn, each for no more than the previous granted, so
 * that a partial grant needs little giving back. When one denies, every
 * grant made so far is given back. The grant is the smallest of the grants
 * (each limit gets its excess back) and the wait the longest reservation.
 * Between a take and its give-back another caller may have been denied
 * what was given back (under-use), or have taken after it, and then the
 * give-back is lost (refund() in limit.h: a limit's give-back never admits
 * more than if its take had not happened). So the whole never admits more
 * than every single limit allows. */
#include "limit/internal.h"

static void give_back(rl_word *const *states, const struct rl_limit *lims,
                      unsigned n, uint64_t now, struct rl_verdict *verdicts,
                      uint64_t keep)
{
    const struct rl_algorithm *alg;
    unsigned i;

    for (i = 0; i < n; i++) {
        if (verdicts[i].granted <= keep)
            continue;
        alg = rl_algorithm_get(lims[i].algo);
        alg->refund(states[i], &lims[i], now, &verdicts[i],
                    verdicts[i].granted - keep);
    }
}

struct rl_verdict rl_multi_take(rl_word *const *states,
                                const struct rl_limit *lims, unsigned n,
                                uint64_t now, uint64_t want, uint64_t min,
                                uint64_t max_wait_ns,
                                struct rl_verdict *verdicts)
{
    struct rl_verdict out = {want, 0, 0};
    const struct rl_algorithm *alg;
    unsigned i;

    if (min == 0)
        min = 1;
    for (i = 0; i < n; i++)
        verdicts[i] = (struct rl_verdict){0, 0, 0};
    if (n == 0)
        return out;
    for (i = 0; i < n; i++) {
        alg = rl_algorithm_get(lims[i].algo);
        if (!alg) {
            give_back(states, lims, i, now, verdicts, 0);
            return (struct rl_verdict){0, UINT64_MAX, 0};
        }
        verdicts[i] = alg->take(states[i], &lims[i], now, out.granted, min,
                                max_wait_ns);
        if (verdicts[i].granted == 0) {
            give_back(states, lims, i, now, verdicts, 0);
            return (struct rl_verdict){0, verdicts[i].wait_ns, 0};
        }
        if (verdicts[i].granted < out.granted)
            out.granted = verdicts[i].granted;
        if (verdicts[i].wait_ns > out.wait_ns)
            out.wait_ns = verdicts[i].wait_ns;
    }
    give_back(states, lims, n, now, verdicts, out.granted);
    return out;
}

void rl_multi_refund(rl_word *const *states, const struct rl_limit *lims,
                     unsigned n, uint64_t now, struct rl_verdict *verdicts,
                     uint64_t units)
{
    const struct rl_algorithm *alg;
    unsigned i;

    for (i = 0; i < n; i++) {
        alg = rl_algorithm_get(lims[i].algo);
        if (alg)
            alg->refund(states[i], &lims[i], now, &verdicts[i], units);
    }
}
