/* verify_pause.h — `rlshim verify --obeyed-retry-after` (SPEC §12). */
#ifndef RL_CLI_VERIFY_PAUSE_H
#define RL_CLI_VERIFY_PAUSE_H

#include <stdint.h>
#include <stdio.h>

#include "cli/logfile.h"

/* Did every request of a destination decided while a 429/503 paused it
 * go at the end of the pause or later (less `slack_ns`)? Prints the
 * requests that did not, with their pause, and a closing line on `out`.
 * Returns 0 (obeyed) or 1. */
int rl_verify_pauses(const struct rl_logfile *lf, uint64_t slack_ns,
                     FILE *out);

#endif
