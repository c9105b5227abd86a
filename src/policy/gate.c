/* gate.c — one decision per call (see gate.h).
 *
 * Process-wide state, written once by rl_gate_init (at load, before any
 * hook acts) and then only read, except `cur`, the budget in use, which is
 * swapped when the segment goes stale (another process replaced it). */
#include "policy/gate.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include "limit/limit.h"
#include "policy/budget.h"
#include "policy/gate_log.h"
#include "state/store.h"
#include "util/atomics.h"
#include "util/clock.h"
#include "util/declog.h"
#include "util/log.h"
#include "util/ownerlock.h"

/* The rule's slot in one open store, with each limit's state words. */
struct budget {
    struct rl_store *store;
    struct rl_slot slot;
    rl_word *states[RL_KIND_COUNT][RL_MAX_RATES];
    /* The budget this one replaced: never freed, since another thread may
     * still be deciding in it, and kept reachable from here. */
    struct budget *replaced;
};

static const struct rl_config *cfg;
static const struct rl_rule *rule; /* NULL: no section for this user */
static bool deny_all;              /* no rule and unknown = deny */
static bool active;
static bool charges_sends;
static struct rl_budget_layout layout;
static struct rl_store_opts store_opts;
static uint64_t slot_tag, overflow_tag;
static char label[RL_STORE_LABEL_MAX];
static char user[RL_IDENTITY_MAX + 16];
static uint64_t max_bytes = UINT64_MAX;

static _Atomic(struct budget *) cur;
static atomic_flag reopening = ATOMIC_FLAG_INIT;

/* What this process decided, per kind and stat (RL_STAT_*), for the exit
 * report; only counted when the report is on. Relaxed adds by any thread,
 * read once at exit. */
static bool report_on;
static rl_atomic_u64 mine[RL_KIND_COUNT][RL_STORE_STATS_PER_KIND];

/* Leases. While a budget is far from binding, a thread takes send tokens
 * a few at a time from the shared bucket into a lease of its own, then
 * spends them with no clock read but the coarse one, no atomic and no
 * lock. Leased tokens are already taken from the bucket, so nothing can
 * be over-admitted. A lease is taken only while the bucket holds at least
 * half its burst, so a limit that binds is decided call by call, exactly;
 * and what a thread holds goes back when it expires (LEASE_NS, or when
 * the lease no longer covers a call) and at thread or process exit, so
 * other threads and processes miss at most lease_size[k] per thread for
 * at most LEASE_NS. Only for rules whose send and send_bytes are each at
 * most one token bucket, and not in dry-run (every call is logged).
 * Written once by rl_gate_init. */
#define LEASE_NS 4000000u /* coarse clock ticks every 4 ms */
#define LEASE_CALLS 64u
#define LEASE_BYTES (256u * 1024u)
static bool lease_on;
static bool lease_calls, lease_bytes; /* send, send_bytes limited */
static uint64_t lease_size[RL_KIND_COUNT];

/* A thread's lease: units of send and send_bytes taken from `from` and not
 * spent yet. Only its own thread touches it (and the thread's exit). */
struct lease {
    struct budget *from;
    uint64_t left[RL_KIND_COUNT];
    uint64_t until; /* coarse ns */
};
static __thread struct lease lease
    __attribute__((tls_model("initial-exec")));
static pthread_key_t lease_key;
static void lease_at_thread_exit(void *arg);

static int claim(struct rl_store *st, struct budget *b)
{
    bool overflowed = false;
    int r = rl_store_slot(st, slot_tag, label, layout.nwords, overflow_tag,
                          &b->slot, &overflowed);
    if (r < 0)
        return r;
    b->store = st;
    for (int k = 0; k < RL_KIND_COUNT; k++)
        for (unsigned i = 0; i < rule->nlimits[k]; i++)
            b->states[k][i] = b->slot.words + layout.offset[k][i];
    return 0;
}

static uint64_t arena_words(void)
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
    cfg = c;
    /* SPEC §9: the environment wins, so a test needs no config edit. */
    const char *dlog = secure_getenv("RLSHIM_DECISION_LOG");
    if (rl_declog_setup(dlog != NULL ? dlog : c->decision_log) < 0)
        rl_log_stderr("decision_log %s: not an absolute path, or too long: "
                      "decisions are not logged", dlog ? dlog : c->decision_log);
    rule = rl_config_find_rule(c, id->has_key ? id->key : NULL, id->uid,
                               id->has_login ? id->login : NULL);
    char caller[RL_IDENTITY_MAX + 16];
    const char *who = rl_identity_user(id, caller, sizeof caller);
    snprintf(user, sizeof user, "%s", who);
    if (rule == NULL) {
        deny_all = c->unknown == RL_UNKNOWN_DENY;
        active = deny_all;
        charges_sends = deny_all;
        return 0;
    }
    for (unsigned i = 0; i < rule->nlimits[RL_KIND_SEND_BYTES]; i++) {
        const struct rl_limit *l = &rule->limits[RL_KIND_SEND_BYTES][i];
        uint64_t cap = l->algo == RL_ALGO_TOKEN_BUCKET ? l->burst : l->count;
        if (cap < max_bytes)
            max_bytes = cap;
    }
    charges_sends = rule->nlimits[RL_KIND_SEND] > 0 ||
                    rule->nlimits[RL_KIND_SEND_BYTES] > 0;
    rl_budget_layout(rule, &layout);
    /* Run the window lock's one-time setup (pthread_once) now, so that a
     * signal handler deciding a send (rl_gate_send_reentered) never runs
     * it, nor waits on it inside the frame it interrupted. */
    (void)rl_ownerlock_self();
    /* The decision log has one line per call: no call goes unseen in a
     * lease. */
    lease_on = !rule->dry_run && !c->dry_run && !rl_declog_enabled() &&
               pthread_key_create(&lease_key, lease_at_thread_exit) == 0;
    lease_calls = rule->nlimits[RL_KIND_SEND] != 0;
    lease_bytes = rule->nlimits[RL_KIND_SEND_BYTES] != 0;
    for (int k = RL_KIND_SEND; k <= RL_KIND_SEND_BYTES; k++) {
        if (rule->nlimits[k] == 0)
            continue;
        const struct rl_limit *l = &rule->limits[k][0];
        uint64_t cap = k == RL_KIND_SEND ? LEASE_CALLS : LEASE_BYTES;
        lease_size[k] = l->burst / 64 < cap ? l->burst / 64 : cap;
        /* Several rates, a window, or a burst too small to share out:
         * every call is decided on its own. */
        if (rule->nlimits[k] > 1 || l->algo != RL_ALGO_TOKEN_BUCKET ||
            lease_size[k] < 2)
            lease_on = false;
    }
    slot_tag =
        rl_budget_label(rule, rl_budget_user(rule, who), label, sizeof label);
    overflow_tag = rl_budget_overflow_tag(rule);
    store_opts = (struct rl_store_opts){
        .shared = c->state_mode == RL_STATE_SHARED,
        .dir = NULL,
        .uid = (uint32_t)getuid(),
        .config_hash = c->hash,
        .nslots = c->max_users + (uint32_t)c->nrules,
        .arena_words = arena_words(),
    };
    struct budget *b = calloc(1, sizeof *b);
    if (b == NULL)
        return -ENOMEM;
    struct rl_store *st = NULL;
    int r = rl_store_open(&st, &store_opts, why, whylen);
    if (r < 0)
        goto fail;
    r = claim(st, b);
    if (r < 0) {
        rl_store_close(st);
        goto fail;
    }
    atomic_store_explicit(&cur, b, memory_order_release);
    active = true;
    return 0;
fail:
    free(b);
    return r;
}

void rl_gate_atfork_child(void)
{
    atomic_flag_clear_explicit(&reopening, memory_order_relaxed);
    /* The parent keeps its lease: the child's copy of it was never taken
     * for the child, and spending it twice would over-admit. */
    lease = (struct lease){0};
}

bool rl_gate_charges_sends(void)
{
    return charges_sends;
}

bool rl_gate_active(void)
{
    return active;
}

uint64_t rl_gate_max_bytes(void)
{
    return max_bytes;
}

bool rl_gate_covers(const void *sa, unsigned salen)
{
    if (rule != NULL)
        return rl_rule_covers(rule, sa, salen);
    if (!deny_all || sa == NULL || salen < sizeof(sa_family_t))
        return false;
    sa_family_t fam = ((const struct sockaddr *)sa)->sa_family;
    return fam == AF_INET || fam == AF_INET6;
}

/* How many times a process follows a replaced segment. Two processes
 * with different configs (an old one still running after an edit) would
 * otherwise replace each other's segment at every decision, resetting
 * both budgets each time; after this many, the process keeps the budgets
 * of the segment it has (no longer shared with newcomers). */
#define MAX_REOPENS 4

static rl_atomic_u64 reopens;

/* The budget to charge: the current one, re-opened and re-claimed when
 * another process has replaced the segment. One thread re-opens; the
 * others keep using the old mapping meanwhile (it stays mapped: a thread
 * may still be inside it, so the old one is never unmapped). */
static struct budget *budget(void)
{
    /* Pairs with the release stores in rl_gate_init and below. */
    struct budget *b = atomic_load_explicit(&cur, memory_order_acquire);
    if (b == NULL || !rl_store_is_stale(b->store) ||
        rl_load_relaxed_u64(&reopens) >= MAX_REOPENS)
        return b;
    if (atomic_flag_test_and_set_explicit(&reopening, memory_order_acquire))
        return b;
    rl_add_relaxed_u64(&reopens, 1);
    struct budget *nb = calloc(1, sizeof *nb);
    struct rl_store *st = NULL;
    if (nb != NULL && rl_store_open(&st, &store_opts, NULL, 0) == 0) {
        if (claim(st, nb) == 0) {
            nb->replaced = b;
            atomic_store_explicit(&cur, nb, memory_order_release);
            b = nb;
            nb = NULL;
        } else {
            rl_store_close(st);
        }
    }
    free(nb);
    atomic_flag_clear_explicit(&reopening, memory_order_release);
    return b;
}

static void count(struct budget *b, int kind, int stat, uint64_t n)
{
    if (n == 0)
        return;
    if (report_on)
        rl_add_relaxed_u64(&mine[kind][stat], n);
    if (b != NULL)
        rl_add_relaxed_u64(
            &b->slot.counters[kind * RL_STORE_STATS_PER_KIND + stat], n);
}

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

static void log_event(uint64_t now, const char *what, const char *call, int fd,
                      const void *sa, unsigned salen, const char *detail)
{
    if (!rl_log_enabled())
        return;
    char dest[96];
    describe(dest, sizeof dest, fd, sa, salen);
    rl_log_event(now, "%s %s %s%s (user %s, rule [%s])", what, call, dest,
                 detail, user, rule != NULL ? rule->section : "none");
}

static uint64_t max_wait(void)
{
    return rule->on_deny == RL_DENY_DELAY ? rule->max_delay_ns : 0;
}

/* Take `want` (at least `min`) units of `kind`; true when granted. */
static bool take(struct budget *b, struct rl_gate_ticket *t, int kind,
                 uint64_t want, uint64_t min, uint64_t *granted)
{
    unsigned n = rule->nlimits[kind];
    if (n == 0 || want == 0 || b == NULL) {
        *granted = want;
        return true;
    }
    struct rl_verdict v =
        rl_multi_take(b->states[kind], rule->limits[kind], n, t->now, want, min,
                      max_wait(), t->v[kind]);
    if (v.granted == 0)
        return false;
    t->took[kind] = true;
    if (v.wait_ns > t->wait_ns)
        t->wait_ns = v.wait_ns;
    *granted = v.granted;
    return true;
}

static void untake(struct budget *b, struct rl_gate_ticket *t, int kind,
                   uint64_t units)
{
    if (!t->took[kind] || units == 0 || b == NULL)
        return;
    rl_multi_refund(b->states[kind], rule->limits[kind], rule->nlimits[kind],
                    t->now, t->v[kind], units);
}

static int deny(struct budget *b, struct rl_gate_ticket *t, int kind,
                uint64_t units, const char *call, int fd, const void *sa,
                unsigned salen)
{
    count(b, kind, RL_STAT_DENIED, units);
    if (rl_declog_enabled())
        rl_gate_log_decision(t, user, rule, kind, units, call, fd, sa, salen);
    bool dry = rule != NULL ? rule->dry_run : cfg->dry_run;
    char detail[64];
    snprintf(detail, sizeof detail, ": %s %llu over quota%s",
             rl_kind_name(kind), (unsigned long long)units,
             dry ? " (dry run)" : "");
    log_event(t->now, dry ? "would deny" : "denied", call, fd, sa, salen,
              detail);
    if (dry)
        return RL_GATE_GO;
    t->err = rule != NULL ? rule->deny_errno : cfg->deny_errno;
    return RL_GATE_FAIL;
}

static void granted(struct budget *b, struct rl_gate_ticket *t,
                    const char *call, int fd, const void *sa, unsigned salen)
{
    uint64_t units[RL_KIND_COUNT] = {1, t->calls, t->bytes};
    for (int k = 0; k < RL_KIND_COUNT; k++) {
        if (!t->took[k])
            continue;
        count(b, k, RL_STAT_ALLOWED, units[k]);
        if (t->wait_ns > 0) {
            count(b, k, RL_STAT_DELAYED, units[k]);
            count(b, k, RL_STAT_DELAYED_NS, t->wait_ns);
        }
    }
    if (rl_declog_enabled())
        rl_gate_log_decision(t, user, rule, -1, 0, call, fd, sa, salen);
    if (t->wait_ns == 0)
        return;
    char detail[64];
    snprintf(detail, sizeof detail, " by %llu.%03llu ms%s",
             (unsigned long long)(t->wait_ns / 1000000),
             (unsigned long long)(t->wait_ns / 1000 % 1000),
             rule->dry_run ? " (dry run: not slept)" : "");
    log_event(t->now, "delayed", call, fd, sa, salen, detail);
    if (rule->dry_run)
        t->wait_ns = 0;
}

static uint64_t coarse_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Give what the thread's lease holds back to the bucket it came from, and
 * take it out of the allowed counters (it was counted when leased). */
static void lease_return(struct lease *l)
{
    struct budget *b = l->from;
    l->from = NULL;
    if (b == NULL)
        return;
    for (int k = RL_KIND_SEND; k <= RL_KIND_SEND_BYTES; k++) {
        uint64_t n = l->left[k];
        l->left[k] = 0;
        if (n == 0 || rule->nlimits[k] == 0)
            continue;
        struct rl_verdict v = {n, 0, 0};
        rl_multi_refund(b->states[k], rule->limits[k], 1, 0, &v, n);
        count(b, k, RL_STAT_ALLOWED, (uint64_t)0 - n);
    }
}

static void lease_at_thread_exit(void *arg)
{
    lease_return(arg);
}

/* After a grant of `bytes` that did not wait: fill the thread's lease up
 * again from each bucket that holds at least half its burst. */
static void lease_refill(struct budget *b, uint64_t now, uint64_t bytes)
{
    struct lease *l = &lease;
    if (l->from != b)
        lease_return(l);
    /* A lease that would not cover a few calls like this one is no use. */
    if (rule->nlimits[RL_KIND_SEND_BYTES] != 0 &&
        lease_size[RL_KIND_SEND_BYTES] / 4 < bytes)
        return;
    for (int k = RL_KIND_SEND; k <= RL_KIND_SEND_BYTES; k++) {
        if (rule->nlimits[k] == 0 || l->left[k] >= lease_size[k] / 2)
            continue;
        const struct rl_limit *lim = &rule->limits[k][0];
        const struct rl_algorithm *a = rl_algorithm_get(lim->algo);
        if (a->available(b->states[k][0], lim, now) < lim->burst / 2)
            continue;
        uint64_t n = lease_size[k] - l->left[k];
        struct rl_verdict v = a->take(b->states[k][0], lim, now, n, n, 0);
        l->left[k] += v.granted;
        count(b, k, RL_STAT_ALLOWED, v.granted);
    }
    if (l->from == NULL) {
        /* The first lease of this thread: hand it back at thread exit. */
        pthread_setspecific(lease_key, l);
        l->from = b;
    }
    l->until = coarse_ns() + LEASE_NS;
}

/* One send call of `bytes` out of the thread's lease: true when it covered
 * them (and took them). */
static inline bool lease_take(uint64_t bytes)
{
    struct lease *l = &lease;
    if (l->from == NULL || (lease_calls && l->left[RL_KIND_SEND] == 0) ||
        (lease_bytes && l->left[RL_KIND_SEND_BYTES] < bytes))
        return false;
    if (coarse_ns() >= l->until)
        return false;
    if (lease_calls)
        l->left[RL_KIND_SEND]--;
    if (lease_bytes)
        l->left[RL_KIND_SEND_BYTES] -= bytes;
    return true;
}

/* lease_take for rl_gate_send, with the ticket saying so (nothing to
 * sleep, nothing logged). */
static bool from_lease(struct rl_gate_ticket *t, uint64_t bytes)
{
    if (!lease_take(bytes))
        return false;
    t->now = 0;
    t->wait_ns = 0;
    t->calls = 1;
    t->bytes = bytes;
    t->err = 0;
    t->leased = true;
    return true;
}

int rl_gate_connect_at(struct rl_gate_ticket *t, uint64_t now, const char *call,
                       int fd, const void *sa, unsigned salen)
{
    memset(t, 0, sizeof *t);
    t->now = now;
    t->calls = 1;
    if (rule == NULL)
        return deny_all ? deny(NULL, t, RL_KIND_CONNECT, 1, call, fd, sa, salen)
                        : RL_GATE_GO;
    struct budget *b = budget();
    uint64_t g;
    if (!take(b, t, RL_KIND_CONNECT, 1, 1, &g))
        return deny(b, t, RL_KIND_CONNECT, 1, call, fd, sa, salen);
    granted(b, t, call, fd, sa, salen);
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
    memset(t, 0, sizeof *t);
    t->now = now;
    t->calls = calls;
    t->bytes = bytes;
    if (rule == NULL)
        return deny_all
                   ? deny(NULL, t, RL_KIND_SEND, calls, call, fd, sa, salen)
                   : RL_GATE_GO;
    struct budget *b = budget();
    uint64_t gc, gb;
    if (!take(b, t, RL_KIND_SEND, calls, calls_min, &gc))
        return deny(b, t, RL_KIND_SEND, calls, call, fd, sa, salen);
    if (bytes_min == 0 && bytes > 0)
        bytes_min = 1;
    if (bytes_min < bytes && rule->on_deny == RL_DENY_DELAY) {
        /* A stream send in delay mode: grant part of it only when a
         * sizeable part is free (1/16 of the burst), else reserve it all
         * and sleep. With a minimum of 1 byte, a client that comes back
         * a few microseconds later would get a few bytes per call: a busy
         * loop of tiny writes instead of a sleep. */
        uint64_t chunk = max_bytes / 16 > 0 ? max_bytes / 16 : 1;
        if (chunk > bytes_min)
            bytes_min = chunk < bytes ? chunk : bytes;
    }
    if (!take(b, t, RL_KIND_SEND_BYTES, bytes, bytes_min, &gb)) {
        untake(b, t, RL_KIND_SEND, gc);
        t->took[RL_KIND_SEND] = false;
        return deny(b, t, RL_KIND_SEND_BYTES, bytes, call, fd, sa, salen);
    }
    t->calls = gc;
    t->bytes = gb;
    granted(b, t, call, fd, sa, salen);
    if (lease_on && calls == 1 && t->wait_ns == 0 && b != NULL)
        lease_refill(b, now, gb);
    return RL_GATE_GO;
}

int rl_gate_send(struct rl_gate_ticket *t, const char *call, int fd,
                 const void *sa, unsigned salen, uint64_t calls,
                 uint64_t calls_min, uint64_t bytes, uint64_t bytes_min)
{
    if (lease_on && calls == 1) {
        if (from_lease(t, bytes))
            return RL_GATE_GO;
        /* Spent, expired or too small for this call: what is left goes
         * back before the call is decided on its own, so that a thread
         * never holds units while its own calls wait or are denied. */
        if (lease.from != NULL)
            lease_return(&lease);
    }
    return rl_gate_send_at(t, rl_clock_now_ns(), call, fd, sa, salen, calls,
                           calls_min, bytes, bytes_min);
}

int rl_gate_send_reentered(uint64_t calls, uint64_t bytes, uint64_t bytes_min,
                           uint64_t *granted, int *err)
{
    *granted = bytes;
    if (rule == NULL) {
        if (!deny_all)
            return RL_GATE_GO;
        count(NULL, RL_KIND_SEND, RL_STAT_DENIED, calls);
        *err = cfg->deny_errno;
        return cfg->dry_run ? RL_GATE_GO : RL_GATE_FAIL;
    }
    /* The budget as it is: budget() may re-open the store (malloc). */
    struct budget *b = atomic_load_explicit(&cur, memory_order_acquire);
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
        rl_multi_take(b->states[RL_KIND_SEND], rule->limits[RL_KIND_SEND],
                      nc, now, calls, calls, 0, vc)
                .granted == 0)
        denied = RL_KIND_SEND;
    if (denied < 0 && nb > 0 && bytes > 0) {
        struct rl_verdict v = rl_multi_take(
            b->states[RL_KIND_SEND_BYTES], rule->limits[RL_KIND_SEND_BYTES],
            nb, now, bytes, bytes_min > 0 ? bytes_min : 1, 0, vb);
        got = v.granted;
        if (got == 0) {
            denied = RL_KIND_SEND_BYTES;
            if (nc > 0 && calls > 0)
                rl_multi_refund(b->states[RL_KIND_SEND],
                                rule->limits[RL_KIND_SEND], nc, now, vc,
                                calls);
        }
    }
    if (denied >= 0) {
        count(b, denied, RL_STAT_DENIED,
              denied == RL_KIND_SEND ? calls : bytes);
        *err = rule->deny_errno;
        return rule->dry_run ? RL_GATE_GO : RL_GATE_FAIL;
    }
    if (nc > 0)
        count(b, RL_KIND_SEND, RL_STAT_ALLOWED, calls);
    if (nb > 0)
        count(b, RL_KIND_SEND_BYTES, RL_STAT_ALLOWED, got);
    *granted = got;
    return RL_GATE_GO;
}

void rl_gate_refund(struct rl_gate_ticket *t, int kind, uint64_t units)
{
    if (t->leased) {
        /* Back into the lease it came from, if the thread still holds it
         * (else it stays spent: never more than was granted). */
        if (lease.from != NULL && kind >= RL_KIND_SEND &&
            kind <= RL_KIND_SEND_BYTES && units <= t->bytes)
            lease.left[kind] += units;
        return;
    }
    if (rule == NULL || kind < 0 || kind >= RL_KIND_COUNT || units == 0 ||
        !t->took[kind])
        return;
    struct budget *b = atomic_load_explicit(&cur, memory_order_acquire);
    untake(b, t, kind, units);
    if (b != NULL) {
        /* Lower `allowed` by what was not spent after all. */
        count(b, kind, RL_STAT_ALLOWED, (uint64_t)0 - units);
    }
}

void rl_gate_report_enable(void)
{
    report_on = true;
}

void rl_gate_finish(void)
{
    if (cfg == NULL)
        return;
    if (rule != NULL)
        lease_return(&lease);
    if (!report_on)
        return;
    int pid = (int)getpid();
    if (rule == NULL && !deny_all) {
        rl_log_stderr("report: pid %d user %s: no section of %s applies "
                      "(unknown = allow): nothing was throttled",
                      pid, user, cfg->path);
        return;
    }
    const char *sec = rule != NULL ? rule->section : "none, unknown = deny";
    uint64_t seen_all = 0;
    for (int k = 0; k < RL_KIND_COUNT; k++) {
        if (rule != NULL ? rule->nlimits[k] == 0 : k == RL_KIND_SEND_BYTES)
            continue;
        uint64_t a = rl_load_relaxed_u64(&mine[k][RL_STAT_ALLOWED]);
        uint64_t d = rl_load_relaxed_u64(&mine[k][RL_STAT_DENIED]);
        uint64_t w = rl_load_relaxed_u64(&mine[k][RL_STAT_DELAYED]);
        seen_all += a + d;
        rl_log_stderr("report: pid %d user %s rule [%s]: %s seen %llu, "
                      "allowed %llu, denied %llu, delayed %llu",
                      pid, user, sec, rl_kind_name(k),
                      (unsigned long long)(a + d), (unsigned long long)a,
                      (unsigned long long)d, (unsigned long long)w);
    }
    if (seen_all == 0)
        rl_log_stderr("report: pid %d user %s rule [%s]: no call went to a "
                      "destination of the rule: nothing was throttled",
                      pid, user, sec);
}


uint64_t rl_gate_send_leased(uint64_t len, bool stream)
{
    if (!lease_on)
        return 0;
    uint64_t want = stream && len > max_bytes ? max_bytes : len;
    return want > 0 && lease_take(want) ? want : 0;
}

void rl_gate_lease_refund(uint64_t calls, uint64_t bytes)
{
    if (lease.from == NULL)
        return;
    if (lease_calls)
        lease.left[RL_KIND_SEND] += calls;
    if (lease_bytes)
        lease.left[RL_KIND_SEND_BYTES] += bytes;
}
