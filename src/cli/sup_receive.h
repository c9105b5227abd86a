/* sup_receive.h — the threads that receive the notifications of `rlshim
 * run --seccomp` (SPEC §10) and hand each to the supervisor's loop
 * (supervise.c), which decides and answers it in the same thread. A
 * receiver may make a blocking connect itself, once another waits for
 * notifications: no thread is made per connect, and a slow connect never
 * holds up the other calls. */
#ifndef RL_CLI_SUP_RECEIVE_H
#define RL_CLI_SUP_RECEIVE_H

#include <linux/seccomp.h>
#include <stdbool.h>

/* Receive on `listener`: `on(arg, req)` for each notification, in a
 * receiver's thread; `failed(arg, errno)` when the ioctl fails otherwise
 * than for a caller gone (the receivers stop: calls left unanswered would
 * hang). 0 or -errno. Call once. */
int sup_receive_start(int listener,
                      void (*on)(void *, const struct seccomp_notif *),
                      void (*failed)(void *, int), void *arg);

/* In a receiver, before a connect: does another receiver wait for
 * notifications (so this one may block)? */
bool sup_receive_others_wait(void);

/* In a receiver that is to make a blocking connect while none other
 * waits: one is called to (or started). 0, or -errno: this one must then
 * not block. */
int sup_receive_call(void);

/* In a receiver, after a connect that blocked. */
void sup_receive_blocked(void);

#endif
