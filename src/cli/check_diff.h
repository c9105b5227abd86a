/* check_diff.h — `rlshim check --diff EDITED`: which budgets an edit of
 * the config in use would restart in a running process, and which keep
 * their state (SPEC §16). */
#ifndef RL_CLI_CHECK_DIFF_H
#define RL_CLI_CHECK_DIFF_H

#include "policy/config.h"

/* Print, per section of `cur` (read from cur_path) and of `edited` (from
 * edited_path), whether its budgets keep their state, restart, are new
 * or go. Returns 0. */
int rl_cli_check_diff(const struct rl_config *cur, const char *cur_path,
                      const struct rl_config *edited, const char *edited_path);

#endif
