/* explain.h — `rlshim check --explain` (see explain.c). */
#ifndef RL_CLI_EXPLAIN_H
#define RL_CLI_EXPLAIN_H

#include "policy/config.h"

/* Print which rule, site and budget a connection to `target` (URL or
 * HOST[:PORT]) is charged to for user key `key` (NULL: this process's
 * identity). Returns an exit status. */
int rl_cli_explain(const struct rl_config *cfg, const char *key,
                   const char *target);

#endif
