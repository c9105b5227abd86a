/* pace.h — a request's decision honours its destination's pace
 * (SPEC §14): the spacing that latency and Crawl-delay ask for, and
 * jitter. The pace's words live in the destination's entry of the pause
 * table (policy/pauses.h); their arithmetic is limit/adapt.h's. Here:
 * how long the pace holds a request before its limit's take, the jitter
 * of its turn, and the record of the turn it was granted, which spaces
 * the next request of every process of the user. */
#ifndef RL_POLICY_PACE_H
#define RL_POLICY_PACE_H

#include <stdbool.h>
#include <stdint.h>

#include "limit/adapt.h"
#include "policy/config.h"
#include "policy/pauses.h"

/* Does section r keep a pace per destination: a request limit, and
 * adapt = latency, crawl_delay = obey or jitter above 0? A section that
 * keeps none costs its requests nothing here. */
bool rl_pace_kept(const struct rl_rule *r);

/* What section r says, in adapt.h's units: the floor is one request's
 * turn at the slowest request limit (gate_pause.c's rl_pause_one_turn);
 * a Crawl-delay counts for nothing under crawl_delay = ignore. */
void rl_pace_conf(const struct rl_rule *r, struct rl_adapt_conf *out);

/* Tries before a write of a word gives up on a table many processes
 * write at once: each failed one means another process wrote it. */
#define RL_PACE_TRIES 8

/* One destination's pace as a decision sees it: its table, its entry's
 * key and label (set: key, rule index + 1, "USER|NAME"), the section. */
struct rl_pace {
    struct rl_pauses table;
    struct rl_pause_set set;
    struct rl_adapt_conf conf;
    const struct rl_rule *rule;
};

/* The turn a request may have at `now` whose limit would let it go at
 * `turn`: later when the latency or a Crawl-delay spaces it from the
 * last turn granted (*why says which; RL_ADAPT_RATE: not held). Reads
 * the words, changes nothing. */
uint64_t rl_pace_turn(const struct rl_pace *pc, uint64_t now, uint64_t turn,
                      enum rl_adapt_why *why);

/* Record `*turn`, granted at `now`, as the destination's last turn,
 * when something paces it (a latency or Crawl-delay in force, or
 * adapt = latency: the next response may set one). Another process that
 * recorded a turn since this one was computed may make it later: *turn
 * moves then (never earlier; *why says why), or, past `latest`, nothing
 * is recorded and -1 says the request may not go at its turn. Returns 1
 * when *turn moved, else 0. A table whose lock cannot be had records
 * nothing (the spacing of one request lost, never a request held). */
int rl_pace_record(struct rl_pace *pc, uint64_t now, uint64_t *turn,
                   uint64_t latest, enum rl_adapt_why *why);

/* Jitter (SPEC §14): how much later a turn goes, a uniform part of
 * `percent` % of `interval_ns` drawn from `random`. */
uint64_t rl_pace_jitter_ns(uint64_t interval_ns, uint32_t percent,
                           uint64_t random);

/* A 64-bit word for jitter from a counter the caller bumps (any thread;
 * `salt` tells processes apart: a decision's clock reading). */
uint64_t rl_pace_random(uint64_t counter, uint64_t salt);

#endif
