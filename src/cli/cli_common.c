/* cli_common.c — what every subcommand shares. */
#include <stdlib.h>

#include "cli/commands.h"
#include "policy/config.h"

const char *rl_cli_config_path(const char *opt)
{
    if (opt != NULL)
        return opt;
    /* The same look-up the shim makes, so both read the same file. */
    return rl_config_path_from_env();
}
