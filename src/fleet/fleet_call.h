/* fleet_call.h — one decision's script call: the EVALSHA (or, after
 * NOSCRIPT, the EVAL) a budget's keys and limits make, and its reply.
 *
 * Keys: `rlshim:{LABEL}:KIND:I:ALGO` per limit of the kind and the
 * budget's `rlshim:{LABEL}:hosts`, LABEL the budget's label: one hash tag,
 * the budget's, so every key of the call is in one slot of a Redis
 * Cluster (fleet_cluster.h). Arguments: fleet_scripts.h's. */
#ifndef RL_FLEET_CALL_H
#define RL_FLEET_CALL_H

#include <stdbool.h>
#include <stdint.h>

#include "fleet/fleet_conn.h"
#include "fleet/fleet_pipe.h"
#include "fleet/fleet_route.h"
#include "model/config.h"

/* What one call asks. */
struct rl_fleet_ask {
    uint64_t want, min, max_wait_ns, debt;
    uint64_t lease; /* units more for the host's pool */
    uint64_t ret;   /* units given back (a stale lease, a refund) */
    bool capped;    /* the debt beyond a share's: charged as far as the
                       budget holds it (fleet_scripts.h) */
    uint64_t not_before_ns; /* the turn no earlier than this from now */
    uint64_t jitter_ns;     /* a granted turn this much later */
};

/* The call's command: a rl_fleet_build_fn's context. */
struct rl_fleet_cmd {
    const struct rl_rule *rule;
    int kind;
    const char *label; /* the budget's */
    const char *host;  /* this host's id */
    uint64_t seq;      /* the call's number in this process */
    const struct rl_fleet_ask *ask;
    /* A request's destination name (NULL: not told, "-"): its pause and
     * the untold destinations' are waited for, no other's (SPEC §12). */
    const char *dest;
};

/* Is rule's `kind` decided by the bucket script (else the window's)? */
int rl_fleet_call_bucket(const struct rl_rule *rule, int kind);

/* The rl_fleet_build_fn of a call (ctx: struct rl_fleet_cmd): EVALSHA of
 * the kind's script, or EVAL of its text when sha is NULL. */
void rl_fleet_call_build(struct rl_fleet_conn *c, const char (*sha)[41],
                         void *ctx);

/* A script's reply, read. */
struct rl_fleet_answer {
    uint64_t granted;
    uint64_t wait_ns; /* UINT64_MAX: never */
    uint64_t hosts;   /* active in the last minute, at least 1 */
    uint64_t leased;
    uint64_t paused_ns; /* a request budget's pause moved the turn */
    bool backoff;       /* the pause was the backoff's */
    int paced;          /* fleet.h's RL_FLEET_PACED_*: the destination's pace moved
                           the turn (SPEC §14) */
};

/* 0 and *a, or -EPROTO when r is not a script's reply. */
int rl_fleet_call_answer(const struct rl_fleet_result *r,
                         struct rl_fleet_answer *a);

/* A request budget's pause of destination `dest` (NULL: "-") to Redis
 * (fleet_scripts.h's rl_fleet_lua_pause), at the budget's node, until
 * `deadline`: 0 or -errno. */
int rl_fleet_call_pause(struct rl_fleet_route *r, const char *label,
                        const char *dest, uint64_t wait_ns, bool backoff,
                        uint64_t deadline);

/* A destination's pace to Redis (fleet_scripts.h's rl_fleet_lua_pace),
 * beside its pause: the latency's interval (crawl false) or a
 * Crawl-delay (true), `value_ns` (0: none), holding `ttl_ns`; at the
 * budget's node, until `deadline`: 0 or -errno. */
int rl_fleet_call_pace(struct rl_fleet_route *r, const char *label,
                       const char *dest, bool crawl, uint64_t value_ns,
                       uint64_t ttl_ns, uint64_t deadline);

#endif
