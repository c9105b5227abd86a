/* fleet_away.c — a fleet budget while its Redis is away, and for a while
 * after it is back (see fleet_away.h). */
#include "fleet/fleet_away.h"

#include <stdatomic.h>

#include "util/atomics.h"

/* ---- the host's share ---------------------------------------------------*/

/* Hosts to divide the limits by: the last reply's count, or the host's
 * (another process's reply) when larger; 0 when no reply ever said. */
uint64_t rl_fleet_hosts_known(struct rl_fleet *f, rl_atomic_u64 *host)
{
    uint64_t h = rl_load_relaxed_u64(&f->hosts);
    if (host != NULL) {
        uint64_t hh = rl_load_relaxed_u64(&host[RL_FLEET_HOST_HOSTS]);
        if (hh > h && hh < 1000000)
            h = hh;
    }
    return h;
}

static uint64_t hosts_now(struct rl_fleet *f, rl_atomic_u64 *host)
{
    uint64_t h = rl_fleet_hosts_known(f, host);
    return h > 0 ? h : 1;
}

/* This host's share of the limits, from the host budget: each unit costs
 * `hosts` units of it (a rate and burst divided by hosts). */
struct rl_verdict rl_fleet_share(struct rl_fleet *f, const struct rl_rule *rule,
                                 int kind, rl_word *const *states,
                                 rl_atomic_u64 *host, uint64_t now,
                                 uint64_t want, uint64_t min,
                                 uint64_t max_wait_ns, struct rl_verdict *v)
{
    unsigned n = rule->nlimits[kind];
    uint64_t h = hosts_now(f, host);
    if (want > UINT64_MAX / h)
        want = UINT64_MAX / h;
    if (min > want)
        min = want;
    struct rl_verdict r = rl_multi_take(states, rule->limits[kind], n, now,
                                        want * h, min * h, max_wait_ns, v);
    uint64_t got = r.granted / h;
    if (r.granted > got * h)
        rl_multi_refund(states, rule->limits[kind], n, now, v,
                        r.granted - got * h);
    r.granted = got;
    if (got == 0 && r.wait_ns == 0)
        r.wait_ns = UINT64_MAX;
    return r;
}

/* Give back to the host budget `units` of a share taken (h each). */
void rl_fleet_unshare(struct rl_fleet *f, const struct rl_rule *rule, int kind,
                      rl_word *const *states, rl_atomic_u64 *host, uint64_t now,
                      struct rl_verdict *v, uint64_t units)
{
    if (units > 0)
        rl_multi_refund(states, rule->limits[kind], rule->nlimits[kind], now, v,
                        units * hosts_now(f, host));
}

/* ---- while Redis is away ------------------------------------------------*/

struct rl_verdict
rl_fleet_fallback(struct rl_fleet *f, struct rl_fleet_budget *st,
                  const struct rl_rule *rule, int kind, rl_word *const *states,
                  rl_atomic_u64 *host, bool drain, uint64_t now, uint64_t want,
                  uint64_t min, uint64_t max_wait_ns, struct rl_verdict *v)
{
    struct rl_verdict r = {0, UINT64_MAX, 0};
    unsigned n = rule->nlimits[kind];
    int fb = f->cfg->fleet_fallback;
    uint64_t gen = rl_load_relaxed_u64(&f->gen) + 1;
    if ((fb == RL_FLEET_SHARE || fb == RL_FLEET_LOCAL) && st != NULL && drain &&
        atomic_exchange_explicit(&st->drained[kind], gen,
                                 memory_order_relaxed) != gen) {
        /* The host budget sat full while Redis decided: empty it, so an
         * outage starts at the fleet's rate, not with a burst per host.
         * (A call alone late behind others' leaves it as it is: drained,
         * that one call would be denied though Redis answers.) */
        struct rl_verdict tmp[RL_MAX_RATES];
        uint64_t cap = UINT64_MAX;
        for (unsigned i = 0; i < n; i++)
            if (rule->limits[kind][i].burst < cap)
                cap = rule->limits[kind][i].burst;
        if (n > 0)
            (void)rl_multi_take(states, rule->limits[kind], n, now, cap, 1, 0,
                                tmp);
    }
    switch (fb) {
    case RL_FLEET_ALLOW:
        r = (struct rl_verdict){want, 0, 0};
        break;
    case RL_FLEET_DENY:
        return r;
    case RL_FLEET_LOCAL:
        r = rl_multi_take(states, rule->limits[kind], n, now, want, min,
                          max_wait_ns, v);
        break;
    case RL_FLEET_SHARE:
    default:
        /* A host that never heard how many hosts share the budget has
         * no share yet (taken as one host, every host starting at once
         * would admit the whole budget): nothing until Redis says. */
        if (rl_fleet_hosts_known(f, host) == 0)
            return r;
        r = rl_fleet_share(f, rule, kind, states, host, now, want, min,
                           max_wait_ns, v);
        break;
    }
    if (st != NULL)
        rl_add_relaxed_u64(&st->debt[kind], r.granted);
    return r;
}

/* Gives back `units` the fallback granted at `now` (and its debt). */
static void fallback_refund(struct rl_fleet *f, struct rl_fleet_budget *st,
                            const struct rl_rule *rule, int kind,
                            rl_word *const *states, rl_atomic_u64 *host,
                            uint64_t now, struct rl_verdict *v, uint64_t units)
{
    if (f->cfg->fleet_fallback == RL_FLEET_LOCAL)
        rl_multi_refund(states, rule->limits[kind], rule->nlimits[kind], now,
                        v, units);
    else if (f->cfg->fleet_fallback == RL_FLEET_SHARE)
        rl_fleet_unshare(f, rule, kind, states, host, now, v, units);
    if (st != NULL)
        atomic_fetch_sub_explicit(&st->debt[kind], units,
                                  memory_order_relaxed);
}

/* The verdict r of a take at `at` ns after the caller's now, as a wait
 * from that now. */
static struct rl_verdict later_by(struct rl_verdict r, uint64_t at)
{
    if (r.granted > 0 || r.wait_ns != UINT64_MAX)
        r.wait_ns = r.wait_ns > UINT64_MAX - at ? UINT64_MAX : r.wait_ns + at;
    return r;
}

struct rl_verdict rl_fleet_fallback_jittered(
    struct rl_fleet *f, struct rl_fleet_budget *st, const struct rl_rule *rule,
    int kind, rl_word *const *states, rl_atomic_u64 *host, bool drain,
    uint64_t now, uint64_t want, uint64_t min, uint64_t max_wait_ns,
    uint64_t not_before_ns, uint64_t jitter_ns, struct rl_verdict *v)
{
    if (jitter_ns == 0 || not_before_ns >= max_wait_ns)
        return rl_fleet_fallback(f, st, rule, kind, states, host, drain, now,
                                 want, min, max_wait_ns, v);
    uint64_t hold = not_before_ns;
    struct rl_verdict r =
        rl_fleet_fallback(f, st, rule, kind, states, host, drain, now + hold,
                          want, min, max_wait_ns - hold, v);
    if (r.granted == 0)
        return later_by(r, hold);
    uint64_t at = hold + r.wait_ns;
    if (at >= max_wait_ns)
        return later_by(r, hold);
    uint64_t j = jitter_ns < max_wait_ns - at ? jitter_ns : max_wait_ns - at;
    uint64_t got = r.granted;
    fallback_refund(f, st, rule, kind, states, host, now + hold, v, got);
    struct rl_verdict later =
        rl_fleet_fallback(f, st, rule, kind, states, host, false,
                          now + at + j, got, got, 0, v);
    if (later.granted > 0)
        return later_by(later, at + j);
    return later_by(rl_fleet_fallback(f, st, rule, kind, states, host, false,
                                      now + hold, got, got,
                                      max_wait_ns - hold, v),
                    hold);
}

/* ---- one decision at Redis ----------------------------------------------*/

/* Is the host (or this process) within RL_FLEET_SETTLE_NS of a return,
 * when every host keeps to its share as well? */
bool rl_fleet_settling(struct rl_fleet *f, rl_atomic_u64 *host, uint64_t cnow)
{
    if (f->cfg->fleet_fallback != RL_FLEET_SHARE)
        return false;
    uint64_t back = rl_load_relaxed_u64(&f->back);
    if (host != NULL) {
        uint64_t hb = rl_load_relaxed_u64(&host[RL_FLEET_HOST_BACK]);
        back = hb > back ? hb : back;
    }
    return back != 0 && cnow >= back && cnow - back < RL_FLEET_SETTLE_NS;
}

/* Node i answered again after an outage: this process and (through the
 * host's word) every other of the host come back, and keep to their
 * share for a while. */
void rl_fleet_returned(struct rl_fleet *f, rl_atomic_u64 *host, uint64_t cnow)
{
    rl_add_relaxed_u64(&f->gen, 1);
    rl_store_relaxed_u64(&f->back, cnow);
    if (host != NULL) {
        uint64_t hb = rl_load_relaxed_u64(&host[RL_FLEET_HOST_BACK]);
        while (hb < cnow && !atomic_compare_exchange_weak_explicit(
                                &host[RL_FLEET_HOST_BACK], &hb, cnow,
                                memory_order_relaxed, memory_order_relaxed))
            ;
    }
}
