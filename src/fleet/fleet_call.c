/* fleet_call.c — a decision's script call and its reply (see
 * fleet_call.h). */
#include "fleet/fleet_call.h"

#include <errno.h>
#include <unistd.h>

#include "fleet/fleet.h"
#include "fleet/fleet_scripts.h"

int rl_fleet_call_bucket(const struct rl_rule *rule, int kind)
{
    return rule->limits[kind][0].algo == RL_ALGO_TOKEN_BUCKET;
}

void rl_fleet_call_build(struct rl_fleet_conn *c, const char (*sha)[41],
                         void *ctx)
{
    const struct rl_fleet_cmd *k = ctx;
    const struct rl_rule *rule = k->rule;
    const struct rl_fleet_ask *a = k->ask;
    int bucket = rl_fleet_call_bucket(rule, k->kind);
    unsigned n = rule->nlimits[k->kind];
    /* A request's two pause keys, last: its destination's, and that of
     * the destinations no response could name ("-"), which every request
     * of the budget obeys (gate_pause.c). */
    unsigned pause = rl_kinds[k->kind].paused ? 2 : 0;
    rl_fleet_cmd_start(c, 3 + (n + 1 + pause) + 11 + 3 * n);
    if (sha != NULL) {
        rl_fleet_cmd_str(c, "EVALSHA");
        rl_fleet_cmd_str(c, sha[bucket ? 0 : 1]);
    } else {
        rl_fleet_cmd_str(c, "EVAL");
        rl_fleet_cmd_lua(c,
                         bucket ? &rl_fleet_lua_bucket : &rl_fleet_lua_window);
    }
    rl_fleet_cmd_u64(c, n + 1 + pause);
    /* One array of parts for every key: the caller's stack is the
     * program's. */
    static const char *const digit[] = {"0", "1", "2", "3", "4", "5", "6", "7"};
    const char *key[8] = {"rlshim:{", k->label, "}:", rl_kind_name(k->kind),
                          ":",        NULL,     ":",  NULL};
    for (unsigned i = 0; i < n; i++) {
        key[5] = digit[i & 7]; /* i < RL_MAX_RATES */
        key[7] =
            rule->limits[k->kind][i].algo == RL_ALGO_TOKEN_BUCKET ? "tb" : "sw";
        rl_fleet_cmd_cat(c, key, 8);
    }
    key[2] = "}:hosts";
    rl_fleet_cmd_cat(c, key, 3);
    key[2] = "}:pause:";
    key[3] = k->dest != NULL ? k->dest : "-";
    if (pause) {
        rl_fleet_cmd_cat(c, key, 4);
        key[3] = "-";
        rl_fleet_cmd_cat(c, key, 4);
    }
    rl_fleet_cmd_u64(c, a->want);
    rl_fleet_cmd_u64(c, a->min);
    rl_fleet_cmd_u64(c, a->max_wait_ns / 1000);
    rl_fleet_cmd_u64(c, a->debt);
    rl_fleet_cmd_str(c, k->host);
    /* The call's id: unique members of the window's sorted sets. */
    char num[2][24];
    key[0] = k->host;
    key[1] = ":";
    key[2] = rl_fleet_dec(num[0], (uint64_t)getpid());
    key[3] = ":";
    key[4] = rl_fleet_dec(num[1], k->seq);
    rl_fleet_cmd_cat(c, key, 5);
    rl_fleet_cmd_u64(c, a->lease);
    rl_fleet_cmd_u64(c, a->ret);
    rl_fleet_cmd_u64(c, a->capped);
    rl_fleet_cmd_u64(c, a->not_before_ns / 1000);
    rl_fleet_cmd_u64(c, a->jitter_ns / 1000);
    for (unsigned i = 0; i < n; i++) {
        const struct rl_limit *l = &rule->limits[k->kind][i];
        rl_fleet_cmd_u64(c, l->count);
        rl_fleet_cmd_u64(c, l->period_ns / 1000);
        rl_fleet_cmd_u64(c,
                         l->algo == RL_ALGO_TOKEN_BUCKET ? l->burst : l->count);
    }
}

int rl_fleet_call_answer(const struct rl_fleet_result *r,
                         struct rl_fleet_answer *a)
{
    if (r->err != 0 || r->type != RL_FLEET_REPLY_INTS || r->n < 4)
        return -EPROTO;
    int64_t g = r->v[0], w = r->v[1], h = r->v[2], l = r->v[3];
    if (g < 0 || w < -1 || h < 0 || l < 0)
        return -EPROTO;
    a->granted = (uint64_t)g;
    a->wait_ns = w < 0 ? UINT64_MAX : (uint64_t)w * 1000;
    a->hosts = h > 0 ? (uint64_t)h : 1;
    a->leased = (uint64_t)l;
    /* A request's pause (SPEC §12): how far it moved the turn, whose. */
    int64_t why = r->n >= 6 ? r->v[5] : 0;
    uint64_t off = r->n >= 6 && r->v[4] > 0 ? (uint64_t)r->v[4] * 1000 : 0;
    /* ...or the destination's pace (SPEC §14), which is no pause. */
    a->paused_ns = why == 1 || why == 2 ? off : 0;
    a->backoff = why == 1;
    a->paced = why == 3   ? RL_FLEET_PACED_LATENCY
               : why == 4 ? RL_FLEET_PACED_CRAWL
                          : RL_FLEET_PACED_NOT;
    return 0;
}

struct pause_cmd {
    const char *label, *dest;
    uint64_t wait_ns;
    bool backoff;
};

static void build_pause(struct rl_fleet_conn *c, const char (*sha)[41],
                        void *ctx)
{
    (void)sha; /* a 429 is rare: EVAL, no SHA to keep */
    const struct pause_cmd *p = ctx;
    const char *key[4] = {"rlshim:{", p->label, "}:pause:",
                          p->dest != NULL ? p->dest : "-"};
    rl_fleet_cmd_start(c, 6);
    rl_fleet_cmd_str(c, "EVAL");
    rl_fleet_cmd_lua(c, &rl_fleet_lua_pause);
    rl_fleet_cmd_u64(c, 1);
    rl_fleet_cmd_cat(c, key, 4);
    rl_fleet_cmd_u64(c, p->wait_ns / 1000);
    rl_fleet_cmd_u64(c, p->backoff ? 1 : 2);
}

/* A script whose answer is an integer and whose late reply is no harm
 * (a pause, a pace): called, and given up after `deadline`. */
static int call_for_integer(struct rl_fleet_route *r, const char *label,
                            void (*build)(struct rl_fleet_conn *,
                                          const char (*)[41], void *),
                            void *ctx, uint64_t deadline)
{
    struct rl_fleet_call owed;
    struct rl_fleet_result res;
    int e = rl_fleet_route_call(r, label, build, ctx, deadline, &owed, &res);
    if (e == -ETIMEDOUT) {
        struct rl_fleet_late none = {{0}};
        rl_fleet_route_abandon(r, &owed, &none);
        return e;
    }
    if (e == 0 && res.type != RL_FLEET_REPLY_INTEGER)
        e = -EPROTO;
    return e;
}

int rl_fleet_call_pause(struct rl_fleet_route *r, const char *label,
                        const char *dest, uint64_t wait_ns, bool backoff,
                        uint64_t deadline)
{
    struct pause_cmd p = {label, dest, wait_ns, backoff};
    /* Late, it may run yet: a pause that ends later is no harm. */
    return call_for_integer(r, label, build_pause, &p, deadline);
}

struct pace_cmd {
    const char *label, *dest, *field;
    uint64_t value_ns, ttl_ns;
};

static void build_pace(struct rl_fleet_conn *c, const char (*sha)[41],
                       void *ctx)
{
    (void)sha; /* written only when the pace moved: EVAL, no SHA to keep */
    const struct pace_cmd *p = ctx;
    const char *key[4] = {"rlshim:{", p->label, "}:pause:",
                          p->dest != NULL ? p->dest : "-"};
    rl_fleet_cmd_start(c, 7);
    rl_fleet_cmd_str(c, "EVAL");
    rl_fleet_cmd_lua(c, &rl_fleet_lua_pace);
    rl_fleet_cmd_u64(c, 1);
    rl_fleet_cmd_cat(c, key, 4);
    rl_fleet_cmd_str(c, p->field);
    /* Rounded up: nothing goes earlier than this host's pace lets it. */
    rl_fleet_cmd_u64(c, (p->value_ns + 999) / 1000);
    rl_fleet_cmd_u64(c, (p->ttl_ns + 999999) / 1000000);
}

int rl_fleet_call_pace(struct rl_fleet_route *r, const char *label,
                       const char *dest, bool crawl, uint64_t value_ns,
                       uint64_t ttl_ns, uint64_t deadline)
{
    struct pace_cmd p = {label, dest, crawl ? "c" : "a", value_ns, ttl_ns};
    /* Late, it may run yet: the value is this host's latest all the same. */
    return call_for_integer(r, label, build_pace, &p, deadline);
}
