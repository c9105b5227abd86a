/* commands.h — the subcommands of `rlshim`. Each takes the arguments after
 * "rlshim" (argv[0] is the subcommand's name), parses its own options,
 * prints errors to stderr and returns the process exit status. */
#ifndef RL_CLI_COMMANDS_H
#define RL_CLI_COMMANDS_H

#include <stdio.h>

int rl_cmd_run(int argc, char **argv);
int rl_cmd_check(int argc, char **argv);
int rl_cmd_stat(int argc, char **argv);
int rl_cmd_reset(int argc, char **argv);
int rl_cmd_verify(int argc, char **argv);
int rl_cmd_timeline(int argc, char **argv);

/* The config path: -c FILE, else $RLSHIM_CONFIG, else the sysconfdir file. */
const char *rl_cli_config_path(const char *opt);

/* getopt_long's ':' (a value missing) or '?' (an unknown option) for the
 * subcommand `cmd`: one line naming the option, then its usage on stderr.
 * Returns the exit status, 2. */
int rl_cli_bad_option(const char *cmd, int c, char **argv,
                      void (*usage)(FILE *));

#endif
