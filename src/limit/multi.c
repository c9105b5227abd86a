/* multi.c — several limits on one budget: all must allow.
 *
 * Limits are asked in turn, each for no more than the previous granted, so
 * that a partial grant needs little giving back. When one denies, every
 * grant made so far is given back. The grant is the smallest of the grants
 * (each limit gets its excess back).
 *
 * All of them must count the units at the time they go. When one limit
 * reserves a later turn, the unit goes then, not when the limits before it
 * granted it: a window that stamped it earlier would let it expire early,
 * a bucket that charged it earlier would refill twice over it (with
 * `send = 3/s, 2/s` the 2/s let 8 go within a second). So a reservation
 * moves the turn, and every limit not holding a grant for that turn gives
 * its grant back and is asked again at the turn (take() with `now` = the
 * turn: the limits never move backwards, so a later `now` is only a later
 * decision). The wait is the turn.
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

/* Is limit i's grant one for time `at`? (A verdict's wait is kept from
 * the caller's `now`.) */
static bool held_at(const struct rl_verdict *v, uint64_t at)
{
    return v->granted > 0 && v->wait_ns == at;
}

struct rl_verdict rl_multi_take(rl_word *const *states,
                                const struct rl_limit *lims, unsigned n,
                                uint64_t now, uint64_t want, uint64_t min,
                                uint64_t max_wait_ns,
                                struct rl_verdict *verdicts)
{
    const struct rl_algorithm *alg;
    uint64_t least = want, at = 0; /* the turn, from now */
    unsigned i, rounds = 0;
    struct rl_verdict v;

    if (min == 0)
        min = 1;
    if (n == 1) {
        /* One limit (most budgets): its own answer, with no turn for
         * others to agree on. */
        alg = rl_algorithm_get(lims[0].algo);
        if (!alg) {
            verdicts[0] = (struct rl_verdict){0, 0, 0};
            return (struct rl_verdict){0, UINT64_MAX, 0};
        }
        v = alg->take(states[0], &lims[0], now, want, min, max_wait_ns);
        verdicts[0] = v.granted > 0 ? v : (struct rl_verdict){0, 0, 0};
        return v.granted > 0 ? (struct rl_verdict){v.granted, v.wait_ns, 0}
                             : v;
    }
    for (i = 0; i < n; i++)
        verdicts[i] = (struct rl_verdict){0, 0, 0};
    if (n == 0)
        return (struct rl_verdict){want, 0, 0};
    for (;;) {
        for (i = 0; i < n && held_at(&verdicts[i], at); i++)
            ;
        if (i == n)
            break;
        alg = rl_algorithm_get(lims[i].algo);
        /* Each limit is asked once when all grant at once; a turn moves
         * later only by a reservation, at most once per limit and
         * round. A budget so busy that it keeps moving is refused. */
        if (!alg || ++rounds > 4 * n) {
            give_back(states, lims, n, now, verdicts, 0);
            return (struct rl_verdict){0, alg ? at + 1 : UINT64_MAX, 0};
        }
        /* A grant for an earlier turn: the unit would go later than this
         * limit counted it. */
        if (verdicts[i].granted > 0)
            alg->refund(states[i], &lims[i], now, &verdicts[i],
                        verdicts[i].granted);
        v = alg->take(states[i], &lims[i], now + at, least, min,
                      max_wait_ns - at);
        if (v.granted == 0) {
            give_back(states, lims, n, now, verdicts, 0);
            v.wait_ns =
                v.wait_ns > UINT64_MAX - at ? UINT64_MAX : v.wait_ns + at;
            return v;
        }
        if (v.granted < least)
            least = v.granted;
        at += v.wait_ns;
        v.wait_ns = at;
        verdicts[i] = v;
    }
    give_back(states, lims, n, now, verdicts, least);
    return (struct rl_verdict){least, at, 0};
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
