/* stat_prometheus.h — `rlshim stat --prometheus`: the counters in
 * Prometheus' text exposition format (0.0.4), for node exporter's textfile
 * collector. cmd_stat.c hands each (user, rule, limit) row here; the rows
 * are printed at the end, grouped by metric family as the format wants. */
#ifndef RL_CLI_STAT_PROMETHEUS_H
#define RL_CLI_STAT_PROMETHEUS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* Add one row: counters[RL_STAT_*] of one limit (added to a row of the
 * same labels, if any). Returns 0 or -ENOMEM. */
int rl_prom_add(const char *user, const char *rule, const char *limit,
                const uint64_t *counters, bool has_avail, uint64_t avail);

/* Print every family and forget the rows. */
void rl_prom_print(FILE *f);

#endif
