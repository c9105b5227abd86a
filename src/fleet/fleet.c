/* fleet.c — the decisions of fleet budgets (see fleet.h): one script call
 * at the budget's node (fleet_route.h), the fallback while it is away
 * (fleet_away.h), the host's lease (fleet_lease.h) spent first, late
 * replies settled (fleet_settle.h).
 *
 * Shared data: the route and its pipes are their own (lock-free or
 * bounded); the budgets' accounts are atomic (fleet_settle.h); `hosts`,
 * `gen` and `back` are relaxed words (a stale read costs one extra try,
 * one extra fallback decision, or a share applied a little longer). */
#include "fleet/fleet.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fleet/fleet_addr.h"
#include "fleet/fleet_away.h"
#include "fleet/fleet_call.h"
#include "fleet/fleet_conn.h"
#include "fleet/fleet_lease.h"
#include "util/atomics.h"
#include "util/bootid.h"
#include "util/clock.h"
#include "util/hash.h"
#include "util/log.h"
#include "util/sys.h"

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
    snprintf(f->label, sizeof f->label, "%s", label);
    host_id(f->host, sizeof f->host);
    rl_store_relaxed_u64(&f->hosts, 0); /* not counted yet */
    rl_fleet_route_init(&f->route, &f->addr, cfg->fleet_password,
                        RL_FLEET_OPEN_NS, RL_FLEET_LATE_NS, rl_fleet_settle,
                        &f->budgets);
    /* Budgets' drained start at 0 (no generation): a process whose first
     * decisions find Redis away (or slow, as on a loaded host at start)
     * drains the host budget too. That budget sits full while Redis
     * decides; taken as it is, it would be a burst per process on top of
     * what the fleet admitted. */
    f->on = true;
    return 0;
}

/* ---- the stderr line ----------------------------------------------------*/

/* Once per process, through rl_sys: never the program's write(), so the
 * shim's own line is never charged, whatever fd 2 is and whatever flag
 * this thread holds. Written in f->warning, which only the thread that
 * set f->warned touches (not the caller's stack: a program thread lends
 * the shim little; not a file-scope buffer: two owners may warn at once). */
static void warn(struct rl_fleet *f, const char *why)
{
    static const char *const names[] = {"share", "local", "allow", "deny"};
    char *line = f->warning;
    size_t size = sizeof f->warning;
    if (atomic_flag_test_and_set(&f->warned))
        return;
    int n = snprintf(line, size,
                     "rlshim: fleet Redis %s: %s; fleet_fallback = %s until it "
                     "is back\n",
                     f->cfg->fleet, why, names[f->cfg->fleet_fallback & 3]);
    if (n > 0)
        rl_log_stderr_line(line, (size_t)n < size ? (size_t)n : size - 1);
}

/* What a call that failed with no reply to come leaves: the debt it
 * carried goes back to be charged with another call (had its script run,
 * it is charged twice: the fleet admits less); a refund it carried is
 * dropped (given back twice would over-admit; dropped, the fleet admits
 * less). */
static void unask(struct rl_fleet_budget *st, int kind,
                  const struct rl_fleet_ask *a)
{
    if (st != NULL && a->debt > 0)
        rl_add_relaxed_u64(&st->debt[kind], a->debt);
}

/* One decision's call to Redis: what it asks, where it went, its reply. */
struct at_redis {
    struct rl_fleet_ask a;
    struct rl_fleet_cmd cmd;
    struct rl_fleet_call owed;
    struct rl_fleet_result res;
    struct rl_fleet_answer ans;
    struct rl_verdict out;
};

/* Redis said no to budget st's `kind` until closed_until: how long a
 * call that cannot wait that long is denied here, with no round trip (0:
 * ask Redis). When that time comes, one thread asks again (it claims the
 * next RL_FLEET_PROBE_NS); the others wait for what it hears, rather than
 * all of a hot key's callers asking at once. */
static __attribute__((noinline)) uint64_t closed_for(struct rl_fleet_budget *st,
                                                     int kind, uint64_t now,
                                                     uint64_t max_wait_ns)
{
    uint64_t closed = rl_load_relaxed_u64(&st->closed_until[kind]);
    if (closed == 0)
        return 0;
    if (max_wait_ns >= RL_FLEET_PROBE_NS) /* asks for a turn at Redis */
        return now < closed && closed - now > max_wait_ns ? closed - now : 0;
    if (now < closed)
        return closed - now;
    if (!atomic_compare_exchange_strong_explicit(
            &st->closed_until[kind], &closed, now + RL_FLEET_PROBE_NS,
            memory_order_relaxed, memory_order_relaxed))
        return RL_FLEET_PROBE_NS;
    return 0;
}

/* A call whose reply may come yet: given up, with what its reply is to
 * be settled against (what the fallback admitted without it). Out of
 * line: the program's stack lends only the common path. */
static __attribute__((noinline)) void
give_up(struct rl_fleet *f, const struct rl_fleet_call *owed,
        struct rl_fleet_budget *st, int kind, bool bucket, uint64_t granted,
        const struct rl_fleet_ask *a)
{
    struct rl_fleet_owed o = {st, kind, bucket, granted, a->debt, a->lease};
    struct rl_fleet_late late;
    rl_fleet_owed_pack(&f->budgets, &o, &late);
    rl_fleet_route_abandon(&f->route, owed, &late);
}

struct rl_verdict
rl_fleet_take(struct rl_fleet *f, const struct rl_rule *rule, const char *label,
              const char *dest, int kind, rl_word *const *states,
              const struct rl_fleet_pool *pool, rl_atomic_u64 *host,
              uint64_t now, uint64_t want, uint64_t min, uint64_t max_wait_ns,
              uint64_t not_before_ns, uint64_t jitter_ns,
              struct rl_verdict *v, struct rl_fleet_paused *paused)
{
    /* The call's state in one object: the caller's stack is the
     * program's, and each object of a frame costs it more than its size
     * under a sanitizer. */
    struct at_redis x;
    if (paused != NULL)
        *paused = (struct rl_fleet_paused){0, false, 0};
    /* The host's lease holds send units only (fleet_lease.c): connects
     * and requests are each decided on Redis, exactly. */
    if (!rl_kinds[kind].leased)
        pool = NULL;
    uint64_t cnow = rl_clock_coarse_ns();
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
    const char *name = label != NULL ? label : f->label;
    struct rl_fleet_budget *st = rl_fleet_budget_of(&f->budgets, label);
    int node = rl_fleet_route_node(&f->route, name);
    bool up = rl_fleet_route_up(&f->route, node);
    if (!up && host != NULL &&
        rl_load_relaxed_u64(&host[RL_FLEET_HOST_BACK]) >
            rl_load_relaxed_u64(&f->back))
        rl_fleet_route_try_now(&f->route); /* another process saw it back */
    uint64_t closed = 0;
    if (up && st != NULL && (closed = closed_for(st, kind, now, max_wait_ns)))
        return (struct rl_verdict){0, closed, 0};
    if (!rl_fleet_route_may_try(&f->route, node, now, RL_FLEET_RETRY_NS))
        return rl_fleet_fallback_jittered(f, st, rule, kind, states, host,
                                          true, now, want, min, max_wait_ns,
                                          not_before_ns, jitter_ns, v);
    /* For a while after a return, the host's share bounds it too. */
    uint64_t shared = 0;
    if (rl_fleet_settling(f, host, cnow)) {
        x.out = rl_fleet_share(f, rule, kind, states, host, now, want, min,
                               max_wait_ns, v);
        if (x.out.granted == 0)
            return x.out;
        shared = x.out.granted;
        want = shared;
        if (min > want)
            min = want;
    }
    int bucket = rl_fleet_call_bucket(rule, kind);
    /* A share's debt is charged in full; one beyond a share as far as
     * the budget holds it (fleet_scripts.h). */
    struct rl_fleet_ask *a = &x.a;
    *a = (struct rl_fleet_ask){want,
                               min,
                               max_wait_ns,
                               0,
                               0,
                               0,
                               f->cfg->fleet_fallback != RL_FLEET_SHARE,
                               not_before_ns,
                               jitter_ns};
    if (st != NULL) {
        /* What was admitted while away is charged with this call, and
         * what Redis charged that nobody spent goes back with it. */
        a->debt =
            atomic_exchange_explicit(&st->debt[kind], 0, memory_order_relaxed);
        if (bucket)
            a->ret = atomic_exchange_explicit(&st->refund[kind], 0,
                                              memory_order_relaxed);
    }
    bool claimed = false;
    uint64_t stale = 0;
    if (pool != NULL) {
        /* A stale lease goes back, and a new one comes, with this call. */
        stale = rl_fleet_pool_claim_stale(pool, kind, cnow);
        a->ret += stale;
        a->lease = rl_fleet_pool_lease_size(pool, rule, kind, want, cnow);
        claimed = a->lease > 0;
    }
    x.cmd = (struct rl_fleet_cmd){
        rule, kind, name, f->host, rl_add_relaxed_u64(&f->seq, 1) + 1, a, dest};
    x.ans = (struct rl_fleet_answer){0, UINT64_MAX, 1, 0, 0, false, 0};
    /* A host that never heard how many hosts share the budget would fall
     * back on all of it: it is starting (on a loaded machine, a fleet of
     * hosts starting at once), not in an outage, and waits as long as a
     * connection's set-up for its first reply. */
    uint64_t wait = rl_fleet_hosts_known(f, host) == 0 ? RL_FLEET_OPEN_NS
                                                       : RL_FLEET_WAIT_NS;
    int r = rl_fleet_route_call(&f->route, name, rl_fleet_call_build, &x.cmd,
                                rl_clock_now_ns() + wait, &x.owed, &x.res);
    node = x.owed.node;
    if (r == 0 && rl_fleet_call_answer(&x.res, &x.ans) != 0) {
        x.owed.why = x.res.type == RL_FLEET_REPLY_ERROR ? x.res.text
                                                        : "unexpected reply";
        r = -EPROTO;
    }
    if (r < 0) {
        if (r == -ETIMEDOUT)
            x.owed.why = wait == RL_FLEET_WAIT_NS
                             ? "no reply within 50 ms"
                             : "no first reply within 200 ms";
        /* The stale lease's units are dropped, not kept: the script that
         * took them back may run yet. */
        if (claimed || stale > 0)
            rl_fleet_pool_filled(pool, kind, 0, 0, stale, claimed, cnow);
        /* The debt it carried is owed again, unless its script may run
         * yet (a reply only late): then it stays with it (its late reply,
         * or the loss of it, settles it). */
        if (r != -ETIMEDOUT)
            unask(st, kind, a);
        /* Redis is away when it failed, or said nothing to anyone for
         * 50 ms; a reply late behind others' (a loaded host: this thread
         * not run in time), or a call with RL_FLEET_PIPE_RING others
         * owed before it, is this call's alone: it falls back, and the
         * next asks Redis again. */
        bool away = (r != -ETIMEDOUT && r != -EBUSY) ||
                    rl_fleet_route_silent(&f->route, node, rl_clock_coarse_ns(),
                                          RL_FLEET_WAIT_NS);
        if (away) {
            rl_fleet_route_failed(&f->route, node, now, RL_FLEET_RETRY_NS);
            warn(f, x.owed.why);
        }
        if (shared > 0) {
            /* Already the share's: admitted as the fallback would. */
            x.out = (struct rl_verdict){shared, 0, 0};
            if (st != NULL)
                rl_add_relaxed_u64(&st->debt[kind], shared);
        } else {
            x.out = rl_fleet_fallback_jittered(
                f, st, rule, kind, states, host, away, now, want, min,
                max_wait_ns, not_before_ns, jitter_ns, v);
        }
        if (r == -ETIMEDOUT)
            give_up(f, &x.owed, st, kind, bucket, x.out.granted, a);
        return x.out;
    }
    rl_store_relaxed_u64(&f->hosts, x.ans.hosts);
    if (host != NULL &&
        rl_load_relaxed_u64(&host[RL_FLEET_HOST_HOSTS]) != x.ans.hosts)
        rl_store_relaxed_u64(&host[RL_FLEET_HOST_HOSTS], x.ans.hosts);
    if (rl_fleet_route_answered(&f->route, node))
        rl_fleet_returned(f, host, cnow);
    if (shared > x.ans.granted)
        rl_fleet_unshare(f, rule, kind, states, host, now, v,
                         shared - x.ans.granted);
    if (pool != NULL)
        rl_fleet_pool_filled(pool, kind, x.ans.leased, x.ans.granted, stale,
                             claimed, cnow);
    if (paused != NULL && (x.ans.paused_ns > 0 || x.ans.paced))
        *paused = (struct rl_fleet_paused){x.ans.paused_ns, x.ans.backoff,
                                           x.ans.paced};
    x.out = (struct rl_verdict){x.ans.granted, x.ans.wait_ns, 0};
    /* Closed to every call of the budget, but not by a destination's
     * pause or pace: the budget's other destinations are not held (SPEC
     * §12, §14). */
    if (x.out.granted == 0 && x.out.wait_ns != UINT64_MAX && min == 1 &&
        st != NULL && x.ans.paused_ns == 0 && !x.ans.paced)
        rl_store_relaxed_u64(&st->closed_until[kind], now + x.out.wait_ns);
    else if (x.out.granted > 0 && st != NULL &&
             rl_load_relaxed_u64(&st->closed_until[kind]) != 0)
        rl_store_relaxed_u64(&st->closed_until[kind], 0); /* open again */
    for (unsigned i = 0; i < rule->nlimits[kind]; i++)
        v[i] = x.out;
    return x.out;
}

/* ---- the process's ends -------------------------------------------------*/

void rl_fleet_finish(struct rl_fleet *f, const struct rl_rule *rule,
                     const struct rl_fleet_pool *pool)
{
    if (!f->on || rule == NULL || rule->scope != RL_SCOPE_FLEET)
        return;
    int node = rl_fleet_route_node(&f->route, f->label);
    struct rl_fleet_node *nd = &f->route.node[node];
    /* Only by a process that went to Redis: one that never did leaves the
     * pool to the host's other processes (it goes back when stale), rather
     * than pay a connection at exit. A node away is tried once more, since
     * no one else will charge this process's debt (bounded like any
     * call). */
    if (atomic_load_explicit(&nd->pipe, memory_order_acquire) == NULL)
        return;
    for (int k = 0; k < RL_KIND_COUNT; k++) {
        if (rule->nlimits[k] == 0)
            continue;
        /* The pool's unspent units back, and what was spent while Redis
         * was away charged: nobody else would. */
        bool leased = pool != NULL && rl_kinds[k].leased;
        struct rl_fleet_ask a = {0,
                                 0,
                                 0,
                                 0,
                                 0,
                                 leased ? rl_fleet_pool_drain(pool, k) : 0,
                                 f->cfg->fleet_fallback != RL_FLEET_SHARE,
                                 0,
                                 0};
        a.debt = atomic_exchange_explicit(&f->budgets.b[0].debt[k], 0,
                                          memory_order_relaxed);
        if (rl_fleet_call_bucket(rule, k))
            a.ret += atomic_exchange_explicit(&f->budgets.b[0].refund[k], 0,
                                              memory_order_relaxed);
        if (a.ret == 0 && a.debt == 0)
            continue;
        struct rl_fleet_cmd cmd = {
            rule, k,  f->label, f->host, rl_add_relaxed_u64(&f->seq, 1) + 1,
            &a,   NULL};
        struct rl_fleet_call owed;
        struct rl_fleet_result res;
        int r = rl_fleet_route_call(&f->route, f->label, rl_fleet_call_build,
                                    &cmd, rl_clock_now_ns() + RL_FLEET_WAIT_NS,
                                    &owed, &res);
        if (r == -ETIMEDOUT) {
            struct rl_fleet_late none = {{0}};
            rl_fleet_route_abandon(&f->route, &owed, &none);
        }
        if (r < 0)
            break;
    }
}

int rl_fleet_pause(struct rl_fleet *f, const char *label, const char *dest,
                   uint64_t wait_ns, bool backoff)
{
    if (!f->on)
        return -EAGAIN;
    const char *name = label != NULL ? label : f->label;
    if (!rl_fleet_route_up(&f->route, rl_fleet_route_node(&f->route, name)))
        return -EAGAIN; /* away: the fallback decides, on this host */
    return rl_fleet_call_pause(&f->route, name, dest, wait_ns, backoff,
                               rl_clock_now_ns() + RL_FLEET_WAIT_NS);
}

int rl_fleet_pace(struct rl_fleet *f, const char *label, const char *dest,
                  bool crawl, uint64_t value_ns, uint64_t ttl_ns)
{
    if (!f->on)
        return -EAGAIN;
    const char *name = label != NULL ? label : f->label;
    if (!rl_fleet_route_up(&f->route, rl_fleet_route_node(&f->route, name)))
        return -EAGAIN; /* away: this host paces by its own word */
    return rl_fleet_call_pace(&f->route, name, dest, crawl, value_ns, ttl_ns,
                              rl_clock_now_ns() + RL_FLEET_WAIT_NS);
}

void rl_fleet_atfork_child(struct rl_fleet *f)
{
    if (!f->on)
        return;
    /* Whatever a thread of the parent was doing on a connection stopped
     * at the fork: each is dropped (closed by system call while it is
     * still ours, its reader forgotten). Nothing is sent: the parent
     * still holds the sockets. */
    rl_fleet_route_atfork_child(&f->route);
    /* The child's connections will live above the floor: its fd table
     * grows now, while the child has one thread, not on its first
     * decision, when it may have several (fleet_conn.h). */
    rl_fleet_fd_table_grow();
    for (unsigned i = 0; i < 1 + RL_FLEET_BUDGETS; i++)
        for (int k = 0; k < RL_KIND_COUNT; k++) {
            rl_store_relaxed_u64(&f->budgets.b[i].debt[k], 0);
            rl_store_relaxed_u64(&f->budgets.b[i].refund[k], 0);
        }
}

void rl_fleet_reopen(struct rl_fleet *f)
{
    if (!f->on)
        return;
    /* Relaxed stores, as every word of an account: a decision of the old
     * generation that closes one again meanwhile costs one call denied
     * here that Redis might have granted, until its probe. */
    for (unsigned i = 0; i < 1 + RL_FLEET_BUDGETS; i++)
        for (int k = 0; k < RL_KIND_COUNT; k++)
            if (rl_load_relaxed_u64(&f->budgets.b[i].closed_until[k]) != 0)
                rl_store_relaxed_u64(&f->budgets.b[i].closed_until[k], 0);
}

bool rl_fleet_decides(const struct rl_fleet *f, const struct rl_rule *rule)
{
    return f->on && rule->scope == RL_SCOPE_FLEET;
}

bool rl_fleet_up(const struct rl_fleet *f)
{
    if (!f->on)
        return false;
    struct rl_fleet_route *r = (struct rl_fleet_route *)&f->route;
    for (unsigned i = 0; i < RL_FLEET_NODES; i++)
        if (!rl_fleet_route_up(r, (int)i))
            return false;
    return true;
}
