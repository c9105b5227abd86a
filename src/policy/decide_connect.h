/* decide_connect.h — one question, one answer: the whole decision of an
 * inet connect (SPEC §2, non-blocking sockets, max_open; issue 32).
 *
 * The carrier (the connect hook, a MSG_FASTOPEN send, a wait call taking
 * up a connect that waits for a max_open place) says what the socket is
 * and where it connects, with a table of what it can ask its kernel,
 * asked only when the decision needs it (an fcntl is a system call).
 * Policy then does all the rest: whether the destination is covered and
 * its sends charged, the gate's decision (rl_gate_handler's in a signal
 * handler), a connect deferred to its turn or to a free place on a
 * socket that must not sleep, a wait for a place on one that may. The
 * answer is what the carrier applies: the socket's marks, then connect
 * (after sleeping until the turn), fail with an errno, answer
 * EINPROGRESS, or sleep for a place and ask again. After the real
 * connect, rl_settle_connect says what its result changes. Runs under
 * the re-entry guard; never sleeps. */
#ifndef RL_POLICY_DECIDE_CONNECT_H
#define RL_POLICY_DECIDE_CONNECT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "policy/decide.h"
#include "policy/gate.h"

struct rl_proc;

/* What a carrier can ask its kernel about the fd of a connect, at most
 * once per decision. */
struct rl_connect_probe {
    /* Is fd non-blocking (O_NONBLOCK)? 1 yes, 0 no, -1 not known (the
     * kernel would not say): neither deferred nor waited for. */
    int (*nonblocking)(int fd);
    /* RL_CONNECT_SUPERVISOR's, for a question without its address (sa
     * NULL): read it now into *ss, for a log line that names it; NULL
     * when it is not an inet one. `ctx` is the carrier's. */
    const struct sockaddr *(*address)(void *ctx, struct sockaddr_storage *ss,
                                      socklen_t *len);
    void *ctx;
};

/* What the socket is, as the carrier knows it. */
enum rl_connect_sock {
    RL_CONNECT_OTHER = 0, /* neither: not the shim's concern */
    RL_CONNECT_STREAM = 1,
    RL_CONNECT_DGRAM = 2,
};

/* Who asks, which says what a decision may turn into. */
enum rl_connect_asker {
    /* The program's connect: a turn later or a full max_open (delay
     * mode) defers a non-blocking socket, and makes a blocking one wait
     * for its place. */
    RL_CONNECT_CALL = 0,
    /* The program's connect again after waiting for a place (a blocking
     * socket): waits again or not, never deferred. */
    RL_CONNECT_WAITED,
    /* A connect that waited for a place (policy/ready.h RL_READY_OPEN),
     * taken up by a wait call: deferred again (to its turn, or to the
     * next free place) without asking the kernel; else its ready entry
     * goes, or tells its failure. */
    RL_CONNECT_DUE,
    /* The connect of a MSG_FASTOPEN send: decided only, as the send's
     * own decision sleeps for both. */
    RL_CONNECT_FASTOPEN,
    /* From a signal handler: rl_gate_handler's async-signal-safe steps,
     * nothing deferred or waited for. */
    RL_CONNECT_HANDLER,
    /* The --seccomp supervisor's, for its target's connect (cli/
     * sup_calls.c): it answers from its timer queue, so its probe says
     * every call may sleep (the target's thread waits for the answer): a
     * later turn is GO with its wait, a full max_open (delay mode)
     * RL_CONNECT_WAIT, asked again with its deadline once
     * rl_connect_wait_over; nothing deferred. When every connect is
     * charged alike (rl_gate_connects_alike), an attempt is charged
     * whatever its address: another family's (the kernel reads it again
     * when it makes the connect), or none (sa NULL: not read; the
     * probe's `address` reads it for a log line that names it). */
    RL_CONNECT_SUPERVISOR,
};

/* The question: a connect of fd, a socket of `sock`, to the inet address
 * `sa` (RL_CONNECT_SUPERVISOR: perhaps another, or NULL). `charged`: this
 * attempt was charged already (its progress reports, a confirming second
 * connect: not charged again). `deadline`: the max_open wait's, from the answer
 * before (0 at first). */
struct rl_connect_question {
    struct rl_call head; /* RL_CALL_CONNECT: asked as rl_decide (decide.h) */
    const char *call; /* its name in log lines */
    int fd;
    const struct sockaddr *sa;
    socklen_t salen;
    int sock;  /* enum rl_connect_sock */
    int asker; /* enum rl_connect_asker */
    bool charged;
    uint64_t deadline;
    /* What the carrier answers about fd (NULL: a question that asks
     * none: RL_CONNECT_FASTOPEN, RL_CONNECT_HANDLER). */
    const struct rl_connect_probe *probe;
};

/* act, in the values of the hook's own verdicts (shim/hooks.h) and two
 * more. */
enum rl_connect_act {
    RL_CONNECT_PASS = 0, /* not charged: the real connect as is */
    RL_CONNECT_GO = 1,   /* charged: at t.now + t.wait_ns, then
                            rl_settle_connect */
    RL_CONNECT_FAIL = 2, /* denied: errno t.err */
    /* Recorded in policy/ready.h, made at its turn or when a place frees:
     * the program's connect answers EINPROGRESS and the wait calls do not
     * see the fd meanwhile. */
    RL_CONNECT_DEFERRED = 3,
    /* max_open reached, delay mode, a blocking socket: sleep (holding
     * nothing) in rl_settle_connect until a connection closes, then ask
     * again (RL_CONNECT_WAITED, this deadline). */
    RL_CONNECT_WAIT = 4,
};

/* The answer. The marks apply whatever the act. */
struct rl_connect_answer {
    int act; /* enum rl_connect_act */
    /* A request limit applies: the carrier counts the requests of a
     * stream socket's connection (SPEC §11). */
    bool counts_requests;
    /* Its sends are charged (covered, and sends are charged at all). */
    bool matched;
    /* This attempt was charged (granted now, perhaps deferred to its
     * turn): the carrier marks the socket so that its progress reports
     * pass uncharged. */
    bool charged;
    uint64_t deadline; /* RL_CONNECT_WAIT: the wait's */
    struct rl_gate_ticket t;
};

/* Decide q, asking q->probe only when the answer depends on it. Fills
 * every member of *a that the act says is read. */
void rl_decide_connect(struct rl_proc *p, const struct rl_connect_question *q,
                       struct rl_connect_answer *a);

/* After the real connect of fd (answered RL_CONNECT_GO, or deferred and
 * made now) returned r with errno err: a connection made or in progress
 * holds its max_open places until its last fd closes; a refused one
 * gives them back. An answer RL_CONNECT_WAIT is settled by its wait
 * instead (r and err unread): sleeps until a connection of the full area
 * closes, a while passes (a killed holder wakes nobody) or a->deadline,
 * holding nothing (the carrier lets its guard go first). Nothing for any
 * other act, or one decided in a handler (which holds no place). */
void rl_settle_connect(struct rl_proc *p, struct rl_connect_answer *a, int fd,
                       int r, int err);

/* RL_CONNECT_WAIT, for a carrier that cannot sleep (the supervisor): is
 * asking again worth it at `now`: a place freed since, or the wait's
 * deadline passed? */
bool rl_connect_wait_over(const struct rl_connect_answer *a, uint64_t now);

/* A connect answered RL_CONNECT_GO that is never made (the supervisor's
 * caller gone before its turn): its unit goes back, and the max_open
 * places a->t still holds. */
void rl_settle_connect_unmade(struct rl_proc *p, struct rl_connect_answer *a);

/* Does the real connect's result change anything (max_open places taken
 * for it)? The carrier asks rl_settle_connect only then: most connects
 * hold none. */
static inline bool rl_settle_connect_owes(const struct rl_connect_answer *a)
{
    return a->act == RL_CONNECT_GO && a->t.nopen != 0;
}

#endif
