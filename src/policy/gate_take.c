/* gate_take.c — one decision per call: the budgets a call is charged to
 * (gate_charges.c finds them) taken from at the one turn the call goes
 * (take()), given back to all when one denies, counted and logged, and
 * the refund of what the kernel did not take (see gate.h). */
#include <errno.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "fleet/fleet.h"
#include "limit/limit.h"
#include "policy/dest.h"
#include "policy/dests.h"
#include "policy/gate.h"
#include "policy/gate_int.h"
#include "policy/gate_log.h"
#include "policy/gate_pause.h"
#include "policy/lease.h"
#include "policy/proc.h"
#include "policy/sites.h"
#include "util/atomics.h"
#include "util/clock.h"
#include "util/declog.h"

static struct budget *budget_of(const struct rl_gate_charge *c)
{
    return c->budget;
}

static uint64_t max_wait(const struct rl_rule *rule)
{
    return rule->on_deny == RL_DENY_DELAY ? rule->max_delay_ns : 0;
}

static void untake(struct rl_gate_ticket *t, struct rl_gate_charge *c, int kind,
                   uint64_t units)
{
    if (!c->took[kind] || units == 0 || c->fleet[kind])
        return;
    rl_multi_refund(c->states[kind], c->rule->limits[kind],
                    c->rule->nlimits[kind], t->now, c->v[rl_gate_vrow(kind)], units);
}

/* Give back what every charge took of `kind`, and forget it. */
static void untake_all(struct rl_gate_ticket *t, int kind, uint64_t units)
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
           uint64_t mw)
{
    /* Only the user's rule budget leases (a site or per-destination
     * charge is decided on its own, exactly, under its own key). */
    char label[RL_GATE_FLEET_LABEL_MAX];
    const char *fl = rl_gate_fleet_label(t, c, label);
    const struct rl_fleet_pool *pool = p->gate.fleet_lease && fl == NULL &&
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
                      host, t->now, want, min, mw, c->v[rl_gate_vrow(kind)],
                      &paused);
    if (paused.ns > 0) {
        /* Another host's 429 (SPEC §12): this host's word shows it too. */
        rl_pause_mirror(p, t, c, paused.ns, paused.backoff);
        if (t->reason == NULL)
            t->reason = paused.backoff ? "backoff" : "retry_after";
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
    uint64_t mw = max_wait(c->rule);
    /* A fleet request budget's pause is Redis's: its script waits for it
     * and answers from now, not from the end of this host's copy of it. */
    if (c->fleet[kind] && kind == RL_KIND_REQUEST)
        at = 0;
    mw = mw > at ? mw - at : 0;
    if (min > want)
        min = want;
    struct rl_verdict v =
        c->fleet[kind] ? take_fleet(p, t, c, kind, want, min, mw)
                       : rl_multi_take(c->states[kind], c->rule->limits[kind],
                                       c->rule->nlimits[kind], t->now + at,
                                       want, min, mw, c->v[rl_gate_vrow(kind)]);
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
static bool take(struct rl_proc *p, struct rl_gate_ticket *t, int kind,
                 uint64_t want, uint64_t min, uint64_t from, uint64_t *granted)
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
    /* Fleet charges first (see above), then the local ones in order. */
    for (int fleet = 1; fleet >= 0; fleet--)
        for (unsigned i = 0; i < t->ncharges; i++) {
            struct rl_gate_charge *c = &t->charge[i];
            if (c->rule->nlimits[kind] == 0)
                continue;
            /* Fleet scope: the user's rule budget, a site's for the
             * user, or either's for the destination, each under its own
             * Redis key (take_one). */
            c->fleet[kind] = rl_fleet_decides(&p->fleet, c->rule);
            if (c->fleet[kind] == (fleet == 1))
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
            untake_all(t, kind, least);
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
            untake_all(t, kind, least);
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

/* A denial by `by` (NULL: the rule) only said, not made? */
static bool deny_dry(struct rl_proc *p, const struct rl_rule *by)
{
    return by != NULL ? by->dry_run : rl_gate_dry_run(p);
}

static int deny_errno(const struct rl_gate *g, const struct rl_rule *by)
{
    const struct rl_rule *r = by != NULL ? by : g->rule;
    return r != NULL ? r->deny_errno : g->cfg->deny_errno;
}

static int deny(struct rl_proc *p, struct rl_gate_ticket *t, int kind,
                uint64_t units, const struct rl_gate_call *c)
{
    struct rl_gate *g = &p->gate;
    const struct rl_rule *by = t->denier;
    struct budget *counted = NULL;
    for (unsigned i = 0; i < t->ncharges && counted == NULL; i++)
        if (by == NULL || t->charge[i].rule == by)
            counted = budget_of(&t->charge[i]);
    /* Counted where it was denied (the site's budget, or the rule's). */
    const struct rl_rule *sec =
        by != NULL ? by : counted != NULL ? counted->rule : NULL;
    rl_gate_count(g, sec, counted, kind, RL_STAT_DENIED, units);
    /* A request moved past a pause and refused now never went: it is no
     * longer counted allowed, as its first decision had it. */
    if (t->moved_ns != 0)
        rl_gate_uncount(g, sec, counted, kind, RL_STAT_ALLOWED, units);
    if (rl_declog_enabled(&p->declog))
        rl_gate_log_decision(p, t, kind, units, c);
    bool dry = deny_dry(p, by);
    uint32_t open = t->open_full != NULL && by != NULL ? by->max_open : 0;
    const struct rl_gate_line d = {dry ? "would deny" : "denied", kind, units,
                                   0, dry, by, open};
    rl_gate_say(p, t, t->now, c, &d);
    /* What an earlier limit of this call reserved was given back: there
     * is no turn to sleep until (a dry run goes at once). */
    t->wait_ns = 0;
    if (dry)
        return RL_GATE_GO;
    t->err = deny_errno(g, by);
    return RL_GATE_FAIL;
}

/* A request refused: counted and logged, unless the write is cut before
 * it (q->cut) and the write that starts with it asks again. */
static int deny_request(struct rl_proc *p, struct rl_gate_ticket *t,
                        const struct rl_gate_req *q,
                        const struct rl_gate_call *c)
{
    if (!q->cut || deny_dry(p, t->denier))
        return deny(p, t, RL_KIND_REQUEST, q->units, c);
    t->wait_ns = 0;
    t->err = deny_errno(&p->gate, t->denier);
    return RL_GATE_FAIL;
}

static void granted(struct rl_proc *p, struct rl_gate_ticket *t,
                    const struct rl_gate_call *c)
{
    struct rl_gate *g = &p->gate;
    uint64_t units[RL_KIND_COUNT] = {1, t->calls, t->bytes, t->calls};
    /* A request moved past a pause (rl_gate_request_again) was counted
     * allowed, and delayed, at its first decision: only its longer wait
     * is new. */
    bool moved = t->moved_ns != 0;
    for (unsigned i = 0; i < t->ncharges; i++) {
        struct rl_gate_charge *ch = &t->charge[i];
        for (int k = 0; k < RL_KIND_COUNT; k++) {
            if (!ch->took[k])
                continue;
            if (!moved)
                rl_gate_count(g, ch->rule, budget_of(ch), k, RL_STAT_ALLOWED,
                              units[k]);
            if (t->wait_ns > 0) {
                if (!moved)
                    rl_gate_count(g, ch->rule, budget_of(ch), k,
                                  RL_STAT_DELAYED, units[k]);
                rl_gate_count(g, ch->rule, budget_of(ch), k,
                              RL_STAT_DELAYED_NS, t->wait_ns);
            }
        }
    }
    if (rl_declog_enabled(&p->declog))
        rl_gate_log_decision(p, t, -1, 0, c);
    if (t->wait_ns == 0)
        return;
    bool dry = rl_gate_dry_run(p);
    for (unsigned i = 0; i < t->ncharges; i++)
        dry |= t->charge[i].rule->dry_run;
    const struct rl_gate_line d = {"delayed", 0, 0, t->wait_ns, dry, NULL, 0};
    rl_gate_say(p, t, t->now, c, &d);
    if (dry)
        t->wait_ns = 0;
}

void rl_gate_ticket_init(struct rl_gate_ticket *t, uint64_t now, uint64_t calls,
                   uint64_t bytes)
{
    /* The header only: a charge is zeroed when it is added. */
    memset(t, 0, offsetof(struct rl_gate_ticket, charge));
    t->now = now;
    t->calls = calls;
    t->bytes = bytes;
    t->retry_ns = UINT64_MAX;
}

/* The common connect (g->connect_alone) when the rule's one limit of
 * connects grants it now: what the whole way (connect_at) would do for it,
 * take and count, without a ticket of charges (t says go, at once). false
 * for any other connect, and when the limit has no unit now (nothing was
 * taken): then the whole way decides it (waits, denies, logs). */
static bool connect_now(struct rl_proc *p, struct rl_gate_ticket *t,
                        uint64_t now)
{
    struct rl_gate *g = &p->gate;
    if (!g->connect_alone)
        return false;
    struct budget *b = rl_gate_budget(g);
    if (b == NULL)
        return false;
    const struct rl_limit *lim = &g->rule->limits[RL_KIND_CONNECT][0];
    struct rl_verdict v = rl_algorithm_get(lim->algo)->take(
        b->states[RL_KIND_CONNECT][0], lim, now, 1, 1, 0);
    if (v.granted == 0)
        return false;
    rl_gate_count(g, g->rule, b, RL_KIND_CONNECT, RL_STAT_ALLOWED, 1);
    rl_gate_ticket_init(t, now, 1, 0);
    return true;
}

static int connect_at(struct rl_proc *p, struct rl_gate_ticket *t, uint64_t now,
                      const char *call, int fd, const void *sa, unsigned salen)
{
    const struct rl_gate *g = &p->gate;
    const struct rl_gate_call c = {call, fd, sa, salen, NULL, NULL, NULL, false};
    rl_gate_ticket_init(t, now, 1, 0);
    if (g->rule == NULL && (g->deny_all || !rl_sites_any(&p->sites)))
        return g->deny_all ? deny(p, t, RL_KIND_CONNECT, 1, &c) : RL_GATE_GO;
    rl_gate_charges(p, t, sa, salen);
    /* The max_open place first, then the rate's turn: a connect that
     * waits for a place takes its turn only once it has one, in the order
     * of every other connect. Taken the other way round, the turn was
     * given back when no place was free, and a give-back is exact only
     * for the newest turn: a sliding window forgot the turn its take had
     * replaced, a token bucket handed a turn already reserved by another
     * connect to the next one (two at once). Giving back a place is
     * exact (a count). */
    if (!rl_gate_open_take(p, t))
        return deny(p, t, RL_KIND_CONNECT, 1, &c);
    uint64_t got;
    if (!take(p, t, RL_KIND_CONNECT, 1, 1, 0, &got)) {
        rl_gate_open_untake(p, t);
        return deny(p, t, RL_KIND_CONNECT, 1, &c);
    }
    granted(p, t, &c);
    return RL_GATE_GO;
}

/* The whole way, with the destination's buffer in its own frame. */
static __attribute__((noinline)) int
connect_whole(struct rl_proc *p, struct rl_gate_ticket *t, uint64_t now,
              const char *call, int fd, const void *sa, unsigned salen)
{
    char dest[RL_NAME_MAX + 1];
    dest[0] = '\0'; /* no name yet: "-" */
    t->dest = dest;
    int r = connect_at(p, t, now, call, fd, sa, salen);
    t->dest = NULL;
    return r;
}

int rl_gate_connect(struct rl_proc *p, struct rl_gate_ticket *t,
                    const char *call, int fd, const void *sa, unsigned salen)
{
    uint64_t now = rl_clock_now_ns();
    if (connect_now(p, t, now))
        return RL_GATE_GO;
    return connect_whole(p, t, now, call, fd, sa, salen);
}

static int send_at(struct rl_proc *p, struct rl_gate_ticket *t, uint64_t now,
                   const char *call, int fd, const void *sa, unsigned salen,
                   uint64_t calls, uint64_t calls_min, uint64_t bytes,
                   uint64_t bytes_min)
{
    const struct rl_gate *g = &p->gate;
    const struct rl_rule *rule = g->rule;
    const struct rl_gate_call c = {call, fd, sa, salen, NULL, NULL, NULL, false};
    rl_gate_ticket_init(t, now, calls, bytes);
    if (rule == NULL && (g->deny_all || !rl_sites_any(&p->sites)))
        return g->deny_all ? deny(p, t, RL_KIND_SEND, calls, &c) : RL_GATE_GO;
    rl_gate_charges(p, t, sa, salen);
    /* Units leased to threads that went quiet come back first (a
     * per-destination budget is never leased). */
    for (unsigned i = 0; i < t->ncharges; i++)
        if (t->charge[i].key_word == NULL && t->charge[i].rule != NULL &&
            t->charge[i].budget->rule == t->charge[i].rule)
            rl_lease_reclaim(budget_of(&t->charge[i]), now, calls, bytes);
    uint64_t gc, gb;
    if (!take(p, t, RL_KIND_SEND, calls, calls_min, 0, &gc))
        return deny(p, t, RL_KIND_SEND, calls, &c);
    if (bytes_min == 0 && bytes > 0)
        bytes_min = 1;
    if (bytes_min < bytes && rule != NULL && rule->on_deny == RL_DENY_DELAY) {
        /* A stream send in delay mode: grant part of it only when a
         * sizeable part is free, else reserve it all and sleep. */
        uint64_t least = rl_gate_send_least(p, bytes);
        if (least > bytes_min)
            bytes_min = least;
    }
    if (!take(p, t, RL_KIND_SEND_BYTES, bytes, bytes_min, 0, &gb)) {
        untake_all(t, RL_KIND_SEND, gc);
        return deny(p, t, RL_KIND_SEND_BYTES, bytes, &c);
    }
    t->calls = gc;
    t->bytes = gb;
    granted(p, t, &c);
    if (g->lease.on && calls == 1 && t->wait_ns == 0 && t->ncharges == 1)
        rl_lease_refill(p, budget_of(&t->charge[0]), now, gb);
    return RL_GATE_GO;
}

/* `turn`: 0 for a request's decision; for rl_gate_request_again, the
 * turn it was given, and nothing is decided unless a pause holds it. */
static int request_at(struct rl_proc *p, struct rl_gate_ticket *t, uint64_t now,
                      const struct rl_gate_req *q, uint64_t turn)
{
    struct rl_gate *g = &p->gate;
    const struct rl_gate_call c = {q->call, q->fd,     q->sa,     q->salen,
                                   q->name, q->method, q->target, true};
    rl_gate_ticket_init(t, now, q->units, 0);
    if (g->rule == NULL && (g->deny_all || !rl_sites_any(&p->sites)))
        return g->deny_all ? deny_request(p, t, q, &c) : RL_GATE_GO;
    struct budget *b = rl_gate_budget(g);
    struct rl_peer dest;
    if (b == NULL || !rl_gate_request_peer(p, q, &dest))
        return RL_GATE_GO;
    rl_gate_charges_peer(p, t, b, &dest, RL_KIND_REQUEST);
    if (t->ncharges == 0)
        return RL_GATE_GO;
    /* A paused budget (SPEC §12): its requests go at the end of the
     * latest pause of their budgets, FIFO with each other after it, or
     * not at all where that is past a section's max_delay (0 in fail
     * mode). */
    uint64_t from = 0;
    for (unsigned i = 0; i < t->ncharges; i++) {
        const char *why = NULL;
        uint64_t left = rl_pause_left(&t->charge[i], now, &why);
        if (left > from) {
            from = left;
            t->reason = why;
        }
    }
    if (turn != 0 && from == 0) {
        t->ncharges = 0; /* not paused: it goes at its turn, as granted */
        return RL_GATE_GO;
    }
    t->moved_ns = turn;
    for (unsigned i = 0; from > 0 && i < t->ncharges; i++) {
        if (from > max_wait(t->charge[i].rule)) {
            t->denier = t->charge[i].rule;
            t->retry_ns = from;
            return deny_request(p, t, q, &c);
        }
    }
    uint64_t got;
    if (!take(p, t, RL_KIND_REQUEST, q->units, q->units, from, &got))
        return deny_request(p, t, q, &c);
    granted(p, t, &c);
    return RL_GATE_GO;
}

void rl_gate_refund(struct rl_proc *p, struct rl_gate_ticket *t, int kind,
                    uint64_t units)
{
    struct rl_gate *g = &p->gate;
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
    for (unsigned i = 0; i < t->ncharges; i++) {
        struct rl_gate_charge *c = &t->charge[i];
        if (!c->took[kind])
            continue;
        untake(t, c, kind, units);
        /* Lower `allowed` by what was not spent after all. */
        rl_gate_uncount(g, c->rule, budget_of(c), kind, RL_STAT_ALLOWED,
                        units);
    }
}

/* The decisions with their destination-name buffer (fleet_dest), which
 * the ticket points to only while deciding. */
int rl_gate_connect_at(struct rl_proc *p, struct rl_gate_ticket *t,
                       uint64_t now, const char *call, int fd, const void *sa,
                       unsigned salen)
{
    if (connect_now(p, t, now))
        return RL_GATE_GO;
    return connect_whole(p, t, now, call, fd, sa, salen);
}

int rl_gate_request_at(struct rl_proc *p, struct rl_gate_ticket *t,
                       uint64_t now, const struct rl_gate_req *q)
{
    char dest[RL_NAME_MAX + 1];
    dest[0] = '\0'; /* no name yet: "-" */
    t->dest = dest;
    int r = request_at(p, t, now, q, 0);
    t->dest = NULL;
    return r;
}

int rl_gate_request_again(struct rl_proc *p, struct rl_gate_ticket *t,
                          uint64_t now, uint64_t turn,
                          const struct rl_gate_req *q)
{
    char dest[RL_NAME_MAX + 1];
    dest[0] = '\0'; /* no name yet: "-" */
    t->dest = dest;
    int r = request_at(p, t, now, q, turn != 0 ? turn : 1);
    t->dest = NULL;
    return r;
}

int rl_gate_request(struct rl_proc *p, struct rl_gate_ticket *t,
                    const struct rl_gate_req *q)
{
    return rl_gate_request_at(p, t, rl_clock_now_ns(), q);
}

int rl_gate_send_at(struct rl_proc *p, struct rl_gate_ticket *t, uint64_t now,
                    const char *call, int fd, const void *sa, unsigned salen,
                    uint64_t calls, uint64_t calls_min, uint64_t bytes,
                    uint64_t bytes_min)
{
    char dest[RL_NAME_MAX + 1];
    dest[0] = '\0'; /* no name yet: "-" */
    t->dest = dest;
    int r = send_at(p, t, now, call, fd, sa, salen, calls, calls_min, bytes,
                    bytes_min);
    t->dest = NULL;
    return r;
}
