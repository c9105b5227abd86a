/* reload.h — a running process follows its config file (SPEC §16).
 *
 * At most once a second, on a call that needs the config, the process
 * compares the file's identity (util/cfgwatch.h) with the one it read
 * and, when it changed, reads it again and sets the gate up anew from its
 * next decision. Between looks the cost is one coarse-clock read and a
 * compare (rl_reload_due).
 *
 * What an edit keeps: a segment is named by the budget-shaping hash of
 * the whole config (§5), so an edit that shapes no budget differently
 * opens the same segment and every budget is found again, pauses and
 * adapted intervals with them. An edit that reshapes some section opens a
 * new segment; the user's own budget, when its limits are unchanged,
 * carries its spent units across (a token bucket's word is raised to the
 * old one's, never lowered, so two processes carrying it agree).
 *
 * The fleet (fleet/fleet.h) is the process's, not a generation's: it is
 * set up once and kept, so an edit is followed only when it leaves the
 * fleet's settings alone (`fleet`, `fleet_password`, `fleet_fallback`);
 * the new generation's fleet budgets are decided on the same connections,
 * under their new limits and labels (gate_int.h's fleet_named).
 *
 * How threads see it: what a config derives (the gate, the sites, the
 * per-destination table) is one generation (policy/proc.h's struct
 * rl_gen). A reload builds the next one aside and publishes it with one
 * release store; each decision loads the pointer once and uses that
 * generation throughout, so a decision is made under one config's rules
 * whatever another thread does meanwhile (tests/unit/test_reload_threads.c).
 *
 * Why retired configs are kept, not freed: a thread of the program may be
 * in the middle of a decision on the old config (its rules, its sites'
 * and destinations' tables, its budgets) when another thread reloads, and
 * no hook may pay for a reference count or a grace period on every call.
 * So nothing a decision may hold is ever freed: the config, the tables
 * and the budgets of each config read stay until exit, and a process
 * follows at most RL_RELOAD_MAX edits (then says so once, and keeps the
 * last config it read): a bound on what is kept, a few KB each. */
#ifndef RL_POLICY_RELOAD_H
#define RL_POLICY_RELOAD_H

#include <stdbool.h>
#include <stdint.h>

#include "policy/proc.h"
#include "util/clock.h"

#define RL_RELOAD_MAX 64u

struct rl_rule;

/* Start following the file from now, with the identity it had just
 * before the config in use was read (or had none). */
void rl_reload_start(struct rl_proc *p, const struct rl_cfgid *id);

/* Is a look at the file due? The only test a decision makes. */
static inline bool rl_reload_due(struct rl_proc *p)
{
    return rl_cfgwatch_due(&p->watch.w, rl_clock_coarse_ns());
}

/* rl_reload_due by a CLOCK_MONOTONIC reading the decision takes anyway
 * (rl_clock_now_ns): the coarse clock is the same clock a tick behind,
 * so a look is due by either; a decision that reads the fine clock for
 * its own use reads no second one. */
static inline bool rl_reload_due_at(struct rl_proc *p, uint64_t now)
{
    return rl_cfgwatch_due(&p->watch.w, now);
}

/* The look, when due (one thread a second; the others return at once),
 * and the reload when the file changed. What the process is now:
 * RL_PROC_READY (a config is applied and the gate acts), RL_PROC_OFF
 * (nothing is throttled), RL_PROC_PENDING (a config appeared in a process
 * that never set up: the caller runs the first set-up). */
enum rl_proc_state rl_reload_look(struct rl_proc *p);
/* The same, claimed at the caller's reading of either monotonic clock. */
enum rl_proc_state rl_reload_look_at(struct rl_proc *p, uint64_t now);

/* In a fork child (proc.c's RL_PROC_FORKED): under key = cgroup, the
 * child's first decision looks again at its cgroup and, when it moved,
 * sets the gate up for its new key (SPEC §16). */
void rl_reload_atfork_child(struct rl_proc *p);

/* Do two sections shape their budgets alike (the same limits, algorithms
 * and table sizes)? A budget of `a` keeps its state under `b` when so. */
bool rl_reload_same_shape(const struct rl_rule *a, const struct rl_rule *b);

#endif
