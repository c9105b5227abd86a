/* sup.h — everything the supervisor of `rlshim run --seccomp` owns (SPEC
 * §10), in one struct: what struct rl_proc (policy/proc.h) is to a
 * process's shim, struct rl_sup is to the supervisor.
 *
 * Its life: rl_sup_init (no system call), then the gate set up in `proc`
 * (cmd_run_seccomp.c: the log, the config, the target's identity), then
 * rl_supervise (supervise.h) on the filter's listener until the targets
 * are gone, then rl_gate_finish on `proc`. The rest is never closed: a
 * receiver may still wait in its ioctl, or a follower on its condition,
 * until the process exits, so the one instance has static storage
 * (cmd_run_seccomp.c's).
 *
 * Its members, each owned by the file named (a function that uses a
 * member takes its owner as its first parameter: the struct rl_sup when it
 * needs several members, as a decision does; the member's own struct when
 * it needs nothing else):
 *
 *   listener  (supervise.c)      the seccomp user-notification fd: every
 *                                thread answers on it
 *   proc      (sup_calls.c)      the gate the target's calls are decided
 *                                by (the same config, identity and shared
 *                                budgets as the preloaded shim)
 *   kernel    (sup_target.c)     what was learnt of the kernel, and the
 *                                EPERM said once
 *   open      (sup_open.c)       max_open: which target fd holds which
 *                                places
 *   rx        (sup_receive.c)    the threads that receive notifications
 *   loop      (supervise.c)      the timer queue, the connects waiting for
 *                                a place, the child and the signals */
#ifndef RL_CLI_SUP_H
#define RL_CLI_SUP_H

#include "cli/sup_open.h"
#include "cli/sup_receive.h"
#include "cli/sup_target.h"
#include "cli/supervise.h"
#include "policy/proc.h"

struct rl_sup {
    int listener;
    struct rl_proc proc;
    struct sup_kernel kernel;
    struct sup_open open;
    struct sup_receive rx;
    struct sup_loop loop;
};

/* Every member empty, the locks made, no fd yet (-1). */
void rl_sup_init(struct rl_sup *s);

#endif
