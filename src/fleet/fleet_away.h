/* fleet_away.h — a fleet budget while its Redis is away (SPEC §8): the
 * host's share of the limits, the four fallbacks, and the share kept for
 * a while after Redis is back. On the host budget (the rule's own slot,
 * unused while Redis decides) and the process's struct rl_fleet; no I/O.
 * For fleet.c. */
#ifndef RL_FLEET_AWAY_H
#define RL_FLEET_AWAY_H

#include <stdbool.h>
#include <stdint.h>

#include "fleet/fleet.h"

/* Hosts to divide the limits by: the last reply's count, or the host's
 * (another process's reply, in the host's words) when larger; 0 when no
 * reply ever said. */
uint64_t rl_fleet_hosts_known(struct rl_fleet *f, rl_atomic_u64 *host);

/* This host's share of the limits, from the host budget `states`: each
 * unit costs `hosts` units of it (a rate and burst divided by hosts). */
struct rl_verdict rl_fleet_share(struct rl_fleet *f, const struct rl_rule *rule,
                                 int kind, rl_word *const *states,
                                 rl_atomic_u64 *host, uint64_t now,
                                 uint64_t want, uint64_t min,
                                 uint64_t max_wait_ns, struct rl_verdict *v);

/* Give back to the host budget `units` of a share taken. */
void rl_fleet_unshare(struct rl_fleet *f, const struct rl_rule *rule, int kind,
                      rl_word *const *states, rl_atomic_u64 *host, uint64_t now,
                      struct rl_verdict *v, uint64_t units);

/* The config's fleet_fallback decides `kind` of budget st (NULL: one the
 * table could not hold) without Redis; what it grants is owed to Redis as
 * st's debt. `drain`: an outage begins (not a call alone late): the host
 * budget, full while Redis decided, is emptied first, once an outage. */
struct rl_verdict
rl_fleet_fallback(struct rl_fleet *f, struct rl_fleet_budget *st,
                  const struct rl_rule *rule, int kind, rl_word *const *states,
                  rl_atomic_u64 *host, bool drain, uint64_t now, uint64_t want,
                  uint64_t min, uint64_t max_wait_ns, struct rl_verdict *v);

/* rl_fleet_fallback as Redis would decide a request (SPEC §14 jitter,
 * prelude.lua): counted no earlier than the host's hold (not_before_ns),
 * and a turn granted goes jitter_ns later (within max_wait_ns), given
 * back and counted again then, so that the next turn is spaced from when
 * this one goes; when the later turn cannot be had, the earlier one.
 * Without jitter it is rl_fleet_fallback (the caller waits the hold). */
struct rl_verdict rl_fleet_fallback_jittered(
    struct rl_fleet *f, struct rl_fleet_budget *st, const struct rl_rule *rule,
    int kind, rl_word *const *states, rl_atomic_u64 *host, bool drain,
    uint64_t now, uint64_t want, uint64_t min, uint64_t max_wait_ns,
    uint64_t not_before_ns, uint64_t jitter_ns, struct rl_verdict *v);

/* Is the host (or this process) within RL_FLEET_SETTLE_NS of a return,
 * when every host keeps to its share as well (fleet_fallback = share)? */
bool rl_fleet_settling(struct rl_fleet *f, rl_atomic_u64 *host, uint64_t cnow);

/* A node answered again after an outage: this process and (through the
 * host's word) every other of the host come back, and keep to their share
 * for a while. */
void rl_fleet_returned(struct rl_fleet *f, rl_atomic_u64 *host, uint64_t cnow);

#endif
