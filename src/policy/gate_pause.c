/* gate_pause.c — politeness that listens (SPEC §12): a server's 429 or 503
 * pauses the destination its request was charged by, in each section of
 * the request that obeys it, and a request to that destination decided
 * while it is paused waits for the end of the pause (or fails).
 *
 * A pause is an entry of the segment's pause table (policy/pauses.h),
 * keyed by (section, user, destination name), so every process of the
 * user sees it and no other destination does, even one sharing the
 * budget. A response whose destination the shim could not tell (neither
 * address nor name: a TLS library writing through a BIO of the program's
 * before its socket is known) pauses the destination "-", which every
 * request of the section obeys too: what cannot be told apart is held
 * together. Its words:
 *   paused until: CLOCK_MONOTONIC ns of this boot (the segment is per
 *       boot), its lowest bit saying why (1: the backoff, 0: the server's
 *       Retry-After), so that the reason and the time change in one store;
 *       only ever moved later;
 *   the backoff: errors that backoff_on lists (SPEC §14: 429, 503, any
 *       5xx, a reset, a timeout) without Retry-After in a row, and the
 *       last one's cause (pauses.h); a success puts it back to 0.
 * A fleet budget's pause is also Redis's (fleet.h's rl_fleet_pause, by
 * Redis's clock), which every host's request script waits for; the count
 * of the backoff stays each host's (a success resets it without a round
 * trip). Each response that moved a pause is a line of the decision log
 * (verdict pause), which `rlshim verify --obeyed-retry-after` reads. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "fleet/fleet.h"
#include "limit/adapt.h"
#include "policy/dest.h"
#include "policy/gate.h"
#include "policy/gate_int.h"
#include "policy/gate_log.h"
#include "policy/gate_pause.h"
#include "policy/dests.h"
#include "policy/names.h"
#include "policy/pauses.h"
#include "policy/proc.h"
#include "policy/sites.h"
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

/* The pause table of charge c's store. */
static bool table_of(const struct rl_gate_charge *c, struct rl_pauses *pt)
{
    if (c->pause_key == 0 || c->budget == NULL || c->budget->store == NULL)
        return false;
    rl_pauses_of(c->budget->store, pt);
    return true;
}

uint64_t rl_pause_left(const struct rl_gate_charge *c, uint64_t now,
                       const char **reason)
{
    struct rl_pauses pt;
    if (!rl_pause_obeyed(c->rule) || !table_of(c, &pt))
        return 0;
    uint64_t w = rl_pauses_get(&pt, c->pause_key, NULL);
    uint64_t u = rl_pauses_get(&pt, c->pause_key_untold, NULL);
    if (rl_pause_end(u) > rl_pause_end(w))
        w = u;
    uint64_t end = rl_pause_end(w);
    if (end <= now)
        return 0;
    *reason = rl_pause_reason(w);
    return end - now;
}

uint64_t rl_pause_one_turn(const struct rl_rule *r)
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

/* The paused-until word of a pause ending at `until`. */
static uint64_t word_of(uint64_t until, bool backoff)
{
    until = rl_pause_end(until);
    return (until != 0 ? until : 2) | (backoff ? WHY_BACKOFF : 0);
}

void rl_pause_mirror(struct rl_proc *p, const struct rl_gate_ticket *t,
                     const struct rl_gate_charge *c, uint64_t ns, bool backoff)
{
    (void)p; /* the ticket carries the decision's generation */
    struct rl_gen *G = t->gen;
    struct rl_pauses pt;
    if (!rl_pause_obeyed(c->rule) || !table_of(c, &pt))
        return;
    char label[RL_IDENTITY_MAX + RL_NAME_MAX + 24];
    snprintf(label, sizeof label, "%s|%s", G->gate.user,
             t->dest != NULL && t->dest[0] != '\0' ? t->dest : "-");
    const struct rl_pause_set s = {
        .key = c->pause_key,
        .rule = (uint64_t)(c->rule - G->gate.cfg->rules) + 1,
        .label = label,
        .until = word_of(rl_add_sat_u64(t->now, ns), backoff),
        .now = t->now,
    };
    rl_pauses_set(&pt, &s, NULL);
}

bool rl_pause_backoff_on(const struct rl_rule *r, unsigned cause)
{
    uint32_t on = r->backoff_on;
    switch (cause) {
    case RL_ADAPT_CAUSE_RESET:
        return (on & RL_BACKOFF_RESET) != 0;
    case RL_ADAPT_CAUSE_TIMEOUT:
        return (on & RL_BACKOFF_TIMEOUT) != 0;
    case 429:
        return (on & RL_BACKOFF_429) != 0;
    case 503:
        if (on & RL_BACKOFF_503)
            return true;
        break;
    default:
        break;
    }
    return cause >= 500 && cause <= 599 && (on & RL_BACKOFF_5XX) != 0;
}

bool rl_pause_retry_after_obeyed(const struct rl_rule *r, unsigned status)
{
    /* The server's own word on a "slow down" status always counts
     * (§12), whether or not its backoff is listed; on another status,
     * when backoff_on makes it one (SPEC §14: a Retry-After always
     * wins over the doubling). */
    return status == 429 || status == 503 ||
           (status >= 500 && status <= 599 && rl_pause_backoff_on(r, status));
}

uint64_t rl_gate_response_timeout(const struct rl_proc *p)
{
    const struct rl_config *cfg = rl_proc_gen(p)->gate.cfg;
    return cfg != NULL ? cfg->response_timeout_ns : 0;
}

/* What one answer or failure does to charge c's destination: `cause` is
 * an HTTP status (final) or RL_ADAPT_CAUSE_* (`waited`: how long its
 * request had waited for an answer). */
struct settled {
    unsigned cause;
    bool has_ra;
    uint64_t ra_ns, waited, now;
};

static void outcome(struct rl_proc *p, const struct rl_gate_ticket *t,
                    const struct rl_gate_charge *c, const struct rl_gate_req *q,
                    const struct settled *o, const char *label)
{
    struct rl_gen *G = t->gen;
    const struct rl_rule *r = c->rule;
    struct rl_pauses pt;
    if (!rl_pause_obeyed(r) || !table_of(c, &pt))
        return;
    bool http = o->cause >= 100;
    bool listed = rl_pause_backoff_on(r, o->cause) &&
                  (o->cause != RL_ADAPT_CAUSE_TIMEOUT ||
                   o->waited >= r->response_timeout_ns);
    bool has_ra = o->has_ra && http && rl_pause_retry_after_obeyed(r, o->cause);
    if (!has_ra && !listed) {
        /* A success ends the doubling; so does any answer that is not
         * the server saying "slower" (a 404 is an answer too). A 5xx
         * that backoff_on does not list says nothing about the rate:
         * left as it is. */
        if (http && o->cause >= 200 && o->cause < 500)
            rl_pauses_backoff_end(&pt, c->pause_key);
        return;
    }
    uint64_t cap = r->max_retry_after_ns, wait, now = o->now;
    struct rl_pause_set s = {
        .key = c->pause_key,
        .rule = (uint64_t)(r - G->gate.cfg->rules) + 1,
        .label = label,
        .count = !has_ra,
        .cause = o->cause,
        .now = now,
    };
    if (has_ra) {
        wait = o->ra_ns < cap ? o->ra_ns : cap;
    } else {
        uint64_t n = 0;
        if (rl_pauses_set(&pt, &s, &n) < 0)
            return;
        s.count = false;
        wait = doubled(rl_pause_one_turn(r), n, cap);
    }
    if (wait == 0)
        return; /* Retry-After: 0 (or a date past): go on at once */
    uint64_t until = now > UINT64_MAX - wait ? UINT64_MAX : now + wait;
    s.until = word_of(until, !has_ra);
    bool moved = rl_pauses_set(&pt, &s, NULL) > 0;
    if (rl_fleet_decides(&p->fleet, r)) {
        /* Every host's: Redis's clock ends it (away: this host's). */
        char label[RL_GATE_FLEET_LABEL_MAX];
        moved |= rl_fleet_pause(&p->fleet, rl_gate_fleet_label(t, c, label),
                                t->dest != NULL && t->dest[0] != '\0'
                                    ? t->dest
                                    : NULL,
                                wait, !has_ra) == 0;
    }
    if (moved && rl_declog_enabled(&p->declog)) {
        const struct rl_gate_call call = {q->call, q->fd, q->sa, q->salen,
                                          q->name, NULL,  NULL,  true};
        /* A reset or a timeout has no status: the line has none. */
        rl_gate_log_pause(p, t, c, &call, http ? o->cause : 0, wait,
                          has_ra ? "retry_after" : "backoff");
    }
}

static void settle(struct rl_proc *p, const struct rl_gate_req *q,
                   const struct settled *o)
{
    struct rl_gate_answer a;
    if (!rl_gate_answer_charges(p, q, o->now, &a))
        return;
    for (unsigned i = 0; i < a.t.ncharges; i++)
        outcome(p, &a.t, &a.t.charge[i], q, o, a.label);
}

void rl_gate_request_outcome_at(struct rl_proc *p, const struct rl_gate_req *q,
                                int status, bool has_retry_after,
                                uint64_t retry_after_ns, uint64_t now)
{
    if (status < 200 || status > 999)
        return; /* 1xx: not the final answer */
    const struct settled o = {(unsigned)status, has_retry_after,
                              retry_after_ns, 0, now};
    settle(p, q, &o);
}

void rl_gate_request_failed_at(struct rl_proc *p, const struct rl_gate_req *q,
                               unsigned cause, uint64_t waited_ns, uint64_t now)
{
    if (cause != RL_ADAPT_CAUSE_RESET && cause != RL_ADAPT_CAUSE_TIMEOUT)
        return;
    const struct settled o = {cause, false, 0, waited_ns, now};
    settle(p, q, &o);
}

void rl_gate_request_outcome(struct rl_proc *p, const struct rl_gate_req *q,
                             int status, bool has_retry_after,
                             uint64_t retry_after_ns)
{
    rl_gate_request_outcome_at(p, q, status, has_retry_after, retry_after_ns,
                               rl_clock_now_ns());
}
