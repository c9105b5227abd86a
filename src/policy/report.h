/* report.h — the exit report (`report = yes`): what this process decided,
 * per limit of its rule and of each site it used, each under its own
 * section's name, counted by the same decisions that count the segment's
 * counters, so that it says the same truth as `rlshim stat`. */
#ifndef RL_POLICY_REPORT_H
#define RL_POLICY_REPORT_H

#include <stdbool.h>
#include <stdint.h>

#include "policy/config.h"

struct rl_report;
struct rl_proc;

/* Add n to this process's (kind, stat) count of the user's rule; nothing
 * when the report is off. Relaxed: read once, at exit. */
void rl_report_add(struct rl_report *r, int kind, int stat, uint64_t n);

/* Take n off, never below zero. */
void rl_report_sub(struct rl_report *r, int kind, int stat, uint64_t n);

/* The same for section `sec`'s count: a site's, else (NULL, or the user's
 * rule) the rule's. Async-signal-safe. */
void rl_report_add_in(struct rl_report *r, const struct rl_rule *sec,
                      int kind, int stat, uint64_t n);
void rl_report_sub_in(struct rl_report *r, const struct rl_rule *sec,
                      int kind, int stat, uint64_t n);

/* n requests of section sec answered under on_deny = respond (SPEC §15),
 * counted apart from the denied ones. Async-signal-safe. */
void rl_report_add_responded(struct rl_report *r, const struct rl_rule *sec,
                             uint64_t n);

/* Count each site's calls apart (rl_gate_report_enable, after the gate's
 * set-up and before any decision). Returns 0 or -ENOMEM (then a site's
 * calls are counted with the rule's). */
int rl_report_setup(struct rl_report *r, const struct rl_config *cfg);

/* One TLS connection to `sa` (NULL: not known) whose plaintext the shim
 * cannot see (TLS built into the program: SPEC §11), so its requests are
 * not counted. The request layer calls it once per such connection.
 * Counted only in the sections whose `request` limit covers the
 * connection (the user's rule when its `to` does, and the site the
 * destination picks): each one's for this process (the exit report's "N
 * TLS connections: requests not counted" line under that section) and
 * in its budget in the segment (`rlshim stat`: "TLS connections not
 * counted"). May claim a site's slot (not from a signal handler). True
 * the first time in p that a section covered one (the one time the
 * request layer says so on stderr); false too when none covers it. */
bool rl_report_tls_unseen(struct rl_proc *p, const void *sa, unsigned salen);

/* Write the report's lines to stderr (rl_gate_finish, when on). */
void rl_report_write(struct rl_proc *p);

#endif
