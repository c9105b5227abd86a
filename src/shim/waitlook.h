/* waitlook.h — a wait call that hides a held socket's POLLOUT (SPEC §2:
 * a non-blocking write waits for its turn in the program's own poll)
 * watches that socket's POLLIN meanwhile, when the program did not ask
 * for it, and looks at what the server sent (readahead.h): the same look
 * a blocking write makes asleep for its turn, for the clients that wait
 * in poll (CPython's sockets with a timeout, whose TLS writes wait there
 * too). The POLLIN the shim asked for is never reported. A socket looked
 * at once is looked at again only when the bytes waiting in it changed,
 * the wait going in slices of RL_LOOK_SLICE_NS meanwhile: no spin on
 * bytes the program has not read. The poll family only; select and epoll
 * are left as they are. */
#ifndef RL_SHIM_WAITLOOK_H
#define RL_SHIM_WAITLOOK_H

#include <poll.h>
#include <stdbool.h>
#include <stdint.h>

#include "shim/waitbuf.h"

#define RL_WAITLOOK_MAX 8

/* What one wait call keeps between its real calls. Zero it first. */
struct rl_waitlook {
    unsigned n;
    struct {
        int fd;
        int seen;    /* bytes waiting after its last look (-1: none yet) */
        nfds_t i;    /* its entry in the caller's array while armed */
        bool armed;  /* its POLLIN asked of the kernel this round */
        bool can;    /* its stream can be looked at (asked once a call) */
    } e[RL_WAITLOOK_MAX];
    bool took; /* the last round's result held only the shim's POLLIN */
};

/* Before a real call: arm the hidden sockets (saved[0..k), the program's
 * own events) that can be looked at. Returns the longest the call may
 * wait (UINT64_MAX: no bound of the looks'). */
uint64_t rl_waitlook_arm(struct rl_waitlook *w, struct pollfd *f,
                         const struct poll_saved *saved, unsigned k);

/* After it (r its result): the shim's POLLIN taken out of revents, and
 * the sockets that had it looked at. Returns r less the entries left
 * with nothing to report. */
int rl_waitlook_take(struct rl_waitlook *w, struct pollfd *f, int r);

#endif
