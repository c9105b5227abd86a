/* commands.h — the subcommands of `rlshim`. Each takes the arguments after
 * "rlshim" (argv[0] is the subcommand's name), parses its own options,
 * prints errors to stderr and returns the process exit status. */
#ifndef RL_CLI_COMMANDS_H
#define RL_CLI_COMMANDS_H

int rl_cmd_run(int argc, char **argv);
int rl_cmd_check(int argc, char **argv);
int rl_cmd_stat(int argc, char **argv);
int rl_cmd_reset(int argc, char **argv);
int rl_cmd_verify(int argc, char **argv);
int rl_cmd_timeline(int argc, char **argv);

/* The config path: -c FILE, else $RLSHIM_CONFIG, else the sysconfdir file. */
const char *rl_cli_config_path(const char *opt);

#endif
