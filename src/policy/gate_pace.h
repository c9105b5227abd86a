/* gate_pace.h — a request's decision and its destination's pace (SPEC
 * §14): gate_decide.c's two steps, before the take and after the grant
 * (gate_pace.c; the words' side is policy/pace.h). */
#ifndef RL_POLICY_GATE_PACE_H
#define RL_POLICY_GATE_PACE_H

#include <stdbool.h>
#include <stdint.h>

struct rl_proc;
struct rl_gate_ticket;

/* Before the take: the hold (ns after t->now) the pace of t's charges
 * asks of the request, at least `from` (a pause's); t->reason says why
 * when the pace holds it longer. *jitter: how much later than its
 * granted turn the request goes (0 in fail mode, which cannot move it). */
uint64_t rl_gate_pace_hold(struct rl_proc *p, struct rl_gate_ticket *t,
                           uint64_t from, uint64_t *jitter);

/* After the grant (t->wait_ns its turn): the turn recorded in each
 * charge's pace. A turn another process recorded meanwhile may make this
 * one later (t->wait_ns grows, t->reason says why); past a section's
 * max_delay (fail mode: any later) false, t->denier and t->retry_ns set:
 * the caller gives back what was taken and denies the request. */
bool rl_gate_pace_went(struct rl_proc *p, struct rl_gate_ticket *t);

#endif
