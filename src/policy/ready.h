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
 * A connect denied because max_open is full (delay mode) holds nothing: it
 * keeps its address and the area it waits on, and is decided again when
 * a place frees (RL_READY_OPEN). A memory BIO's request whose bytes went
 * ahead of its turn holds its socket until then and is decided again
 * there (RL_READY_TURN, reqheld.h): a pause that came meanwhile holds it
 * still.
 *
 * One small table for the process (struct rl_ready, a member of its struct
 * rl_proc: the functions take the rl_proc, since a dropped entry's ticket
 * goes back through its gate), under a mutex; callers hold the shim's
 * re-entry guard, so a signal handler never takes the mutex twice. The
 * only lock-free part is rl_ready_any(), the whole cost of a wait call
 * while nothing is held. Knows fds as numbers only: no libc call on them. */
#ifndef RL_POLICY_READY_H
#define RL_POLICY_READY_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "policy/gate.h"
#include "policy/reqheld.h"
#include "util/atomics.h"

struct rl_proc;

/* Entries the table holds; a socket that finds it full is not held (its
 * send fails or sleeps as it would without the table). */
#define RL_READY_MAX 1024

enum rl_ready_what {
    RL_READY_HOLD = 1,    /* a denied send: hide POLLOUT until `until` */
    RL_READY_RESERVE = 2, /* delay mode: the send's turn is `until` */
    RL_READY_CONNECT = 3, /* delay mode: connect at `until`; hide all */
    RL_READY_OPEN = 4,    /* delay mode, max_open full: decide the connect
                             again when a place frees (or at `until`, the
                             next look); hide all */
    RL_READY_FAILED = 5,  /* a deferred connect that failed: shown as the
                             kernel has it (an unconnected socket: writable,
                             hung up); SO_ERROR and connect say the errno */
    RL_READY_TURN = 6,    /* a memory BIO's request, its bytes gone ahead:
                             hide POLLOUT until `until`, and after it until
                             it is decided again (rl_ready_turn_due); once
                             refused (`err`), shown, its sends failing */
};

/* A connect waiting for a max_open place is looked at again (from the
 * program's wait calls) after RL_READY_OPEN_FIRST ns, then after twice as
 * long each time up to RL_READY_OPEN_STEP ns; its area's release sequence
 * is read at every wait call too, so a close seen by this process is acted
 * on at its next wait call, and one in another process within a step.
 * Looks fall on multiples of their step, so that every socket waiting in a
 * process wakes its wait call together: at most 1 s / 50 ms = 20 wake-ups
 * a second however many wait. The gate decides again only when a release
 * happened, or RL_READY_OPEN_DECIDE ns after its last decision (a holder
 * killed releases nothing: a decision takes its places back). */
#define RL_READY_OPEN_FIRST 6250000u /* 6.25 ms */
#define RL_READY_OPEN_STEP 50000000u /* 50 ms */
#define RL_READY_OPEN_DECIDE 1000000000u

/* Hidden from the wait sets entirely (not connected yet)? */
static inline bool rl_ready_unconnected(int what)
{
    return what == RL_READY_CONNECT || what == RL_READY_OPEN;
}

/* What a wait call needs of one entry. */
struct rl_ready_view {
    int fd;
    int what;       /* enum rl_ready_what */
    uint64_t until; /* CLOCK_MONOTONIC ns */
};

/* One held, reserved or deferred socket. */
struct rl_ready_entry {
    int fd; /* -1: free */
    int what;
    uint64_t until;
    struct rl_gate_ticket t;    /* RESERVE, CONNECT */
    struct sockaddr_storage sa; /* CONNECT, OPEN */
    socklen_t salen;
    /* OPEN: the full area, its release sequence at the last decision,
     * when that was, the max_delay deadline and the step between looks;
     * FAILED: the errno. */
    rl_atomic_u64 *area;
    uint32_t seq;
    uint64_t decided, deadline, step;
    bool taken; /* OPEN, TURN: a thread is deciding it again */
    int err;    /* FAILED, TURN (refused): the errno */
    struct rl_reqheld held; /* TURN */
};

/* The process's table (a member of struct rl_proc): a flat array searched
 * up to its high-water mark, mapped when the first socket is held. All
 * zero is empty (a zero mutex is PTHREAD_MUTEX_INITIALIZER on glibc). */
struct rl_ready {
    pthread_mutex_t mu;
    struct rl_ready_entry *tab; /* RL_READY_MAX entries, or NULL */
    unsigned hw;   /* entries at or above are free */
    atomic_uint n; /* entries in the table (held, reserved or deferred) */
};

static inline bool rl_ready_any(const struct rl_ready *r)
{
    return atomic_load_explicit(&r->n, memory_order_relaxed) != 0;
}

/* fd may not send before `until` (a denied send). Returns 1 when fd was
 * not held before (hide it now), 0 when it was, -ENOSPC. */
int rl_ready_hold(struct rl_proc *p, int fd, uint64_t until);

/* Delay mode: keep the reservation of ticket `t` for fd; its turn is
 * t->now + t->wait_ns. Returns as rl_ready_hold; on -ENOSPC the caller
 * still owns the reservation. */
int rl_ready_reserve(struct rl_proc *p, int fd, const struct rl_gate_ticket *t);

/* Delay mode: a connect of fd to `sa` deferred to its turn (ticket `t`).
 * Returns as rl_ready_hold. */
int rl_ready_defer_connect(struct rl_proc *p, int fd,
                           const struct rl_gate_ticket *t,
                           const struct sockaddr *sa, socklen_t len);

/* Delay mode: a connect of fd to `sa` denied at t->now because max_open
 * area t->open_full was full (at sequence t->open_seq); it waits for a
 * place until `deadline` (its max_delay). Returns as rl_ready_hold. */
int rl_ready_defer_open(struct rl_proc *p, int fd,
                        const struct rl_gate_ticket *t,
                        const struct sockaddr *sa, socklen_t len,
                        uint64_t deadline);

/* The connect of fd waiting for a place, taken out to be decided again
 * when its moment has come at `now` (a release in its area, its deadline,
 * RL_READY_OPEN_DECIDE since its last decision, or `force`): 1 with the
 * address and deadline; 0 when fd has none; -EAGAIN when not yet (the
 * next look is re-armed: *until says when). */
int rl_ready_take_open(struct rl_proc *p, int fd, uint64_t now, bool force,
                       struct sockaddr_storage *sa, socklen_t *len,
                       uint64_t *deadline, uint64_t *until);

/* A deferred connect of fd failed with `err` (SO_ERROR and connect tell
 * it once; the entry goes with it, or at the close). Returns as
 * rl_ready_hold. */
int rl_ready_fail(struct rl_proc *p, int fd, int err);

/* The errno of fd's failed deferred connect, told once: 1 (*err set, the
 * entry dropped) or 0. */
int rl_ready_take_error(struct rl_proc *p, int fd, int *err);

/* Delay mode: the request h, whose bytes went ahead of its turn h->turn
 * (a memory BIO's), holds fd until then; a second one on fd before the
 * first's turn holds it until the later turn, both decided again then.
 * Returns as rl_ready_hold, or -EBUSY when fd is held otherwise (a
 * reservation, a connect, a decision under way): not held. */
int rl_ready_hold_turn(struct rl_proc *p, int fd, const struct rl_reqheld *h);

/* fd's held request (RL_READY_TURN) at `now`: decided again at its turn
 * (rl_reqheld_again, outside the mutex). Returns 0 when fd has none, or it
 * goes now (the entry dropped); -EAGAIN when held until *until (not due,
 * another thread deciding it, or a pause moved its turn there); a
 * positive errno when refused (the entry kept: every send on fd fails
 * with it until the close). */
int rl_ready_turn_due(struct rl_proc *p, int fd, uint64_t now, uint64_t *until);

/* A send on fd at `now`. Returns:
 *   0        nothing recorded, or a hold that is over (dropped): decide
 *            the send as usual;
 *   1        its reserved turn has come: *t is the reservation (the entry
 *            is dropped, the caller owns the ticket);
 *   -EAGAIN  not before *until (a hold, a reservation not due: then *t is
 *            filled too, for a blocking socket that sleeps until then, when
 *            `take_early` is set; the entry is dropped); or a deferred
 *            connect (*what says which). */
int rl_ready_claim(struct rl_proc *p, int fd, uint64_t now, bool take_early,
                   struct rl_gate_ticket *t, uint64_t *until, int *what);

/* The deferred connect of fd, taken out when due at `now` (or at once
 * when `force`): 1 with the ticket and address (the caller connects), 0
 * when fd has none, -EAGAIN when not due (*until says when). */
int rl_ready_take_connect(struct rl_proc *p, int fd, uint64_t now, bool force,
                          struct rl_gate_ticket *t, struct sockaddr_storage *sa,
                          socklen_t *len, uint64_t *until);

/* What a wait call sees of one fd at `now`. */
struct rl_ready_look {
    /* Hidden, and how (enum rl_ready_what; 0: not hidden, and a failed
     * connect or a refused request is not). */
    int hidden;
    /* When its hold (RL_READY_HOLD, or a held request's turn not yet come:
     * RL_READY_TURN) ends, if later than `now`; else 0. */
    uint64_t held_until;
};

/* Look at fd at `now` (one look, under the mutex once); the shim asks it
 * as rl_ready_take's RL_READY_LOOK. */
void rl_ready_look(struct rl_proc *p, int fd, uint64_t now,
                   struct rl_ready_look *lk);

/* rl_ready_take's `what` that takes nothing: tk->look is what a wait call
 * sees of fd (rl_ready_look). */
enum { RL_READY_LOOK = 0 };

/* What a wait call or the program's next call on fd takes out of the
 * table when its moment has come: one entry for the four kinds of it,
 * and for a look at fd that takes nothing. */
struct rl_ready_take {
    /* In: the entry to take: RL_READY_CONNECT (a deferred connect, due at
     * its turn), RL_READY_OPEN (a connect waiting for a max_open place),
     * RL_READY_FAILED (a deferred connect's errno, told once) or
     * RL_READY_TURN (a held request, decided again at its turn). */
    int what;
    bool force; /* CONNECT, OPEN: take it now, due or not */
    /* Out, as what says. */
    struct rl_gate_ticket t;    /* CONNECT */
    struct sockaddr_storage sa; /* CONNECT, OPEN */
    socklen_t len;
    uint64_t deadline; /* OPEN: its max_delay */
    uint64_t until;    /* -EAGAIN: when to look again */
    int err;           /* FAILED, TURN refused */
    struct rl_ready_look look; /* LOOK */
};

/* Take fd's entry of kind tk->what at `now` (rl_ready_take_connect,
 * rl_ready_take_open, rl_ready_take_error, rl_ready_turn_due). Returns 1
 * when taken (CONNECT, OPEN: the caller connects or decides again;
 * FAILED: tk->err told; TURN: refused, tk->err is what the sockets' sends
 * fail with); 0 when fd has none (TURN: or it goes now; LOOK: always);
 * -EAGAIN when not yet (tk->until). */
int rl_ready_take(struct rl_proc *p, int fd, uint64_t now,
                  struct rl_ready_take *tk);

/* Copy up to `cap` entries that are still hidden at `now` into `out` and
 * return their count; *next is the earliest `until` after now of any
 * entry (UINT64_MAX when none). Holds that are over are dropped. */
unsigned rl_ready_snapshot(struct rl_proc *p, uint64_t now,
                           struct rl_ready_view *out, unsigned cap,
                           uint64_t *next);

/* fd is closed (or replaced by dup2): drop its entry; a reservation or a
 * deferred connect not spent goes back to the budget. */
void rl_ready_forget(struct rl_proc *p, int fd);

/* The same for every fd in [first, last]. */
void rl_ready_forget_range(struct rl_proc *p, unsigned first, unsigned last);

/* In the child after fork: the entries are the parent's (its turns, its
 * tickets); the child forgets them without giving anything back. */
void rl_ready_atfork_child(struct rl_proc *p);

#endif
