/* gate.c — one decision per call (see gate.h).
 *
 * The process's state is one struct rl_gate (gate_int.h). A decision
 * builds the list of budgets the call is charged to (today: the rule's
 * one budget), takes from each, and gives back to all when one denies;
 * leases (lease.c) and the exit report (report.c) sit beside it. */
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

#include "limit/limit.h"
#include "policy/fleet.h"
#include "policy/gate_int.h"
#include "policy/gate_log.h"
#include "policy/lease.h"
#include "policy/report.h"
#include "state/store.h"
#include "util/atomics.h"
#include "util/clock.h"
#include "util/declog.h"
#include "util/log.h"
#include "util/ownerlock.h"

struct rl_gate rl_gate = {
    .max_bytes = UINT64_MAX,
    .reopening = ATOMIC_FLAG_INIT,
};

static int claim(struct rl_store *st, struct budget *b)
{
    struct rl_gate *g = &rl_gate;
    bool overflowed = false;
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
    return 0;
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
                      "decisions are not logged", dlog);
    g->rule = rl_config_find_rule(c, id->has_key ? id->key : NULL, id->uid,
                                  id->has_login ? id->login : NULL);
    char caller[RL_IDENTITY_MAX + 16];
    const char *who = rl_identity_user(id, caller, sizeof caller);
    snprintf(g->user, sizeof g->user, "%s", who);
    const struct rl_rule *rule = g->rule;
    if (rule == NULL) {
        g->deny_all = c->unknown == RL_UNKNOWN_DENY;
        g->active = g->deny_all;
        g->charges_sends = g->deny_all;
        return 0;
    }
    for (unsigned i = 0; i < rule->nlimits[RL_KIND_SEND_BYTES]; i++) {
        const struct rl_limit *l = &rule->limits[RL_KIND_SEND_BYTES][i];
        uint64_t cap = l->algo == RL_ALGO_TOKEN_BUCKET ? l->burst : l->count;
        if (cap < g->max_bytes)
            g->max_bytes = cap;
    }
    g->charges_sends = rule->nlimits[RL_KIND_SEND] > 0 ||
                       rule->nlimits[RL_KIND_SEND_BYTES] > 0;
    /* Run the window lock's one-time setup (pthread_once) now, so that a
     * signal handler deciding a send (rl_gate_send_reentered) never runs
     * it, nor waits on it inside the frame it interrupted. */
    (void)rl_ownerlock_self();
    rl_lease_setup();
    /* The decision log has one line per call: no call goes unseen in a
     * lease. */
    if (rl_declog_enabled())
        g->lease.on = false;
    g->slot_tag = rl_budget_label(rule, rl_budget_user(rule, who), g->label,
                                  sizeof g->label);
    g->overflow_tag = rl_budget_overflow_tag(rule);
    /* A fleet budget is decided in Redis: no local lease of its units. */
    if (rl_fleet_init(c, g->label) == 0 && rl_fleet_decides(rule))
        g->lease.on = false;
    g->store_opts = (struct rl_store_opts){
        .shared = c->state_mode == RL_STATE_SHARED,
        .dir = NULL,
        .uid = (uint32_t)getuid(),
        .config_hash = rl_budget_hash(c),
        .nslots = c->max_users + (uint32_t)c->nrules,
        .arena_words = arena_words(c),
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
    rl_lease_atfork_child();
    rl_fleet_atfork_child();
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

bool rl_gate_covers(const void *sa, unsigned salen)
{
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

/* The budgets this call is charged to, into t->charge[]; t->ncharges of
 * them. One today (the rule's); per-destination budgets and sites add
 * theirs here. A store that could not be set up charges none. */
static void charges(struct rl_gate_ticket *t)
{
    struct budget *b = budget();
    t->ncharges = 0;
    if (b != NULL)
        t->charge[t->ncharges++].budget = b;
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
    struct budget *b = budget_of(c);
    if (!c->took[kind] || units == 0 || c->fleet[kind])
        return;
    rl_multi_refund(b->states[kind], b->rule->limits[kind],
                    b->rule->nlimits[kind], t->now, c->v[kind], units);
}

/* Give back what every charge took of `kind`, and forget it. */
static void untake_all(struct rl_gate_ticket *t, int kind, uint64_t units)
{
    for (unsigned i = 0; i < t->ncharges; i++) {
        untake(t, &t->charge[i], kind, units);
        t->charge[i].took[kind] = false;
    }
}

/* Take `want` (at least `min`) units of `kind` from every charge: true
 * when all granted, *granted the least of their grants (what more the
 * others took goes back). On false nothing of `kind` is held. */
static bool take(struct rl_gate_ticket *t, int kind, uint64_t want,
                 uint64_t min, uint64_t *granted)
{
    uint64_t least = want;
    *granted = want;
    if (want == 0)
        return true;
    for (unsigned i = 0; i < t->ncharges; i++) {
        struct rl_gate_charge *c = &t->charge[i];
        struct budget *b = budget_of(c);
        unsigned n = b->rule->nlimits[kind];
        if (n == 0)
            continue;
        c->fleet[kind] = rl_fleet_decides(b->rule);
        struct rl_verdict v =
            c->fleet[kind]
                ? rl_fleet_take(b->rule, kind, b->states[kind], t->now, least,
                                min, max_wait(b->rule), c->v[kind])
                : rl_multi_take(b->states[kind], b->rule->limits[kind], n,
                                t->now, least, min, max_wait(b->rule),
                                c->v[kind]);
        if (v.granted == 0) {
            untake_all(t, kind, least);
            return false;
        }
        c->took[kind] = true;
        c->granted[kind] = v.granted;
        if (v.wait_ns > t->wait_ns)
            t->wait_ns = v.wait_ns;
        if (v.granted < least)
            least = v.granted;
    }
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
    if (t->ncharges == 0)
        rl_gate_count(NULL, kind, RL_STAT_DENIED, units);
    for (unsigned i = 0; i < t->ncharges; i++)
        rl_gate_count(budget_of(&t->charge[i]), kind, RL_STAT_DENIED, units);
    if (rl_declog_enabled())
        rl_gate_log_decision(t, rl_gate.user, rl_gate.rule, kind, units,
                             c->name, c->fd, c->sa, c->salen);
    bool dry = dry_run();
    const struct verdict_line d = {dry ? "would deny" : "denied", kind, units,
                                   0, dry};
    log_event(t->now, c, &d);
    /* What an earlier limit of this call reserved was given back: there
     * is no turn to sleep until (a dry run goes at once). */
    t->wait_ns = 0;
    if (dry)
        return RL_GATE_GO;
    t->err = rl_gate.rule != NULL ? rl_gate.rule->deny_errno
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
    const struct verdict_line d = {"delayed", 0, 0, t->wait_ns, dry};
    log_event(t->now, c, &d);
    if (dry)
        t->wait_ns = 0;
}

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
    if (rl_gate.rule == NULL)
        return rl_gate.deny_all ? deny(t, RL_KIND_CONNECT, 1, &c) : RL_GATE_GO;
    charges(t);
    uint64_t g;
    if (!take(t, RL_KIND_CONNECT, 1, 1, &g))
        return deny(t, RL_KIND_CONNECT, 1, &c);
    granted(t, &c);
    return RL_GATE_GO;
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
    if (rule == NULL)
        return rl_gate.deny_all ? deny(t, RL_KIND_SEND, calls, &c) : RL_GATE_GO;
    charges(t);
    /* Units leased to threads that went quiet come back first. */
    for (unsigned i = 0; i < t->ncharges; i++)
        rl_lease_reclaim(budget_of(&t->charge[i]), now, calls, bytes);
    uint64_t gc, gb;
    if (!take(t, RL_KIND_SEND, calls, calls_min, &gc))
        return deny(t, RL_KIND_SEND, calls, &c);
    if (bytes_min == 0 && bytes > 0)
        bytes_min = 1;
    if (bytes_min < bytes && rule->on_deny == RL_DENY_DELAY) {
        /* A stream send in delay mode: grant part of it only when a
         * sizeable part is free (1/16 of the burst), else reserve it all
         * and sleep. With a minimum of 1 byte, a client that comes back
         * a few microseconds later would get a few bytes per call: a busy
         * loop of tiny writes instead of a sleep. */
        uint64_t chunk =
            rl_gate.max_bytes / 16 > 0 ? rl_gate.max_bytes / 16 : 1;
        if (chunk > bytes_min)
            bytes_min = chunk < bytes ? chunk : bytes;
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

int rl_gate_send(struct rl_gate_ticket *t, const char *call, int fd,
                 const void *sa, unsigned salen, uint64_t calls,
                 uint64_t calls_min, uint64_t bytes, uint64_t bytes_min)
{
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
    if (rl_gate.report.on) {
        rl_lease_report();
        rl_report_write();
    }
}

uint64_t rl_gate_send_leased(uint64_t len, bool stream)
{
    if (!rl_gate.lease.on)
        return 0;
    uint64_t want = stream && len > rl_gate.max_bytes ? rl_gate.max_bytes : len;
    return want > 0 && rl_lease_take(want) ? want : 0;
}

void rl_gate_lease_refund(uint64_t calls, uint64_t bytes)
{
    rl_lease_refund(calls, bytes);
}
