/* decide_request.h — one question, one answer: the requests a write
 * carries (SPEC §11, §12; issue 32), whatever carries them.
 *
 * A carrier is what moves a request's bytes: a plaintext socket's send
 * (shim/hook_request.c), or a TLS library's write (shim/tlswrite.c: on
 * an fd, through a BIO of the program's own, through a memory BIO the
 * program empties, GnuTLS). It hands over the bytes, what it knows of
 * the connection (its socket, the server name, the socket its
 * ciphertext was seen on) and a table of what it can ask its kernel and
 * its tables, each asked only when the decision needs it. Policy does
 * the rest: the connection's shared state taken and let go, its name
 * and address, the plan of its requests against the gate, a TLS stream
 * on a plaintext socket, a hold after a denial, a memory BIO's turn held
 * on its socket. The carrier applies the answer: go (sleeping until the
 * turn first, then asking again), fail with an errno, or pass the call
 * on uncounted; the socket to hide from the wait calls.
 *
 *     rl_decide_request(p, c, &q, &a);
 *     while a.act is GO and a.wake: sleep; q.again = true; ask again
 *     r = real(..., a.allow bytes)
 *     rl_settle_request(p, c, &q, &a, r);
 *
 * Never sleeps; runs under the carrier's re-entry guard. */
#ifndef RL_POLICY_DECIDE_REQUEST_H
#define RL_POLICY_DECIDE_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "policy/decide.h"
#include "policy/reqconn.h"

struct rl_proc;

/* What carries the bytes. */
enum rl_carrier {
    RL_CARRY_PLAIN = 0, /* a plaintext socket's send */
    RL_CARRY_TLS = 1,   /* a TLS library's write of plaintext */
};

/* What a carrier can be asked; each only when the decision needs it. */
struct rl_request_probe {
    /* Must a call on fd with `flags` not sleep? */
    bool (*nonblocking)(int fd, int flags);
    /* What the kernel has to say of fd: 0 nothing, -1 a hang-up, > 0 its
     * pending error (shim/wait.h rl_wait_kernel_says). */
    int (*kernel_says)(int fd);
    /* The peer of fd into *ss (NULL: none). */
    const struct sockaddr *(*peer)(int fd, struct sockaddr_storage *ss,
                                   socklen_t *len);
    /* The port of the CONNECT tunnel fd's connection carries (0: none). */
    uint16_t (*tunnel_port)(int fd);
    /* Plain: is a TLS library the shim reads loaded in the process? */
    bool (*tls_visible)(void);
    /* Plain: ciphertext on fd is the bytes of a TLS write of this thread
     * whose session did not know its socket; true when fd is now it. */
    bool (*tls_bind)(int fd);
    /* TLS without an fd: the socket its session's ciphertext leaves by,
     * else -1; when `look`, looked for now if it can be (its handshake's
     * client random). *membio: the program moves that ciphertext itself.
     * ctx is q's. */
    int (*wire)(void *ctx, bool look, bool *membio);
};

/* The question. */
struct rl_request_question {
    struct rl_call head; /* RL_CALL_REQUEST: asked as rl_decide (decide.h) */
    const char *call; /* its name in log lines */
    int carrier;      /* enum rl_carrier */
    int fd;           /* the socket (-1: the TLS library names none) */
    int flags;        /* plain: the send's flags */
    int how;          /* TLS: RL_REQ_WHOLE or RL_REQ_PIECES */
    const struct iovec *iov; /* NULL: bytes not seen (the connection is
                                counted no further) */
    size_t n;
    /* TLS, the session's first counted write: the server name the
     * program set ("": none; NULL: not the first write). */
    const char *sni;
    const struct rl_request_probe *probe;
    void *ctx; /* the carrier's, for probe->wire */
    /* At the turn of a GO with a.wake, asked with that answer: a pause of
     * its destination that came meanwhile holds it still (a new a.wake),
     * or fails it (a.act FAIL). */
    bool again;
    /* rl_decide's: the connection rl_decide_request is handed as `c`. */
    struct rl_reqconn *conn;
};

/* act beside RL_GATE_GO and RL_GATE_FAIL (policy/gate.h). */
enum {
    RL_REQUEST_PASS = 3,   /* not counted: the call goes as any other */
    RL_REQUEST_KERNEL = 4, /* held back on a socket the kernel refuses:
                              the call goes, and the kernel answers */
    RL_REQUEST_CIPHER = 5, /* plain: ciphertext of a TLS session */
    RL_REQUEST_RESPOND = 6, /* plain: a refused request the shim answers
                               (SPEC §15): `allow` bytes are taken and
                               not sent; no real call; settle with
                               sent = allow */
};

/* The answer. */
struct rl_request_answer {
    int act;
    int err;       /* FAIL: the errno */
    size_t allow;  /* GO: the bytes that may go now */
    uint64_t wake; /* GO: sleep until then (CLOCK_MONOTONIC ns), then
                      ask again (q.again); 0: go at once */
    uint64_t after; /* GO: sleep until then after the real call wrote (a
                       memory BIO's turn not held on its socket) */
    int hide;      /* a socket now held: hidden from the wait calls (-1) */
    bool forget;   /* plain: the fd's requests are counted no further */
    bool paced;    /* CIPHER: the fd's sends wait while its session's
                      writes wait (shim/wait.h rl_wait_paced) */
    int sock;      /* the socket the write goes by, to sleep on (-1) */
    struct rl_reqplan p; /* policy's, until rl_settle_request */
};

/* A connection to count the requests of, to `sa` (NULL: not known);
 * NULL when there is no memory. Freed by rl_request_conn_free. The shim
 * asks both through rl_policy_fd_event (RL_FDLIFE_CONN_*). */
struct rl_reqconn *rl_request_conn_new(const struct sockaddr *sa,
                                       socklen_t len);
void rl_request_conn_free(struct rl_reqconn *c);

/* Decide the write q on c. Fills a (q->again: updates the answer of the
 * same write at its turn). */
void rl_decide_request(struct rl_proc *p, struct rl_reqconn *c,
                       const struct rl_request_question *q,
                       struct rl_request_answer *a);

/* After the real call of a GO took `sent` bytes (< 0: it failed): the
 * scanner moves on. Returns true when, plain, the fd's requests are
 * counted no further. */
bool rl_settle_request(struct rl_proc *p, struct rl_reqconn *c,
                       const struct rl_request_question *q,
                       struct rl_request_answer *a, long sent);

/* What one read returned: `got` bytes in iov[0..n) on c, by `carrier`;
 * or, r->end RL_READ_ENDED or RL_READ_CLOSING (got 0), the stream's end:
 * the server's EOF or reset, or the program's close (policy/reqconn.h's
 * rl_reqconn_ended); or, RL_READ_AHEAD, what a look of a write asleep
 * for its turn saw from the program's next byte on (made only while no
 * read of the program is under way: the program's reads of those bytes
 * are then not read again). `lost`: bytes went by before it unseen.
 * Returns true when, plain, the stream turned out not to be HTTP (count
 * it no further; never for a look). */
bool rl_request_received(struct rl_proc *p, struct rl_reqconn *c,
                         int carrier, const struct rl_reqread *r, bool lost,
                         const struct iovec *iov, size_t n, size_t got);

/* on_deny = respond (SPEC §15): one question about the made-up answers
 * queued on c, asked as `ask`. */
enum rl_madeup_ask {
    /* Copy the answer due into iov[0..n) and take it: returns the bytes
     * (0: none due); *left: answers still queued on c. */
    RL_MADEUP_TAKE = 0,
    RL_MADEUP_PEEK,    /* the same, not taken */
    RL_MADEUP_PENDING, /* its bytes, none copied (SSL_pending's share) */
    RL_MADEUP_DUE,     /* 1 when one is due (the wait calls report it
                          readable), else 0 */
    /* The same, never waiting for another thread that holds c: 1 then
     * (the caller holds a lock that thread may want). */
    RL_MADEUP_DUE_NOW,
};

/* iov, n and left are read only by TAKE and PEEK (left may be NULL
 * otherwise). */
size_t rl_request_madeup(struct rl_reqconn *c, int ask,
                         const struct iovec *iov, size_t n, bool *left);

#endif
