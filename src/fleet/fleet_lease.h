/* fleet_lease.h — a host's lease of fleet send units (SPEC §8 "never
 * over-admit"), kept in the host segment so that every process of the
 * host spends from it with no round trip to Redis.
 *
 * The lease is a pool per kind (send, send_bytes) in the budget's slot:
 * units Redis already counted as spent (fleet.c takes them in the same
 * script as a call's own units), so nothing can be over-admitted, only
 * under-used by what the pool holds. Invariants:
 * - A pool word packs units left (bits 0-39) and units spent from it by
 *   the fast path and not yet counted (bits 40-63). Changed only by CAS
 *   (or exchange): a unit is spent by exactly one call.
 * - Units are spent only while the pool is fresh: used within
 *   RL_FLEET_LEASE_IDLE_NS and filled within RL_FLEET_LEASE_MAX_AGE_NS.
 *   A stale pool is never spent from; the next decision of any process
 *   of the host that goes to Redis gives what it holds back (in the same
 *   script as its own take), and so does a process at exit.
 * - Redis grants a lease only while its bucket keeps half its burst after
 *   it, and a lease is at most 1/16 of the burst: one host cannot starve
 *   the others, and a limit that binds is decided call by call.
 * - Lease sizes follow the host's recent take rate (units per second the
 *   host took from Redis, measured over RL_FLEET_RATE_WINDOW_NS):
 *   RL_FLEET_LEASE_HORIZON_NS of it. A host sending slowly (a curl per
 *   page) takes no lease at all, and pays no give-back at exit.
 * - A process killed holding a lease in flight (granted by Redis, not yet
 *   in the pool) loses that lease: under-use, never over-use.
 * - One process of the host refills at a time (the refill claim, stale
 *   after RL_FLEET_CLAIM_NS: a killed claimer blocks no one); the others
 *   meanwhile decide their calls in Redis as without a lease. */
#ifndef RL_FLEET_LEASE_H
#define RL_FLEET_LEASE_H

#include <stdbool.h>
#include <stdint.h>

#include "model/config.h"
#include "util/atomics.h"

/* Words a fleet budget's slot gives its pool (16 used, aligned to a
 * cache line inside). */
#define RL_FLEET_POOL_AREA_WORDS 24u

#define RL_FLEET_LEASE_IDLE_NS 8000000u      /* 8 ms of the coarse clock */
#define RL_FLEET_LEASE_MAX_AGE_NS 200000000u /* a lease is spent within */
#define RL_FLEET_LEASE_HORIZON_NS 50000000u  /* of the host's rate */
#define RL_FLEET_RATE_WINDOW_NS 100000000u
#define RL_FLEET_CLAIM_NS 100000000u

#define RL_FLEET_LEFT_BITS 40
#define RL_FLEET_LEFT_MASK ((1ull << RL_FLEET_LEFT_BITS) - 1)
#define RL_FLEET_SPENT_MAX ((1ull << (64 - RL_FLEET_LEFT_BITS)) - 1)

/* One budget's pool: its words and the `allowed` counters (per kind) its
 * spent units are counted into. */
struct rl_fleet_pool {
    rl_atomic_u64 *w;
    rl_atomic_u64 *allowed[RL_KIND_COUNT];
};

/* Can rule's sends be leased from the fleet (scope = fleet, every limit
 * of send and send_bytes a token bucket, one of them limited)? */
bool rl_fleet_leasable(const struct rl_rule *rule);

/* The pool in a slot's area (RL_FLEET_POOL_AREA_WORDS from `area`), with
 * the slot's `allowed` counters: kind k's at allowed + k * stride (the
 * slot's counters are state's: fleet never reads their layout). NULL:
 * none. */
void rl_fleet_pool_at(rl_atomic_u64 *area, rl_atomic_u64 *allowed,
                      unsigned stride, struct rl_fleet_pool *p);

/* The fast path: one send call (calls 0 or 1) of `bytes` out of the
 * pool, when it is fresh and holds them all; the spent units are
 * counted later (rl_fleet_pool_fold). */
bool rl_fleet_lease_take(const struct rl_fleet_pool *p, uint64_t calls,
                         uint64_t bytes);

/* Give back to the pool what a call granted by rl_fleet_lease_take did
 * not use (and take it off `allowed`). */
void rl_fleet_lease_refund(const struct rl_fleet_pool *p, uint64_t calls,
                           uint64_t bytes);

/* ---- for fleet.c: the slow path (a decision that may go to Redis) ---- */

/* Take between min and want units of `kind` from a fresh pool, counted by
 * the caller (the gate counts a decision's grant). 0: none. */
uint64_t rl_fleet_pool_get(const struct rl_fleet_pool *p, int kind,
                           uint64_t want, uint64_t min, uint64_t cnow);

/* When the pool is stale: empty `kind`'s pool, count what was spent from
 * it, and return the units left (to give back to Redis). */
uint64_t rl_fleet_pool_claim_stale(const struct rl_fleet_pool *p, int kind,
                                   uint64_t cnow);

/* Empty `kind`'s pool whatever its age (process exit): as above. */
uint64_t rl_fleet_pool_drain(const struct rl_fleet_pool *p, int kind);

/* How many units of `kind` to ask Redis for ahead, for a call of `want`
 * of them, and the refill claim taken when more than 0 (release it with
 * rl_fleet_pool_filled). */
uint64_t rl_fleet_pool_lease_size(const struct rl_fleet_pool *p,
                                  const struct rl_rule *rule, int kind,
                                  uint64_t want, uint64_t cnow);

/* After the round trip: `leased` units into the pool (fresh), the host's
 * take rate told that `took` units came from Redis and `gave` went back,
 * and the refill claim released when `claimed`. */
void rl_fleet_pool_filled(const struct rl_fleet_pool *p, int kind,
                          uint64_t leased, uint64_t took, uint64_t gave,
                          bool claimed, uint64_t cnow);

#endif
