/* cmd_placeholder.c — stands in for `rlshim stat` and `rlshim reset` until
 * their own files (cmd_stat.c, cmd_reset.c) are merged; the integrator
 * deletes this file then. */
#include <stdio.h>

#include "cli/commands.h"

int rl_cmd_stat(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fputs("rlshim stat: not yet\n", stderr);
    return 2;
}

int rl_cmd_reset(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fputs("rlshim reset: not yet\n", stderr);
    return 2;
}
