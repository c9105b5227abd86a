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
 * It never links into librlshim.so; the gate must be initialised (with
 * PROGRAM's identity) before rl_supervise is called. */
#ifndef RL_CLI_SUPERVISE_H
#define RL_CLI_SUPERVISE_H

#include <stdbool.h>
#include <sys/types.h>

/* Run the supervisor on `listener` (a seccomp user-notification fd) until
 * `child` and every descendant of this process have exited (the caller
 * made itself a child subreaper before forking). Signals: SIGTERM, SIGHUP,
 * SIGINT, SIGQUIT, SIGUSR1 and SIGUSR2 sent to the supervisor by another
 * process are passed on to `child`; those the terminal sends to the whole
 * group are not (the child got them already). Returns `child`'s exit
 * status as a shell reports it (128 + signal when killed), or -errno when
 * the loop itself cannot run. Takes `listener`: it stays open (a thread
 * may still wait in it) until the process exits; call once. */
int rl_supervise(int listener, pid_t child);

#endif
