/* fleet_route.h — which Redis decides a budget, and one script call there.
 *
 * The `fleet` key names one node. Until it answers `MOVED`, it is all
 * there is: a plain Redis (or Valkey). A `MOVED` says it is a Redis
 * Cluster: from then on a budget's calls go to the master serving its
 * keys' slot (fleet_cluster.h: one slot per budget), learnt one MOVED at
 * a time and, after a node fails, from `CLUSTER SLOTS` asked of another;
 * an `ASK` (a slot migrating) sends that one call to the node importing
 * it, behind `ASKING`; `TRYAGAIN`, `CLUSTERDOWN` and `LOADING` are tried
 * again within the call's deadline. Each node has its own pipelined
 * connection (fleet_pipe.h), opened when first needed.
 *
 * A node is *down* from a failure until its next try (the caller's
 * pacing, fleet.c): its budgets fall back meanwhile; the others' do not.
 * Nothing here sleeps past a deadline, and the waits are fleet_pipe.h's.
 */
#ifndef RL_FLEET_ROUTE_H
#define RL_FLEET_ROUTE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "fleet/fleet_addr.h"
#include "fleet/fleet_cluster.h"
#include "fleet/fleet_pipe.h"
#include "util/atomics.h"

struct rl_fleet_node {
    _Atomic(struct rl_fleet_pipe *) pipe; /* NULL until first used */
    atomic_bool down;                     /* since a failure */
    rl_atomic_u64 next_try;               /* host clock: no try before */
};

struct rl_fleet_route {
    const char *password_file; /* fleet_password, or NULL */
    rl_fleet_late_fn late;     /* every pipe's, with late_ctx */
    void *late_ctx;
    uint64_t open_ns;        /* a connection's set-up, bounded apart */
    uint64_t late_ns;        /* a reply late behind others: waited for */
    atomic_bool cluster;     /* a MOVED was seen */
    atomic_bool stale;       /* the map is to be asked again */
    struct rl_fleet_map map; /* node 0 is the `fleet` key's */
    struct rl_fleet_node node[RL_FLEET_NODES];
};

/* r routes to `seed` alone until told otherwise. Opens nothing. A call's
 * reply that is late while its node keeps answering is waited for up to
 * `late_ns` from the call's start (fleet_pipe.h's rl_fleet_pipe_wait).
 */
void rl_fleet_route_init(struct rl_fleet_route *r,
                         const struct rl_fleet_addr *seed,
                         const char *password_file, uint64_t open_ns,
                         uint64_t late_ns, rl_fleet_late_fn late,
                         void *late_ctx);

/* The node that decides the budget labelled `label` (its keys are
 * `rlshim:{label}:...`): the seed, or its slot's master once r is a
 * cluster's. */
int rl_fleet_route_node(struct rl_fleet_route *r, const char *label);

/* A call: where it went last (the node that is down when it fails), why
 * it failed (a string that outlives the call: the connection's reason,
 * the reply's text, or a constant), and the ticket it owes when its
 * reply is late (see rl_fleet_route_call). */
struct rl_fleet_call {
    int node;
    uint64_t ticket;
    const char *why;
    /* The wait of the command in flight (fleet_pipe.h): in the caller's
     * object, not a copy down the calls, whose every frame would add to a
     * hooked call's stack. */
    struct rl_fleet_wait wait;
};

/* Call what `build` makes (an EVALSHA of a script; with sha NULL, the
 * same as EVAL of its text: after NOSCRIPT) for the budget `label`, at
 * its node, following redirections, until `deadline` (plus the time a
 * connection's set-up took), or, while the node keeps answering others,
 * until r->late_ns from the start. Returns 0 and *out (a reply: an error reply
 * other than a redirection or a retry is in *out, for the caller);
 * -ETIMEDOUT with the call owed: the caller decides without it and then
 * gives it up with rl_fleet_route_abandon; another -errno when no reply
 * will come. call->node and call->why as struct rl_fleet_call says. */
int rl_fleet_route_call(struct rl_fleet_route *r, const char *label,
                        rl_fleet_build_fn build, void *ctx, uint64_t deadline,
                        struct rl_fleet_call *call,
                        struct rl_fleet_result *out);

/* Give an owed call up; its reply (if it comes) goes to r->late with
 * `late`. */
void rl_fleet_route_abandon(struct rl_fleet_route *r,
                            const struct rl_fleet_call *call,
                            const struct rl_fleet_late *late);

/* ---- pacing: a node that failed is tried again once per retry_ns -------*/

/* May a decision for node i go to Redis now: the node is up, or it is
 * down and this caller claims its next try (one per retry_ns, whichever
 * thread comes first)? */
bool rl_fleet_route_may_try(struct rl_fleet_route *r, int i, uint64_t now,
                            uint64_t retry_ns);

/* Node i failed (at host time `now`): down until now + retry_ns. Returns
 * true when it was up (the first failure of an outage). */
bool rl_fleet_route_failed(struct rl_fleet_route *r, int i, uint64_t now,
                           uint64_t retry_ns);

/* Node i answered. Returns true when it was down (a return). */
bool rl_fleet_route_answered(struct rl_fleet_route *r, int i);

/* Every down node may be tried at once (another process of the host saw
 * Redis back). */
void rl_fleet_route_try_now(struct rl_fleet_route *r);

/* Is node i silent: nothing from it for `ns` while replies were owed
 * (coarse clock `cnow`; fleet_pipe.h's rl_fleet_pipe_quiet_ns)? A call
 * that timed out on a node that is not silent was late behind others (a
 * loaded host), not met by an absent Redis. */
bool rl_fleet_route_silent(struct rl_fleet_route *r, int i, uint64_t cnow,
                           uint64_t ns);

/* Is node i answering (not down)? */
bool rl_fleet_route_up(struct rl_fleet_route *r, int i);

/* In the child after fork: every connection is the parent's (dropped);
 * what r learnt of the cluster stays. */
void rl_fleet_route_atfork_child(struct rl_fleet_route *r);

#endif
