/* fleet.h — budgets shared by every host on one Redis (SPEC §8).
 *
 * A rule with `scope = fleet` is decided in Redis by one Lua script per
 * kind and call (fleet_scripts.h), on Redis's clock, at the node that
 * holds the budget (fleet_route.h: one Redis, or a Redis Cluster's master
 * of the budget's slot). Each node has one connection per process, on
 * which every thread's calls are pipelined (fleet_pipe.h): a decision
 * waits for its own reply only, at most RL_FLEET_WAIT_NS, and a
 * connection's set-up has a bound of its own (RL_FLEET_OPEN_NS), as has
 * the first reply of a host that does not know yet how many hosts share
 * its budgets (its share would be all of them).
 *
 * While a node is away (no reply in time, or none at all) the config's
 * fleet_fallback decides its budgets on the host budget (the rule's own
 * slot, unused otherwise); one stderr line says so per process; the node
 * is tried again at most once a second, or at once when another process
 * of the host saw Redis answer again (the host's "back" word). What was
 * admitted meanwhile is charged when it is back (fleet_settle.h: a reply
 * that came late is settled, so nothing is charged twice), and for a
 * while after a return each host admits no more than its share, so the
 * hosts still away and those back do not add up to more than the rate.
 *
 * Every system call made here goes through rl_sys (util/sys.h), never a
 * name the shim hooks: the shim's own sockets, reads and writes are never
 * charged, logged or marked, whatever flag the calling thread holds. */
#ifndef RL_FLEET_H
#define RL_FLEET_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fleet/fleet_addr.h"
#include "fleet/fleet_route.h"
#include "fleet/fleet_settle.h"
#include "limit/limit.h"
#include "model/config.h"
#include "util/atomics.h"

#define RL_FLEET_WAIT_NS 50000000u    /* 50 ms: the longest wait on Redis */
#define RL_FLEET_OPEN_NS 200000000u   /* a connection's set-up, apart */
#define RL_FLEET_RETRY_NS 1000000000u /* 1 s between tries while away */
/* A reply late while Redis answers others (a busy host, many threads on
 * one pipelined connection) is waited for this long from the call's
 * start: Redis is away only when it said nothing for RL_FLEET_WAIT_NS. */
#define RL_FLEET_LATE_NS 1000000000u
/* A budget Redis said no to is asked again by one thread of the process
 * at a time: the others are denied here for this long meanwhile. */
#define RL_FLEET_PROBE_NS 5000000u
/* After a return, how long a host keeps to its share as well: every
 * host still away tries again within RL_FLEET_RETRY_NS, and a try whose
 * reply was late once more within the next. */
#define RL_FLEET_SETTLE_NS (2 * RL_FLEET_RETRY_NS + 100000000ull)

/* The host segment's fleet words (state/layout.h): the coarse clock of
 * the host's latest return from an outage, and the most hosts a reply
 * counted lately (a new process's share before its first reply). */
enum { RL_FLEET_HOST_BACK = 0, RL_FLEET_HOST_HOSTS = 1 };

/* A process's fleet: everything its decisions share (a member of struct
 * rl_proc; all zero, in .bss: a process with no fleet pays no page for it
 * at load). Only what the comments say is shared between threads, and
 * how: the rest is set by rl_fleet_init before any decision. */
struct rl_fleet {
    const struct rl_config *cfg;
    struct rl_fleet_addr addr;
    char label[160]; /* the user's rule budget's */
    char host[40];   /* this host's id in the hosts sets */
    bool on;
    atomic_flag warned;  /* the stderr line went out */
    char warning[512];   /* its text: only the thread that set warned */
    rl_atomic_u64 hosts; /* last counted by a reply; 0 until then */
    rl_atomic_u64 seq;   /* calls made (their ids) */
    rl_atomic_u64 gen;   /* outages ended: a new one drains again */
    rl_atomic_u64 back;  /* coarse clock of this process's last return */
    struct rl_fleet_budgets budgets;
    struct rl_fleet_route route;
};

/* Set f up for cfg (its `fleet` set) and the budget `label`
 * ("SECTION|USER"). Opens nothing yet. Returns 0 or -errno. */
int rl_fleet_init(struct rl_fleet *f, const struct rl_config *cfg,
                  const char *label);

/* The config's budgets were reshaped (a reload, SPEC §16): what Redis
 * said no to under the old limits is forgotten, so the next call of each
 * budget asks Redis under the new ones. The rest of f (its connections,
 * route, lease, away state, debts) is kept as it is. */
void rl_fleet_reopen(struct rl_fleet *f);

/* Is `rule` decided in Redis (scope = fleet, and f set up)? */
bool rl_fleet_decides(const struct rl_fleet *f, const struct rl_rule *rule);

struct rl_fleet_pool;

/* How far a request budget's pause in Redis moved a decision's turn
 * (SPEC §12), when rl_fleet_take is asked for a request. */
enum { RL_FLEET_PACED_NOT, RL_FLEET_PACED_LATENCY, RL_FLEET_PACED_CRAWL };

struct rl_fleet_paused {
    uint64_t ns;  /* 0: not paused */
    bool backoff; /* the backoff's pause (else a server's Retry-After) */
    int paced;    /* RL_FLEET_PACED_*: the destination's
                     pace in Redis (SPEC §14) moved the turn */
};

/* Take between min and want units of `kind` from the fleet budget of
 * `rule` named `label` (NULL: the user's rule budget of rl_fleet_init; a
 * site's "site:S|USER", a per-destination one "SECTION|USER|NAME"), as
 * rl_multi_take does locally; `states` (the rule's host slot) serve the
 * fallback and the share after a return. `pool` (NULL: none) is the
 * host's lease of send units (fleet_lease.h): spent first, given back
 * when stale and filled again by this call's round trip. `host` (NULL:
 * none) are the host segment's fleet words (RL_FLEET_HOST_*). `now` is
 * the host's clock, used only to pace the retries: Redis's own clock
 * decides. For a request, the pause in Redis of its destination `dest`
 * (NULL: not told) and of the untold destinations is waited for too (its
 * turn and max_wait_ns are from now), and *paused (NULL: not asked) says
 * how far it moved the turn. The turn is counted no earlier than
 * not_before_ns from now (this host's own hold: SPEC §14's jitter, a
 * pause or pace it knows of), so that every host spaces its next turn
 * from when this one goes; a turn granted goes jitter_ns later (within
 * max_wait_ns), counted then. */
struct rl_verdict
rl_fleet_take(struct rl_fleet *f, const struct rl_rule *rule, const char *label,
              const char *dest, int kind, rl_word *const *states,
              const struct rl_fleet_pool *pool, rl_atomic_u64 *host,
              uint64_t now, uint64_t want, uint64_t min, uint64_t max_wait_ns,
              uint64_t not_before_ns, uint64_t jitter_ns,
              struct rl_verdict *v, struct rl_fleet_paused *paused);

/* A 429/503 from destination `dest` (NULL: not told) paused the request
 * budget named `label` (as rl_fleet_take names it) for `wait_ns` (a
 * Retry-After, or this host's backoff): the pause goes to Redis, ending at
 * Redis's now + wait unless it ends later already, and every host's
 * requests of that budget to that destination wait for it (their script
 * reads it; an untold destination's pause holds them all). Returns 0, or
 * -errno when Redis cannot be reached now (the pause then stays this
 * host's). Bounded like every wait on Redis. */
int rl_fleet_pause(struct rl_fleet *f, const char *label, const char *dest,
                   uint64_t wait_ns, bool backoff);

/* The pace of destination `dest` (NULL: not told) of the request budget
 * named `label` moved on this host (SPEC §14): its latency interval
 * (crawl false) or Crawl-delay (true) is now `value_ns` (0: none), for
 * `ttl_ns`. It goes to Redis beside the destination's pause, and every
 * host's request script spaces that destination's turns by it from the
 * last turn granted. Returns 0, or -errno when Redis cannot be reached
 * now (the pace then stays this host's). Bounded like every wait on
 * Redis. */
int rl_fleet_pace(struct rl_fleet *f, const char *label, const char *dest,
                  bool crawl, uint64_t value_ns, uint64_t ttl_ns);

/* At exit: the host's unspent leased units (pool, NULL: none) go back to
 * Redis, and what the process spent of the user's rule budget while Redis
 * was away is charged, when this process has a connection to it (bounded
 * like every wait on Redis). */
void rl_fleet_finish(struct rl_fleet *f, const struct rl_rule *rule,
                     const struct rl_fleet_pool *pool);

/* In the child after fork: drop the parent's connections (the child opens
 * its own) and what its threads were doing on them, without touching
 * either; the debts are the parent's to charge. */
void rl_fleet_atfork_child(struct rl_fleet *f);

/* Is Redis answering now (every node the process uses)? */
bool rl_fleet_up(const struct rl_fleet *f);

/* For `rlshim check` (fleet_ping.c): connect to cfg's Redis,
 * authenticate, PING, load the scripts. Returns 0 and the round trip in
 * *rtt_ns, or -errno and why in `why`. A connection of its own, closed
 * before return. */
int rl_fleet_ping(const struct rl_config *cfg, uint64_t *rtt_ns, char *why,
                  size_t whylen);

#endif
