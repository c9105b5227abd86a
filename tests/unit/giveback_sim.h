/* giveback_sim.h — takes and give-backs interleaved at random on one
 * budget (one or more limits, rl_multi_take), on a fake clock, and then
 * the record of what went checked against every limit (limit/conform.h).
 *
 * Callers take now or reserve a later turn; some grants are given back,
 * in part or whole, at once or after others have taken: a grant given
 * back while it is still the newest, and one given back after another
 * caller reserved the next turn or found the budget full. Whatever the
 * order, what went (each grant's units at its turn, less what was given
 * back) must obey every limit: a give-back never admits more than if
 * the take had not happened. Shared by test_window.c, test_gcra.c and
 * test_multi.c. */
#ifndef RL_TESTS_GIVEBACK_SIM_H
#define RL_TESTS_GIVEBACK_SIM_H

#include <criterion/criterion.h>
#include <stdlib.h>

#include "limit/conform.h"
#include "limit/limit.h"

#define GB_MAX_LIMITS 4
#define GB_MAX_STEPS 4000

struct gb_grant {
    uint64_t go;    /* when its units went (or go) */
    uint64_t units; /* granted, less what was given back */
    struct rl_verdict vs[GB_MAX_LIMITS];
};

static int gb_by_time(const void *a, const void *b)
{
    const struct rl_conform_ev *x = a, *y = b;

    return x->t < y->t ? -1 : x->t > y->t;
}

static uint64_t gb_rand(uint64_t *s)
{
    /* xorshift64*: the same sequence on every run for one seed. */
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 2685821657736338717ull;
}

/* `steps` random operations on the limits, the clock moving by up to
 * `step_ns` before each; a take asks for up to `max_want` units. Returns
 * the units that went (so a caller can see the run was not idle). */
static uint64_t gb_run(rl_word *const *states, const struct rl_limit *lims,
                       unsigned n, uint64_t seed, unsigned steps,
                       uint64_t step_ns, uint64_t max_want)
{
    static struct gb_grant g[GB_MAX_STEPS];
    static struct rl_conform_ev ev[GB_MAX_STEPS];
    uint64_t s = seed | 1, now = 100ull * 1000000000ull, total = 0;
    uint64_t horizon = 0;
    unsigned ng = 0, ne = 0, i, k;

    cr_assert_leq(n, GB_MAX_LIMITS);
    cr_assert_leq(steps, GB_MAX_STEPS);
    for (k = 0; k < n; k++)
        if (lims[k].period_ns > horizon)
            horizon = lims[k].period_ns;
    for (i = 0; i < steps; i++) {
        uint64_t r = gb_rand(&s);

        now += r % (step_ns + 1);
        if (r >> 60 < 10 || ng == 0) {
            /* A take: now, or a later turn within a few periods. */
            uint64_t want = 1 + gb_rand(&s) % max_want;
            uint64_t min = 1 + gb_rand(&s) % want;
            uint64_t wait = gb_rand(&s) % 3 ? 4 * horizon : 0;
            struct rl_verdict v =
                rl_multi_take(states, lims, n, now, want, min, wait, g[ng].vs);

            if (v.granted == 0)
                continue;
            g[ng].go = now + v.wait_ns;
            g[ng].units = v.granted;
            ng++;
        } else {
            /* A give-back: of the newest grant (the exact case) or of
             * any, in part or whole. */
            unsigned j = gb_rand(&s) % 2 ? ng - 1 : gb_rand(&s) % ng;
            uint64_t units;

            if (g[j].units == 0)
                continue;
            units = 1 + gb_rand(&s) % g[j].units;
            rl_multi_refund(states, lims, n, now, g[j].vs, units);
            g[j].units -= units;
        }
    }
    for (i = 0; i < ng; i++)
        if (g[i].units > 0) {
            ev[ne].t = g[i].go;
            ev[ne].units = g[i].units;
            total += g[i].units;
            ne++;
        }
    qsort(ev, ne, sizeof ev[0], gb_by_time);
    for (k = 0; k < n; k++) {
        struct rl_conform_result res;

        if (lims[k].algo == RL_ALGO_SLIDING_WINDOW)
            rl_conform_window(ev, ne, lims[k].count, lims[k].period_ns, 0,
                              &res);
        else
            rl_conform_bucket(ev, ne, lims[k].count, lims[k].period_ns,
                              lims[k].burst, 1, &res);
        cr_assert(
            res.ok,
            "seed %llu, limit %u (%llu per %llu ns): %llu units from "
            "t=%llu to t=%llu, %llu allowed",
            (unsigned long long)seed, k, (unsigned long long)lims[k].count,
            (unsigned long long)lims[k].period_ns,
            (unsigned long long)res.units, (unsigned long long)ev[res.first].t,
            (unsigned long long)ev[res.last].t,
            (unsigned long long)res.allowed);
    }
    return total;
}

#endif
