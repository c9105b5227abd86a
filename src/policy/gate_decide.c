/* gate_decide.c — one decision per call (see gate.h): a connect, a send
 * or a request, charged to the budgets gate_charges.c finds, taken from
 * as gate_take.c takes, then denied or granted, counted and logged. A
 * call from a signal handler is the same decision in handler mode
 * (rl_gate_handler; what that mode changes: gate_signal.c). */
#include <stddef.h>
#include <string.h>

#include "limit/limit.h"
#include "policy/dest.h"
#include "policy/gate.h"
#include "policy/gate_int.h"
#include "policy/gate_log.h"
#include "policy/gate_pace.h"
#include "policy/gate_pause.h"
#include "policy/lease.h"
#include "policy/proc.h"
#include "policy/sites.h"
#include "util/clock.h"
#include "util/declog.h"
#include "util/log.h"
#include "util/parse.h"

static struct budget *budget_of(const struct rl_gate_charge *c)
{
    return c->budget;
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
    struct rl_gen *G = t->gen;
    struct rl_gate *g = &G->gate;
    const struct rl_rule *by = t->denier;
    struct budget *counted = NULL;
    for (unsigned i = 0; i < t->ncharges && counted == NULL; i++)
        if (by == NULL || t->charge[i].rule == by)
            counted = budget_of(&t->charge[i]);
    /* Counted where it was denied (the site's budget, or the rule's). */
    const struct rl_rule *sec =
        by != NULL ? by : counted != NULL ? counted->rule : NULL;
    /* A request answered in the process (on_deny = respond) is counted
     * apart from the denied ones (SPEC §15): `rlshim stat` shows each
     * refusal once, in one column or the other. */
    if (t->respond_ns != 0)
        rl_gate_count_responded(g, sec, counted, units);
    else
        rl_gate_count(g, sec, counted, kind, RL_STAT_DENIED, units);
    /* A request moved past a pause and refused now never went: it is no
     * longer counted allowed, as its first decision had it. */
    if (t->moved_ns != 0)
        rl_gate_uncount(g, sec, counted, kind, RL_STAT_ALLOWED, units);
    bool dry = deny_dry(p, by);
    if (!t->handler) { /* a log line is formatted and written: not there */
        if (rl_declog_enabled(&p->declog))
            rl_gate_log_decision(p, t, kind, units, c);
        uint32_t open = t->open_full != NULL && by != NULL ? by->max_open : 0;
        const struct rl_gate_line d = {dry ? "would deny" : "denied", kind,
                                       units, 0, dry, by, open};
        rl_gate_say(p, t, t->now, c, &d);
    }
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
    struct rl_gen *G = t->gen;
    const struct rl_rule *by = t->denier != NULL ? t->denier : G->gate.rule;
    if (q->respond && !q->cut && by != NULL &&
        by->on_deny == RL_DENY_RESPOND && !deny_dry(p, t->denier)) {
        /* Retry-After in whole seconds, rounded up, at least one: a
         * client that waits as told is then granted. Set before deny()
         * so that its log line says "respond". */
        uint64_t s = t->retry_ns == UINT64_MAX
                         ? 1
                         : (t->retry_ns + RL_NS_PER_S - 1) / RL_NS_PER_S;
        t->respond_ns = (s > 0 ? s : 1) * RL_NS_PER_S;
        t->respond_by = by;
    } else if (!q->respond && !q->cut && by != NULL &&
               by->on_deny == RL_DENY_RESPOND && !deny_dry(p, t->denier) &&
               rl_add_relaxed_u64(&G->gate.respond_failed_said, 1) == 0) {
        rl_log_stderr("on_deny = respond in [%s]: a request the shim cannot "
                      "answer (an HTTP/2 header block that adds to the "
                      "HPACK table, a TLS write of several) fails as "
                      "under fail",
                      by->section);
    }
    if (!q->cut || deny_dry(p, t->denier))
        return deny(p, t, RL_KIND_REQUEST, q->units, c);
    t->wait_ns = 0;
    t->err = deny_errno(&G->gate, t->denier);
    return RL_GATE_FAIL;
}

static void granted(struct rl_proc *p, struct rl_gate_ticket *t,
                    const struct rl_gate_call *c)
{
    struct rl_gen *G = t->gen;
    struct rl_gate *g = &G->gate;
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
            if (t->handler && ch->fleet[k]) {
                /* The host's lease: its spent units reach the segment's
                 * counters at its next fill (fleet_lease.h). */
                rl_gate_count(g, ch->rule, NULL, k, RL_STAT_ALLOWED,
                              units[k]);
                continue;
            }
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
    if (!t->handler && rl_declog_enabled(&p->declog))
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
    /* The header only, less what is set here: a charge is zeroed when it
     * is added. */
    memset(&t->wait_ns, 0,
           offsetof(struct rl_gate_ticket, charge) -
               offsetof(struct rl_gate_ticket, wait_ns));
    t->now = now;
    t->calls = calls;
    t->bytes = bytes;
    t->retry_ns = UINT64_MAX;
}

/* The common connect (g->connect_alone) when the rule's one limit of
 * connects grants it now: what the whole way (connect_at) would do for it,
 * take and count, without a ticket of charges (t says go, at once; what
 * a give-back needs is kept, t->alone). false for any other connect, and
 * when the limit has no unit now (nothing was taken): then the whole way
 * decides it (waits, denies, logs). */
bool rl_gate_connect_now(struct rl_gate_ticket *t, uint64_t now)
{
    struct rl_gen *G = t->gen;
    struct rl_gate *g = &G->gate;
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
    /* A grant of one unit, now: its stamp is all a give-back needs of
     * it (gate_take.c's refund_alone). */
    t->alone = true;
    t->charge[0].budget = b;
    t->charge[0].v[rl_gate_vrow(RL_KIND_CONNECT)][0].stamp = v.stamp;
    return true;
}

static int connect_at(struct rl_proc *p, struct rl_gate_ticket *t, uint64_t now,
                      bool handler, const char *call, int fd, const void *sa,
                      unsigned salen)
{
    struct rl_gen *G = t->gen;
    const struct rl_gate *g = &G->gate;
    const struct rl_gate_call c = {call, fd, sa, salen, NULL, NULL, NULL, false};
    rl_gate_ticket_init(t, now, 1, 0);
    t->handler = handler;
    if (g->rule == NULL && (g->deny_all || !rl_sites_any(&G->sites)))
        return g->deny_all ? deny(p, t, RL_KIND_CONNECT, 1, &c) : RL_GATE_GO;
    if (!rl_gate_charges(p, t, sa, salen))
        return deny(p, t, RL_KIND_CONNECT, 1, &c);
    /* The max_open place first, then the rate's turn: a connect that
     * waits for a place takes its turn only once it has one, in the order
     * of every other connect. Taken the other way round, the turn was
     * given back when no place was free, and a give-back is exact only
     * for the newest turn: a sliding window forgot the turn its take had
     * replaced, a token bucket handed a turn already reserved by another
     * connect to the next one (two at once). Giving back a place is
     * exact (a count). */
    if (!(handler ? rl_gate_open_in_handler(t) : rl_gate_open_take(p, t)))
        return deny(p, t, RL_KIND_CONNECT, 1, &c);
    uint64_t got;
    if (!rl_gate_take(p, t, RL_KIND_CONNECT, 1, 1, 0, &got)) {
        rl_gate_open_untake(p, t);
        return deny(p, t, RL_KIND_CONNECT, 1, &c);
    }
    granted(p, t, &c);
    return RL_GATE_GO;
}

/* The whole way, with the destination's buffer in its own frame (never
 * inlined into rl_gate_connect_at's). */
__attribute__((noinline)) int rl_gate_connect_whole(struct rl_proc *p, struct rl_gate_ticket *t,
                          uint64_t now, const char *call, int fd,
                          const void *sa, unsigned salen)
{
    char dest[RL_NAME_MAX + 1];
    dest[0] = '\0'; /* no name yet: "-" */
    t->dest = dest;
    int r = connect_at(p, t, now, false, call, fd, sa, salen);
    t->dest = NULL;
    return r;
}

int rl_gate_connect(struct rl_proc *p, struct rl_gate_ticket *t,
                    const char *call, int fd, const void *sa, unsigned salen)
{
    return rl_gate_connect_at(p, t, rl_clock_now_ns(), call, fd, sa, salen);
}

static int send_at(struct rl_proc *p, struct rl_gate_ticket *t, uint64_t now,
                   bool handler, const char *call, int fd, const void *sa,
                   unsigned salen, uint64_t calls, uint64_t calls_min,
                   uint64_t bytes, uint64_t bytes_min)
{
    struct rl_gen *G = t->gen;
    const struct rl_gate *g = &G->gate;
    const struct rl_rule *rule = g->rule;
    const struct rl_gate_call c = {call, fd, sa, salen, NULL, NULL, NULL, false};
    rl_gate_ticket_init(t, now, calls, bytes);
    t->handler = handler;
    if (rule == NULL && (g->deny_all || !rl_sites_any(&G->sites)))
        return g->deny_all ? deny(p, t, RL_KIND_SEND, calls, &c) : RL_GATE_GO;
    if (!rl_gate_charges(p, t, sa, salen))
        return deny(p, t, RL_KIND_SEND, calls, &c);
    /* Units leased to threads that went quiet come back first (a
     * per-destination budget is never leased); not in a handler, which
     * takes no lease's lock. */
    for (unsigned i = 0; i < t->ncharges && !handler; i++)
        if (t->charge[i].key_word == NULL && t->charge[i].rule != NULL &&
            t->charge[i].budget->rule == t->charge[i].rule)
            rl_lease_reclaim(budget_of(&t->charge[i]), now, calls, bytes);
    uint64_t gc, gb;
    if (!rl_gate_take(p, t, RL_KIND_SEND, calls, calls_min, 0, &gc))
        return deny(p, t, RL_KIND_SEND, calls, &c);
    if (bytes_min == 0 && bytes > 0)
        bytes_min = 1;
    if (bytes_min < bytes && rule != NULL && rule->on_deny == RL_DENY_DELAY &&
        !handler) {
        /* A stream send in delay mode: grant part of it only when a
         * sizeable part is free, else reserve it all and sleep. */
        uint64_t least = rl_gate_send_least(G, bytes);
        if (least > bytes_min)
            bytes_min = least;
    }
    if (!rl_gate_take(p, t, RL_KIND_SEND_BYTES, bytes, bytes_min, 0, &gb)) {
        rl_gate_untake_all(t, RL_KIND_SEND, gc);
        return deny(p, t, RL_KIND_SEND_BYTES, bytes, &c);
    }
    t->calls = gc;
    t->bytes = gb;
    granted(p, t, &c);
    if (g->lease.on && calls == 1 && t->wait_ns == 0 && t->ncharges == 1 &&
        !handler)
        rl_lease_refill(p, budget_of(&t->charge[0]), now, gb);
    return RL_GATE_GO;
}

/* A turn asked about only after it came (an event loop that woke late,
 * a memory BIO's socket held to it) that a pause, since ended, covered:
 * the turn was given up all the same, as it would have been had it been
 * asked at once, and the request takes a turn after the pause. */
static bool paused_at(struct rl_gate_ticket *t, uint64_t turn, uint64_t now)
{
    bool held = false;
    for (unsigned i = 0; turn < now && i < t->ncharges; i++) {
        const char *why = NULL;
        if (rl_pause_left(&t->charge[i], turn, &why) > 0) {
            held = true;
            t->reason = why;
        }
    }
    return held;
}

/* Jitter (SPEC §14): the request granted t->wait_ns after t->now goes
 * `jitter` later, within every section's max_delay, and its limits count
 * it then (given back and taken again at the later turn: counted at the
 * earlier one, the next request could follow it closer than the limit
 * allows). A fleet grant cannot be given back: it goes at its turn. When
 * the later turn cannot be had, it goes at its own (taken again there);
 * false when neither can (nothing held, t->denier set). */
static bool jittered(struct rl_proc *p, struct rl_gate_ticket *t,
                     uint64_t units, uint64_t jitter)
{
    uint64_t at = t->wait_ns, room = UINT64_MAX, got;
    for (unsigned i = 0; i < t->ncharges; i++) {
        const struct rl_gate_charge *c = &t->charge[i];
        if (c->fleet[RL_KIND_REQUEST])
            return true;
        uint64_t mw = rl_gate_max_wait(c->rule);
        if (mw < room)
            room = mw;
    }
    if (room <= at)
        return true;
    if (jitter > room - at)
        jitter = room - at;
    rl_gate_untake_all(t, RL_KIND_REQUEST, units);
    return rl_gate_take(p, t, RL_KIND_REQUEST, units, units, at + jitter,
                        &got) ||
           rl_gate_take(p, t, RL_KIND_REQUEST, units, units, at, &got);
}

/* Jitter where a fleet budget counts the request: Redis's grant cannot
 * be given back and taken later, so Redis moves the turn it grants
 * (gate_take.c passes t->fleet_jitter_ns), within its max_delay, and
 * counts it when it goes; the local charges are then asked at that
 * turn. True when it did (a fleet charge). */
static bool fleet_jitter(struct rl_proc *p, struct rl_gate_ticket *t,
                         uint64_t jitter)
{
    for (unsigned i = 0; i < t->ncharges; i++)
        if (rl_fleet_decides(&p->fleet, t->charge[i].rule)) {
            t->fleet_jitter_ns = jitter;
            return true;
        }
    return false;
}

/* `turn`: 0 for a request's decision; for rl_gate_request_again, the
 * turn it was given, and nothing is decided unless a pause holds it. */
static int request_at(struct rl_proc *p, struct rl_gate_ticket *t, uint64_t now,
                      const struct rl_gate_req *q, uint64_t turn)
{
    struct rl_gen *G = t->gen;
    struct rl_gate *g = &G->gate;
    const struct rl_gate_call c = {q->call, q->fd,     q->sa,     q->salen,
                                   q->name, q->method, q->target, true};
    rl_gate_ticket_init(t, now, q->units, 0);
    if (g->rule == NULL && (g->deny_all || !rl_sites_any(&G->sites)))
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
    if (turn != 0 && from == 0 && !paused_at(t, turn, now)) {
        t->ncharges = 0; /* not paused: it goes at its turn, as granted */
        return RL_GATE_GO;
    }
    /* The destination's pace (SPEC §14) holds it as a pause does; a
     * request moved past a pause was paced at its first decision. */
    uint64_t jitter = 0;
    if (turn == 0)
        from = rl_gate_pace_hold(p, t, from, &jitter);
    t->moved_ns = turn;
    for (unsigned i = 0; from > 0 && i < t->ncharges; i++) {
        if (from > rl_gate_max_wait(t->charge[i].rule)) {
            t->denier = t->charge[i].rule;
            t->retry_ns = from;
            return deny_request(p, t, q, &c);
        }
    }
    if (jitter > 0 && fleet_jitter(p, t, jitter))
        jitter = 0;
    uint64_t got;
    if (!rl_gate_take(p, t, RL_KIND_REQUEST, q->units, q->units, from, &got))
        return deny_request(p, t, q, &c);
    if (jitter > 0 && !jittered(p, t, q->units, jitter))
        return deny_request(p, t, q, &c);
    if (turn == 0 && !rl_gate_pace_went(p, t)) {
        rl_gate_untake_all(t, RL_KIND_REQUEST, got);
        return deny_request(p, t, q, &c);
    }
    granted(p, t, &c);
    return RL_GATE_GO;
}

/* The decisions with their destination-name buffer (fleet_dest), which
 * the ticket points to only while deciding. */
int rl_gate_connect_at(struct rl_proc *p, struct rl_gate_ticket *t,
                       uint64_t now, const char *call, int fd, const void *sa,
                       unsigned salen)
{
    t->gen = rl_proc_gen(p); /* the decision's one load (proc.h) */
    if (rl_gate_connect_now(t, now))
        return RL_GATE_GO;
    return rl_gate_connect_whole(p, t, now, call, fd, sa, salen);
}

int rl_gate_request_at(struct rl_proc *p, struct rl_gate_ticket *t,
                       uint64_t now, const struct rl_gate_req *q)
{
    t->gen = rl_proc_gen(p); /* the decision's one load (proc.h) */
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
    t->gen = rl_proc_gen(p); /* the decision's one load (proc.h) */
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
    t->gen = rl_proc_gen(p); /* the decision's one load (proc.h) */
    return rl_gate_send_loaded_at(p, t, now, call, fd, sa, salen, calls,
                                  calls_min, bytes, bytes_min);
}

int rl_gate_send_loaded_at(struct rl_proc *p, struct rl_gate_ticket *t,
                           uint64_t now, const char *call, int fd,
                           const void *sa, unsigned salen, uint64_t calls,
                           uint64_t calls_min, uint64_t bytes,
                           uint64_t bytes_min)
{
    char dest[RL_NAME_MAX + 1];
    dest[0] = '\0'; /* no name yet: "-" */
    t->dest = dest;
    int r = send_at(p, t, now, false, call, fd, sa, salen, calls, calls_min,
                    bytes, bytes_min);
    t->dest = NULL;
    return r;
}

int rl_gate_handler(struct rl_proc *p, const struct rl_gate_q *q,
                    uint64_t *grant, int *err)
{
    /* The same decision as outside a handler, in handler mode (the steps
     * it changes: gate_signal.c). Nothing to give back later: the ticket
     * stays here. */
    struct rl_gate_ticket t;
    uint64_t now = rl_clock_now_ns();
    /* The decision's one load (proc.h), or the caller's. */
    t.gen = q->gen != NULL ? q->gen : rl_proc_gen(p);
    t.dest = NULL; /* no fleet budget per destination: no name to keep */
    int r = q->kind == RL_KIND_CONNECT
                ? connect_at(p, &t, now, true, NULL, -1, q->sa, q->salen)
                : send_at(p, &t, now, true, NULL, -1, q->sa, q->salen,
                          q->calls, q->calls, q->bytes, q->bytes_min);
    *grant = q->kind == RL_KIND_SEND ? t.bytes : q->bytes;
    *err = r == RL_GATE_FAIL ? t.err : 0;
    return r;
}
