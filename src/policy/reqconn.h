/* reqconn.h — the requests of one connection (SPEC §11): what the program
 * writes is scanned (http/reqscan.h) and each request it starts is
 * charged, through the gate, to the budgets of the name it carries, when
 * the call that carries its first byte is made.
 *
 * One struct rl_reqconn per connection whose requests are counted, made by
 * whoever owns the connection's writes: the socket layer (shim/conntab.c,
 * per fd, a plaintext TCP connection) or the TLS layer (shim/hook_tls*.c,
 * per SSL* or gnutls session). The TLS layer owns the count on a TLS
 * connection: the socket layer's scanner sees a TLS record, stops, and
 * never counts the ciphertext.
 *
 * The shim's carriers do not call this file: they ask
 * policy/decide_request.h, which takes the shared state and calls it.
 *
 * Every write has two steps around the real call:
 *
 *     struct rl_reqplan p;
 *     rl_reqconn_plan(proc, c, iov, n, &q, &p);   decide the requests the bytes
 *                                           start (nothing is changed but
 *                                           the budgets)
 *     sleep until p.wake if p.act is GO and the call may sleep;
 *     r = real(..., p.allow bytes)          or fail with p.err
 *     rl_reqconn_done(c, iov, n, r, &p);    the bytes that went move the
 *                                           scanner on
 *
 * A request charged by a call that then failed (the kernel's EAGAIN, or
 * a TLS write the library asks to be retried) stays charged, and a retry
 * of the same bytes is not charged again: the connection remembers how
 * far its stream is charged. Not async-signal-safe (a write from a
 * signal handler is not scanned: the stream is given up). */
#ifndef RL_POLICY_REQCONN_H
#define RL_POLICY_REQCONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "http/http.h"
#include "http/reqscan.h"
#include "http/respscan.h"
#include "http/tlshello.h"
#include "policy/dest.h"
#include "policy/names.h"
#include "util/waitlock.h"

struct rl_proc;
struct rl_gate_req;

/* A request the program sent and whose final answer has not come yet,
 * named as it was charged (SPEC §12: that answer pauses those budgets).
 * HTTP/1.x ones are answered in the order they went; HTTP/2 ones by
 * stream id. */
struct rl_reqsent {
    uint32_t stream_id; /* HTTP/2; 0 for HTTP/1.x */
    uint16_t port;      /* the port it was charged with (0: the peer's) */
    uint16_t gen;       /* a slot of http.names: its generation */
    uint8_t name;       /* RL_SENT_PEER, RL_SENT_SNI, or a slot of
                           http.names */
    bool late;          /* counted already as no answer in time */
    bool gone;          /* a write that carried it returned */
    uint64_t sent_ns;   /* when it was recorded, then when that write
                           returned: CLOCK_MONOTONIC ns */
};
#define RL_SENT_MAX 32
#define RL_SENT_PEER 0xffu /* charged without a name: the connection's */
#define RL_SENT_SNI 0xfeu  /* charged to the TLS server name */

struct rl_reqconn {
    struct rl_httpconn http; /* shared with the response side */
    struct rl_reqscan scan;
    /* The response side (policy/respconn.c): what the program receives,
     * and the requests it answers. */
    struct rl_respscan resp;
    struct rl_reqsent sent[RL_SENT_MAX];
    uint8_t nsent;
    bool resp_off; /* responses are read no further */
    /* The process's list of connections that carried requests
     * (policy/awaited.h; under its word): NULL aw, none. */
    struct rl_reqconn *aw_next, *aw_prev;
    struct rl_awaited *aw;
    uint32_t aw_epoch;
    /* A robots.txt answer's body being read (policy/robotsread.h; SPEC
     * §14), allocated for it alone; NULL otherwise. */
    struct rl_robotsread *robots;
    /* Bytes of the server's stream the response side read before the
     * program did (RL_READ_AHEAD): the program's next reads of as many
     * are not read again, and no made-up answer is due until it has read
     * them (its place among the server's answers is the program's). */
    uint64_t ahead;
    int resp_lost; /* atomic: bytes went by unread (a second thread's
                      read at once, a read that waited too long for the
                      state, or a signal handler's): the next read turns
                      the side off */
    /* The connection's destination: its peer (salen 0: not known) and the
     * TLS server name the program set ("" : none). */
    struct sockaddr_storage peer;
    socklen_t salen;
    char sni[RL_NAME_MAX + 1];
    /* The port of the CONNECT tunnel the connection carries (0: none): a
     * request inside it whose Host gives no port is its site's there,
     * not the proxy's (atomic: a TLS session on the socket copies it). */
    uint16_t tunnel_port;
    /* A TLS session's connection: the socket whose peer was asked, + 1
     * (0: none; policy/decide_request.c asks each socket once). */
    int peer_asked;
    /* Bytes of the stream from the scanner's position on whose requests
     * are charged already (a call that carried them failed, or a turn
     * reserved for a non-blocking socket), and, for such a turn, when it
     * comes (CLOCK_MONOTONIC ns; 0: none). */
    uint64_t charged;
    uint64_t turn;
    uint8_t turn_sent; /* records (sent[]) the requests of `turn` made */
    bool tls_seen;  /* a TLS record went through the socket layer */
    bool tls_owned; /* a TLS layer counts this connection's requests */
    /* A plaintext socket whose stream began with a ClientHello: its client
     * random (hello_seen), until the TLS session that wrote it claims the
     * socket (rl_conntab_claim_hello). A session that moves its ciphertext
     * through a memory BIO is known by it alone; its socket is then
     * `tls_paced`: held while one of that session's writes waits its turn
     * (shim/tlswrite.c). */
    uint8_t hello[RL_TLS_RANDOM];
    bool hello_seen;
    bool tls_paced;
    /* The state the request and response sides share (the scanners, the
     * record of requests awaiting answers, `http`, the flags above): a
     * lock word (util/waitlock.h; rl_reqconn_hold), taken while a write
     * plans, decides again or ends, and while a read looks at an answer.
     * Never across a sleep or a real call: a read sees its answers (a
     * 429 among them) while a write of another thread waits its turn. */
    uint32_t busy;
    /* A socket's connection: whether a write and a read hold it, and
     * whether it was unlinked meanwhile (conntab.c, under its table's
     * lock). */
    int holds;
    /* A TLS session's connection: a write is in progress, from its plan
     * to its end, its sleep included (atomic: another thread's write at
     * once is not scanned). `busy` is then held only while the write
     * touches the connection, so that the session's reader sees its
     * answers (a 429 among them) while the write waits for its turn. */
    int writing;
    /* on_deny = respond (SPEC §15; reqrespond.c): the made-up answers
     * the program's reads get before the server's next bytes (NULL: none
     * ever), and whether the bytes of a refused request go on past its
     * write, to be taken unsent up to the next request. */
    struct rl_respond *made;
    bool swallowing;
    /* HTTP/2 (respond_h2.c): the streams cut from the client's writes
     * (NULL: none ever), and the length of the HEADERS frame this write
     * opens with when its request can be answered (0: it cannot). */
    struct rl_h2cut *h2cut;
    uint32_t h2_lead;
};

/* Take c's shared state (`busy`), waiting up to max_ns for the thread
 * that holds it (false: not had, and nothing is held: a holder that
 * never came back). Every call below but rl_reqconn_init, _free and
 * _lost is made holding it when another thread may use c. */
static inline bool rl_reqconn_hold(struct rl_reqconn *c, uint64_t max_ns)
{
    return rl_waitlock_take(&c->busy, max_ns);
}

static inline void rl_reqconn_let_go(struct rl_reqconn *c)
{
    rl_waitlock_let_go(&c->busy);
}

/* How a write goes: a plaintext socket write may be cut before a request
 * that cannot go (a short write); a TLS write goes whole or not at all;
 * a TLS write that may go in pieces (shim/tlswrite.c hands the library
 * each piece as a write of its own) does so in delay mode when it carries
 * several requests: p.allow ends where its second request starts, and
 * each piece goes at its request's turn (fail mode: whole or not at all). */
enum rl_reqhow { RL_REQ_PLAIN = 0, RL_REQ_WHOLE = 1, RL_REQ_PIECES = 2 };

/* What the write is: its fd (-1: not known), its name in log lines, and
 * whether it may sleep (a blocking socket; 0 for a non-blocking one:
 * a turn later than now is then reserved and answered EAGAIN). */
struct rl_reqwrite {
    int fd;
    const char *call;
    int how;            /* enum rl_reqhow */
    bool nonblocking;
    /* The socket its ciphertext leaves by when the library names none
     * (curl's own BIO), else -1: its turns are slept as a blocking
     * write's, but when that socket is non-blocking a wait past max_delay
     * fails it at once (overdue.h), or the program would wait for that
     * socket for the whole wait. Asked only then. */
    int wire;
    /* The caller hands the library the write in pieces, p.allow or
     * p.swallow bytes at a time, whatever `how` (a memory BIO's write
     * goes whole in delay mode, yet its HTTP/2 streams may be cut: SPEC
     * §15, respond_h2.c). */
    bool pieces;
};

/* The decision for one write. */
struct rl_reqplan {
    int act;       /* RL_GATE_GO or RL_GATE_FAIL (then err) */
    int err;
    size_t allow;  /* GO: bytes that may go now (plaintext: up to the first
                      request that cannot; the whole write otherwise) */
    uint64_t wake; /* GO: sleep until then first (CLOCK_MONOTONIC ns; 0: at
                      once); FAIL on a non-blocking socket, or of a write
                      that goes whole: when it could go (hold the
                      socket until then; 0: not known) */
    unsigned requests; /* requests this write charged */
    unsigned sent;     /* records (sent[]) it made for their answers */
    /* GO: bytes of refused requests at the start of the write, taken
     * without being sent (SPEC §15: the shim answers them); the call
     * returns this many and makes no real call. 0: none. */
    size_t swallow;
    bool scanned;  /* done must commit (false: the write was not looked at) */
};

/* Start counting a connection to `sa` (NULL: not known yet). The result is
 * zeroed and owned by the caller; free with rl_reqconn_free. */
void rl_reqconn_init(struct rl_reqconn *c, const void *sa, socklen_t salen);
void rl_reqconn_free(struct rl_reqconn *c);

/* Is there anything left to count on c (not a stream that turned out not
 * to be HTTP, nor a plaintext socket that carries TLS)? */
bool rl_reqconn_counting(const struct rl_reqconn *c);

/* Decide the write of iov[0..n) on c, by p's gate. */
void rl_reqconn_plan(struct rl_proc *proc, struct rl_reqconn *c,
                     const struct iovec *iov, size_t n,
                     const struct rl_reqwrite *w, struct rl_reqplan *p);

/* A write planned with a later turn (p->wake, GO), at that turn, on a
 * socket that slept for it: its requests go now unless a pause of their
 * destination came meanwhile (SPEC §12), which holds them too. Then
 * p->wake is their new turn after the pause (sleep again, and ask again
 * then), or p->act is RL_GATE_FAIL (p->err; the requests the plan
 * charged are charged again by a retry of these bytes). iov and w as
 * the plan had them. */
void rl_reqconn_again(struct rl_proc *proc, struct rl_reqconn *c,
                      const struct iovec *iov, size_t n,
                      const struct rl_reqwrite *w, struct rl_reqplan *p);

/* A write planned with a later turn (`turn`) whose bytes go now all the
 * same (a memory BIO's: shim/tlswrite.c): its requests, detached into *h,
 * for their socket to be held until that turn and decided again there
 * (reqheld.h). iov and w as the plan had them, before rl_reqconn_done. */
struct rl_reqheld;
void rl_reqconn_held(const struct rl_reqconn *c, const struct iovec *iov,
                     size_t n, const struct rl_reqwrite *w, uint64_t turn,
                     struct rl_reqheld *h);

/* After the real call took `sent` bytes (< 0: it failed); the requests
 * recorded for their answers (sent[]) not stamped yet are stamped as
 * sent now. A stream whose
 * first bytes were a ClientHello keeps its client random (c->hello): a
 * session written through a memory BIO is paired with its socket by it. */
void rl_reqconn_done(struct rl_reqconn *c, const struct iovec *iov, size_t n,
                     long sent, const struct rl_reqplan *p);

/* What one read is: its fd (-1: not known), its name in log lines, and
 * whether it ended the stream instead of returning bytes. */
enum rl_reqread_end {
    RL_READ_BYTES = 0, /* bytes (got > 0) */
    RL_READ_ENDED,     /* the server's end: EOF, or ECONNRESET */
    RL_READ_CLOSING,   /* the program closes the connection */
    /* Bytes looked at, not taken (got > 0): the stream from the program's
     * next byte on, seen by a write asleep for its turn (SPEC §12: an
     * answer the program has not read yet pauses what waits behind it). */
    RL_READ_AHEAD,
};
struct rl_reqread {
    int fd;
    const char *call;
    int end; /* enum rl_reqread_end */
};

/* A request of c was charged as q names it (or found no budget): its
 * answer is to pause those budgets (respconn.c). */
void rl_reqconn_sent(struct rl_reqconn *c, const struct rl_gate_req *q,
                     uint32_t stream_id);

/* The program received `got` bytes in iov[0..n) on c (what the call
 * really returned, never more): each final response's status goes to
 * rl_gate_request_outcome of proc, named as its request was charged. The
 * bytes are only read. Not async-signal-safe: a handler's read is not
 * passed here (rl_reqconn_lost). */
void rl_reqconn_received(struct rl_proc *proc, struct rl_reqconn *c,
                         const struct iovec *iov, size_t n, size_t got,
                         const struct rl_reqread *r);

/* A write of c's bytes returned (rl_reqconn_done): the requests recorded
 * and not gone yet went now (a turn reserved before they went is not a
 * wait for their answer). */
void rl_reqconn_gone(struct rl_reqconn *c);

/* The end of c's stream, r->end says whose (RL_READ_ENDED: the server's,
 * RL_READ_CLOSING: the program's), rather than bytes: a request still
 * awaiting an answer goes to rl_gate_request_failed_at of proc (SPEC §14
 * backoff_on): reset when the server ended it before the oldest one's
 * answer began, timeout when one has waited its response_timeout. The
 * response side reads no further. rl_reqconn_received passes it on when
 * r->end is not RL_READ_BYTES. */
void rl_reqconn_ended(struct rl_proc *proc, struct rl_reqconn *c,
                      const struct rl_reqread *r);

/* A request of c awaiting an answer longer than the shortest
 * response_timeout a section lists (rl_gate_response_timeout) at `now`
 * goes to rl_gate_request_failed_at as a timeout, once; the oldest of them
 * only (one error per look, not one per request in flight). Costs one
 * test when none is awaited. */
void rl_reqconn_overdue(struct rl_proc *proc, struct rl_reqconn *c,
                        const struct rl_reqread *r, uint64_t now);

/* The same look at c's records for policy/awaited.c, whose walk counts
 * what it finds once c is let go: the requests waiting `limit` or
 * longer are marked late, and the oldest of them copied into *out
 * (false: none, or its name's slot was re-used). */
struct rl_awaited_req;
bool rl_reqconn_late_take(struct rl_reqconn *c, uint64_t now, uint64_t limit,
                          struct rl_awaited_req *out);

/* Bytes of c's responses went by without being read here: its response
 * side turns off at its next read (responses are never guessed at from
 * the middle of a stream). Any thread may call it, holding c or not. */
static inline void rl_reqconn_lost(struct rl_reqconn *c)
{
    __atomic_store_n(&c->resp_lost, 1, __ATOMIC_RELAXED);
}

/* ---- on_deny = respond (reqrespond.c; SPEC §15) ---- */

/* The request of ev[i] (at the write's first byte) was refused with
 * t->respond_ns set: its answer queued behind the server's answers owed,
 * and its bytes in this write (up to the next request, else all of them,
 * the rest then taken from later writes) set to be taken unsent
 * (p->swallow, p->act GO). false: no room, the refusal fails. */
struct rl_gate_ticket;
bool rl_reqconn_respond(struct rl_reqconn *c, const struct rl_gate_ticket *t,
                        const struct rl_req_event *ev, size_t nev, size_t i,
                        struct rl_reqplan *p);

/* Can the write be cut short or taken unsent in part (SPEC §15)? */
static inline bool rl_reqwrite_cuts(const struct rl_reqwrite *w)
{
    return w->how == RL_REQ_PLAIN || w->pieces;
}

/* HTTP/2 (respond_h2.c), at a write's start: the frames of cut streams
 * it starts with are taken unsent (p->swallow; true: plan no further),
 * else p->allow ends at its first frame of a cut stream, and c->h2_lead
 * says whether its first request can be answered. */
bool rl_reqconn_h2_plan(struct rl_reqconn *c, const struct iovec *iov,
                        size_t n, const struct rl_reqwrite *w,
                        struct rl_reqplan *p);
/* A TLS write (in pieces) of HTTP/2 streams whose first request (first,
 * asked as q) every
 * budget would answer: its requests are planned one by one, as a
 * plaintext write's, each refused one answered apart. */
bool rl_reqconn_h2_each(struct rl_proc *proc, const struct rl_reqwrite *w,
                        const struct rl_req_event *first,
                        const struct rl_gate_req *q);
/* The events of ev[0..nev) up to `allow`: their number. */
size_t rl_reqconn_h2_events(const struct rl_req_event *ev, size_t nev,
                            size_t allow);
/* The HTTP/2 request on `stream` starting the write, refused with
 * t->respond_ns set: its answer queued and its HEADERS frame taken unsent,
 * the stream cut from now on. false: it cannot be (as rl_reqconn_respond). */
/* A write settled: the streams it took unsent (p->swallow) are awaited
 * no more by the response side (the server never sees them; their
 * answers are the shim's), so that on a long-lived connection they never
 * take the places of streams the server will answer. */
void rl_reqconn_h2_settled(struct rl_reqconn *c, const struct rl_reqplan *p);

bool rl_reqconn_respond_h2(struct rl_reqconn *c,
                           const struct rl_gate_ticket *t, uint32_t stream,
                           struct rl_reqplan *p);

/* A refused request's bytes begun in an earlier write: those of this
 * write up to the next request are taken unsent (p->swallow). true:
 * the whole write is, plan no further. */
bool rl_reqconn_swallow(struct rl_reqconn *c, const struct rl_req_event *ev,
                        size_t nev, struct rl_reqplan *p);

/* Is a made-up answer the program's next bytes on c? */
bool rl_reqconn_madeup_due(const struct rl_reqconn *c);

/* Copy the due made-up answer's next bytes into iov[0..n) (taken unless
 * `peek`). Returns the bytes copied (0: none due); *left: answers still
 * queued after it. */
size_t rl_reqconn_madeup(struct rl_reqconn *c, const struct iovec *iov,
                         size_t n, bool peek, bool *left);

/* Bytes of the made-up answer due on c (0: none due). */
size_t rl_reqconn_madeup_pending(const struct rl_reqconn *c);

/* A plaintext socket whose first bytes were a TLS record while no TLS
 * layer owns it: the TLS the shim cannot see (SPEC §11). Says so once per
 * process on stderr, naming the destination, and counts it for the exit
 * report and `rlshim stat`. */
void rl_reqconn_unseen_tls(struct rl_proc *proc, const struct rl_reqconn *c);
/* (Defined in decide_request.c, its one caller.) */

#endif
