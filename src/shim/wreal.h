/* wreal.h — the libc wait calls behind hook_wait.c's hooks.
 *
 * Kept apart from real.h (the send and close families): resolved with
 * dlsym(RTLD_NEXT) on first use, refusing our own symbol, falling back to
 * the raw system call, so no pointer is ever NULL after rl_wreal_resolve. */
#ifndef RL_SHIM_WREAL_H
#define RL_SHIM_WREAL_H

#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <time.h>

struct rl_wreal {
    int (*poll)(struct pollfd *, nfds_t, int);
    int (*ppoll)(struct pollfd *, nfds_t, const struct timespec *,
                 const sigset_t *);
    int (*poll_chk)(struct pollfd *, nfds_t, int, unsigned long);
    int (*ppoll_chk)(struct pollfd *, nfds_t, const struct timespec *,
                     const sigset_t *, unsigned long);
    int (*select)(int, fd_set *, fd_set *, fd_set *, struct timeval *);
    int (*pselect)(int, fd_set *, fd_set *, fd_set *, const struct timespec *,
                   const sigset_t *);
    int (*epoll_wait)(int, struct epoll_event *, int, int);
    int (*epoll_pwait)(int, struct epoll_event *, int, int, const sigset_t *);
    int (*epoll_pwait2)(int, struct epoll_event *, int,
                        const struct timespec *, const sigset_t *);
    int (*epoll_ctl)(int, int, int, struct epoll_event *);
};

extern struct rl_wreal rl_wreal;

void rl_wreal_resolve(void);

#define WREAL(name)                                                            \
    (__builtin_expect(rl_wreal.name != NULL, 1)                                \
         ? rl_wreal.name                                                       \
         : (rl_wreal_resolve(), rl_wreal.name))

#endif
