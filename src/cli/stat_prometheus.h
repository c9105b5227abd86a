/* stat_prometheus.h — `rlshim stat --prometheus`: the counters in
 * Prometheus' text exposition format (0.0.4), for node exporter's textfile
 * collector. cmd_stat.c hands each row here (a budget's limit, a
 * destination's budget, a budget's open connections); the rows are
 * printed at the end, grouped by metric family as the format wants, each
 * family's HELP and TYPE once. Nothing else is ever printed to stdout in
 * this mode: one line the format refuses makes the collector drop the
 * whole file. */
#ifndef RL_CLI_STAT_PROMETHEUS_H
#define RL_CLI_STAT_PROMETHEUS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* One limit of one budget. */
struct rl_prom_row {
    const char *user, *rule, *limit;
    const char *dest;         /* per destination: its name; else NULL */
    const uint64_t *counters; /* RL_STAT_*; NULL: none of its own (a
                                 destination's are its section's) */
    bool has_avail;
    uint64_t avail;
    uint64_t responded; /* limit "request": answered under on_deny =
                           respond (SPEC §15), not in counters' denied */
};

/* Add one row (added to a row of the same labels, if any: the same budget
 * in another segment, --all). Returns 0 or -ENOMEM. */
int rl_prom_add(const struct rl_prom_row *row);

/* A budget with max_open: `open` connections open now, of at most `max`.
 * dest NULL when not per destination. Returns 0 or -ENOMEM. */
int rl_prom_open(const char *user, const char *rule, const char *dest,
                 uint64_t open, uint32_t max);

/* A budget's TLS connections whose requests were not counted (n > 0). */
int rl_prom_tls_unseen(const char *user, const char *rule, uint64_t n);

/* max_open areas of budgets that are not per destination live in slots
 * of their own, "#open|SECTION|N" beside the budget's slot N
 * (policy/gate.c's open_area). */
#define RL_PROM_OPEN_PREFIX "#open|"

/* Before a segment's rows: learn its max_open areas (forgetting the last
 * segment's). */
struct rl_store;
void rl_prom_segment(struct rl_store *s);

/* The max_open row of `rule`'s budget for `user` in slot `index` of the
 * segment rl_prom_segment last read: its area's connections (0 while it
 * has none). */
struct rl_rule;
void rl_prom_budget_open(uint32_t index, const struct rl_rule *rule,
                         const char *user);

/* Print every family and forget the rows. */
void rl_prom_print(FILE *f);

#endif
