/* fleet.c — the decisions of fleet budgets (see fleet.h): one EVALSHA
 * on the connection (fleet_conn.h), the fallback while Redis is away, the
 * host's lease (fleet_lease.h) spent first.
 *
 * A decision is one EVALSHA; NOSCRIPT (Redis restarted, or SCRIPT FLUSH)
 * loads the scripts again, once, on the same call.
 *
 * Shared data: `lock` guards `conn` (its buffers too) and the SHAs;
 * everything else is atomic. `down` and `next_try` are written by the
 * thread that holds `lock` and read by every thread (relaxed: a stale read
 * only costs one extra try or one extra fallback decision). */
#include "fleet/fleet.h"

#include <errno.h>
#include <linux/futex.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "fleet/fleet_addr.h"
#include "fleet/fleet_conn.h"
#include "fleet/fleet_lease.h"
#include "fleet/fleet_scripts.h"
#include "util/atomics.h"
#include "util/bootid.h"
#include "util/clock.h"
#include "util/hash.h"
#include "util/sys.h"

enum { SCRIPT_BUCKET = 0, SCRIPT_WINDOW = 1 };

/* ---- the host's identity ------------------------------------------------*/

/* Hosts are told apart by name, boot and state directory: two
 * RLSHIM_STATE_DIRs on one machine are two hosts (their budgets are apart
 * too), which is how the tests simulate a fleet. */
static void host_id(char *buf, size_t len)
{
    char name[256] = "", boot[64] = "";
    uint64_t h = RL_HASH_INIT;
    if (gethostname(name, sizeof name - 1) != 0)
        name[0] = '\0';
    rl_bootid_text(boot, sizeof boot);
    const char *dir = secure_getenv("RLSHIM_STATE_DIR");
    h = rl_hash_str(h, name);
    h = rl_hash_str(h, boot);
    h = rl_hash_str(h, dir != NULL ? dir : "");
    snprintf(buf, len, "%s:%016llx", name, (unsigned long long)h);
}

int rl_fleet_init(struct rl_fleet *f, const struct rl_config *cfg,
                  const char *label)
{
    if (cfg->fleet == NULL)
        return 0;
    if (rl_fleet_addr_parse(cfg->fleet, &f->addr) != NULL)
        return -EINVAL;
    f->cfg = cfg;
    f->conn.fd = -1;
    snprintf(f->label, sizeof f->label, "%s", label);
    host_id(f->host, sizeof f->host);
    rl_store_relaxed_u64(&f->hosts, 1);
    /* Budgets' drained start at 0 (no generation): a process whose first
     * decisions find Redis away (or slow, as on a loaded host at start) drains
     * the host budget too. That budget sits full while Redis decides; taken as
     * it is, it would be a burst per process on top of what the fleet admitted.
     */
    f->on = true;
    return 0;
}

bool rl_fleet_decides(const struct rl_fleet *f, const struct rl_rule *rule)
{
    return f->on && rule->scope == RL_SCOPE_FLEET;
}

bool rl_fleet_up(const struct rl_fleet *f)
{
    return f->on && !atomic_load_explicit(&f->down, memory_order_relaxed);
}

/* The state of the budget named `label` (NULL: the user's rule budget);
 * NULL when the table is full (that budget then keeps no debt, no denial
 * shortcut and no drain: each call asks Redis, or the fallback). */
static struct rl_fleet_budget *state_of(struct rl_fleet *f, const char *label)
{
    if (label == NULL)
        return &f->own;
    uint64_t h = rl_hash_str(RL_HASH_INIT, label) | 1;
    for (unsigned i = 0; i < RL_FLEET_BUDGETS; i++) {
        struct rl_fleet_budget *b = &f->others[(h + i) % RL_FLEET_BUDGETS];
        uint64_t t = rl_load_relaxed_u64(&b->tag);
        if (t == 0 &&
            atomic_compare_exchange_strong_explicit(
                &b->tag, &t, h, memory_order_relaxed, memory_order_relaxed))
            return b;
        if (t == h)
            return b;
    }
    return NULL;
}

/* ---- one decision in Redis ----------------------------------------------*/

/* What one EVALSHA asks: a call's units, and a lease's. */
struct ask {
    uint64_t want, min, max_wait_ns, debt;
    uint64_t lease; /* units more for the host's pool */
    uint64_t ret;   /* a stale lease's units given back */
};

static void format_eval(struct rl_fleet *f, struct rl_fleet_conn *c,
                        const char *sha, const char *label,
                        const struct rl_rule *rule, int kind,
                        const struct ask *a)
{
    unsigned n = rule->nlimits[kind];
    bool pause = kind == RL_KIND_REQUEST; /* its pause key, last */
    rl_fleet_cmd_reset(c);
    rl_fleet_cmd_start(c, 3 + (n + 1 + pause) + 8 + 3 * n);
    rl_fleet_cmd_str(c, "EVALSHA");
    rl_fleet_cmd_str(c, sha);
    rl_fleet_cmd_u64(c, n + 1 + pause);
    const char *algo[2] = {"sw", "tb"};
    char idx[2] = "0";
    const char *key[8] = {"rlshim:{", label, "}:", rl_kind_name(kind),
                          ":",        idx,   ":",  NULL};
    for (unsigned i = 0; i < n; i++) {
        idx[0] = (char)('0' + i); /* i < RL_MAX_RATES */
        key[7] = algo[rule->limits[kind][i].algo == RL_ALGO_TOKEN_BUCKET];
        rl_fleet_cmd_cat(c, key, 8);
    }
    const char *hosts[3] = {"rlshim:{", label, "}:hosts"};
    rl_fleet_cmd_cat(c, hosts, 3);
    const char *pkey[3] = {"rlshim:{", label, "}:pause"};
    if (pause)
        rl_fleet_cmd_cat(c, pkey, 3);
    rl_fleet_cmd_u64(c, a->want);
    rl_fleet_cmd_u64(c, a->min);
    rl_fleet_cmd_u64(c, a->max_wait_ns / 1000);
    rl_fleet_cmd_u64(c, a->debt);
    rl_fleet_cmd_str(c, f->host);
    /* The call's id: unique members of the window's sorted sets. */
    char pid[24], seq[24];
    const char *id[5] = {f->host, ":", rl_fleet_dec(pid, (uint64_t)getpid()),
                         ":",
                         rl_fleet_dec(seq, rl_add_relaxed_u64(&f->seq, 1))};
    rl_fleet_cmd_cat(c, id, 5);
    rl_fleet_cmd_u64(c, a->lease);
    rl_fleet_cmd_u64(c, a->ret);
    for (unsigned i = 0; i < n; i++) {
        const struct rl_limit *l = &rule->limits[kind][i];
        rl_fleet_cmd_u64(c, l->count);
        rl_fleet_cmd_u64(c, l->period_ns / 1000);
        rl_fleet_cmd_u64(c, l->algo == RL_ALGO_TOKEN_BUCKET ? l->burst
                                                            : l->count);
    }
}

static int64_t int_at(const redisReply *r, size_t i)
{
    return i < r->elements && r->element[i]->type == REDIS_REPLY_INTEGER
               ? r->element[i]->integer
               : -2;
}

/* One EVALSHA on c (re-loading the scripts once after NOSCRIPT); the
 * units leased are in *leased; on failure c->why says why. */
static int eval(struct rl_fleet *f, struct rl_fleet_conn *c, const char *label,
                const struct rl_rule *rule, int kind, const struct ask *a,
                uint64_t deadline, struct rl_verdict *out, uint64_t *leased,
                struct rl_fleet_paused *paused)
{
    int script = rule->limits[kind][0].algo == RL_ALGO_TOKEN_BUCKET
                     ? SCRIPT_BUCKET
                     : SCRIPT_WINDOW;
    for (int attempt = 0; attempt < 2; attempt++) {
        format_eval(f, c, f->sha[script], label, rule, kind, a);
        if (c->overflow) {
            rl_fleet_conn_why(c, "command too long");
            return -E2BIG;
        }
        int r = rl_fleet_conn_send(c, deadline);
        redisReply *rep = NULL;
        if (r == 0)
            r = rl_fleet_conn_reply(c, &rep, deadline);
        if (r < 0) {
            rl_fleet_conn_why(c, "%s", strerror(-r));
            return r;
        }
        if (rep->type == REDIS_REPLY_ERROR &&
            strncmp(rep->str, "NOSCRIPT", 8) == 0 && attempt == 0) {
            freeReplyObject(rep);
            /* Redis lost the scripts (a restart): load them again. */
            r = rl_fleet_conn_handshake(c, &f->addr, f->cfg->fleet_password,
                                        f->sha, deadline);
            if (r < 0)
                return r;
            continue;
        }
        if (rep->type != REDIS_REPLY_ARRAY) {
            r = rep->type == REDIS_REPLY_ERROR
                    ? rl_fleet_conn_error(c, rep, "script")
                    : -EPROTO;
            freeReplyObject(rep);
            return r;
        }
        int64_t g = int_at(rep, 0), w = int_at(rep, 1), h = int_at(rep, 2);
        int64_t l = int_at(rep, 3), off = int_at(rep, 4), why = int_at(rep, 5);
        freeReplyObject(rep);
        if (g < 0 || w < -1 || h < 0 || l < 0) {
            rl_fleet_conn_why(c, "unexpected reply");
            return -EPROTO;
        }
        out->granted = (uint64_t)g;
        out->wait_ns = w < 0 ? UINT64_MAX : (uint64_t)w * 1000;
        out->stamp = 0;
        *leased = (uint64_t)l;
        if (paused != NULL && off > 0)
            *paused = (struct rl_fleet_paused){(uint64_t)off * 1000, why == 1};
        rl_store_relaxed_u64(&f->hosts, h > 0 ? (uint64_t)h : 1);
        return 0;
    }
    return -EPROTO;
}

/* ---- while Redis is away ------------------------------------------------*/

/* The stderr line, once per process: made under the lock (from c->why),
 * written after it (in f->warn_line). */
static size_t warn_format(struct rl_fleet *f, const char *why)
{
    static const char *const names[] = {"share", "local", "allow", "deny"};
    if (atomic_flag_test_and_set(&f->warned))
        return 0;
    int n = snprintf(f->warn_line, sizeof f->warn_line,
                     "rlshim: fleet Redis %s: %s; fleet_fallback = %s until it "
                     "is back\n",
                     f->cfg->fleet, why, names[f->cfg->fleet_fallback & 3]);
    if (n <= 0)
        return 0;
    return (size_t)n < sizeof f->warn_line ? (size_t)n
                                           : sizeof f->warn_line - 1;
}

/* Through rl_sys: never the program's write(), so the shim's own line is
 * never charged, whatever fd 2 is and whatever flag this thread holds. */
static void warn_write(struct rl_fleet *f, size_t n)
{
    if (n > 0)
        rl_sys_write_all(2, f->warn_line, n);
}

static struct rl_verdict fallback(struct rl_fleet *f,
                                  struct rl_fleet_budget *st,
                                  const struct rl_rule *rule, int kind,
                                  rl_word *const *states, uint64_t now,
                                  uint64_t want, uint64_t min,
                                  uint64_t max_wait_ns, struct rl_verdict *v)
{
    struct rl_verdict r = {0, UINT64_MAX, 0};
    unsigned n = rule->nlimits[kind];
    int fb = f->cfg->fleet_fallback;
    uint64_t gen = rl_load_relaxed_u64(&f->gen) + 1;
    if ((fb == RL_FLEET_SHARE || fb == RL_FLEET_LOCAL) && st != NULL &&
        atomic_exchange_explicit(&st->drained[kind], gen,
                                 memory_order_relaxed) != gen) {
        /* The host budget sat full while Redis decided: empty it, so an
         * outage starts at the fleet's rate, not with a burst per host. */
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
    default: {
        /* This host's share of the limits: each unit costs `hosts` units
         * of the host budget (a rate and burst divided by hosts). */
        uint64_t h = rl_load_relaxed_u64(&f->hosts);
        if (h == 0)
            h = 1;
        if (want > UINT64_MAX / h)
            want = UINT64_MAX / h;
        if (min > want)
            min = want;
        r = rl_multi_take(states, rule->limits[kind], n, now, want * h, min * h,
                          max_wait_ns, v);
        uint64_t got = r.granted / h;
        if (r.granted > got * h)
            rl_multi_refund(states, rule->limits[kind], n, now, v,
                            r.granted - got * h);
        r.granted = got;
        if (got == 0 && r.wait_ns == 0)
            r.wait_ns = UINT64_MAX;
        break;
    }
    }
    if (st != NULL)
        rl_add_relaxed_u64(&st->debt[kind], r.granted);
    return r;
}

/* f->lock, waited for at most RL_FLEET_WAIT_NS: a futex word of the
 * process rather than a pthread mutex, so that a forked child can start it
 * afresh (whoever held it in the parent) with one store. Acquire pairs
 * with the release exchange of unlock(f). */
static bool lock_bounded(struct rl_fleet *f)
{
    uint32_t free = 0;
    if (atomic_compare_exchange_strong_explicit(
            &f->lock, &free, 1, memory_order_acquire, memory_order_relaxed))
        return true;
    uint64_t deadline = rl_clock_now_ns() + RL_FLEET_WAIT_NS;
    for (;;) {
        if (atomic_exchange_explicit(&f->lock, 2, memory_order_acquire) == 0)
            return true;
        uint64_t now = rl_clock_now_ns();
        if (now >= deadline)
            return false;
        struct timespec ts = {.tv_sec = (time_t)((deadline - now) / 1000000000u),
                              .tv_nsec = (long)((deadline - now) % 1000000000u)};
        rl_sys.futex((uint32_t *)&f->lock, FUTEX_WAIT_PRIVATE, 2, &ts);
    }
}

static void unlock(struct rl_fleet *f)
{
    if (atomic_exchange_explicit(&f->lock, 0, memory_order_release) == 2)
        rl_sys.futex((uint32_t *)&f->lock, FUTEX_WAKE_PRIVATE, 1, NULL);
}

static int conn_open(struct rl_fleet *f, struct rl_fleet_conn *c,
                     uint64_t deadline)
{
    return rl_fleet_conn_open(c, &f->addr, f->cfg->fleet_password, f->sha,
                              deadline);
}

struct rl_verdict rl_fleet_take(struct rl_fleet *f, const struct rl_rule *rule,
                                const char *label, int kind,
                                rl_word *const *states,
                                const struct rl_fleet_pool *pool, uint64_t now,
                                uint64_t want, uint64_t min,
                                uint64_t max_wait_ns, struct rl_verdict *v,
                                struct rl_fleet_paused *paused)
{
    if (paused != NULL)
        *paused = (struct rl_fleet_paused){0, false};
    /* The host's lease holds send units only (fleet_lease.c): connects
     * and requests are each decided on Redis, exactly. */
    if (kind != RL_KIND_SEND && kind != RL_KIND_SEND_BYTES)
        pool = NULL;
    uint64_t cnow = pool != NULL ? rl_clock_coarse_ns() : 0;
    if (pool != NULL) {
        /* What the host leased comes first: Redis counted it already
         * (and while Redis is away, it is spent before the fallback). */
        uint64_t g = rl_fleet_pool_get(pool, kind, want, min, cnow);
        if (g > 0) {
            struct rl_verdict out = {g, 0, 0};
            for (unsigned i = 0; i < rule->nlimits[kind]; i++)
                v[i] = out;
            return out;
        }
    }
    uint64_t deadline = rl_clock_now_ns() + RL_FLEET_WAIT_NS;
    bool down = atomic_load_explicit(&f->down, memory_order_relaxed);
    struct rl_fleet_budget *st = state_of(f, label);
    uint64_t closed =
        st != NULL ? rl_load_relaxed_u64(&st->closed_until[kind]) : 0;
    if (!down && now < closed && closed - now > max_wait_ns)
        return (struct rl_verdict){0, closed - now, 0};
    if (down) {
        /* One try a second, by whichever thread claims it. */
        uint64_t next = rl_load_relaxed_u64(&f->next_try);
        if (now < next || !atomic_compare_exchange_strong_explicit(
                              &f->next_try, &next, now + RL_FLEET_RETRY_NS,
                              memory_order_relaxed, memory_order_relaxed))
            return fallback(f, st, rule, kind, states, now, want, min,
                            max_wait_ns, v);
    }
    if (!lock_bounded(f)) {
        /* Other threads of ours kept Redis busy for 50 ms: Redis answers,
         * so this is no outage; never admit without it. */
        if (!down)
            return (struct rl_verdict){0, RL_FLEET_WAIT_NS, 0};
        return fallback(f, st, rule, kind, states, now, want, min, max_wait_ns,
                        v);
    }
    struct rl_fleet_conn *c = &f->conn;
    /* A number the program closed and reused, or dup2'd over, is not
     * ours: forgotten, never closed (fleet_conn.h). */
    if (c->fd >= 0 && !rl_fleet_conn_ours(c))
        rl_fleet_conn_close(c);
    int r = 0;
    if (c->fd < 0)
        r = conn_open(f, c, deadline);
    /* What was admitted while away is charged with this call. */
    struct ask a = {want, min, max_wait_ns, 0, 0, 0};
    if (st != NULL)
        a.debt =
            atomic_exchange_explicit(&st->debt[kind], 0, memory_order_relaxed);
    bool claimed = false;
    if (r == 0 && pool != NULL) {
        /* A stale lease goes back, and a new one comes, with this call. */
        a.ret = rl_fleet_pool_claim_stale(pool, kind, cnow);
        a.lease = rl_fleet_pool_lease_size(pool, rule, kind, want, cnow);
        claimed = a.lease > 0;
    }
    struct rl_verdict out = {0, UINT64_MAX, 0};
    uint64_t leased = 0;
    const char *name = label != NULL ? label : f->label;
    if (r == 0)
        r = eval(f, c, name, rule, kind, &a, deadline, &out, &leased, paused);
    if (r == -EBADF) {
        /* The program took the number in the middle of the call: once more
         * on a new connection. The first script may have run (its reply
         * unread), so the stale lease is not given back twice (dropped:
         * under-use) and the debt is charged again at worst (the same). */
        rl_fleet_conn_close(c);
        a.ret = 0;
        r = conn_open(f, c, deadline);
        if (r == 0)
            r = eval(f, c, name, rule, kind, &a, deadline, &out, &leased,
                     paused);
    }
    if (r < 0) {
        /* A stale lease's units are dropped, not kept: Redis may have run
         * the script that took them back (a reply lost to the timeout),
         * and spending them then would over-admit. */
        if (claimed)
            rl_fleet_pool_filled(pool, kind, 0, 0, a.ret, true, cnow);
        if (st != NULL)
            rl_add_relaxed_u64(&st->debt[kind], a.debt);
        rl_fleet_conn_close(c);
        rl_store_relaxed_u64(&f->next_try, now + RL_FLEET_RETRY_NS);
        atomic_store_explicit(&f->down, true, memory_order_relaxed);
        size_t n = warn_format(f, c->why);
        unlock(f);
        warn_write(f, n);
        return fallback(f, st, rule, kind, states, now, want, min, max_wait_ns,
                        v);
    }
    atomic_store_explicit(&f->down, false, memory_order_relaxed);
    /* A new generation: the next outage drains every host budget again. */
    rl_add_relaxed_u64(&f->gen, 1);
    unlock(f);
    if (pool != NULL)
        rl_fleet_pool_filled(pool, kind, leased, out.granted, a.ret, claimed,
                             cnow);
    if (out.granted == 0 && out.wait_ns != UINT64_MAX && min == 1)
        if (st != NULL)
            rl_store_relaxed_u64(&st->closed_until[kind], now + out.wait_ns);
    for (unsigned i = 0; i < rule->nlimits[kind]; i++)
        v[i] = out;
    return out;
}

void rl_fleet_finish(struct rl_fleet *f, const struct rl_rule *rule,
                     const struct rl_fleet_pool *pool)
{
    if (!f->on || pool == NULL ||
        atomic_load_explicit(&f->down, memory_order_relaxed))
        return;
    /* Only on a connection this process has: a process that never went
     * to Redis leaves the pool to the host's other processes (it goes
     * back when stale), rather than pay a connection at exit. */
    if (!lock_bounded(f))
        return;
    struct rl_fleet_conn *c = &f->conn;
    if (c->fd >= 0 && !rl_fleet_conn_ours(c))
        rl_fleet_conn_close(c);
    uint64_t deadline = rl_clock_now_ns() + RL_FLEET_WAIT_NS;
    for (int k = RL_KIND_SEND; k <= RL_KIND_SEND_BYTES && c->fd >= 0; k++) {
        if (rule->nlimits[k] == 0)
            continue;
        struct ask a = {0, 0, 0, 0, 0, rl_fleet_pool_drain(pool, k)};
        if (a.ret == 0)
            continue;
        a.debt =
            atomic_exchange_explicit(&f->own.debt[k], 0, memory_order_relaxed);
        struct rl_verdict out;
        uint64_t leased = 0;
        if (eval(f, c, f->label, rule, k, &a, deadline, &out, &leased, NULL) <
            0) {
            rl_fleet_conn_close(c);
            break;
        }
    }
    unlock(f);
}

int rl_fleet_pause(struct rl_fleet *f, const char *label, uint64_t wait_ns,
                   bool backoff)
{
    if (!f->on || atomic_load_explicit(&f->down, memory_order_relaxed))
        return -EAGAIN; /* away: the fallback decides, on this host */
    if (!lock_bounded(f))
        return -EBUSY;
    struct rl_fleet_conn *c = &f->conn;
    if (c->fd >= 0 && !rl_fleet_conn_ours(c))
        rl_fleet_conn_close(c);
    uint64_t deadline = rl_clock_now_ns() + RL_FLEET_WAIT_NS;
    int r = c->fd < 0 ? conn_open(f, c, deadline) : 0;
    if (r == 0) {
        const char *key[3] = {"rlshim:{", label != NULL ? label : f->label,
                              "}:pause"};
        rl_fleet_cmd_reset(c);
        rl_fleet_cmd_start(c, 6);
        rl_fleet_cmd_str(c, "EVAL");
        rl_fleet_cmd_str(c, rl_fleet_lua_pause);
        rl_fleet_cmd_u64(c, 1);
        rl_fleet_cmd_cat(c, key, 3);
        rl_fleet_cmd_u64(c, wait_ns / 1000);
        rl_fleet_cmd_u64(c, backoff ? 1 : 2);
        redisReply *rep = NULL;
        r = c->overflow ? -E2BIG : rl_fleet_conn_send(c, deadline);
        if (r == 0)
            r = rl_fleet_conn_reply(c, &rep, deadline);
        if (r == 0 && rep->type != REDIS_REPLY_INTEGER)
            r = -EPROTO;
        if (rep != NULL)
            freeReplyObject(rep);
        if (r < 0)
            rl_fleet_conn_close(c);
    }
    unlock(f);
    return r;
}

void rl_fleet_atfork_child(struct rl_fleet *f)
{
    /* Whatever a thread of the parent was doing under the lock stopped at
     * the fork: the lock starts afresh, and the connection (the parent's)
     * is dropped without a look inside its reader. Nothing is sent: the
     * parent still holds the socket. */
    atomic_store_explicit(&f->lock, 0, memory_order_relaxed);
    if (f->on)
        rl_fleet_conn_abandon(&f->conn);
    /* The child's connection will live above the floor: its fd table
     * grows now, while the child has one thread, not on its first
     * decision, when it may have several (fleet_conn.h). */
    if (f->on)
        rl_fleet_fd_table_grow();
    for (int k = 0; k < RL_KIND_COUNT; k++) {
        rl_store_relaxed_u64(&f->own.debt[k], 0);
        for (unsigned i = 0; i < RL_FLEET_BUDGETS; i++)
            rl_store_relaxed_u64(&f->others[i].debt[k], 0);
    }
}
