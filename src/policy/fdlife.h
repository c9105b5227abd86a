/* fdlife.h — an fd's life as policy hears of it: one entry for every
 * close, range of closes and copy of an fd, and for the record of a
 * connection whose requests are counted, from the connect (or a TLS
 * session's first counted write) to its close (issue 32: one question,
 * one answer).
 *
 * Policy keeps two things by fd number, and a number is reused at once, so
 * both must let go of it before the real close: the max_open connection
 * the fd holds (policy/open.h, lock-free) and the wait calls' entry of a
 * held, reserved or deferred socket (policy/ready.h, under a mutex: a
 * reservation or a deferred connect not spent goes back to its budget).
 * The caller says whether it may take that mutex (it holds its re-entry
 * guard); the lock-free part is done wherever it is called from, a signal
 * handler included, so that no max_open place is ever left held. */
#ifndef RL_POLICY_FDLIFE_H
#define RL_POLICY_FDLIFE_H

#include <stdbool.h>
#include <sys/socket.h>

struct rl_proc;
struct rl_reqconn;

enum rl_fdlife_what {
    RL_FDLIFE_CLOSED = 1,  /* fd `first` (== last) is being closed */
    RL_FDLIFE_CLOSED_RANGE, /* every fd in [first, last] (last may be ~0U) */
    RL_FDLIFE_DUPED,       /* `last` now refers to what `first` does (dup2,
                              dup3, F_DUPFD): what it held before is gone */
    /* A connection whose requests are counted begins, to `sa` (NULL: not
     * known): *conn is its record (policy/decide_request.h), NULL when
     * there is no memory. first and last are not read. */
    RL_FDLIFE_CONN_BEGUN,
    /* That connection is over: its record *conn (NULL: none) is let go
     * and *conn set to NULL. first and last are not read. */
    RL_FDLIFE_CONN_OVER,
};

struct rl_fd_event {
    int what; /* enum rl_fdlife_what */
    unsigned first, last;
    /* The caller may take policy's locks (it holds its re-entry guard):
     * the wait calls' entries are forgotten too. Without it they stay (a
     * stale entry at worst, gone at the number's next close). */
    bool may_lock;
    /* CONN_BEGUN, CONN_OVER: */
    struct rl_reqconn **conn;
    const struct sockaddr *sa;
    socklen_t salen;
};

/* Let policy forget what it keeps for the fds of ev. */
void rl_policy_fd_event(struct rl_proc *p, const struct rl_fd_event *ev);

#endif
