/* gate_pause.c — politeness that listens (SPEC §12): a server's 429 or 503
 * pauses the request budgets its request was charged to, and a request
 * decided while its budget is paused waits for the end of the pause (or
 * fails).
 *
 * A budget's pause is two words beside its limiters (a slot's in
 * layout.h's struct rl_seg_store, a per-destination entry's in dests.c),
 * so every process of the user sees it:
 *   [0] paused until: CLOCK_MONOTONIC ns of this boot (the segment is per
 *       boot), its lowest bit saying why (1: the backoff, 0: the server's
 *       Retry-After), so that the reason and the time change in one store;
 *       only ever moved later, by CAS;
 *   [1] the backoff: 429/503 without Retry-After in a row, relaxed; a
 *       success puts it back to 0.
 * A fleet budget's pause is also Redis's (fleet.h's rl_fleet_pause, by
 * Redis's clock), which every host's request script waits for; the count
 * of the backoff stays each host's (a success resets it without a round
 * trip). Each response that moved a pause is a line of the decision log
 * (verdict pause), which `rlshim verify --obeyed-retry-after` reads. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fleet/fleet.h"
#include "policy/dest.h"
#include "policy/gate.h"
#include "policy/gate_int.h"
#include "policy/gate_log.h"
#include "policy/gate_pause.h"
#include "policy/names.h"
#include "policy/proc.h"
#include "policy/sites.h"
#include "state/store.h"
#include "util/atomics.h"
#include "util/clock.h"
#include "util/declog.h"

#define WHY_BACKOFF 1ull

uint64_t rl_pause_end(uint64_t word)
{
    return word & ~WHY_BACKOFF;
}

const char *rl_pause_reason(uint64_t word)
{
    return (word & WHY_BACKOFF) ? "backoff" : "retry_after";
}

bool rl_pause_obeyed(const struct rl_rule *r)
{
    return r != NULL && r->retry_after == RL_RETRY_AFTER_OBEY &&
           r->nlimits[RL_KIND_REQUEST] > 0;
}

uint64_t rl_pause_left(const struct rl_gate_charge *c, uint64_t now,
                       const char **reason)
{
    if (c->pause == NULL || !rl_pause_obeyed(c->rule))
        return 0;
    /* Pairs with the release CAS of pause_until: a pause seen is whole. */
    uint64_t w = rl_load_acquire_u64(&c->pause[0]);
    uint64_t end = rl_pause_end(w);
    if (end <= now)
        return 0;
    *reason = rl_pause_reason(w);
    return end - now;
}

/* The budget's turn: the time one request takes in its slowest request
 * limit (request = 1/s: 1 s; 60/min: 1 s; 100/h: 36 s), the pause of a
 * 429/503 that said nothing, before doubling. */
static uint64_t one_turn(const struct rl_rule *r)
{
    uint64_t turn = 0;
    for (unsigned j = 0; j < r->nlimits[RL_KIND_REQUEST]; j++) {
        const struct rl_limit *l = &r->limits[RL_KIND_REQUEST][j];
        uint64_t t = l->period_ns / (l->count > 0 ? l->count : 1);
        if (t > turn)
            turn = t;
    }
    return turn > 0 ? turn : 1;
}

/* `turn` doubled `n` times, at most `cap`. */
static uint64_t doubled(uint64_t turn, uint64_t n, uint64_t cap)
{
    if (turn >= cap)
        return cap;
    while (n-- > 0) {
        if (turn > cap / 2)
            return cap;
        turn *= 2;
    }
    return turn;
}

/* Move the pause to end at `until` unless it already ends as late;
 * true when it moved. */
static bool pause_until(rl_atomic_u64 *w, uint64_t until, bool backoff)
{
    uint64_t want = rl_pause_end(until) | (backoff ? WHY_BACKOFF : 0);
    uint64_t seen = rl_load_relaxed_u64(w);
    while (rl_pause_end(seen) < rl_pause_end(want))
        if (rl_cas_acq_rel_u64(w, &seen, want))
            return true;
    return false;
}

void rl_pause_mirror(const struct rl_gate_charge *c, uint64_t now, uint64_t ns,
                     bool backoff)
{
    if (c->pause != NULL && rl_pause_obeyed(c->rule)) {
        uint64_t until = rl_add_sat_u64(now, ns);
        pause_until(&c->pause[0], until, backoff);
        rl_store_hold(c->budget->store, until);
    }
}

static void outcome(struct rl_proc *p, const struct rl_gate_ticket *t,
                    const struct rl_gate_charge *c, const struct rl_gate_req *q,
                    int status, bool has_ra, uint64_t ra_ns, uint64_t now)
{
    const struct rl_rule *r = c->rule;
    if (c->pause == NULL || !rl_pause_obeyed(r))
        return;
    if (status != 429 && status != 503) {
        /* A success ends the doubling; so does any answer that is not
         * the server saying "slower" (a 404 is an answer too). A 5xx
         * other than 503 says nothing about the rate: left as it is. */
        if (status >= 200 && status < 500 &&
            rl_load_relaxed_u64(&c->pause[1]) != 0)
            rl_store_relaxed_u64(&c->pause[1], 0);
        return;
    }
    uint64_t cap = r->max_retry_after_ns, wait;
    if (has_ra) {
        wait = ra_ns < cap ? ra_ns : cap;
    } else {
        uint64_t n = rl_add_relaxed_u64(&c->pause[1], 1);
        wait = doubled(one_turn(r), n, cap);
    }
    if (wait == 0)
        return; /* Retry-After: 0 (or a date past): go on at once */
    uint64_t until = now > UINT64_MAX - wait ? UINT64_MAX : now + wait;
    bool moved = pause_until(&c->pause[0], until, !has_ra);
    /* The segment is not removed as unused while the pause runs (SPEC
     * §5): it is not a budget that refills. */
    rl_store_hold(c->budget->store, until);
    if (rl_fleet_decides(&p->fleet, r)) {
        /* Every host's: Redis's clock ends it (away: this host's). */
        char label[RL_GATE_FLEET_LABEL_MAX];
        moved |= rl_fleet_pause(&p->fleet, rl_gate_fleet_label(t, c, label),
                                wait, !has_ra) == 0;
    }
    if (moved && rl_declog_enabled(&p->declog)) {
        const struct rl_gate_call call = {q->call, q->fd, q->sa, q->salen,
                                          q->name, NULL,  NULL,  true};
        rl_gate_log_pause(p, t, c, &call, (unsigned)status, wait,
                          has_ra ? "retry_after" : "backoff");
    }
}

void rl_gate_request_outcome_at(struct rl_proc *p, const struct rl_gate_req *q,
                                int status, bool has_retry_after,
                                uint64_t retry_after_ns, uint64_t now)
{
    if (status < 200)
        return; /* 1xx: not the final answer */
    if (p->gate.rule == NULL && !rl_sites_any(&p->sites))
        return;
    struct budget *b = rl_gate_budget(&p->gate);
    struct rl_peer peer;
    if (b == NULL || !rl_gate_request_peer(p, q, &peer))
        return;
    /* The same budgets as the request's decision (gate_take.c). */
    struct rl_gate_ticket t;
    char dest[RL_NAME_MAX + 1];
    rl_gate_ticket_init(&t, now, q->units, 0);
    t.dest = dest;
    rl_gate_charges_peer(p, &t, b, &peer, RL_KIND_REQUEST);
    for (unsigned i = 0; i < t.ncharges; i++)
        outcome(p, &t, &t.charge[i], q, status, has_retry_after, retry_after_ns,
                now);
}

void rl_gate_request_outcome(struct rl_proc *p, const struct rl_gate_req *q,
                             int status, bool has_retry_after,
                             uint64_t retry_after_ns)
{
    rl_gate_request_outcome_at(p, q, status, has_retry_after, retry_after_ns,
                               rl_clock_now_ns());
}
