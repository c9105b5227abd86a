/* supervise.h — the supervisor of `rlshim run --seccomp` (SPEC §10).
 *
 * A small event loop in the launcher process: it receives the seccomp
 * user notifications of PROGRAM and its descendants (connect, addressed
 * sendto/sendmsg/sendmmsg), decides each with the gate (the same config,
 * identity and shared budgets as the preloaded shim), and answers:
 *
 *   - a stream connect is *made here*, on a copy of the program's socket
 *     (pidfd_getfd) and the address read and checked here, and the answer
 *     is its result (0, EINPROGRESS, ECONNREFUSED...): the program cannot
 *     swap the address after the check;
 *   - an addressed datagram send is answered "continue" or the errno;
 *   - a call that must wait (on_deny = delay) is answered later from a
 *     timer queue, so that one waiting thread never holds up another.
 *
 * It never links into librlshim.so. What it keeps is struct rl_sup's
 * (cli/sup.h). */
#ifndef RL_CLI_SUPERVISE_H
#define RL_CLI_SUPERVISE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "cli/sup_target.h"

struct rl_sup;
struct sup_job;

/* The event loop's state (struct rl_sup's `loop`; its members are this
 * module's). `lock` guards the heap, the connects waiting for a place and
 * the timer's setting; the fds and `child` are set before the receivers
 * start; child_done and status are the loop thread's. */
struct sup_loop {
    int timer, sig, ep;
    int dead; /* eventfd: the receivers stopped (rx_err says why) */
    _Atomic int rx_err;
    pthread_mutex_t lock;
    pid_t child;
    bool child_done;
    int status;
    struct sup_job **heap; /* min-heap by due */
    size_t n, cap;
    /* Connects waiting for a max_open place, oldest first (under `lock`),
     * looked at again at poll_at or when `kick` (an eventfd) says that a
     * place was given back. */
    struct sup_job **waitq;
    size_t nw, capw;
    uint64_t poll_at;
    int kick;
    struct sup_pidfds pidfds; /* the loop thread's (sup_redecide) */
};

/* Run the supervisor `s` (rl_sup_init'ed, its gate set up with PROGRAM's
 * identity) on `listener` (a seccomp user-notification fd) until `child`
 * and every descendant of this process have exited (the caller made
 * itself a child subreaper before forking). Signals: SIGTERM, SIGHUP,
 * SIGINT, SIGQUIT, SIGUSR1 and SIGUSR2 sent to the supervisor by another
 * process are passed on to `child`; those the terminal sends to the whole
 * group are not (the child got them already). Returns `child`'s exit
 * status as a shell reports it (128 + signal when killed), or -errno when
 * the loop itself cannot run. Takes `listener`: it stays open (a thread
 * may still wait in it) until the process exits; call once. */
int rl_supervise(struct rl_sup *s, int listener, pid_t child);

#endif
