/* rlshim.c — the `rlshim` command: one word picks the subcommand, which
 * parses the rest itself (commands.h). */
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "util/sys.h"

#ifndef RL_VERSION
#define RL_VERSION "unknown"
#endif

static const char usage[] =
    "usage: rlshim COMMAND [OPTIONS] [ARGS]\n"
    "\n"
    "  run   [-c FILE] [-k KEY] [--] PROGRAM [ARGS...]\n"
    "                   run PROGRAM with the shim preloaded\n"
    "  check [-c FILE]  validate the config; print the quota table\n"
    "  stat  [-c FILE] [--json] [--watch]\n"
    "                   counters and budgets per user and limit\n"
    "  reset [-c FILE] [USER]\n"
    "                   forget budgets (all, or one user's)\n"
    "  stat  [-c FILE] --prometheus\n"
    "                   the counters in Prometheus text format\n"
    "  verify LOG --limit KIND=RATE[,burst=N] [--per user|destination]\n"
    "        [--window] do a decision log's allowed units obey a limit?\n"
    "  timeline LOG [--bin 100ms] [--svg FILE]\n"
    "                   allowed / delayed / denied per destination over time\n"    "\n"
    "Each command takes --help. The config is -c FILE, else $RLSHIM_CONFIG,\n"
    "else " RL_SYSCONFDIR "/rlshim.ini. See rlshim(1), rlshim.ini(5).\n";

int main(int argc, char **argv)
{
    rl_sys_use_libc();
    static const struct {
        const char *name;
        int (*fn)(int, char **);
    } cmds[] = {
        {"run", rl_cmd_run},
        {"check", rl_cmd_check},
        {"stat", rl_cmd_stat},
        {"reset", rl_cmd_reset},
        {"verify", rl_cmd_verify},
        {"timeline", rl_cmd_timeline},
    };

    if (argc < 2) {
        fputs(usage, stderr);
        return 2;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        fputs(usage, stdout);
        return 0;
    }
    if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-V") == 0) {
        printf("rlshim %s\n", RL_VERSION);
        return 0;
    }
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
        if (strcmp(argv[1], cmds[i].name) == 0)
            return cmds[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "rlshim: unknown command '%s'\n%s", argv[1], usage);
    return 2;
}
