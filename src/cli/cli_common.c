/* cli_common.c — what every subcommand shares. */
#include <stdlib.h>
#include <unistd.h>

#include "cli/commands.h"
#include "policy/config.h"

const char *rl_cli_config_path(const char *opt)
{
    if (opt != NULL)
        return opt;
    /* The same look-up the shim makes, so both read the same file. */
    return rl_config_path_from_env();
}

int rl_cli_bad_option(const char *cmd, int c, char **argv,
                      void (*usage)(FILE *))
{
    if (c == ':')
        fprintf(stderr, "rlshim %s: option '%s' needs a value\n", cmd,
                argv[optind - 1]);
    else
        fprintf(stderr, "rlshim %s: unknown option '%s'\n", cmd,
                argv[optind - 1]);
    usage(stderr);
    return 2;
}
