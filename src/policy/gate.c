/* gate.c — one decision per call (see gate.h).
 *
 * The process's state is one struct rl_gate (gate_int.h). A decision
 * builds the list of budgets the call is charged to (the user's rule, the
 * first site that covers it, a budget per destination; each local or on
 * Redis), takes from each at the one turn the call goes (take()), and
 * gives back to all when one denies; leases (lease.c) and the exit report
 * (report.c) sit beside it. */
#include "policy/gate.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
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

struct rl_gate rl_gate = {
    .max_bytes = UINT64_MAX,
    .refill_10ms = UINT64_MAX,
    .reopening = ATOMIC_FLAG_INIT,
};

static int claim(struct rl_store *st, struct budget *b)
{
    struct rl_gate *g = &rl_gate;
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
        rl_fleet_pool_at(b->slot.words + b->layout.fleet, b->slot.counters,
                         &b->fleet);
    return 0;
}

static int open_store(const struct rl_config *c, char *why, size_t whylen);

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

int rl_gate_init(const struct rl_config *c, const struct rl_identity *id,
                 char *why, size_t whylen)
{
    struct rl_gate *g = &rl_gate;
    g->cfg = c;
    /* SPEC §9: the environment wins, so a test needs no config edit. */
    const char *dlog = secure_getenv("RLSHIM_DECISION_LOG");
    if (dlog == NULL)
        dlog = c->decision_log;
    if (rl_declog_setup(dlog) < 0)
        rl_log_stderr("decision_log %s: not an absolute path, or too long: "
                      "decisions are not logged",
                      dlog);
    g->rule = rl_config_find_rule(c, id->has_key ? id->key : NULL, id->uid,
                                  id->has_login ? id->login : NULL);
    char caller[RL_IDENTITY_MAX + 16];
    const char *who = rl_identity_user(id, caller, sizeof caller);
    snprintf(g->user, sizeof g->user, "%s", who);
    const struct rl_rule *rule = g->rule;
    if (rl_sites_setup(c, who) < 0 || rl_dests_setup(c) < 0)
        return -ENOMEM;
    for (size_t j = 0; j < c->nrules; j++)
        if (c->rules[j].max_open > 0 &&
            (&c->rules[j] == rule || c->rules[j].site != NULL))
            rl_open_enable();
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
    if (rule == NULL) {
        g->deny_all = c->unknown == RL_UNKNOWN_DENY;
        g->active = g->deny_all;
        g->charges_sends = g->deny_all || rl_sites_charge_sends();
        if (!rl_sites_any())
            return 0;
        (void)rl_ownerlock_self();
        (void)rl_fleet_init(c, "");        /* for the sites' fleet budgets */
        return open_store(c, why, whylen); /* for the sites' budgets */
    }
    g->charges_sends = rule->nlimits[RL_KIND_SEND] > 0 ||
                       rule->nlimits[RL_KIND_SEND_BYTES] > 0 ||
                       rl_sites_charge_sends();
    /* Run the window lock's one-time setup (pthread_once) now, so that a
     * signal handler deciding a send (rl_gate_send_reentered) never runs
     * it, nor waits on it inside the frame it interrupted. */
    (void)rl_ownerlock_self();
    rl_lease_setup();
    /* A call charged to a site or per destination is decided on its own,
     * exactly: a lease of the rule's units would skip the other budget.
     * The decision log has one line per call: no call goes unseen in a
     * lease. */
    if (rl_sites_any() || rule->per == RL_PER_DESTINATION ||
        rl_declog_enabled())
        g->lease.on = false;
    g->slot_tag = rl_budget_label(rule, rl_budget_user(rule, who), g->label,
                                  sizeof g->label);
    g->overflow_tag = rl_budget_overflow_tag(rule);
    /* A fleet budget is decided in Redis: no local lease of its units,
     * but the host's lease of fleet units, on the same terms (no dry
     * run, no site, no per-destination budget, no decision log). */
    bool fleet_leasable = !rule->dry_run && !c->dry_run && !rl_sites_any() &&
                          rule->per != RL_PER_DESTINATION &&
                          !rl_declog_enabled() && rl_fleet_leasable(rule);
    if (rl_fleet_init(c, g->label) == 0 && rl_fleet_decides(rule)) {
        g->lease.on = false;
        g->fleet_lease = fleet_leasable;
    }
    return open_store(c, why, whylen);
}

/* Open the store and claim the rule's slot (with only sites, the budget
 * holds the store and no slot of its own). */
static int open_store(const struct rl_config *c, char *why, size_t whylen)
{
    struct rl_gate *g = &rl_gate;
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
                       rl_dests_arena_words(c) +
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
    r = claim(st, b);
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

void rl_gate_atfork_child(void)
{
    atomic_flag_clear_explicit(&rl_gate.reopening, memory_order_relaxed);
}

bool rl_gate_charges_sends(void)
{
    return rl_gate.charges_sends;
}

bool rl_gate_active(void)
{
    return rl_gate.active;
}

uint64_t rl_gate_max_bytes(void)
{
    return rl_gate.max_bytes;
}

uint64_t rl_gate_send_least(uint64_t want)
{
    uint64_t least = rl_gate.max_bytes / 16 > 0 ? rl_gate.max_bytes / 16 : 1;
    return least < want ? least : want;
}

uint64_t rl_gate_send_least_nonblocking(uint64_t want)
{
    uint64_t least = rl_gate_send_least(want);
    uint64_t r = rl_gate.refill_10ms > 0 ? rl_gate.refill_10ms : 1;
    return r < least ? r : least;
}

bool rl_gate_covers(const void *sa, unsigned salen)
{
    if (rl_sites_any() && !rl_gate.deny_all &&
        (rl_gate.rule == NULL || !rl_rule_covers(rl_gate.rule, sa, salen)))
        return rl_sites_pick(sa, salen) >= 0;
    if (rl_gate.rule != NULL)
        return rl_rule_covers(rl_gate.rule, sa, salen);
    if (!rl_gate.deny_all || sa == NULL || salen < sizeof(sa_family_t))
        return false;
    sa_family_t fam = ((const struct sockaddr *)sa)->sa_family;
    return fam == AF_INET || fam == AF_INET6;
}

/* The budget to charge: the current one, re-opened and re-claimed when
 * another process has replaced the segment. One thread re-opens; the
 * others keep using the old mapping meanwhile (it stays mapped: a thread
 * may still be inside it, so the old one is never unmapped). */
static struct budget *budget(void)
{
    struct rl_gate *g = &rl_gate;
    /* Pairs with the release stores in rl_gate_init and below. */
    struct budget *b = atomic_load_explicit(&g->cur, memory_order_acquire);
    if (b == NULL || !rl_store_is_stale(b->store))
        return b;
    if (atomic_flag_test_and_set_explicit(&g->reopening, memory_order_acquire))
        return b;
    struct budget *nb = calloc(1, sizeof *nb);
    struct rl_store *st = NULL;
    if (nb != NULL && rl_store_open(&st, &g->store_opts, NULL, 0) == 0) {
        if (claim(st, nb) == 0) {
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

void rl_gate_count(struct budget *b, int kind, int stat, uint64_t n)
{
    if (n == 0)
        return;
    rl_report_add(&rl_gate.report, kind, stat, n);
    if (b != NULL)
        rl_add_relaxed_u64(counter(b, kind, stat), n);
}

void rl_gate_uncount(struct budget *b, int kind, int stat, uint64_t n)
{
    if (n == 0)
        return;
    rl_report_sub(&rl_gate.report, kind, stat, n);
    if (b != NULL)
        rl_sub_sat_u64(counter(b, kind, stat), n);
}

/* "fd 3 to 127.0.0.1:80" for a log line. Asks the kernel for the peer
 * when sa is NULL: call only once the log has said it will write. */
static void describe(char *buf, size_t len, int fd, const void *sa,
                     unsigned salen)
{
    struct sockaddr_storage ss;
    if (sa == NULL) {
        socklen_t sl = sizeof ss;
        if (getpeername(fd, (struct sockaddr *)&ss, &sl) != 0) {
            snprintf(buf, len, "fd %d", fd);
            return;
        }
        sa = &ss;
        salen = sl;
    }
    char host[INET6_ADDRSTRLEN] = "?";
    unsigned port = 0;
    sa_family_t fam = ((const struct sockaddr *)sa)->sa_family;
    if (fam == AF_INET && salen >= sizeof(struct sockaddr_in)) {
        const struct sockaddr_in *in = sa;
        inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
        port = ntohs(in->sin_port);
        snprintf(buf, len, "fd %d to %s:%u", fd, host, port);
    } else if (fam == AF_INET6 && salen >= sizeof(struct sockaddr_in6)) {
        const struct sockaddr_in6 *in6 = sa;
        inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
        port = ntohs(in6->sin6_port);
        snprintf(buf, len, "fd %d to [%s]:%u", fd, host, port);
    } else {
        snprintf(buf, len, "fd %d", fd);
    }
}

/* What a log line names: the call and its destination. */
struct call {
    const char *name;
    int fd;
    const void *sa;
    unsigned salen;
};

/* What a log line says about a decision. */
struct verdict_line {
    const char *what; /* "denied", "would deny", "delayed" */
    int kind;         /* denied: the kind over quota */
    uint64_t units;   /* denied: how many were asked */
    uint64_t wait_ns; /* delayed: for how long */
    bool dry;
    const struct rl_rule *by; /* denied: the section that said no (NULL:
                                 the rule) */
    uint32_t max_open;        /* denied for max_open: its N; else 0 */
};

/* One log line. Nothing is done (no getpeername, no formatting) unless
 * the log's rate limit says the line will be written: a client spinning
 * on denials pays no system call for lines never written. */
static void log_event(uint64_t now, const struct call *c,
                      const struct verdict_line *d)
{
    if (!rl_log_admit(now))
        return;
    char dest[96], detail[96];
    describe(dest, sizeof dest, c->fd, c->sa, c->salen);
    if (d->wait_ns > 0)
        snprintf(detail, sizeof detail, " by %llu.%03llu ms%s",
                 (unsigned long long)(d->wait_ns / 1000000),
                 (unsigned long long)(d->wait_ns / 1000 % 1000),
                 d->dry ? " (dry run: not slept)" : "");
    else if (d->max_open > 0)
        snprintf(detail, sizeof detail, ": max_open %u of [%s] reached%s",
                 d->max_open, d->by->section, d->dry ? " (dry run)" : "");
    else if (d->by != NULL && d->by != rl_gate.rule)
        snprintf(detail, sizeof detail, ": %s %llu over quota of [%s]%s",
                 rl_kind_name(d->kind), (unsigned long long)d->units,
                 d->by->section, d->dry ? " (dry run)" : "");
    else
        snprintf(detail, sizeof detail, ": %s %llu over quota%s",
                 rl_kind_name(d->kind), (unsigned long long)d->units,
                 d->dry ? " (dry run)" : "");
    rl_log_admitted("%s %s %s%s (user %s, rule [%s])", d->what, c->name, dest,
                    detail, rl_gate.user,
                    rl_gate.rule != NULL ? rl_gate.rule->section : "none");
}

static bool dry_run(void)
{
    return rl_gate.rule != NULL ? rl_gate.rule->dry_run : rl_gate.cfg->dry_run;
}

/* Charge `b` (its own limiters) for this call. */
static struct rl_gate_charge *add_budget(struct rl_gate_ticket *t,
                                         struct budget *b)
{
    struct rl_gate_charge *c = &t->charge[t->ncharges++];
    c->budget = b;
    c->rule = b->rule;
    memcpy(c->states, b->states, sizeof c->states);
    /* A site's fleet budget is the site's for this user. */
    if (b->rule != rl_gate.rule)
        c->fleet_owner = rl_gate.user;
    return c;
}

/* The destination's name, kept in the ticket for a per-destination fleet
 * budget of `c`'s rule (its Redis key names it). */
static void fleet_dest(struct rl_gate_ticket *t, struct rl_gate_charge *c,
                       const char *owner, const char *name, size_t namelen)
{
    if (c->rule->scope != RL_SCOPE_FLEET || namelen >= sizeof t->dest)
        return;
    memcpy(t->dest, name, namelen);
    t->dest[namelen] = '\0';
    c->fleet_owner = owner;
    c->fleet_dest = true;
}

/* Charge the budget of section `r` for (owner, name) in the table of
 * policy/dests.h, counting in `b` (the section's budget for the user).
 * false when not even an overflow budget could be had. */
static bool add_dest(struct rl_gate_ticket *t, struct budget *b,
                     const struct rl_rule *r, const char *owner,
                     const char *name, size_t namelen)
{
    struct rl_dest_entry e;
    if (rl_dests_find(b->store, r, owner, name, namelen, t->now, &e) < 0)
        return false;
    struct rl_gate_charge *c = &t->charge[t->ncharges++];
    c->budget = b;
    c->rule = r;
    memcpy(c->states, e.states, sizeof c->states);
    c->key_word = e.key_word;
    c->key = e.key;
    c->open_area = e.open;
    fleet_dest(t, c, owner, name, namelen);
    return true;
}

/* The budgets this call to `sa` (NULL: fd's peer) is charged to, into
 * t->charge[]: the rule's (when its `to` covers the destination; its
 * budget for the destination when it is `per = destination`) and the
 * first site that covers it (likewise). A store that could not be set up
 * charges none. */
static void charges(struct rl_gate_ticket *t, int fd, const void *sa,
                    unsigned salen)
{
    const struct rl_rule *rule = rl_gate.rule;
    struct budget *b = budget();
    t->ncharges = 0;
    if (b == NULL)
        return;
    if (!rl_sites_any() && !rl_dests_any()) {
        add_budget(t, b); /* the hook asked rl_gate_covers */
        return;
    }
    struct sockaddr_storage peer;
    if (sa == NULL) {
        socklen_t l = sizeof peer;
        if (getpeername(fd, (struct sockaddr *)&peer, &l) != 0) {
            if (rule != NULL)
                add_budget(t, b);
            return;
        }
        sa = &peer;
        salen = l;
    }
    /* The destination taken apart once: its name is looked up at most
     * once for every `to` and per-destination budget below. */
    struct rl_peer p;
    char name[RL_NAME_MAX + 1], pname[RL_NAME_MAX + 1];
    size_t namelen = 0;
    if (!rl_peer_from_addr(sa, salen, &p))
        return;
    if (rule != NULL && rl_dests_cover_peer(rule->to, rule->nto, &p, pname)) {
        if (rule->per == RL_PER_DESTINATION) {
            namelen = rl_dests_peer_name(&p, name);
            const char *owner = rl_budget_user(rule, rl_gate.user);
            if (!add_dest(t, b, rule, owner, name, namelen))
                /* No room at all: the rule's own (in Redis, still the
                 * destination's). */
                fleet_dest(t, add_budget(t, b), owner, name, namelen);
        } else {
            add_budget(t, b);
        }
    }
    int si = rl_sites_pick_peer(&p, pname);
    struct budget *sb = si >= 0 ? rl_sites_budget(si, b->store) : NULL;
    if (sb == NULL)
        return;
    if (sb->rule->per == RL_PER_DESTINATION) {
        if (namelen == 0)
            namelen = rl_dests_peer_name(&p, name);
        if (add_dest(t, sb, sb->rule, rl_gate.user, name, namelen))
            return;
        fleet_dest(t, add_budget(t, sb), rl_gate.user, name, namelen);
        return;
    }
    add_budget(t, sb);
}

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
                    c->rule->nlimits[kind], t->now, c->v[kind], units);
}

/* Give back what every charge took of `kind`, and forget it. */
static void untake_all(struct rl_gate_ticket *t, int kind, uint64_t units)
{
    for (unsigned i = 0; i < t->ncharges; i++) {
        untake(t, &t->charge[i], kind, units);
        t->charge[i].took[kind] = false;
    }
}

/* Ask charge c for `want` (at least `min`) units of `kind` for the turn
 * `at` ns after t->now; the verdict's wait is from t->now. The charge's
 * own max_delay bounds how far it may move the turn: one the turn is
 * already past grants only what it has free at the turn. */
static struct rl_verdict take_one(struct rl_gate_ticket *t,
                                  struct rl_gate_charge *c, int kind,
                                  uint64_t at, uint64_t want, uint64_t min)
{
    uint64_t mw = max_wait(c->rule);
    mw = mw > at ? mw - at : 0;
    if (min > want)
        min = want;
    struct rl_verdict v;
    if (c->fleet[kind]) {
        /* Only the user's rule budget leases (a site or per-destination
         * charge is decided on its own, exactly, under its own key). */
        char label[RL_STORE_LABEL_MAX + sizeof t->dest + 1];
        const char *fl = NULL;
        if (c->fleet_owner != NULL) {
            rl_budget_label(c->rule, c->fleet_owner, label, RL_STORE_LABEL_MAX);
            if (c->fleet_dest) {
                size_t l = strlen(label);
                snprintf(label + l, sizeof label - l, "|%s", t->dest);
            }
            fl = label;
        }
        const struct rl_fleet_pool *pool = rl_gate.fleet_lease && fl == NULL &&
                                                   kind != RL_KIND_CONNECT &&
                                                   c->budget->fleet.w != NULL
                                               ? &c->budget->fleet
                                               : NULL;
        v = rl_fleet_take(c->rule, fl, kind, c->states[kind], pool, t->now,
                          want, min, mw, c->v[kind]);
    } else {
        v = rl_multi_take(c->states[kind], c->rule->limits[kind],
                          c->rule->nlimits[kind], t->now + at, want, min, mw,
                          c->v[kind]);
    }
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
 * would refill (or let a stamp expire) over a unit that had not gone yet:
 * with the rule at 2/s and a site at 1/s that delays a connect by 1 s,
 * the rule let 3 go at once. A give-back admits no more than if the take
 * had not happened (limit.h), so the loop never over-admits; a turn that
 * keeps moving (other callers take in between) is refused after a few
 * rounds.
 *
 * A fleet charge (decided in Redis, at Redis's time) cannot be given back
 * nor asked for a later turn. It is asked first, so that the local
 * charges are asked at its turn; if a local charge then moves the turn
 * later still, the fleet counted the unit up to that much early (left as
 * it is: refusing would lose the fleet's unit and turn the delay the
 * section asked for into a failure). */
static bool take(struct rl_gate_ticket *t, int kind, uint64_t want,
                 uint64_t min, uint64_t *granted)
{
    uint64_t least = want, at = 0; /* the turn, from t->now */
    uint64_t turn[RL_GATE_MAX_CHARGES] = {0};
    unsigned order[RL_GATE_MAX_CHARGES], nc = 0, rounds = 0;
    *granted = want;
    if (want == 0)
        return true;
    /* Fleet charges first (see above), then the local ones in order. */
    for (int fleet = 1; fleet >= 0; fleet--)
        for (unsigned i = 0; i < t->ncharges; i++) {
            struct rl_gate_charge *c = &t->charge[i];
            if (c->rule->nlimits[kind] == 0)
                continue;
            /* Fleet scope: the user's rule budget, a site's for the
             * user, or either's for the destination, each under its own
             * Redis key (take_one). */
            c->fleet[kind] = rl_fleet_decides(c->rule);
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
        struct rl_verdict v = take_one(t, c, kind, at, least, min);
        bool moved = v.granted > 0 && c->key_word != NULL &&
                     rl_load_acquire_u64(c->key_word) != c->key;
        if (v.granted == 0 || moved) {
            /* Denied, or what it took fell on the other name (kept
             * there: that name admits less, never more). */
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

static int deny(struct rl_gate_ticket *t, int kind, uint64_t units,
                const struct call *c)
{
    const struct rl_rule *by = t->denier;
    struct budget *counted = NULL;
    for (unsigned i = 0; i < t->ncharges && counted == NULL; i++)
        if (by == NULL || t->charge[i].rule == by)
            counted = budget_of(&t->charge[i]);
    /* Counted where it was denied (the site's budget, or the rule's). */
    rl_gate_count(counted, kind, RL_STAT_DENIED, units);
    if (rl_declog_enabled())
        rl_gate_log_decision(t, rl_gate.user, rl_gate.rule, kind, units,
                             c->name, c->fd, c->sa, c->salen);
    bool dry = by != NULL ? by->dry_run : dry_run();
    const struct verdict_line d = {
        dry ? "would deny" : "denied",
        kind,
        units,
        0,
        dry,
        by,
        t->open_full != NULL && by != NULL ? by->max_open : 0};
    log_event(t->now, c, &d);
    /* What an earlier limit of this call reserved was given back: there
     * is no turn to sleep until (a dry run goes at once). */
    t->wait_ns = 0;
    if (dry)
        return RL_GATE_GO;
    t->err = by != NULL             ? by->deny_errno
             : rl_gate.rule != NULL ? rl_gate.rule->deny_errno
                                    : rl_gate.cfg->deny_errno;
    return RL_GATE_FAIL;
}

static void granted(struct rl_gate_ticket *t, const struct call *c)
{
    uint64_t units[RL_KIND_COUNT] = {1, t->calls, t->bytes};
    for (unsigned i = 0; i < t->ncharges; i++) {
        struct rl_gate_charge *ch = &t->charge[i];
        for (int k = 0; k < RL_KIND_COUNT; k++) {
            if (!ch->took[k])
                continue;
            rl_gate_count(budget_of(ch), k, RL_STAT_ALLOWED, units[k]);
            if (t->wait_ns > 0) {
                rl_gate_count(budget_of(ch), k, RL_STAT_DELAYED, units[k]);
                rl_gate_count(budget_of(ch), k, RL_STAT_DELAYED_NS, t->wait_ns);
            }
        }
    }
    if (rl_declog_enabled())
        rl_gate_log_decision(t, rl_gate.user, rl_gate.rule, -1, 0, c->name,
                             c->fd, c->sa, c->salen);
    if (t->wait_ns == 0)
        return;
    bool dry = dry_run();
    for (unsigned i = 0; i < t->ncharges; i++)
        dry |= t->charge[i].rule->dry_run;
    const struct verdict_line d = {"delayed", 0, 0, t->wait_ns, dry, NULL, 0};
    log_event(t->now, c, &d);
    if (dry)
        t->wait_ns = 0;
}

static bool open_take(struct rl_gate_ticket *t);
static void open_untake(struct rl_gate_ticket *t);

static void ticket(struct rl_gate_ticket *t, uint64_t now, uint64_t calls,
                   uint64_t bytes)
{
    memset(t, 0, sizeof *t);
    t->now = now;
    t->calls = calls;
    t->bytes = bytes;
}

int rl_gate_connect_at(struct rl_gate_ticket *t, uint64_t now, const char *call,
                       int fd, const void *sa, unsigned salen)
{
    const struct call c = {call, fd, sa, salen};
    ticket(t, now, 1, 0);
    if (rl_gate.rule == NULL && (rl_gate.deny_all || !rl_sites_any()))
        return rl_gate.deny_all ? deny(t, RL_KIND_CONNECT, 1, &c) : RL_GATE_GO;
    charges(t, fd, sa, salen);
    /* The max_open place first, then the rate's turn: a connect that
     * waits for a place takes its turn only once it has one, in the order
     * of every other connect. Taken the other way round, the turn was
     * given back when no place was free, and a give-back is exact only
     * for the newest turn: a sliding window forgot the turn its take had
     * replaced, a token bucket handed a turn already reserved by another
     * connect to the next one (two at once). Giving back a place is
     * exact (a count). */
    if (!open_take(t))
        return deny(t, RL_KIND_CONNECT, 1, &c);
    uint64_t g;
    if (!take(t, RL_KIND_CONNECT, 1, 1, &g)) {
        open_untake(t);
        return deny(t, RL_KIND_CONNECT, 1, &c);
    }
    granted(t, &c);
    return RL_GATE_GO;
}

/* The max_open area of a charge: a per-destination entry's, or a slot of
 * its own beside the budget's ("#open|" and the budget's slot number, the
 * same in every process of the segment). NULL when none can be had. */
static rl_atomic_u64 *open_area(struct rl_gate_charge *c)
{
    if (c->open_area != NULL)
        return c->open_area;
    struct budget *b = c->budget;
    char label[RL_STORE_LABEL_MAX];
    snprintf(label, sizeof label, "#open|%s|%u", c->rule->section,
             b->slot.index);
    uint64_t tag = rl_hash_str(RL_HASH_INIT, label);
    struct rl_slot slot;
    bool overflowed = false;
    if (rl_store_slot(b->store, tag, label, RL_OPEN_WORDS,
                      rl_hash_str(RL_HASH_INIT, "#open|*"), &slot,
                      &overflowed) < 0 ||
        slot.nwords < RL_OPEN_WORDS)
        return NULL;
    return slot.words;
}

/* Give back the places open_take held (the rate denied the connect). */
static void open_untake(struct rl_gate_ticket *t)
{
    for (unsigned j = 0; j < t->nopen; j++)
        rl_open_release(t->open[j]);
    t->nopen = 0;
}

/* Hold a connection in every charge with max_open: true, or false with
 * nothing held and t->open_full set. Takes nothing of the rate. */
static bool open_take(struct rl_gate_ticket *t)
{
    t->nopen = 0;
    if (!rl_open_on)
        return true;
    for (unsigned i = 0; i < t->ncharges; i++) {
        struct rl_gate_charge *c = &t->charge[i];
        if (c->rule->max_open == 0)
            continue;
        rl_atomic_u64 *area = open_area(c);
        uint32_t seq;
        if (area == NULL)
            continue; /* no room in the segment: not enforced, never blocks */
        if (rl_open_acquire(area, c->rule->max_open, &seq) == 0) {
            t->open[t->nopen++] = area;
            continue;
        }
        open_untake(t);
        t->denier = c->rule;
        t->open_full = area;
        t->open_seq = seq;
        return false;
    }
    return true;
}

void rl_gate_connected(struct rl_gate_ticket *t, int fd, bool holds)
{
    if (t->nopen == 0)
        return;
    if (holds)
        rl_open_bind(fd, t->open, t->nopen);
    else
        for (unsigned j = 0; j < t->nopen; j++)
            rl_open_release(t->open[j]);
    t->nopen = 0;
}

bool rl_gate_open_waits(const struct rl_gate_ticket *t, uint64_t *deadline)
{
    const struct rl_rule *r = t->denier;
    if (t->open_full == NULL || r == NULL || r->on_deny != RL_DENY_DELAY ||
        r->dry_run)
        return false;
    uint64_t now = rl_clock_now_ns();
    if (*deadline == 0)
        *deadline = now + r->max_delay_ns;
    return now < *deadline;
}

void rl_gate_open_wait(const struct rl_gate_ticket *t, uint64_t deadline)
{
    rl_open_wait(t->open_full, t->open_seq, deadline);
}

bool rl_gate_open_freed(const struct rl_gate_ticket *t)
{
    return t->open_full == NULL || rl_open_freed(t->open_full, t->open_seq);
}

int rl_gate_connect(struct rl_gate_ticket *t, const char *call, int fd,
                    const void *sa, unsigned salen)
{
    return rl_gate_connect_at(t, rl_clock_now_ns(), call, fd, sa, salen);
}

int rl_gate_send_at(struct rl_gate_ticket *t, uint64_t now, const char *call,
                    int fd, const void *sa, unsigned salen, uint64_t calls,
                    uint64_t calls_min, uint64_t bytes, uint64_t bytes_min)
{
    const struct rl_rule *rule = rl_gate.rule;
    const struct call c = {call, fd, sa, salen};
    ticket(t, now, calls, bytes);
    if (rule == NULL && (rl_gate.deny_all || !rl_sites_any()))
        return rl_gate.deny_all ? deny(t, RL_KIND_SEND, calls, &c) : RL_GATE_GO;
    charges(t, fd, sa, salen);
    /* Units leased to threads that went quiet come back first (a
     * per-destination budget is never leased). */
    for (unsigned i = 0; i < t->ncharges; i++)
        if (t->charge[i].key_word == NULL && t->charge[i].rule != NULL &&
            t->charge[i].budget->rule == t->charge[i].rule)
            rl_lease_reclaim(budget_of(&t->charge[i]), now, calls, bytes);
    uint64_t gc, gb;
    if (!take(t, RL_KIND_SEND, calls, calls_min, &gc))
        return deny(t, RL_KIND_SEND, calls, &c);
    if (bytes_min == 0 && bytes > 0)
        bytes_min = 1;
    if (bytes_min < bytes && rule != NULL && rule->on_deny == RL_DENY_DELAY) {
        /* A stream send in delay mode: grant part of it only when a
         * sizeable part is free, else reserve it all and sleep. */
        uint64_t least = rl_gate_send_least(bytes);
        if (least > bytes_min)
            bytes_min = least;
    }
    if (!take(t, RL_KIND_SEND_BYTES, bytes, bytes_min, &gb)) {
        untake_all(t, RL_KIND_SEND, gc);
        return deny(t, RL_KIND_SEND_BYTES, bytes, &c);
    }
    t->calls = gc;
    t->bytes = gb;
    granted(t, &c);
    if (rl_gate.lease.on && calls == 1 && t->wait_ns == 0 && t->ncharges == 1)
        rl_lease_refill(budget_of(&t->charge[0]), now, gb);
    return RL_GATE_GO;
}

/* One send call of `bytes` out of the host's lease of a fleet budget
 * (fleet_lease.h): no round trip, nothing logged. */
static bool fleet_leased(uint64_t bytes)
{
    const struct rl_rule *rule = rl_gate.rule;
    struct budget *b = atomic_load_explicit(&rl_gate.cur, memory_order_acquire);
    if (b == NULL || b->fleet.w == NULL)
        return false;
    uint64_t calls = rule->nlimits[RL_KIND_SEND] != 0 ? 1 : 0;
    if (rule->nlimits[RL_KIND_SEND_BYTES] == 0)
        bytes = 0;
    if (!rl_fleet_lease_take(&b->fleet, calls, bytes))
        return false;
    /* The segment's counters learn it at the pool's next fill. */
    if (rl_gate.report.on) {
        rl_report_add(&rl_gate.report, RL_KIND_SEND, RL_STAT_ALLOWED, calls);
        rl_report_add(&rl_gate.report, RL_KIND_SEND_BYTES, RL_STAT_ALLOWED,
                      bytes);
    }
    return true;
}

static void fleet_lease_refund(uint64_t calls, uint64_t bytes)
{
    struct budget *b = atomic_load_explicit(&rl_gate.cur, memory_order_acquire);
    const struct rl_rule *rule = rl_gate.rule;
    if (b == NULL || b->fleet.w == NULL)
        return;
    if (rule->nlimits[RL_KIND_SEND] == 0)
        calls = 0;
    if (rule->nlimits[RL_KIND_SEND_BYTES] == 0)
        bytes = 0;
    rl_fleet_lease_refund(&b->fleet, calls, bytes);
    rl_report_sub(&rl_gate.report, RL_KIND_SEND, RL_STAT_ALLOWED, calls);
    rl_report_sub(&rl_gate.report, RL_KIND_SEND_BYTES, RL_STAT_ALLOWED, bytes);
}

int rl_gate_send(struct rl_gate_ticket *t, const char *call, int fd,
                 const void *sa, unsigned salen, uint64_t calls,
                 uint64_t calls_min, uint64_t bytes, uint64_t bytes_min)
{
    if (rl_gate.fleet_lease && calls == 1 && fleet_leased(bytes)) {
        ticket(t, 0, 1, bytes);
        t->leased = true;
        return RL_GATE_GO;
    }
    if (rl_gate.lease.on && calls == 1) {
        if (rl_lease_take(bytes)) {
            /* Nothing to sleep, nothing logged. */
            ticket(t, 0, 1, bytes);
            t->leased = true;
            return RL_GATE_GO;
        }
        /* Spent, expired or too small for this call: what is left goes
         * back before the call is decided on its own, so that a thread
         * never holds units while its own calls wait or are denied. */
        rl_lease_drop();
    }
    return rl_gate_send_at(t, rl_clock_now_ns(), call, fd, sa, salen, calls,
                           calls_min, bytes, bytes_min);
}

int rl_gate_send_reentered(uint64_t calls, uint64_t bytes, uint64_t bytes_min,
                           uint64_t *granted, int *err)
{
    const struct rl_rule *rule = rl_gate.rule;
    *granted = bytes;
    if (rule == NULL) {
        if (!rl_gate.deny_all)
            return RL_GATE_GO;
        rl_gate_count(NULL, RL_KIND_SEND, RL_STAT_DENIED, calls);
        *err = rl_gate.cfg->deny_errno;
        return rl_gate.cfg->dry_run ? RL_GATE_GO : RL_GATE_FAIL;
    }
    /* The budget as it is: budget() may re-open the store (malloc). */
    struct budget *b = atomic_load_explicit(&rl_gate.cur, memory_order_acquire);
    if (b == NULL)
        return RL_GATE_GO;
    uint64_t now = rl_clock_now_ns();
    /* Our own verdicts: the interrupted frame's ticket is its own. */
    struct rl_verdict vc[RL_MAX_RATES], vb[RL_MAX_RATES];
    unsigned nc = rule->nlimits[RL_KIND_SEND];
    unsigned nb = rule->nlimits[RL_KIND_SEND_BYTES];
    int denied = -1;
    uint64_t got = bytes;
    if (nc > 0 && calls > 0 &&
        rl_multi_take(b->states[RL_KIND_SEND], rule->limits[RL_KIND_SEND], nc,
                      now, calls, calls, 0, vc)
                .granted == 0)
        denied = RL_KIND_SEND;
    if (denied < 0 && nb > 0 && bytes > 0) {
        struct rl_verdict v = rl_multi_take(
            b->states[RL_KIND_SEND_BYTES], rule->limits[RL_KIND_SEND_BYTES], nb,
            now, bytes, bytes_min > 0 ? bytes_min : 1, 0, vb);
        got = v.granted;
        if (got == 0) {
            denied = RL_KIND_SEND_BYTES;
            if (nc > 0 && calls > 0)
                rl_multi_refund(b->states[RL_KIND_SEND],
                                rule->limits[RL_KIND_SEND], nc, now, vc, calls);
        }
    }
    if (denied >= 0) {
        rl_gate_count(b, denied, RL_STAT_DENIED,
                      denied == RL_KIND_SEND ? calls : bytes);
        *err = rule->deny_errno;
        return rule->dry_run ? RL_GATE_GO : RL_GATE_FAIL;
    }
    if (nc > 0)
        rl_gate_count(b, RL_KIND_SEND, RL_STAT_ALLOWED, calls);
    if (nb > 0)
        rl_gate_count(b, RL_KIND_SEND_BYTES, RL_STAT_ALLOWED, got);
    *granted = got;
    return RL_GATE_GO;
}

void rl_gate_refund(struct rl_gate_ticket *t, int kind, uint64_t units)
{
    if (kind < 0 || kind >= RL_KIND_COUNT || units == 0)
        return;
    if (t->leased && rl_gate.fleet_lease) {
        if (kind == RL_KIND_SEND && units <= t->calls)
            fleet_lease_refund(units, 0);
        else if (kind == RL_KIND_SEND_BYTES && units <= t->bytes)
            fleet_lease_refund(0, units);
        return;
    }
    if (t->leased) {
        /* Back into the lease it came from, if the thread still holds it
         * (else it stays spent: never more than was granted). */
        if (kind == RL_KIND_SEND && units <= t->calls)
            rl_lease_refund(units, 0);
        else if (kind == RL_KIND_SEND_BYTES && units <= t->bytes)
            rl_lease_refund(0, units);
        return;
    }
    for (unsigned i = 0; i < t->ncharges; i++) {
        struct rl_gate_charge *c = &t->charge[i];
        if (!c->took[kind])
            continue;
        untake(t, c, kind, units);
        /* Lower `allowed` by what was not spent after all. */
        rl_gate_uncount(budget_of(c), kind, RL_STAT_ALLOWED, units);
    }
}

void rl_gate_report_enable(void)
{
    rl_gate.report.on = true;
}

void rl_gate_finish(void)
{
    if (rl_gate.cfg == NULL)
        return;
    rl_lease_finish();
    if (rl_gate.fleet_lease) {
        struct budget *b =
            atomic_load_explicit(&rl_gate.cur, memory_order_acquire);
        if (b != NULL && b->fleet.w != NULL)
            rl_fleet_finish(rl_gate.rule, &b->fleet);
    }
    if (rl_gate.report.on) {
        rl_lease_report();
        rl_report_write();
    }
}

uint64_t rl_gate_send_leased(uint64_t len, bool stream)
{
    if (!rl_gate.lease.on && !rl_gate.fleet_lease)
        return 0;
    uint64_t want = stream && len > rl_gate.max_bytes ? rl_gate.max_bytes : len;
    if (want == 0)
        return 0;
    if (rl_gate.fleet_lease)
        return fleet_leased(want) ? want : 0;
    return rl_lease_take(want) ? want : 0;
}

void rl_gate_lease_refund(uint64_t calls, uint64_t bytes)
{
    if (rl_gate.fleet_lease)
        fleet_lease_refund(calls, bytes);
    else
        rl_lease_refund(calls, bytes);
}

uint64_t rl_gate_send_eta(uint64_t bytes)
{
    const struct rl_rule *rule = rl_gate.rule;
    if (rule == NULL)
        return rl_gate.deny_all ? UINT64_MAX : 0;
    /* The user's own budget (not a site's: a held socket is woken when
     * its rule's budget allows, and asks again if a site still says no). */
    struct budget *b = atomic_load_explicit(&rl_gate.cur, memory_order_acquire);
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
