/* cmd_state.h — what `rlshim stat` and `rlshim reset` share. */
#ifndef RL_CLI_CMD_STATE_H
#define RL_CLI_CMD_STATE_H

#include "policy/config.h"

/* Load the config named by -c FILE (`opt`), $RLSHIM_CONFIG or the
 * sysconfdir file. *cfg is NULL, and 0 returned, when no file was named and
 * the default one does not exist: the state is then shown or reset without
 * knowing its rules. Errors are printed to stderr; returns 0 or -errno. */
int rl_cli_load_optional(const char *opt, struct rl_config **cfg);

#endif
