/* report.h — the exit report (`report = yes`): what this process decided,
 * per limit of its rule, counted by the same decisions that count the
 * segment's counters, so that it says the same truth as `rlshim stat`. */
#ifndef RL_POLICY_REPORT_H
#define RL_POLICY_REPORT_H

#include <stdbool.h>
#include <stdint.h>

struct rl_report;
struct rl_proc;

/* Add n to this process's (kind, stat) count; nothing when the report is
 * off. Relaxed: read once, at exit. */
void rl_report_add(struct rl_report *r, int kind, int stat, uint64_t n);

/* Take n off, never below zero. */
void rl_report_sub(struct rl_report *r, int kind, int stat, uint64_t n);

/* One TLS connection, covered by a request limit, whose plaintext the
 * shim cannot see (TLS built into the program: SPEC §11), so its requests
 * are not counted. The request layer calls it once per such connection.
 * Counts it for this process (the exit report's "N TLS connections:
 * requests not counted" line) and in the user's rule budget in the
 * segment (`rlshim stat`: "TLS connections not counted"). Lock-free,
 * relaxed adds; never blocks, no system call. True the first time in p
 * (the one time the request layer says so on stderr). */
bool rl_report_tls_unseen(struct rl_proc *p);

/* Write the report's lines to stderr (rl_gate_finish, when on). */
void rl_report_write(struct rl_proc *p);

#endif
