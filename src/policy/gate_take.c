/* gate_take.c — the take from a call's charges (gate_charges.c finds
 * them): every budget at the one turn the call goes, all or none (a
 * denial gives back what the others took), and the refund of what the
 * kernel did not take (see gate.h). The decision around it (counted,
 * logged, denied or granted) is gate_decide.c's. */
#include <stdatomic.h>
#include <stdint.h>

#include "fleet/fleet.h"
#include "limit/limit.h"
#include "policy/gate.h"
#include "policy/gate_int.h"
#include "policy/gate_pause.h"
#include "policy/lease.h"
#include "policy/proc.h"
#include "util/atomics.h"

static void untake(struct rl_gate_ticket *t, struct rl_gate_charge *c, int kind,
                   uint64_t units)
{
    if (!c->took[kind] || units == 0)
        return;
    if (c->fleet[kind]) {
        /* Redis's grant stands; a handler's came from the host's lease. */
        if (t->handler)
            rl_gate_untake_in_handler(c, kind, units);
        return;
    }
    rl_multi_refund(c->states[kind], c->rule->limits[kind],
                    c->rule->nlimits[kind], t->now, c->v[rl_gate_vrow(kind)], units);
}

/* Give back what every charge took of `kind`, and forget it. */
void rl_gate_untake_all(struct rl_gate_ticket *t, int kind, uint64_t units)
{
    for (unsigned i = 0; i < t->ncharges; i++) {
        untake(t, &t->charge[i], kind, units);
        t->charge[i].took[kind] = false;
    }
}

/* A fleet charge's take, on Redis (out of line: its Redis key's label is
 * on the stack only for a fleet budget). */
static __attribute__((noinline)) struct rl_verdict
take_fleet(struct rl_proc *p, struct rl_gate_ticket *t,
           struct rl_gate_charge *c, int kind, uint64_t want, uint64_t min,
           uint64_t mw, uint64_t at)
{
    struct rl_gen *G = t->gen;
    /* Only the user's rule budget leases (a site or per-destination
     * charge is decided on its own, exactly, under its own key). */
    char label[RL_GATE_FLEET_LABEL_MAX];
    const char *fl = rl_gate_fleet_label(t, c, label);
    const struct rl_fleet_pool *pool = G->gate.fleet_lease && fl == NULL &&
                                               kind != RL_KIND_CONNECT &&
                                               c->budget->fleet.w != NULL
                                           ? &c->budget->fleet
                                           : NULL;
    /* The host's fleet words (when Redis came back, how many hosts). */
    rl_atomic_u64 *host =
        c->budget->store != NULL ? rl_store_fleet_words(c->budget->store)
                                 : NULL;
    struct rl_fleet_paused paused;
    struct rl_verdict v =
        rl_fleet_take(&p->fleet, c->rule, fl,
                      kind == RL_KIND_REQUEST && t->dest != NULL &&
                              t->dest[0] != '\0'
                          ? t->dest
                          : NULL,
                      kind, c->states[kind], pool,
                      host, t->now, want, min, mw, at,
                      kind == RL_KIND_REQUEST ? t->fleet_jitter_ns : 0,
                      c->v[rl_gate_vrow(kind)], &paused);
    if (paused.ns > 0) {
        /* Another host's 429 (SPEC §12): this host's word shows it too. */
        rl_pause_mirror(p, t, c, paused.ns, paused.backoff);
        if (t->reason == NULL)
            t->reason = paused.backoff ? "backoff" : "retry_after";
    } else if (paused.paced != RL_FLEET_PACED_NOT && t->reason == NULL) {
        /* Another host's pace of the destination (SPEC §14). */
        t->reason = paused.paced == RL_FLEET_PACED_LATENCY ? "latency"
                                                           : "crawl_delay";
    }
    return v;
}

/* Ask charge c for `want` (at least `min`) units of `kind` for the turn
 * `at` ns after t->now; the verdict's wait is from t->now. The charge's
 * own max_delay bounds how far it may move the turn: one the turn is
 * already past grants only what it has free at the turn. */
static struct rl_verdict take_one(struct rl_proc *p, struct rl_gate_ticket *t,
                                  struct rl_gate_charge *c, int kind,
                                  uint64_t at, uint64_t want, uint64_t min)
{
    if (t->handler)
        return rl_gate_take_in_handler(t, c, kind, want, min);
    uint64_t mw = rl_gate_max_wait(c->rule);
    /* A fleet request's turn is Redis's, from now, no earlier than this
     * host's hold (a pause, a pace, the jitter: `at`), which Redis counts
     * it at: the next turn of every host is spaced from it. A grant not
     * from Redis (a lease, the fallback) still waits for the hold. */
    uint64_t hold = 0;
    if (c->fleet[kind] && kind == RL_KIND_REQUEST) {
        hold = at;
        at = 0;
    }
    mw = mw > at ? mw - at : 0;
    if (min > want)
        min = want;
    struct rl_verdict v =
        c->fleet[kind] ? take_fleet(p, t, c, kind, want, min, mw, hold)
                       : rl_multi_take(c->states[kind], c->rule->limits[kind],
                                       c->rule->nlimits[kind], t->now + at,
                                       want, min, mw, c->v[rl_gate_vrow(kind)]);
    if (v.granted > 0 && v.wait_ns < hold)
        v.wait_ns = hold;
    if (v.granted > 0 || v.wait_ns != UINT64_MAX)
        v.wait_ns = v.wait_ns > UINT64_MAX - at ? UINT64_MAX : v.wait_ns + at;
    return v;
}

/* Take `want` (at least `min`) units of `kind` from every charge: true
 * when all granted, *granted the least of their grants (what more the
 * others took goes back). On false nothing of `kind` is held and
 * t->denier is the section that said no. A per-destination budget that
 * was re-used for another name while we took from it counts as a denial:
 * what we took fell on the other name, which then admits less, never
 * more.
 *
 * Every budget counts the units at the turn the call goes, as the limits
 * of one budget do (rl_multi_take, multi.c): when one charge reserves a
 * later turn, a charge that granted for an earlier one gives its grant
 * back and is asked again at that turn. Counted at the earlier turn, it
 * would refill (or let a stamp expire) over a unit that had not gone yet
 * (site_gate::every_budget_counts_a_delayed_connect_at_its_turn). A
 * give-back admits no more than if the take had not happened (limit.h),
 * so the loop never over-admits; a turn that keeps moving (other callers
 * take in between) is refused after a few rounds. `from` is the earliest
 * turn (ns after t->now): the end of a pause (SPEC §12), else 0.
 *
 * A fleet charge (decided in Redis, at Redis's time) cannot be given back
 * nor asked for a later turn. It is asked first, so that the local
 * charges are asked at its turn; if a local charge then moves the turn
 * later still, the fleet counted the unit up to that much early (left as
 * it is: refusing would lose the fleet's unit and turn the delay the
 * section asked for into a failure). */
bool rl_gate_take(struct rl_proc *p, struct rl_gate_ticket *t, int kind,
                  uint64_t want, uint64_t min, uint64_t from,
                  uint64_t *granted)
{
    *granted = want;
    if (want == 0)
        return true;
    struct rl_gate_charge *one = &t->charge[0];
    if (t->ncharges == 1 && one->rule->nlimits[kind] > 0 &&
        !(one->fleet[kind] = rl_fleet_decides(&p->fleet, one->rule))) {
        /* One local budget (the common case): its answer is the turn,
         * with no other charge to agree on it. */
        struct rl_verdict v = take_one(p, t, one, kind, from, want, min);
        if (v.granted == 0 || (one->key_word != NULL &&
                               rl_load_acquire_u64(one->key_word) != one->key)) {
            t->retry_ns = v.granted == 0 ? v.wait_ns : 0;
            t->denier = one->rule;
            return false;
        }
        one->took[kind] = true;
        one->granted[kind] = v.granted;
        if (v.wait_ns > t->wait_ns)
            t->wait_ns = v.wait_ns;
        *granted = v.granted;
        return true;
    }
    uint64_t least = want, at = from; /* the turn, from t->now */
    uint64_t turn[RL_GATE_MAX_CHARGES] = {0};
    unsigned order[RL_GATE_MAX_CHARGES], nc = 0, rounds = 0;
    /* Fleet charges first (see above), then the local ones in order; in
     * a handler, where no grant waits for a turn, all in order. */
    for (int fleet = 1; fleet >= 0; fleet--)
        for (unsigned i = 0; i < t->ncharges; i++) {
            struct rl_gate_charge *c = &t->charge[i];
            if (c->rule->nlimits[kind] == 0)
                continue;
            /* Fleet scope: the user's rule budget, a site's for the
             * user, or either's for the destination, each under its own
             * Redis key (take_one). */
            c->fleet[kind] = rl_fleet_decides(&p->fleet, c->rule);
            if (t->handler ? fleet == 1 : c->fleet[kind] == (fleet == 1))
                order[nc++] = i;
        }
    for (;;) {
        /* The first charge that holds no grant for the turn (a fleet
         * grant stands whatever the turn). */
        unsigned j;
        struct rl_gate_charge *c = NULL;
        for (j = 0; j < nc; j++) {
            c = &t->charge[order[j]];
            if (!c->took[kind] || (!c->fleet[kind] && turn[order[j]] != at))
                break;
        }
        if (j == nc)
            break;
        if (++rounds > 4 * nc) {
            rl_gate_untake_all(t, kind, least);
            t->denier = c->rule;
            return false;
        }
        if (c->took[kind]) {
            untake(t, c, kind, c->granted[kind]);
            c->took[kind] = false;
        }
        struct rl_verdict v = take_one(p, t, c, kind, at, least, min);
        bool moved = v.granted > 0 && c->key_word != NULL &&
                     rl_load_acquire_u64(c->key_word) != c->key;
        if (v.granted == 0 || moved) {
            /* Denied, or what it took fell on the other name (kept
             * there: that name admits less, never more). */
            t->retry_ns = v.granted == 0 ? v.wait_ns : 0;
            rl_gate_untake_all(t, kind, least);
            t->denier = c->rule;
            return false;
        }
        c->took[kind] = true;
        c->granted[kind] = v.granted;
        turn[order[j]] = v.wait_ns;
        if (v.wait_ns > at)
            at = v.wait_ns;
        if (v.granted < least)
            least = v.granted;
    }
    if (at > t->wait_ns)
        t->wait_ns = at;
    /* A later charge granted less: the earlier ones keep only that. */
    for (unsigned i = 0; i < t->ncharges; i++) {
        struct rl_gate_charge *c = &t->charge[i];
        if (c->took[kind] && c->granted[kind] > least) {
            untake(t, c, kind, c->granted[kind] - least);
            c->granted[kind] = least;
        }
    }
    *granted = least;
    return true;
}

/* The give-back of a connect granted at once (t->alone): its one unit,
 * to its budget's lone connect limit, as untake gives back a charge's.
 * Once: the ticket holds nothing more afterwards. */
static __attribute__((noinline, cold)) void
refund_alone(struct rl_proc *p, struct rl_gate_ticket *t, int kind,
             uint64_t units)
{
    (void)p; /* the ticket carries the decision's generation */
    struct rl_gen *G = t->gen;
    if (kind != RL_KIND_CONNECT)
        return;
    struct budget *b = t->charge[0].budget;
    const struct rl_rule *r = G->gate.rule;
    const struct rl_limit *lim = &r->limits[kind][0];
    struct rl_verdict v = {
        .granted = 1,
        .wait_ns = 0,
        .stamp = t->charge[0].v[rl_gate_vrow(kind)][0].stamp,
    };
    rl_algorithm_get(lim->algo)->refund(b->states[kind][0], lim, t->now, &v,
                                        units);
    rl_gate_uncount(&G->gate, r, b, kind, RL_STAT_ALLOWED, units);
    t->alone = false;
}

void rl_gate_refund(struct rl_proc *p, struct rl_gate_ticket *t, int kind,
                    uint64_t units)
{
    struct rl_gen *G = t->gen;
    struct rl_gate *g = &G->gate;
    if (kind < 0 || kind >= RL_KIND_COUNT || units == 0)
        return;
    if (t->leased && g->fleet_lease) {
        if (kind == RL_KIND_SEND && units <= t->calls)
            rl_gate_fleet_lease_refund(g, units, 0);
        else if (kind == RL_KIND_SEND_BYTES && units <= t->bytes)
            rl_gate_fleet_lease_refund(g, 0, units);
        return;
    }
    if (t->leased) {
        /* Back into the lease it came from, if the thread still holds it
         * (else it stays spent: never more than was granted). */
        if (kind == RL_KIND_SEND && units <= t->calls)
            rl_lease_refund(p, units, 0);
        else if (kind == RL_KIND_SEND_BYTES && units <= t->bytes)
            rl_lease_refund(p, 0, units);
        return;
    }
    if (__builtin_expect(t->alone, 0)) {
        refund_alone(p, t, kind, units);
        return;
    }
    for (unsigned i = 0; i < t->ncharges; i++) {
        struct rl_gate_charge *c = &t->charge[i];
        if (!c->took[kind])
            continue;
        untake(t, c, kind, units);
        /* Lower `allowed` by what was not spent after all. */
        rl_gate_uncount(g, c->rule, c->budget, kind, RL_STAT_ALLOWED,
                        units);
    }
}
