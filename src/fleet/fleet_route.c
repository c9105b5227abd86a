/* fleet_route.c — a budget's node, and one call there (see
 * fleet_route.h).
 *
 * Shared data: `cluster` and `stale` are flags any thread sets (relaxed:
 * a stale read costs one more MOVED or one more look-up); the map is
 * fleet_cluster.h's (lock-free); a node's pipe pointer is published once
 * (CAS from NULL, release; read with acquire) and never freed before the
 * process ends; `down`/`next_try` are relaxed (a stale read costs one try
 * more or less). */
#include "fleet/fleet_route.h"

#include <errno.h>
#include <linux/futex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/clock.h"
#include "util/sys.h"

void rl_fleet_route_init(struct rl_fleet_route *r,
                         const struct rl_fleet_addr *seed,
                         const char *password_file, uint64_t open_ns,
                         uint64_t late_ns, rl_fleet_late_fn late,
                         void *late_ctx)
{
    r->password_file = password_file;
    r->late = late;
    r->late_ctx = late_ctx;
    r->open_ns = open_ns;
    r->late_ns = late_ns;
    atomic_store_explicit(&r->cluster, false, memory_order_relaxed);
    atomic_store_explicit(&r->stale, false, memory_order_relaxed);
    /* Node 0 is the seed, whatever the table held. */
    atomic_store_explicit(&r->map.n, 0, memory_order_relaxed);
    (void)rl_fleet_map_find(&r->map, seed);
    r->map.nodes[0].db = seed->db;
}

/* The slot of every key of the budget `label` (`rlshim:{label}:...`):
 * the tag is the label up to its first '}', unless that leaves nothing
 * (then the whole key counts: its hosts key's). Without building a key:
 * the caller's stack is the program's. */
static __attribute__((noinline)) unsigned whole_key_slot(const char *label)
{
    char key[128];
    int k = snprintf(key, sizeof key, "rlshim:{%s}:hosts", label);
    if (k < 0 || (size_t)k >= sizeof key)
        k = (int)sizeof key - 1;
    return rl_fleet_key_slot(key, (size_t)k);
}

static unsigned label_slot(const char *label)
{
    size_t n = strcspn(label, "}");
    return n > 0 ? rl_fleet_tag_slot(label, n) : whole_key_slot(label);
}

int rl_fleet_route_node(struct rl_fleet_route *r, const char *label)
{
    if (!atomic_load_explicit(&r->cluster, memory_order_relaxed))
        return 0;
    int i = rl_fleet_map_node(&r->map, label_slot(label));
    return i >= 0 ? i : 0;
}

/* Node i's pipe, made on first use. */
static struct rl_fleet_pipe *pipe_of(struct rl_fleet_route *r, int i)
{
    struct rl_fleet_node *n = &r->node[i];
    /* Acquire pairs with the release CAS below: the pipe is set up. */
    struct rl_fleet_pipe *p =
        atomic_load_explicit(&n->pipe, memory_order_acquire);
    if (p != NULL)
        return p;
    struct rl_fleet_pipe *fresh = calloc(1, sizeof *fresh);
    if (fresh == NULL)
        return NULL;
    rl_fleet_pipe_init(fresh, &r->map.nodes[i], r->late, r->late_ctx);
    if (atomic_compare_exchange_strong_explicit(
            &n->pipe, &p, fresh, memory_order_acq_rel, memory_order_acquire))
        return fresh;
    free(fresh); /* another thread's won */
    return p;
}

/* ---- pacing -------------------------------------------------------------*/

bool rl_fleet_route_may_try(struct rl_fleet_route *r, int i, uint64_t now,
                            uint64_t retry_ns)
{
    struct rl_fleet_node *n = &r->node[i];
    if (!atomic_load_explicit(&n->down, memory_order_relaxed))
        return true;
    uint64_t next = rl_load_relaxed_u64(&n->next_try);
    return now >= next && atomic_compare_exchange_strong_explicit(
                              &n->next_try, &next, now + retry_ns,
                              memory_order_relaxed, memory_order_relaxed);
}

bool rl_fleet_route_failed(struct rl_fleet_route *r, int i, uint64_t now,
                           uint64_t retry_ns)
{
    struct rl_fleet_node *n = &r->node[i];
    rl_store_relaxed_u64(&n->next_try, now + retry_ns);
    /* A cluster's node that fails may have lost its slots to a replica:
     * the map is asked again before the next try. */
    if (atomic_load_explicit(&r->cluster, memory_order_relaxed))
        atomic_store_explicit(&r->stale, true, memory_order_relaxed);
    return !atomic_exchange_explicit(&n->down, true, memory_order_relaxed);
}

bool rl_fleet_route_answered(struct rl_fleet_route *r, int i)
{
    struct rl_fleet_node *n = &r->node[i];
    if (!atomic_load_explicit(&n->down, memory_order_relaxed))
        return false;
    return atomic_exchange_explicit(&n->down, false, memory_order_relaxed);
}

void rl_fleet_route_try_now(struct rl_fleet_route *r)
{
    for (unsigned i = 0; i < RL_FLEET_NODES; i++)
        rl_store_relaxed_u64(&r->node[i].next_try, 0);
}

bool rl_fleet_route_silent(struct rl_fleet_route *r, int i, uint64_t cnow,
                           uint64_t ns)
{
    struct rl_fleet_pipe *p =
        atomic_load_explicit(&r->node[i].pipe, memory_order_acquire);
    return p == NULL || rl_fleet_pipe_quiet_ns(p, cnow) >= ns;
}

bool rl_fleet_route_up(struct rl_fleet_route *r, int i)
{
    return !atomic_load_explicit(&r->node[i].down, memory_order_relaxed);
}

/* ---- one command on one node --------------------------------------------*/

/* Out of line, and on_node in its callers: the frames of a call to Redis
 * are below every hooked call's (the fleet test bounds their sum). */
static __attribute__((noinline)) int
on_pipe(struct rl_fleet_route *r, struct rl_fleet_pipe *p,
        rl_fleet_build_fn build, void *ctx, unsigned skip, bool raw,
        struct rl_fleet_call *call, struct rl_fleet_result *out);

/* Send and wait on node i as call->wait allows; 0 and *out (pipe left),
 * -ETIMEDOUT with the pipe still entered (*ticket owed), or -errno (pipe
 * left). */
static inline __attribute__((always_inline)) int
on_node(struct rl_fleet_route *r, int i, rl_fleet_build_fn build, void *ctx,
        unsigned skip, bool raw, struct rl_fleet_call *call,
        struct rl_fleet_result *out)
{
    struct rl_fleet_pipe *p = pipe_of(r, i);
    call->node = i;
    if (p == NULL) {
        call->why = "out of memory";
        return -ENOMEM;
    }
    int e = -EBADF;
    /* A number the program closed or took (a close_range sweep, a dup2)
     * broke the connection under the call: once more, on a new one. The
     * first command may have run (its reply lost): charged twice at
     * worst, the fleet admits less. */
    for (int attempt = 0; attempt < 2 && e == -EBADF; attempt++)
        e = on_pipe(r, p, build, ctx, skip, raw, call, out);
    return e;
}

static int on_pipe(struct rl_fleet_route *r, struct rl_fleet_pipe *p,
                   rl_fleet_build_fn build, void *ctx, unsigned skip, bool raw,
                   struct rl_fleet_call *call, struct rl_fleet_result *out)
{
    /* A connection opened now (by this thread or another) has a bound of
     * its own; the call's wait starts after it (SPEC §8: no *reply*
     * within 50 ms). call->wait is moved on by each set-up: a second
     * attempt or a redirection waits past both. */
    uint64_t t0 = rl_clock_now_ns();
    int e =
        rl_fleet_pipe_enter(p, r->password_file, r->open_ns, t0 + r->open_ns);
    /* Only a reply owed past the deadline is -ETIMEDOUT (the caller then
     * gives its ticket up): a connection not opened in time, or a command
     * not written in time, owes nothing. */
    if (e < 0) {
        call->why = e == -ETIMEDOUT ? "connecting took too long" : p->why;
        return e == -ETIMEDOUT ? -EAGAIN : e;
    }
    uint64_t opened = rl_clock_now_ns() - t0;
    call->wait.deadline += opened;
    call->wait.late += opened;
    e = rl_fleet_pipe_send(p, build, ctx, skip, raw, &call->wait,
                           &call->ticket);
    if (e == 0) {
        e = rl_fleet_pipe_wait(p, call->ticket, &call->wait, out);
        if (e == -ETIMEDOUT)
            return e; /* still entered: rl_fleet_route_abandon leaves */
        if (out->err != 0) {
            e = out->err;
            call->why = p->why;
        }
    } else {
        call->why = e == -EBUSY ? "too many calls owed" : p->why;
        if (e == -ETIMEDOUT)
            e = -EAGAIN;
    }
    rl_fleet_pipe_leave(p);
    return e;
}

/* The caller's command, wrapped: behind ASKING (in one write), or with
 * sha NULL (EVAL of the text, after NOSCRIPT). */
struct wrap {
    rl_fleet_build_fn build;
    void *ctx;
    bool eval; /* after NOSCRIPT */
    bool ask;  /* after ASK, this once */
};

static void build_wrapped(struct rl_fleet_conn *c, const char (*sha)[41],
                          void *ctx)
{
    const struct wrap *w = ctx;
    w->build(c, w->eval ? NULL : sha, w->ctx);
}

static void build_asking(struct rl_fleet_conn *c, const char (*sha)[41],
                         void *ctx)
{
    rl_fleet_cmd_start(c, 1);
    rl_fleet_cmd_str(c, "ASKING");
    build_wrapped(c, sha, ctx);
}

/* CLUSTER SHARDS (Redis 7), or CLUSTER SLOTS (ctx non-NULL: an older
 * Redis, or one that refused SHARDS). */
static void build_map(struct rl_fleet_conn *c, const char (*sha)[41], void *ctx)
{
    (void)sha;
    rl_fleet_cmd_start(c, 2);
    rl_fleet_cmd_str(c, "CLUSTER");
    rl_fleet_cmd_str(c, ctx != NULL ? "SLOTS" : "SHARDS");
}

static int learn_range(void *ctx, unsigned first, unsigned last,
                       const struct rl_fleet_addr *master)
{
    struct rl_fleet_route *r = ctx;
    int i = rl_fleet_map_find(&r->map, master);
    for (int k = 0; i == -EAGAIN && k < 1000; k++)
        i = rl_fleet_map_find(&r->map, master);
    if (i >= 0)
        rl_fleet_map_set(&r->map, first, last, i);
    return 0;
}

/* Ask a node that is up (the seed first) for the map: CLUSTER SHARDS,
 * or CLUSTER SLOTS where SHARDS is refused (before Redis 7). */
static __attribute__((noinline)) void refresh_map(struct rl_fleet_route *r,
                                                  uint64_t deadline)
{
    if (!atomic_exchange_explicit(&r->stale, false, memory_order_relaxed))
        return;
    unsigned n = atomic_load_explicit(&r->map.n, memory_order_acquire);
    for (unsigned i = 0; i < n; i++) {
        if (!rl_fleet_route_up(r, (int)i) && i != 0)
            continue;
        for (int slots = 0; slots < 2; slots++) {
            struct rl_fleet_result res;
            struct rl_fleet_call call;
            call.wait = (struct rl_fleet_wait){deadline, deadline, 0};
            int e = on_node(r, (int)i, build_map, slots ? r : NULL, 0, true,
                            &call, &res);
            if (e == -ETIMEDOUT) {
                struct rl_fleet_late none = {{0}};
                rl_fleet_route_abandon(r, &call, &none);
                atomic_store_explicit(&r->stale, true, memory_order_relaxed);
                return;
            }
            if (e < 0 || res.raw == NULL)
                break; /* this node is away: the next */
            int rc = slots ? rl_fleet_cluster_slots(res.raw, &r->map.nodes[i],
                                                    learn_range, r)
                           : rl_fleet_cluster_shards(res.raw, &r->map.nodes[i],
                                                     learn_range, r);
            freeReplyObject(res.raw);
            if (rc == 0)
                return;
        }
    }
    /* Nobody answered: ask again next time. */
    atomic_store_explicit(&r->stale, true, memory_order_relaxed);
}

/* Is this error one that passes (a failover, a migration, a restart)? */
static bool passing(const char *text)
{
    return strncmp(text, "TRYAGAIN", 8) == 0 ||
           strncmp(text, "CLUSTERDOWN", 11) == 0 ||
           strncmp(text, "LOADING", 7) == 0 ||
           strncmp(text, "MASTERDOWN", 10) == 0;
}

static __attribute__((noinline)) void pause_ms(uint64_t ms, uint64_t deadline)
{
    uint64_t now = rl_clock_now_ns();
    uint64_t until = now + ms * 1000000u;
    if (until > deadline)
        until = deadline;
    if (until <= now)
        return;
    struct timespec ts = {0, (long)(until - now)};
    uint32_t never = 1;
    /* A timed sleep through the seam: a wait on a word no one wakes. */
    rl_sys.futex(&never, FUTEX_WAIT_PRIVATE, 1, &ts);
}

/* An error reply from node i that redirects the call: the node to go to
 * (learnt for a MOVED; *ask set for an ASK), -ENOENT when it is no
 * redirection, or -errno when it cannot be followed. Out of line: the
 * address it reads is 128 bytes of the caller's stack, needed only here. */
static __attribute__((noinline)) int
redirected(struct rl_fleet_route *r, const struct rl_fleet_result *out, int i,
           bool *ask, const char **why)
{
    struct rl_fleet_redirect rd;
    int k = rl_fleet_redirect_parse(out->text, strlen(out->text),
                                    &r->map.nodes[i], &rd);
    if (k == RL_FLEET_NO_REDIRECT)
        return -ENOENT;
    if (k < 0) {
        *why = "cluster: a redirection that cannot be followed (a host "
               "name?)";
        return -EPROTO;
    }
    int j = rl_fleet_map_find(&r->map, &rd.to);
    for (int n = 0; j == -EAGAIN && n < 1000; n++)
        j = rl_fleet_map_find(&r->map, &rd.to);
    if (j < 0) {
        *why = j == -ENOSPC ? "cluster: too many nodes"
                            : "cluster: a redirection that cannot be followed";
        return j == -ENOSPC ? -ENOSPC : -EPROTO;
    }
    if (k == RL_FLEET_MOVED) {
        atomic_store_explicit(&r->cluster, true, memory_order_relaxed);
        rl_fleet_map_set(&r->map, rd.slot, rd.slot, j);
    } else {
        *ask = true;
    }
    return j;
}

int rl_fleet_route_call(struct rl_fleet_route *r, const char *label,
                        rl_fleet_build_fn build, void *ctx, uint64_t deadline,
                        struct rl_fleet_call *call, struct rl_fleet_result *out)
{
    /* The call's whole span until `deadline` is how long Redis may say
     * nothing before it is away; a reply late while it answers others is
     * waited for until r->late_ns from the start (fleet_pipe.h). */
    uint64_t now = rl_clock_now_ns();
    call->wait = (struct rl_fleet_wait){
        deadline, now + r->late_ns > deadline ? now + r->late_ns : deadline,
        deadline > now ? deadline - now : 0};
    if (atomic_load_explicit(&r->cluster, memory_order_relaxed))
        refresh_map(r, deadline);
    int i = rl_fleet_route_node(r, label);
    struct wrap w = {build, ctx, false, false};
    call->why = "";
    for (int hop = 0; hop < 6; hop++) {
        int e = on_node(r, i, w.ask ? build_asking : build_wrapped, &w, w.ask,
                        false, call, out);
        if (e < 0)
            return e; /* -ETIMEDOUT: owed */
        w.ask = false;
        if (out->type != RL_FLEET_REPLY_ERROR)
            return 0;
        int j = redirected(r, out, i, &w.ask, &call->why);
        if (j >= 0) {
            i = j;
            continue;
        }
        if (j != -ENOENT)
            return j;
        if (strncmp(out->text, "NOSCRIPT", 8) == 0 && !w.eval) {
            w.eval = true;
            continue;
        }
        if (passing(out->text)) {
            call->why = out->text;
            if (strncmp(out->text, "CLUSTERDOWN", 11) == 0)
                atomic_store_explicit(&r->stale, true, memory_order_relaxed);
            pause_ms(2, deadline);
            if (rl_clock_now_ns() >= deadline)
                return -EAGAIN;
            hop--; /* a wait, not a hop */
            continue;
        }
        return 0; /* another error: the caller's */
    }
    call->why = "cluster: too many redirections";
    return -ELOOP;
}

void rl_fleet_route_abandon(struct rl_fleet_route *r,
                            const struct rl_fleet_call *call,
                            const struct rl_fleet_late *late)
{
    struct rl_fleet_pipe *p =
        atomic_load_explicit(&r->node[call->node].pipe, memory_order_acquire);
    rl_fleet_pipe_abandon(p, call->ticket, late);
    rl_fleet_pipe_leave(p);
}

void rl_fleet_route_atfork_child(struct rl_fleet_route *r)
{
    for (unsigned i = 0; i < RL_FLEET_NODES; i++) {
        struct rl_fleet_pipe *p =
            atomic_load_explicit(&r->node[i].pipe, memory_order_relaxed);
        if (p != NULL)
            rl_fleet_pipe_atfork_child(p);
    }
}
