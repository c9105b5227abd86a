/* fleet.h — budgets shared by every host on one Redis (SPEC §8).
 *
 * A rule with `scope = fleet` is decided in Redis by one Lua script per
 * kind and call (fleet_scripts.h), on Redis's clock. The process keeps one
 * connection (opened on its first decision, re-opened by a forked child,
 * and when a close_range/closefrom sweep took it), used by one thread at a
 * time; every wait on it, the lock included, is bounded by
 * RL_FLEET_WAIT_NS. While Redis is away the config's fleet_fallback
 * decides, on the host budget (the rule's own slot, unused otherwise), one
 * stderr line says so per process, and Redis is tried again at most once a
 * second; what was admitted meanwhile is charged when it is back.
 *
 * Every system call made here goes through rl_sys (util/sys.h), never a
 * name the shim hooks: the shim's own sockets, reads and writes are never
 * charged, logged or marked, whatever flag the calling thread holds. The
 * connection and its protocol are fleet_conn.h's. */
#ifndef RL_FLEET_H
#define RL_FLEET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fleet/fleet_addr.h"
#include "fleet/fleet_conn.h"
#include "limit/limit.h"
#include "policy/config.h"
#include "util/atomics.h"

#define RL_FLEET_WAIT_NS 50000000u    /* 50 ms: the longest wait on Redis */
#define RL_FLEET_RETRY_NS 1000000000u /* 1 s between tries while away */

/* What the process keeps per fleet budget: the user's rule budget has its
 * own; a site's and per-destination budgets (named by their label) get one
 * of a small table, claimed by the label's hash. */
struct rl_fleet_budget {
    rl_atomic_u64 tag;                 /* label hash | 1; 0: free */
    rl_atomic_u64 debt[RL_KIND_COUNT]; /* admitted while away */
    /* Host clock until which Redis said no to one unit of a kind: calls
     * before then are denied here, with no round trip (a denied client
     * that retries at once must not become a storm on one key). */
    rl_atomic_u64 closed_until[RL_KIND_COUNT];
    /* gen + 1 when this outage's host budget was drained. */
    rl_atomic_u64 drained[RL_KIND_COUNT];
};
#define RL_FLEET_BUDGETS 64

/* The process's side of the fleet (a member of struct rl_proc). All zero,
 * in .bss: a process with no fleet pays no page for it at load
 * (rl_fleet_init gives the connection its -1). */
struct rl_fleet {
    const struct rl_config *cfg;
    struct rl_fleet_addr addr;
    char label[160];
    char host[40]; /* this host's id in the hosts sets */
    bool on;
    /* 0 free, 1 held, 2 held with waiters (futex word): a forked child
     * starts it afresh with a store, whoever held it in the parent. */
    _Atomic uint32_t lock;
    struct rl_fleet_conn conn;
    char sha[2][41];
    atomic_bool down;
    rl_atomic_u64 next_try; /* host clock: no try before */
    atomic_flag warned;
    /* The "Redis away" line, formatted while the lock is held and written
     * after it; only the thread that set `warned` touches it. */
    char warn_line[512];
    rl_atomic_u64 hosts; /* last seen; 1 until then */
    rl_atomic_u64 seq;
    rl_atomic_u64 gen; /* Redis answers seen: a new one ends an outage */
    struct rl_fleet_budget own; /* the user's rule budget (label) */
    struct rl_fleet_budget others[RL_FLEET_BUDGETS];
};

/* Set f up for cfg (its `fleet` set) and the budget `label`
 * ("SECTION|USER"). Opens nothing yet. Returns 0 or -errno. */
int rl_fleet_init(struct rl_fleet *f, const struct rl_config *cfg,
                  const char *label);

/* Is `rule` decided in Redis (scope = fleet, and f set up)? */
bool rl_fleet_decides(const struct rl_fleet *f, const struct rl_rule *rule);

struct rl_fleet_pool;

/* How far a request budget's pause in Redis moved a decision's turn
 * (SPEC §12), when rl_fleet_take is asked for a request. */
struct rl_fleet_paused {
    uint64_t ns;  /* 0: not paused */
    bool backoff; /* the backoff's pause (else a server's Retry-After) */
};

/* Take between min and want units of `kind` from the fleet budget of
 * `rule` named `label` (NULL: the user's rule budget of rl_fleet_init; a
 * site's "site:S|USER", a per-destination one "SECTION|USER|NAME"), as
 * rl_multi_take does locally; `states` (the rule's host slot) serve the
 * fallback. `pool` (NULL: none) is the host's lease of send units
 * (fleet_lease.h): spent first, given back when stale and filled again by this
 * call's round trip. `now` is the host's clock, used only to pace the retries:
 * Redis's own clock decides. What is granted here is never given back (a refund
 * would only ever lower use). For a request, the budget's pause in Redis
 * is waited for too (its turn and max_wait_ns are from now), and
 * *paused (NULL: not asked) says how far it moved the turn. */
struct rl_verdict rl_fleet_take(struct rl_fleet *f, const struct rl_rule *rule,
                                const char *label, int kind,
                                rl_word *const *states,
                                const struct rl_fleet_pool *pool, uint64_t now,
                                uint64_t want, uint64_t min,
                                uint64_t max_wait_ns, struct rl_verdict *v,
                                struct rl_fleet_paused *paused);

/* A 429/503 paused the request budget named `label` (as rl_fleet_take
 * names it) for `wait_ns` (a Retry-After, or this host's backoff): the
 * pause goes to Redis, ending at Redis's now + wait unless it ends later
 * already, and every host's requests of that budget wait for it (their
 * script reads it). Returns 0, or -errno when Redis cannot be reached
 * now (the pause then stays this host's). Bounded like every wait on
 * Redis. */
int rl_fleet_pause(struct rl_fleet *f, const char *label, uint64_t wait_ns,
                   bool backoff);

/* At exit: the host's unspent leased units go back to Redis, when this
 * process has a connection to it (bounded like every wait on Redis). */
void rl_fleet_finish(struct rl_fleet *f, const struct rl_rule *rule,
                     const struct rl_fleet_pool *pool);

/* In the child after fork: drop the parent's connection (the child opens
 * its own) and start the lock afresh, without touching either. */
void rl_fleet_atfork_child(struct rl_fleet *f);

/* Is Redis answering now (for tests and `rlshim check`)? */
bool rl_fleet_up(const struct rl_fleet *f);

/* For `rlshim check`: connect to cfg's Redis, authenticate, PING, load the
 * scripts. Returns 0 and the round trip in *rtt_ns, or -errno and why in
 * `why`. A connection of its own, closed before return. */
int rl_fleet_ping(const struct rl_config *cfg, uint64_t *rtt_ns, char *why,
                  size_t whylen);

#endif
