/* gate.c — the gate's process state (see gate.h, gate_int.h): set-up, the
 * store and the budget in use, the counters, and the calls that need no
 * decision of their own (leased sends, the send ETA, the exit).
 *
 * A decision is in gate_decide.c, the budgets it charges in
 * gate_charges.c, the take from them at the one turn the call goes in
 * gate_take.c, its max_open places in gate_open.c, its log lines in
 * gate_log.c, and what a call from a signal handler does differently in
 * gate_signal.c; leases (lease.c) and the exit report (report.c) sit
 * beside them. */
#include "policy/gate.h"
#include "policy/proc.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fleet/fleet.h"
#include "limit/limit.h"
#include "policy/dest.h"
#include "policy/dests.h"
#include "policy/gate_int.h"
#include "policy/gate_log.h"
#include "policy/lease.h"
#include "policy/gate_leased.h"
#include "policy/lease_take.h"
#include "policy/open.h"
#include "policy/report.h"
#include "policy/sites.h"
#include "state/store.h"
#include "util/atomics.h"
#include "util/clock.h"
#include "util/declog.h"
#include "util/hash.h"
#include "util/log.h"
#include "util/ownerlock.h"

/* The window's default lock is util/ownerlock's (limit.h declares its two
 * functions, this file sees both declarations and the compiler checks
 * them): the words and results of the two sides agree. */
_Static_assert(RL_WINDOW_LOCK_WORDS == RL_OWNERLOCK_WORDS &&
                   (int)RL_LOCK_OK == (int)RL_OWNERLOCK_OK &&
                   (int)RL_LOCK_RECOVERED == (int)RL_OWNERLOCK_RECOVERED &&
                   (int)RL_LOCK_BUSY == (int)RL_OWNERLOCK_BUSY,
               "limit.h's lock is util/ownerlock.h's");
/* A slot keeps counters for every kind (state/store.h: state knows no
 * kinds, so a new kind grows RL_STORE_KINDS and the layout version). */
_Static_assert(RL_STORE_KINDS >= RL_KIND_COUNT, "a slot counts every kind");
/* A window's state words in a segment's arena (state/layout.h). */
_Static_assert(RL_WINDOW_STATE_WORDS == 9,
               "a window's state words are part of the layout version");

static int claim(struct rl_gate *g, struct rl_store *st, struct budget *b)
{
    bool overflowed = false;
    b->store = st;
    if (g->rule == NULL)
        return 0; /* only sites: their slots are claimed by sites.c */
    b->rule = g->rule;
    rl_budget_layout(g->rule, &b->layout);
    int r = rl_store_slot(st, g->slot_tag, g->label, b->layout.nwords,
                          g->overflow_tag, &b->slot, &overflowed);
    if (r < 0)
        return r;
    b->store = st;
    for (int k = 0; k < RL_KIND_COUNT; k++)
        for (unsigned i = 0; i < b->rule->nlimits[k]; i++)
            b->states[k][i] = b->slot.words + b->layout.offset[k][i];
    if (b->layout.fleet != 0 && b->slot.nwords >= b->layout.nwords)
        rl_fleet_pool_at(b->slot.words + b->layout.fleet,
                         b->slot.counters != NULL
                             ? b->slot.counters + RL_STAT_ALLOWED
                             : NULL,
                         RL_STORE_STATS_PER_KIND, &b->fleet);
    return 0;
}

static int open_store(struct rl_gen *G, const struct rl_config *c, char *why,
                      size_t whylen);

/* Slots for max_open areas: one per budget of a section with max_open
 * (each user of [default] and of a site has one). */
static uint32_t open_slots(const struct rl_config *c)
{
    uint32_t n = 0;
    for (size_t i = 0; i < c->nrules; i++)
        if (c->rules[i].max_open > 0)
            n += c->rules[i].is_default || c->rules[i].site != NULL
                     ? c->max_users + 1
                     : 2;
    return n;
}

/* The longest period of any limit: the store removes a segment unused for
 * longer (store.h). */
static uint64_t max_period_ns(const struct rl_config *cfg)
{
    uint64_t p = 0;
    for (size_t i = 0; i < cfg->nrules; i++)
        for (int k = 0; k < RL_KIND_COUNT; k++)
            for (unsigned j = 0; j < cfg->rules[i].nlimits[k]; j++)
                if (cfg->rules[i].limits[k][j].period_ns > p)
                    p = cfg->rules[i].limits[k][j].period_ns;
    return p;
}

static uint64_t arena_words(const struct rl_config *cfg)
{
    uint64_t words = 0;
    for (size_t i = 0; i < cfg->nrules; i++) {
        struct rl_budget_layout l;
        if (cfg->rules[i].site != NULL)
            continue; /* rl_sites_arena_words */
        rl_budget_layout(&cfg->rules[i], &l);
        uint64_t users = cfg->rules[i].is_default ? cfg->max_users : 1;
        words += (uint64_t)l.nwords * (users + 1); /* + overflow slot */
    }
    return words;
}

int rl_gate_init(struct rl_proc *p, const struct rl_config *c,
                 const struct rl_identity *id, char *why, size_t whylen)
{
    /* The first set-up fills the generation the process starts with. */
    if (rl_proc_gen(p) == NULL)
        atomic_store_explicit(&p->gen, &p->gen0, memory_order_release);
    /* SPEC §9: the environment wins, so a test needs no config edit.
     * The decision log is the process's, set up once: threads read it
     * while a reload builds a generation, so an edit does not move it. */
    const char *dlog = secure_getenv("RLSHIM_DECISION_LOG");
    if (dlog == NULL)
        dlog = c->decision_log;
    if (rl_declog_setup(&p->declog, dlog) < 0)
        rl_log_stderr("decision_log %s: not an absolute path, or too long: "
                      "decisions are not logged",
                      dlog);
    return rl_gate_init_gen(p, rl_proc_gen(p), c, id, why, whylen);
}

/* The fleet is set up once a process, by its first set-up: a reload
 * (reload.c follows only an edit that leaves the fleet's settings alone)
 * writes nothing in it, since other threads use it meanwhile. A
 * generation whose user's budget has another label names it in each call
 * instead (fleet_named). */
static int fleet_init(struct rl_proc *p, struct rl_gate *g,
                      const struct rl_config *c)
{
    int r = c->fleet == NULL || p->fleet.on
                ? 0
                : rl_fleet_init(&p->fleet, c, g->label);
    g->fleet_named = r == 0 && c->fleet != NULL &&
                     strcmp(g->label, p->fleet.label) != 0;
    return r;
}

int rl_gate_init_gen(struct rl_proc *p, struct rl_gen *G,
                     const struct rl_config *c, const struct rl_identity *id,
                     char *why, size_t whylen)
{
    struct rl_gate *g = &G->gate;
    g->cfg = c;
    g->max_bytes = UINT64_MAX;
    g->refill_10ms = UINT64_MAX;
    g->rule = rl_config_find_rule(c, id->has_key ? id->key : NULL, id->uid,
                                  id->has_login ? id->login : NULL);
    char caller[RL_IDENTITY_MAX + 16];
    const char *who = rl_identity_user(id, caller, sizeof caller);
    snprintf(g->user, sizeof g->user, "%s", who);
    const struct rl_rule *rule = g->rule;
    if (rl_sites_setup(&G->sites, c, who) < 0 ||
        rl_dests_setup(&G->dests, c) < 0)
        return -ENOMEM;
    /* Fixed from here on: whether a send's destination is needed. */
    g->needs_peer = rl_sites_any(&G->sites) || rl_dests_any(&G->dests) ||
                    rl_declog_enabled(&p->declog);
    for (size_t j = 0; j < c->nrules; j++)
        if (c->rules[j].max_open > 0 &&
            (&c->rules[j] == rule || c->rules[j].site != NULL))
            rl_open_enable(&p->open);
    /* A stream send is cut to the smallest byte burst of the rule and of
     * every site (a site's may be the binding one). */
    for (size_t j = 0; j < c->nrules; j++) {
        const struct rl_rule *r = &c->rules[j];
        if (r != rule && r->site == NULL)
            continue;
        for (unsigned i = 0; i < r->nlimits[RL_KIND_SEND_BYTES]; i++) {
            const struct rl_limit *l = &r->limits[RL_KIND_SEND_BYTES][i];
            uint64_t cap =
                l->algo == RL_ALGO_TOKEN_BUCKET ? l->burst : l->count;
            if (cap < g->max_bytes)
                g->max_bytes = cap;
            unsigned __int128 r =
                (unsigned __int128)l->count * 10000000u / l->period_ns;
            if (r < g->refill_10ms)
                g->refill_10ms = (uint64_t)r;
        }
    }
    g->counts_requests = rule != NULL && rule->nlimits[RL_KIND_REQUEST] > 0;
    for (size_t i = 0; i < c->nrules; i++)
        if (c->rules[i].site != NULL &&
            c->rules[i].nlimits[RL_KIND_REQUEST] > 0)
            g->counts_requests = true;
    if (rule == NULL) {
        g->deny_all = c->unknown == RL_UNKNOWN_DENY;
        g->active = g->deny_all;
        g->charges_sends = g->deny_all || rl_sites_charge_sends(&G->sites);
        if (!rl_sites_any(&G->sites))
            return 0;
        (void)rl_ownerlock_self();
        fleet_init(p, g, c); /* the sites' fleet budgets */
        return open_store(G, c, why, whylen); /* for the sites' budgets */
    }
    g->charges_sends = rule->nlimits[RL_KIND_SEND] > 0 ||
                       rule->nlimits[RL_KIND_SEND_BYTES] > 0 ||
                       rl_sites_charge_sends(&G->sites);
    /* Run the window lock's one-time setup (pthread_once) now, so that no
     * decision runs it inside a frame a signal handler interrupted. */
    (void)rl_ownerlock_self();
    rl_lease_setup(p, &G->gate);
    /* A call charged to a site or per destination is decided on its own,
     * exactly: a lease of the rule's units would skip the other budget.
     * The decision log has one line per call: no call goes unseen in a
     * lease. */
    if (rl_sites_any(&G->sites) || rl_rule_per_dest(rule) ||
        rl_declog_enabled(&p->declog))
        g->lease.on = false;
    g->slot_tag = rl_budget_label(rule, rl_budget_user(rule, who), g->label,
                                  sizeof g->label);
    g->overflow_tag = rl_budget_overflow_tag(rule);
    /* A fleet budget is decided in Redis: no local lease of its units,
     * but the host's lease of fleet units, on the same terms (no dry
     * run, no site, no per-destination budget, no decision log). */
    bool fleet_leasable =
        !rule->dry_run && !c->dry_run && !rl_sites_any(&G->sites) &&
        !rl_rule_per_dest(rule) && !rl_declog_enabled(&p->declog) &&
        rl_fleet_leasable(rule);
    if (fleet_init(p, g, c) == 0 && rl_fleet_decides(&p->fleet, rule)) {
        g->lease.on = false;
        /* The host's lease is kept under the fleet's own label. */
        g->fleet_lease = fleet_leasable && !g->fleet_named;
    }
    /* As rl_gate_charges and take() would find: the rule's budget only. */
    g->connect_alone = !rl_sites_any(&G->sites) && !rl_dests_any(&G->dests) &&
                       rule->nlimits[RL_KIND_CONNECT] == 1 &&
                       rule->max_open == 0 && !rl_declog_enabled(&p->declog) &&
                       !rl_fleet_decides(&p->fleet, rule);
    return open_store(G, c, why, whylen);
}

/* Open the store and claim the rule's slot (with only sites, the budget
 * holds the store and no slot of its own). */
static int open_store(struct rl_gen *G, const struct rl_config *c, char *why,
                      size_t whylen)
{
    struct rl_gate *g = &G->gate;
    uint32_t nsites = 0;
    for (size_t i = 0; i < c->nrules; i++)
        nsites += c->rules[i].site != NULL;
    g->store_opts = (struct rl_store_opts){
        .shared = c->state_mode == RL_STATE_SHARED,
        .dir = NULL,
        .uid = (uint32_t)getuid(),
        .config_hash = rl_budget_hash(c),
        /* Every user of the uid may hold a budget of every site. */
        .nslots = c->max_users * (1 + nsites) + (uint32_t)c->nrules +
                  rl_dests_slots(c) + open_slots(c),
        .arena_words = arena_words(c) + rl_sites_arena_words(c) +
                       rl_dests_arena_words(&G->dests, c) +
                       (uint64_t)open_slots(c) * RL_OPEN_WORDS,
        .max_period_ns = max_period_ns(c),
    };
    struct budget *b = calloc(1, sizeof *b);
    if (b == NULL)
        return -ENOMEM;
    struct rl_store *st = NULL;
    int r = rl_store_open(&st, &g->store_opts, why, whylen);
    if (r < 0)
        goto fail;
    r = claim(g, st, b);
    if (r < 0) {
        rl_store_close(st);
        goto fail;
    }
    atomic_store_explicit(&g->cur, b, memory_order_release);
    g->active = true;
    return 0;
fail:
    free(b);
    return r;
}

void rl_gate_atfork_child(struct rl_proc *p)
{
    struct rl_gen *G = rl_proc_gen(p);
    atomic_flag_clear_explicit(&G->gate.reopening, memory_order_relaxed);
}

bool rl_gate_charges_sends(const struct rl_proc *p)
{
    struct rl_gen *G = rl_proc_gen(p);
    return G->gate.charges_sends;
}

bool rl_gate_active(const struct rl_proc *p)
{
    struct rl_gen *G = rl_proc_gen(p);
    return G->gate.active;
}

uint64_t rl_gate_send_least(const struct rl_gen *G, uint64_t want)
{
    uint64_t m = G->gate.max_bytes;
    uint64_t least = m / 16 > 0 ? m / 16 : 1;
    return least < want ? least : want;
}

uint64_t rl_gate_send_least_nonblocking(const struct rl_gen *G, uint64_t want)
{
    uint64_t least = rl_gate_send_least(G, want);
    uint64_t r = G->gate.refill_10ms > 0 ? G->gate.refill_10ms : 1;
    return r < least ? r : least;
}

bool rl_gate_needs_peer(const struct rl_proc *p)
{
    struct rl_gen *G = rl_proc_gen(p);
    return G->gate.needs_peer;
}

bool rl_gate_covers(struct rl_proc *p, const void *sa, unsigned salen)
{
    return rl_gate_covers_in(p, rl_proc_gen(p), sa, salen);
}

bool rl_gate_covers_in(struct rl_proc *p, const struct rl_gen *G,
                       const void *sa, unsigned salen)
{
    const struct rl_gate *g = &G->gate;
    if (rl_sites_any(&G->sites) && !g->deny_all &&
        (g->rule == NULL || !rl_rule_covers(&p->names, g->rule, sa, salen)))
        return rl_sites_pick(&G->sites, &p->names, sa, salen) >= 0;
    if (g->rule != NULL)
        return rl_rule_covers(&p->names, g->rule, sa, salen);
    if (!g->deny_all || sa == NULL || salen < sizeof(sa_family_t))
        return false;
    sa_family_t fam = ((const struct sockaddr *)sa)->sa_family;
    return fam == AF_INET || fam == AF_INET6;
}

bool rl_gate_connects_alike(const struct rl_proc *p)
{
    struct rl_gen *G = rl_proc_gen(p);
    const struct rl_rule *rule = G->gate.rule;
    return rule != NULL && rule->nto == 0 && !rl_rule_per_dest(rule) &&
           !rl_sites_any(&G->sites) && !p->open.on;
}

/* The budget to charge: the current one, re-opened and re-claimed when
 * another process has replaced the segment. One thread re-opens; the
 * others keep using the old mapping meanwhile (it stays mapped: a thread
 * may still be inside it, so the old one is never unmapped). */
struct budget *rl_gate_budget(struct rl_gate *g)
{
    /* Pairs with the release stores in rl_gate_init and below. */
    struct budget *b = atomic_load_explicit(&g->cur, memory_order_acquire);
    if (b == NULL || !rl_store_is_stale(b->store))
        return b;
    if (atomic_flag_test_and_set_explicit(&g->reopening, memory_order_acquire))
        return b;
    struct budget *nb = calloc(1, sizeof *nb);
    struct rl_store *st = NULL;
    if (nb != NULL && rl_store_open(&st, &g->store_opts, NULL, 0) == 0) {
        if (claim(g, st, nb) == 0) {
            nb->replaced = b;
            atomic_store_explicit(&g->cur, nb, memory_order_release);
            b = nb;
            nb = NULL;
        } else {
            rl_store_close(st);
        }
    }
    free(nb);
    atomic_flag_clear_explicit(&g->reopening, memory_order_release);
    return b;
}

void rl_sub_sat_u64(rl_atomic_u64 *p, uint64_t n)
{
    uint64_t v = rl_load_relaxed_u64(p);
    while (!atomic_compare_exchange_weak_explicit(
        p, &v, v > n ? v - n : 0, memory_order_relaxed, memory_order_relaxed))
        ;
}

static rl_atomic_u64 *counter(struct budget *b, int kind, int stat)
{
    return &b->slot.counters[kind * RL_STORE_STATS_PER_KIND + stat];
}

void rl_gate_count(struct rl_gate *g, const struct rl_rule *sec,
                   struct budget *b, int kind, int stat, uint64_t n)
{
    if (n == 0)
        return;
    /* The exit report counts only when asked for (SPEC §4): else no call. */
    if (__builtin_expect(g->report.on, 0))
        rl_report_add_in(&g->report, sec, kind, stat, n);
    if (b != NULL)
        rl_add_relaxed_u64(counter(b, kind, stat), n);
}

void rl_gate_count_responded(struct rl_gate *g, const struct rl_rule *sec,
                             struct budget *b, uint64_t n)
{
    if (n == 0)
        return;
    if (__builtin_expect(g->report.on, 0))
        rl_report_add_responded(&g->report, sec, n);
    if (b != NULL)
        rl_store_count_responded(&b->slot, n);
}

void rl_gate_uncount(struct rl_gate *g, const struct rl_rule *sec,
                     struct budget *b, int kind, int stat, uint64_t n)
{
    if (n == 0)
        return;
    rl_report_sub_in(&g->report, sec, kind, stat, n);
    if (b != NULL)
        rl_sub_sat_u64(counter(b, kind, stat), n);
}

/* One send call of `bytes` out of the host's lease of a fleet budget
 * (fleet_lease.h): no round trip, nothing logged. */
static bool fleet_leased(struct rl_gate *g, uint64_t bytes)
{
    const struct rl_rule *rule = g->rule;
    struct budget *b = atomic_load_explicit(&g->cur, memory_order_acquire);
    if (b == NULL || b->fleet.w == NULL)
        return false;
    uint64_t calls = rule->nlimits[RL_KIND_SEND] != 0 ? 1 : 0;
    if (rule->nlimits[RL_KIND_SEND_BYTES] == 0)
        bytes = 0;
    if (!rl_fleet_lease_take(&b->fleet, calls, bytes))
        return false;
    /* The segment's counters learn it at the pool's next fill. */
    if (g->report.on) {
        rl_report_add(&g->report, RL_KIND_SEND, RL_STAT_ALLOWED, calls);
        rl_report_add(&g->report, RL_KIND_SEND_BYTES, RL_STAT_ALLOWED, bytes);
    }
    return true;
}

void rl_gate_fleet_lease_refund(struct rl_gate *g, uint64_t calls,
                                uint64_t bytes)
{
    struct budget *b = atomic_load_explicit(&g->cur, memory_order_acquire);
    const struct rl_rule *rule = g->rule;
    if (b == NULL || b->fleet.w == NULL)
        return;
    if (rule->nlimits[RL_KIND_SEND] == 0)
        calls = 0;
    if (rule->nlimits[RL_KIND_SEND_BYTES] == 0)
        bytes = 0;
    rl_fleet_lease_refund(&b->fleet, calls, bytes);
    rl_report_sub(&g->report, RL_KIND_SEND, RL_STAT_ALLOWED, calls);
    rl_report_sub(&g->report, RL_KIND_SEND_BYTES, RL_STAT_ALLOWED, bytes);
}

int rl_gate_send(struct rl_proc *p, struct rl_gate_ticket *t, const char *call,
                 int fd, const void *sa, unsigned salen, uint64_t calls,
                 uint64_t calls_min, uint64_t bytes, uint64_t bytes_min)
{
    return rl_gate_send_in(p, rl_proc_gen(p), t, call, fd, sa, salen, calls,
                           calls_min, bytes, bytes_min);
}

int rl_gate_send_in(struct rl_proc *p, struct rl_gen *G,
                    struct rl_gate_ticket *t, const char *call, int fd,
                    const void *sa, unsigned salen, uint64_t calls,
                    uint64_t calls_min, uint64_t bytes, uint64_t bytes_min)
{
    t->gen = G; /* the decision's one load, the caller's */
    if (G->gate.fleet_lease && calls == 1 && fleet_leased(&G->gate, bytes)) {
        rl_gate_ticket_init(t, 0, 1, bytes);
        t->leased = true;
        return RL_GATE_GO;
    }
    if (G->gate.lease.on && calls == 1) {
        struct rl_lease_holder *h = rl_lease_take(p, G, bytes);
        if (h != NULL) {
            rl_lease_stamp(h);
            /* Nothing to sleep, nothing logged. */
            rl_gate_ticket_init(t, 0, 1, bytes);
            t->leased = true;
            return RL_GATE_GO;
        }
        /* Spent, expired or too small for this call: what is left goes
         * back before the call is decided on its own, so that a thread
         * never holds units while its own calls wait or are denied. */
        rl_lease_drop(p);
    }
    return rl_gate_send_loaded_at(p, t, rl_clock_now_ns(), call, fd, sa, salen,
                                  calls, calls_min, bytes, bytes_min);
}

void rl_gate_report_enable(struct rl_proc *p)
{
    struct rl_gen *G = rl_proc_gen(p);
    /* Each site's counts apart; without the memory, with the rule's. */
    if (G->gate.cfg != NULL)
        (void)rl_report_setup(&G->gate.report, G->gate.cfg);
    G->gate.report.on = true;
}

void rl_gate_finish(struct rl_proc *p)
{
    struct rl_gen *G = rl_proc_gen(p);
    struct rl_gate *g = &G->gate;
    if (g->cfg == NULL)
        return;
    rl_lease_finish(p);
    if (g->rule != NULL && rl_fleet_decides(&p->fleet, g->rule)) {
        /* The host's lease back, and what was spent while Redis was away
         * charged (fleet.h). */
        struct budget *b = atomic_load_explicit(&g->cur, memory_order_acquire);
        rl_fleet_finish(&p->fleet, g->rule,
                        g->fleet_lease && b != NULL && b->fleet.w != NULL
                            ? &b->fleet
                            : NULL);
    }
    if (g->report.on) {
        rl_lease_report(p);
        rl_report_write(p);
    }
}

uint64_t rl_gate_send_leased(struct rl_proc *p, uint64_t len, bool stream)
{
    struct rl_gen *G = rl_proc_gen(p);
    struct rl_gate *g = &G->gate;
    uint64_t want = rl_gate_send_want(g, len, stream);
    if (want == 0)
        return 0;
    if (g->fleet_lease)
        return fleet_leased(g, want) ? want : 0;
    struct rl_lease_holder *h = g->lease.on ? rl_lease_take(p, G, want) : NULL;
    rl_gate_send_leased_done(h);
    return h != NULL ? want : 0;
}

void rl_gate_lease_refund(struct rl_proc *p, uint64_t calls, uint64_t bytes)
{
    struct rl_gen *G = rl_proc_gen(p);
    if (G->gate.fleet_lease)
        rl_gate_fleet_lease_refund(&G->gate, calls, bytes);
    else
        rl_lease_refund(p, calls, bytes);
}

uint64_t rl_gate_send_eta(struct rl_proc *p, uint64_t bytes)
{
    return rl_gate_send_eta_in(rl_proc_gen(p), bytes);
}

uint64_t rl_gate_send_eta_in(const struct rl_gen *G, uint64_t bytes)
{
    const struct rl_rule *rule = G->gate.rule;
    if (rule == NULL)
        return G->gate.deny_all ? UINT64_MAX : 0;
    /* The user's own budget (not a site's: a held socket is woken when
     * its rule's budget allows, and asks again if a site still says no). */
    struct budget *b = atomic_load_explicit(&G->gate.cur, memory_order_acquire);
    if (b == NULL)
        return 0;
    uint64_t now = rl_clock_now_ns(), eta = 0;
    uint64_t units[RL_KIND_COUNT] = {0, 1, bytes};
    for (int k = RL_KIND_SEND; k <= RL_KIND_SEND_BYTES; k++) {
        for (unsigned i = 0; i < rule->nlimits[k] && units[k] > 0; i++) {
            const struct rl_limit *lim = &rule->limits[k][i];
            const struct rl_algorithm *a = rl_algorithm_get(lim->algo);
            uint64_t u = units[k] < lim->burst ? units[k] : lim->burst;
            /* Asked, not taken: a take given back at once would be lost
             * whenever another caller took in between (limit.h). u is
             * within the capacity, so "never" means the window's lock
             * could not be had: ask again in a while. */
            uint64_t w = a->eta(b->states[k][i], lim, now, u);
            if (w == UINT64_MAX)
                w = RL_GATE_ETA_RETRY_NS;
            if (w > eta)
                eta = w;
        }
    }
    return eta;
}
