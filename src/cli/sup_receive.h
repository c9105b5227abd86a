/* sup_receive.h — the threads that receive the notifications of `rlshim
 * run --seccomp` (SPEC §10) and hand each to the supervisor's loop
 * (supervise.c), which decides and answers it in the same thread. A
 * receiver may make a blocking connect itself, once another waits for
 * notifications: no thread is made per connect, and a slow connect never
 * holds up the other calls. */
#ifndef RL_CLI_SUP_RECEIVE_H
#define RL_CLI_SUP_RECEIVE_H

#include <linux/seccomp.h>
#include <pthread.h>
#include <stdbool.h>

#include "cli/sup_target.h"

struct sup_receiver;

/* The receivers (a member of the supervisor's struct rl_sup, cli/sup.h;
 * never closed: a follower waits on `called` until the process exits).
 * listener, on, failed, arg and kernel are set before the first receiver
 * starts and never change after; `in_ioctl` is atomic; `lock` guards
 * followers and calls. */
struct sup_receive {
    int listener;
    void (*on)(void *, struct sup_receiver *, const struct seccomp_notif *);
    void (*failed)(void *, int);
    void *arg;
    struct sup_kernel *kernel; /* what each receiver's pidfd cache learns */
    _Atomic int in_ioctl;      /* receivers in (or going into) the ioctl */
    /* Receivers that follow (wait on `called`), and the calls sent to
     * them that none has taken yet. */
    pthread_mutex_t lock;
    pthread_cond_t called;
    int followers, calls;
};

/* One receiving thread's own state, on its stack: passed to `on` with
 * each notification it received. */
struct sup_receiver {
    struct sup_receive *rx;
    bool blocked; /* set by this receiver's connect that blocked */
    struct sup_pidfds pidfds;
};

/* No receiver yet; their pidfd caches will learn into `kernel`. */
void sup_receive_init(struct sup_receive *rx, struct sup_kernel *kernel);

/* Receive on `listener`: `on(arg, receiver, req)` for each notification,
 * in a receiver's thread; `failed(arg, errno)` when the ioctl fails
 * otherwise than for a caller gone (the receivers stop: calls left
 * unanswered would hang). 0 or -errno. Call once. */
int sup_receive_start(struct sup_receive *rx, int listener,
                      void (*on)(void *, struct sup_receiver *,
                                 const struct seccomp_notif *),
                      void (*failed)(void *, int), void *arg);

/* In a receiver, before a connect: does another receiver wait for
 * notifications (so this one may block)? */
bool sup_receive_others_wait(struct sup_receive *rx);

/* In a receiver that is to make a blocking connect while none other
 * waits: one is called to (or started). 0, or -errno: this one must then
 * not block. */
int sup_receive_call(struct sup_receive *rx);

/* In receiver `self`, after a connect that blocked. */
void sup_receive_blocked(struct sup_receiver *self);

#endif
