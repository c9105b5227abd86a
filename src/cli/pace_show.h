/* pace_show.h — a destination's pace (SPEC §14) as the CLI says it:
 * `rlshim stat`'s rows (stat_rows.c) and `rlshim check --explain`
 * (explain.c) read the same entry of the segment's pause table and word
 * it the same way. */
#ifndef RL_CLI_PACE_SHOW_H
#define RL_CLI_PACE_SHOW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "policy/config.h"
#include "policy/pauses.h"

/* The pace section `rule` (one of cfg's) keeps in table p for `user`'s
 * destination key `dest` (as the gate keys it: policy/dests.h) at `now`:
 * true when a latency or a Crawl-delay sets it, with its interval into
 * *interval and what set it into why ("latency 2 x 400 ms"); false when
 * the limit alone paces it (or the section keeps no pace). */
bool rl_cli_pace(const struct rl_pauses *p, const struct rl_config *cfg,
                 const struct rl_rule *rule, const char *user,
                 const char *dest, uint64_t now, uint64_t *interval,
                 char *why, size_t wlen);

/* Section r's adaptation settings as one line ("adapt latency x 2 (max
 * 60 s), backoff_on 429, 503, crawl_delay obey (max 30 s), jitter 20%")
 * into buf, snprintf's way. */
void rl_cli_pace_settings(const struct rl_rule *r, char *buf, size_t len);

#endif
