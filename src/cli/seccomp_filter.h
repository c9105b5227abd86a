/* seccomp_filter.h — which calls of PROGRAM the supervisor of `rlshim run
 * --seccomp` is notified of (cmd_run_seccomp.c loads it in the child). */
#ifndef RL_CLI_SECCOMP_FILTER_H
#define RL_CLI_SECCOMP_FILTER_H

#include <linux/filter.h>
#include <stdbool.h>

/* The filter as BPF in `prog` (prog->filter malloc'd): connect always;
 * the sends that may carry an address when `sends` (the rule charges
 * sends), else only MSG_FASTOPEN ones; the calls that give an fd up when
 * `closes` (a section has max_open); io_uring_setup answered ENOSYS.
 * Returns 0 or -errno. */
int rl_seccomp_filter(struct sock_fprog *prog, bool sends, bool closes);

#endif
