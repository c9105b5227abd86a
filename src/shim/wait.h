/* wait.h — what the other hook files ask of hook_wait.c: the shaping of a
 * send or connect on a socket that must not sleep in the shim, and the
 * bookkeeping of a closed or copied fd (SPEC §2, non-blocking sockets).
 *
 * Everything but rl_wait_forget* runs with the re-entry guard held. */
#ifndef RL_SHIM_WAIT_H
#define RL_SHIM_WAIT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "policy/decide_connect.h"
#include "policy/decide_send.h"
#include "policy/fdlife.h"
#include "policy/gate.h"
#include "policy/ready.h"
#include "shim/fdtab.h"
#include "shim/self.h"

/* Are there epoll registrations recorded (shim/epreg.c) or ready entries:
 * does the close of an inet socket have entries to look for? */
static inline bool rl_wait_live(void)
{
    return (atomic_load_explicit(&rl_shim_self->epreg.n, memory_order_relaxed) |
            atomic_load_explicit(&rl_shim_proc()->ready.n,
                                 memory_order_relaxed)) != 0;
}

/* Must a call on fd with `flags` not sleep (O_NONBLOCK, or MSG_DONTWAIT)?
 * Keeps errno. */
bool rl_wait_nonblocking(int fd, int flags);

/* What the kernel has to say about fd that a send would hear (SPEC §2:
 * never hidden), asked only of a call the shim would hold back (a poll
 * of fd with a zero timeout): 0, nothing (hold it back as decided); -1, a
 * hang-up (POLLHUP: the peer reset, or both directions are shut), so the
 * call goes to the kernel, which refuses it (EPIPE, ECONNRESET) and sends
 * nothing; > 0, the socket's pending error (POLLERR, SO_ERROR taken as a
 * send of the kernel's would take it), the call's answer. Keeps errno. */
int rl_wait_kernel_says(int fd);

/* A send of ciphertext on fd, the socket of a TLS session whose program
 * moves the ciphertext itself (a memory BIO: shim/tlswrite.c holds the
 * socket while a write of it waits its turn, and at the turn the write's
 * requests are decided again: policy/ready.h RL_READY_TURN): while held,
 * a non-blocking socket answers EAGAIN (returns -1, errno set) and a
 * blocking one is to sleep until *sleep_until (after the guard is let
 * go), then ask again; a request refused at its turn fails the send with
 * its errno; 0: it goes. */
int rl_wait_paced(int fd, int flags, uint64_t *sleep_until);

/* The peer of fd into *ss (NULL when it has none), by libc's
 * getpeername: the probes' `peer`. May change errno. */
const struct sockaddr *rl_wait_peer(int fd, struct sockaddr_storage *ss,
                                    socklen_t *len);

/* What policy may ask the kernel about the fd of a send
 * (rl_decide_send): rl_wait_nonblocking, rl_wait_kernel_says, its
 * SO_SNDTIMEO and its peer (getpeername). */
extern const struct rl_send_probe rl_wait_probe;

/* Apply what rl_decide_send answered about fd beyond the call's own
 * verdict: the fd's deferred connect made now, then its registrations
 * shown again and/or hidden (RL_DECIDE_SHOW, RL_DECIDE_HIDE). */
void rl_wait_apply(int fd, const struct rl_send_answer *a);

/* Before a connect on fd: a connect the shim deferred answers here.
 * Returns 1 when the call is answered (*ret, errno set: EALREADY while
 * waiting, the real connect's own result when its turn has come), else 0. */
int rl_wait_connect_again(int fd, int *ret);

/* What policy may ask the kernel about the fd of a connect
 * (rl_decide_connect): whether it is non-blocking. */
extern const struct rl_connect_probe rl_wait_connect_probe;

/* fd's connect was deferred (rl_decide_connect answered
 * RL_CONNECT_DEFERRED: to its turn, or until a max_open place frees, as
 * policy/ready.h RL_READY_CONNECT and RL_READY_OPEN; a close in this
 * process is seen at the next wait call, one elsewhere within
 * RL_READY_OPEN_STEP): the wait calls do not see fd until it is made.
 * The caller answers EINPROGRESS. */
void rl_wait_connect_deferred(int fd);

/* getsockopt(SO_ERROR) on fd: the errno of a deferred connect that
 * failed, told once (returns 1); else 0 (the kernel's answer). */
int rl_wait_connect_error(int fd, int *err);

/* Make the deferred connects among `v` whose turn has come by `now`,
 * decide again those waiting for a place and the held requests whose
 * turn has come (from inside a wait call). */
void rl_wait_connect_due(uint64_t now, const struct rl_ready_view *v,
                         unsigned n);

/* Tell policy (policy/fdlife.h) that the fds of `what` (RL_FDLIFE_*) are
 * gone; `live`: the wait calls may have entries for them (taken under the
 * re-entry guard when it can be entered, with the epoll registrations). */
void rl_wait_forget_slow(int what, unsigned first, unsigned last, bool live);

/* Does policy keep max_open connections by fd (lock-free, forgotten from
 * anywhere)? */
static inline bool rl_wait_open_on(void)
{
    return __builtin_expect(rl_shim_proc()->open.on, 0);
}

/* fd, whose mark is `mark`, is being closed. Only an inet socket can have
 * a wait entry (the hook records none for anything else): the close of a
 * file or a pipe never gets this far. */
static inline void rl_wait_forget(int fd, uint32_t mark)
{
    bool live =
        (mark & RL_FD_INET) && __builtin_expect(rl_wait_live(), 0) && fd >= 0;
    if (live || rl_wait_open_on())
        rl_wait_forget_slow(RL_FDLIFE_CLOSED, (unsigned)fd, (unsigned)fd, live);
}

/* [first, last] is being closed. */
static inline void rl_wait_forget_range(unsigned first, unsigned last)
{
    bool live = rl_wait_live();
    if (live || rl_wait_open_on())
        rl_wait_forget_slow(RL_FDLIFE_CLOSED_RANGE, first, last, live);
}

/* `to`, whose mark was `old`, now refers to what `from` does. */
static inline void rl_wait_forget_dup(int from, int to, uint32_t old)
{
    bool live = (old & RL_FD_INET) && __builtin_expect(rl_wait_live(), 0) &&
                to >= 0;
    if (live || rl_wait_open_on())
        rl_wait_forget_slow(RL_FDLIFE_DUPED, (unsigned)from, (unsigned)to,
                            live);
}

#endif
