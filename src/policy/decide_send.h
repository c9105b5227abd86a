/* decide_send.h — one question, one answer: the whole decision of a
 * charged send (SPEC §2, non-blocking sockets; issue 32).
 *
 * The carrier (a hook, later a TLS writer or the supervisor) hands over
 * what it knows of the call and a table of what it can ask its kernel,
 * each asked only when the decision needs it (an fcntl, a poll, a
 * getsockopt, a getpeername are system calls). Policy then does all the
 * rest: a reserved turn or a hold met on the fd, the short grant worth
 * giving, the gate's decision, a hold after a denial, a turn kept for a
 * socket that must not sleep, SO_SNDTIMEO. The answer is what the
 * carrier applies: go with the grant (after sleeping until the turn),
 * fail with an errno, or leave the call to the kernel; the wait calls'
 * view of the fd to change; a deferred connect of the fd to make now.
 * After the real call, rl_settle_send gives back what the kernel did not
 * take. Runs under the re-entry guard; never sleeps. A send made from a
 * signal handler is a mode of the same question (q->handler): the gate's
 * async-signal-safe steps, nothing held, deferred or logged. */
#ifndef RL_POLICY_DECIDE_SEND_H
#define RL_POLICY_DECIDE_SEND_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "policy/decide.h"
#include "policy/gate.h"

struct rl_lease_holder;
struct rl_proc;

/* What a carrier can ask its kernel about the fd of a send. Each is asked
 * at most as often as the decision needs (the nonblocking answer once). */
struct rl_send_probe {
    /* Must a call on fd with `flags` not sleep (O_NONBLOCK, or
     * MSG_DONTWAIT)? */
    bool (*nonblocking)(int fd, int flags);
    /* What the kernel has to say of fd that a send would hear: 0 nothing,
     * -1 a hang-up (the kernel answers the call), > 0 its pending error
     * (shim/wait.h rl_wait_kernel_says). */
    int (*kernel_says)(int fd);
    /* SO_SNDTIMEO of fd in ns, 0 when none. */
    uint64_t (*send_timeout)(int fd);
    /* The peer of fd into *ss, or NULL when it has none. */
    const struct sockaddr *(*peer)(int fd, struct sockaddr_storage *ss,
                                   socklen_t *len);
};

/* Who asks, which says what a decision may turn into. */
enum rl_send_asker {
    /* The program's own call (a hook): sendmmsg may send a prefix of its
     * messages; a denial holds the fd for the wait calls. */
    RL_SEND_CALL = 0,
    /* The --seccomp supervisor's, for its target's call (cli/
     * sup_calls.c): it can only let the call go as made or fail it, so
     * all `calls` or none; and it has no wait calls' view to change, so
     * nothing is held after a denial. Its probe says every call may
     * sleep (the target's thread waits for the answer, which comes at
     * the turn from its timer queue). */
    RL_SEND_SUPERVISOR = 1,
    /* A carrier classifying a send before it is one: is a send to the
     * inet address `sa` charged at all (sends are charged, and the rule
     * covers sa)? How it classifies a datagram with an explicit
     * destination, and a socket it inherited connected to `sa` (the
     * connect answer's `matched` says it of a socket connected here).
     * Only `sa` and `salen` are read; the answer's act is RL_GATE_GO or
     * RL_DECIDE_NO, and nothing else of it is. Async-signal-safe: loads
     * of what set-up published. */
    RL_SEND_CLASSIFY = 2,
    /* The carrier's leased way (policy/gate_leased.h), for a fleet
     * budget's host lease: one unit of `want` bytes (`stream`: cut to the
     * largest grant) out of the lease and nothing else, no decision:
     * RL_GATE_GO with the grant in t.calls and t.bytes (settled as
     * leased), else RL_DECIDE_NO (then the whole question is asked). */
    RL_SEND_LEASE_ONLY = 3,
};

/* The question: a charged send call on fd of `calls` units (sendmmsg's
 * messages) carrying `want` bytes, `min` of them at least (0: 1 for a
 * stream, whose `want` is then cut to the largest grant, all for a
 * datagram), to `sa` (NULL: the fd's peer). */
struct rl_send_question {
    struct rl_call head; /* RL_CALL_SEND: asked as rl_decide (decide.h) */
    const char *call; /* its name in log lines */
    int fd;
    int flags;
    const struct sockaddr *sa;
    socklen_t salen;
    uint64_t calls, want, min;
    bool stream; /* a stream socket's send (else a datagram's) */
    /* One unit to the fd's own peer (`sa` NULL) on a socket whose sends
     * are charged: it may come out of the thread's lease first, without
     * a decision (rl_gate_send_leased). */
    bool lease;
    /* Made from a signal handler: decided by async-signal-safe steps only
     * (rl_gate_handler: no allocation, no lock, no sleep, nothing logged
     * or held for later), asking the kernel at most the peer of a stream
     * or of a send without an address; `sa` is then the destination
     * only when the fd has no peer (a MSG_FASTOPEN connecting now). */
    bool handler;
    /* The ticket of the connect this send makes (MSG_FASTOPEN), granted
     * just before: its unit goes back when the send is denied, and the
     * kernel's hang-up is no answer (a socket with no connection yet
     * polls as hung up). NULL: none. */
    struct rl_gate_ticket *fastopen;
    const struct rl_send_probe *probe;
    int asker; /* enum rl_send_asker */
};

/* act beside RL_GATE_GO and RL_GATE_FAIL: a send that would be held back
 * on a socket the kernel refuses goes to the kernel, uncharged. */
#define RL_DECIDE_KERNEL 2
/* act of a question asked aside (RL_SEND_CLASSIFY: the send is not
 * charged; RL_SEND_LEASE_ONLY: the lease does not cover it). */
#define RL_DECIDE_NO 3

/* How the wait calls are to see the fd afterwards, applied in this
 * order: SHOW, its registrations as the program made them (a hold or a
 * reserved turn met is over); HIDE, writability hidden until the hold
 * (or the reserved turn) it now has. */
enum {
    RL_DECIDE_SHOW = 1,
    RL_DECIDE_HIDE = 2,
};

/* The answer. On RL_GATE_GO t.calls and t.bytes are the grant and the
 * turn is t.now + t.wait_ns; on RL_GATE_FAIL t.err is the errno. The
 * rest of t is policy's, kept by the carrier until rl_settle_send (a
 * handler's: t.handler, nothing to settle). */
struct rl_send_answer {
    int act;       /* RL_GATE_GO, RL_GATE_FAIL, RL_DECIDE_* */
    bool leased;   /* GO out of the thread's lease (q->lease): settled so */
    unsigned view; /* RL_DECIDE_* bits */
    /* RL_READY_CONNECT or RL_READY_OPEN: the fd's own connect was
     * deferred (policy/ready.h); the carrier makes it now, as a wait
     * call would at `connect_now`, and the send fails EAGAIN. */
    int connect_due;
    uint64_t connect_now;
    /* A holder whose lease record rl_settle_send stamps (the carrier's
     * leased way: its take stamps nothing, rl_lease_stamp_due says when
     * the stamp is due); NULL from rl_decide_send. */
    struct rl_lease_holder *stamp;
    struct rl_gate_ticket t;
};

/* Decide q. Fills every member of *a that the act says is read. */
void rl_decide_send(struct rl_proc *p, const struct rl_send_question *q,
                    struct rl_send_answer *a);

/* The carrier's classification, asked as RL_SEND_CLASSIFY: is a send to
 * the inet address `sa` charged at all? */
static inline bool rl_decide_send_charged(struct rl_proc *p,
                                          const struct sockaddr *sa,
                                          socklen_t salen)
{
    const struct rl_send_question q = {.head = {RL_CALL_SEND},
                                       .sa = sa,
                                       .salen = salen,
                                       .asker = RL_SEND_CLASSIFY};
    struct rl_send_answer a;
    rl_decide(p, &q.head, (union rl_answer){.send = &a});
    return a.act == RL_GATE_GO;
}

/* After the real call of a granted send took `calls` units and `bytes`
 * bytes (a failed call: 0, 0): a->stamp's record stamped; what was
 * granted beyond that goes back, to the thread's lease when `leased`
 * (a->leased, or the carrier's own lease take, written into a->t.calls
 * and a->t.bytes), else to every budget the decision took from; a->t
 * then says what was spent. */
void rl_settle_send(struct rl_proc *p, struct rl_send_answer *a, bool leased,
                    uint64_t calls, uint64_t bytes);

/* Is anything owed back after a call that took `calls` and `bytes`? (The
 * carrier then enters its guard for rl_settle_send; most calls owe
 * nothing.) */
static inline bool rl_settle_send_owes(const struct rl_send_answer *a,
                                       uint64_t calls, uint64_t bytes)
{
    return calls < a->t.calls || bytes < a->t.bytes;
}

#endif
