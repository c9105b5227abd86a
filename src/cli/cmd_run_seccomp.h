/* cmd_run_seccomp.h — `rlshim run --seccomp` (SPEC §10): the launcher
 * that puts PROGRAM under a seccomp user-notification filter and stays as
 * its supervisor. cmd_run.c has found PROGRAM and validated the config
 * (RLSHIM_CONFIG is set, absolute; RLSHIM_KEY too when -k was given). */
#ifndef RL_CLI_CMD_RUN_SECCOMP_H
#define RL_CLI_CMD_RUN_SECCOMP_H

/* Run `path` with `argv` under the filter and supervise it. Returns
 * PROGRAM's exit status (128 + signal when killed); 126 when the kernel
 * cannot do it (one line says why: PROGRAM never runs unthrottled), 1 when
 * budgets cannot be set up. */
int rl_run_seccomp(const char *path, char *const argv[]);

#endif
