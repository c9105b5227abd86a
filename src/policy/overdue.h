/* overdue.h — a call on a non-blocking socket whose wait, in delay mode,
 * is past max_delay (SPEC §2): a turn that far away, or a server's pause
 * (SPEC §12). Such a call fails at once with an error the program gives
 * up on, not EAGAIN, which means "wait until writable" and would hold the
 * program for as long as the whole wait (curl until its own timeout,
 * aiohttp for ever); and the process says why, once, on stderr. */
#ifndef RL_POLICY_OVERDUE_H
#define RL_POLICY_OVERDUE_H

#include <stdbool.h>
#include <sys/socket.h>

#include "policy/gate.h"

struct rl_proc;

/* Was the denial in ticket t (RL_GATE_FAIL) of a wait past its section's
 * max_delay in delay mode? Then true, with *err the errno to fail with:
 * ETIMEDOUT, or the section's errno when it is not EAGAIN. false for any
 * other denial. No side effect: the caller asks it only of a call on a
 * non-blocking socket. */
bool rl_overdue(const struct rl_gate_ticket *t, int *err);

/* After rl_overdue said true: the first such call of the process writes
 * one line on stderr naming the destination (`name`, else the address
 * sa) and why; later ones write nothing. */
void rl_overdue_say(struct rl_proc *p, const struct rl_gate_ticket *t,
                    const char *name, const struct sockaddr *sa,
                    socklen_t salen);

/* Written by rl_overdue_say: the whole line, for the unit tests, into buf
 * (the "rlshim: " prefix is rl_log_stderr's). */
void rl_overdue_line(const struct rl_gate_ticket *t, const char *dest,
                     char *buf, size_t len);

#endif
