/* sup_probe.h — what the --seccomp supervisor answers when policy's
 * decision asks about the call's socket (policy/decide_connect.h and
 * decide_send.h, asked as RL_CONNECT_SUPERVISOR and RL_SEND_SUPERVISOR).
 *
 * Every notified call waits in the kernel for the supervisor's answer,
 * O_NONBLOCK or not: to a decision it is a call that may sleep (its
 * answer comes at its turn, or when a max_open place frees, from the
 * timer queue), that no SO_SNDTIMEO bounds, and that the kernel answers
 * itself once let go. The connect's own address, when it was not read,
 * is read by sup_calls.c (its `address` member). */
#ifndef RL_CLI_SUP_PROBE_H
#define RL_CLI_SUP_PROBE_H

#include "policy/decide_send.h"

/* A connect probe's `nonblocking`: 0, whatever fd is. */
int sup_probe_waits(int fd);

/* The send probe: nothing the kernel says first, no timeout, no peer
 * asked (the sends decided here name their destination). */
extern const struct rl_send_probe sup_send_probe;

#endif
