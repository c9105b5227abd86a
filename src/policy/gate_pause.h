/* gate_pause.h — a request budget's pause (SPEC §12; gate_pause.c says
 * what its two words hold), for the decision (gate_decide.c) and for
 * `rlshim stat`. The outcome that sets a pause is in gate.h. */
#ifndef RL_POLICY_GATE_PAUSE_H
#define RL_POLICY_GATE_PAUSE_H

#include <stdbool.h>
#include <stdint.h>

#include "policy/config.h"
#include "policy/gate.h"

/* Does section r listen to 429/503 (retry_after = obey, and a request
 * limit to pause)? */
bool rl_pause_obeyed(const struct rl_rule *r);

/* Does section r's backoff_on list `cause` (an HTTP status, or
 * limit/adapt.h's RL_ADAPT_CAUSE_RESET / _TIMEOUT)? */
bool rl_pause_backoff_on(const struct rl_rule *r, unsigned cause);

/* Is a Retry-After on a response of `status` obeyed by section r (one
 * that obeys pauses)? Always on 429 and 503; on another 5xx when
 * backoff_on lists it. */
bool rl_pause_retry_after_obeyed(const struct rl_rule *r, unsigned status);

/* The end of the pause a paused-until word holds (ns; 0: none). */
uint64_t rl_pause_end(uint64_t word);

/* ns from `now` until charge c's pause ends (0: not paused, or its section
 * ignores pauses); when paused, *reason is "retry_after" or "backoff". */
uint64_t rl_pause_left(const struct rl_gate_charge *c, uint64_t now,
                       const char **reason);

/* Section r's turn: the time one request takes in its slowest request
 * limit (request = 1/s: 1 s; 60/min: 1 s; 100/h: 36 s), the pause of a
 * 429/503 that said nothing, before doubling, and the floor of its pace
 * (policy/pace.h). At least 1. */
uint64_t rl_pause_one_turn(const struct rl_rule *r);

/* The reason a paused-until word gives ("retry_after" or "backoff"). */
const char *rl_pause_reason(uint64_t word);

/* Another host's pause of a fleet budget, as its Redis script reported
 * it (gate_take.c): the pause table shows it too for charge c's
 * destination (t->dest), ending `ns` after t->now unless it ends later
 * already. */
struct rl_proc;
void rl_pause_mirror(struct rl_proc *p, const struct rl_gate_ticket *t,
                     const struct rl_gate_charge *c, uint64_t ns,
                     bool backoff);

#endif
