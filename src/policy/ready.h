/* ready.h — when may this fd go: the sockets a wait call must not report
 * ready yet (SPEC §2, non-blocking sockets).
 *
 * A non-blocking socket never sleeps in the shim. When its send is denied
 * (or, in delay mode, when its turn is later), the shim answers EAGAIN and
 * records here until when the socket is *held*: the wait calls (shim/
 * hook_wait.c) hide its POLLOUT/EPOLLOUT until then and wake at that
 * moment. In delay mode the turn was reserved by the gate: the entry keeps
 * that ticket, and the socket's next send at or after its turn spends it
 * (rl_ready_claim); a socket closed before spends nothing and the
 * reservation goes back to the budget (rl_ready_forget). A deferred
 * connect (delay mode) keeps its ticket and address the same way, and its
 * socket is hidden from the wait sets entirely until the shim connects it.
 *
 * One small table for the process, under a mutex; callers hold the shim's
 * re-entry guard, so a signal handler never takes the mutex twice. The
 * only lock-free part is rl_ready_any(), the whole cost of a wait call
 * while nothing is held. Knows fds as numbers only: no libc call on them. */
#ifndef RL_POLICY_READY_H
#define RL_POLICY_READY_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "policy/gate.h"

/* Entries the table holds; a socket that finds it full is not held (its
 * send fails or sleeps as it would without the table). */
#define RL_READY_MAX 1024

enum rl_ready_what {
    RL_READY_HOLD = 1,    /* a denied send: hide POLLOUT until `until` */
    RL_READY_RESERVE = 2, /* delay mode: the send's turn is `until` */
    RL_READY_CONNECT = 3, /* delay mode: connect at `until`; hide all */
};

/* What a wait call needs of one entry. */
struct rl_ready_view {
    int fd;
    int what;       /* enum rl_ready_what */
    uint64_t until; /* CLOCK_MONOTONIC ns */
};

/* Entries in the table (held, reserved or deferred, due or not). */
extern atomic_uint rl_ready_n;

static inline bool rl_ready_any(void)
{
    return atomic_load_explicit(&rl_ready_n, memory_order_relaxed) != 0;
}

/* fd may not send before `until` (a denied send). Returns 1 when fd was
 * not held before (hide it now), 0 when it was, -ENOSPC. */
int rl_ready_hold(int fd, uint64_t until);

/* Delay mode: keep the reservation of ticket `t` for fd; its turn is
 * t->now + t->wait_ns. Returns as rl_ready_hold; on -ENOSPC the caller
 * still owns the reservation. */
int rl_ready_reserve(int fd, const struct rl_gate_ticket *t);

/* Delay mode: a connect of fd to `sa` deferred to its turn (ticket `t`).
 * Returns as rl_ready_hold. */
int rl_ready_defer_connect(int fd, const struct rl_gate_ticket *t,
                           const struct sockaddr *sa, socklen_t len);

/* A send on fd at `now`. Returns:
 *   0        nothing recorded, or a hold that is over (dropped): decide
 *            the send as usual;
 *   1        its reserved turn has come: *t is the reservation (the entry
 *            is dropped, the caller owns the ticket);
 *   -EAGAIN  not before *until (a hold, a reservation not due: then *t is
 *            filled too, for a blocking socket that sleeps until then, when
 *            `take_early` is set; the entry is dropped); or a deferred
 *            connect (*what says which). */
int rl_ready_claim(int fd, uint64_t now, bool take_early,
                   struct rl_gate_ticket *t, uint64_t *until, int *what);

/* The deferred connect of fd, taken out when due at `now` (or at once
 * when `force`): 1 with the ticket and address (the caller connects), 0
 * when fd has none, -EAGAIN when not due (*until says when). */
int rl_ready_take_connect(int fd, uint64_t now, bool force,
                          struct rl_gate_ticket *t,
                          struct sockaddr_storage *sa, socklen_t *len,
                          uint64_t *until);

/* Is fd hidden at `now`, and how (0: not hidden)? */
int rl_ready_hidden(int fd, uint64_t now);

/* Copy up to `cap` entries that are still hidden at `now` into `out` and
 * return their count; *next is the earliest `until` after now of any
 * entry (UINT64_MAX when none). Holds that are over are dropped. */
unsigned rl_ready_snapshot(uint64_t now, struct rl_ready_view *out,
                           unsigned cap, uint64_t *next);

/* fd is closed (or replaced by dup2): drop its entry; a reservation or a
 * deferred connect not spent goes back to the budget. */
void rl_ready_forget(int fd);

/* The same for every fd in [first, last]. */
void rl_ready_forget_range(unsigned first, unsigned last);

/* In the child after fork: the entries are the parent's (its turns, its
 * tickets); the child forgets them without giving anything back. */
void rl_ready_atfork_child(void);

#endif
