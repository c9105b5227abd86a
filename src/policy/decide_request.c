/* decide_request.c — the requests a write carries, decided once for any
 * carrier (decide_request.h): the connection's shared state taken only
 * while it is planned, decided again or ended (never across a sleep or
 * the real call, so that a read of another thread sees the answers, a
 * 429 among them, while a write waits its turn), its name and address,
 * and what a socket that must not sleep gets instead of a sleep. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/decide_request.h"
#include "policy/awaited.h"
#include "policy/gate.h"
#include "policy/ready.h"
#include "policy/proc.h"
#include "policy/report.h"
#include "policy/reqheld.h"
#include "policy/respond.h"
#include "policy/dests.h"
#include "util/declog.h"
#include "util/log.h"
#include "util/clock.h"

/* How long a write waits for the connection's state: held by a write
 * only while it plans or ends, by a read while it looks at an answer
 * (and pauses its destination). No holder waits for anything else
 * meanwhile; the bound is for a holder that never came back (a
 * cancelled thread). */
#define WRITE_WAIT_MAX_NS 1000000000ull

/* How long a read waits for a write that plans or ends (asking Redis
 * for a fleet budget takes part of it). */
#define READ_WAIT_MAX_NS 200000000ull

struct rl_reqconn *rl_request_conn_new(const struct sockaddr *sa,
                                       socklen_t len)
{
    struct rl_reqconn *c = calloc(1, sizeof *c);
    if (c != NULL)
        rl_reqconn_init(c, sa, len);
    return c;
}

void rl_request_conn_free(struct rl_reqconn *c)
{
    if (c == NULL)
        return;
    rl_awaited_leave(c);
    rl_reqconn_free(c);
    free(c);
}

static void answer_init(struct rl_request_answer *a, int act)
{
    a->act = act;
    a->err = 0;
    a->allow = 0;
    a->wake = 0;
    a->after = 0;
    a->hide = -1;
    a->forget = false;
    a->paced = false;
    a->sock = -1;
    a->p.scanned = false;
}

/* ---- a plaintext socket's send ---- */

/* A TLS stream on a plaintext socket whose session no TLS library of the
 * process could have written: its requests cannot be seen (said once). */
static void tls_check(struct rl_proc *p, struct rl_reqconn *c,
                      const struct rl_request_question *q)
{
    if (!c->tls_seen || c->tls_owned)
        return;
    c->tls_seen = false;
    if (!q->probe->tls_visible())
        rl_reqconn_unseen_tls(p, c);
}

/* A TLS connection whose session the TLS layer may yet find here: one
 * written through a BIO of the program's own (curl's) is known by its
 * socket only when its first write's ciphertext comes by. */
static bool tls_unbound(const struct rl_reqconn *c,
                        const struct rl_request_question *q)
{
    return rl_reqscan_proto(&c->scan) == RL_HTTP_TLS &&
           (c->tls_paced || (!c->tls_owned && q->probe->tls_visible()));
}

/* A send of ciphertext: kept only until a TLS write it is made inside
 * names its session, or the session named this socket itself (its
 * handshake's client random, or its fd). The socket of a session that
 * moves its ciphertext itself (a memory BIO) stays: its sends wait while
 * a write of that session waits its turn. */
static void ciphertext(struct rl_reqconn *c,
                       const struct rl_request_question *q,
                       struct rl_request_answer *a)
{
    if (!c->tls_owned && q->probe->tls_bind(q->fd))
        c->tls_owned = true;
    a->act = RL_REQUEST_CIPHER;
    a->paced = c->tls_paced;
    a->forget = !c->tls_paced && c->tls_owned;
    rl_reqconn_let_go(c);
}

static void plain_write(const struct rl_request_question *q,
                        struct rl_reqwrite *w)
{
    w->fd = q->fd;
    w->call = q->call;
    w->how = RL_REQ_PLAIN;
    w->nonblocking = (q->flags & MSG_DONTWAIT) != 0;
    w->wire = -1;
    w->pieces = false;
}

/* A request of c still unanswered past its response_timeout counts
 * before this write's are decided (SPEC §14 backoff_on = timeout: at
 * the connection's next request); held. */
static void late_answers(struct rl_proc *p, struct rl_reqconn *c,
                         const struct rl_request_question *q)
{
    if (rl_gate_response_timeout(p) == 0)
        return;
    uint64_t now = rl_clock_now_ns();
    if (c->nsent > 0) {
        const struct rl_reqread r = {q->fd, q->call, RL_READ_BYTES};
        rl_reqconn_overdue(p, c, &r, now);
    }
    /* And those of the destination's other connections (awaited.h). */
    rl_awaited_join(p, c);
    rl_awaited_look(p, c, q->call, now);
}

static void decide_plain(struct rl_proc *p, struct rl_reqconn *c,
                         const struct rl_request_question *q,
                         struct rl_request_answer *a)
{
    /* A read of another thread looking at an answer holds the state a
     * moment. Not had (its holder never came back), or bytes not seen
     * (sendfile): the stream's place is lost, so its requests are
     * counted no further. */
    bool held = rl_reqconn_hold(c, WRITE_WAIT_MAX_NS);
    if (!held || q->iov == NULL) {
        if (held)
            rl_reqconn_let_go(c);
        a->forget = true;
        return;
    }
    if (rl_reqscan_proto(&c->scan) == RL_HTTP_TLS) {
        ciphertext(c, q, a);
        return;
    }
    struct rl_reqwrite w;
    plain_write(q, &w);
    late_answers(p, c, q);
    rl_reqconn_plan(p, c, q->iov, q->n, &w, &a->p);
    tls_check(p, c, q);
    rl_reqconn_let_go(c);
    if (!a->p.scanned)
        return;
    if (a->p.act == RL_GATE_FAIL) {
        /* Held back, unless the kernel has something to say (SPEC §2):
         * a hang-up goes to the kernel, which refuses it, uncounted. */
        int k = q->probe->kernel_says(q->fd);
        if (k == 0 && a->p.wake != 0 &&
            rl_ready_hold(p, q->fd, a->p.wake) >= 0)
            a->hide = q->fd;
        if (k < 0) {
            a->act = RL_REQUEST_KERNEL;
            return;
        }
        a->act = RL_GATE_FAIL;
        a->err = k > 0 ? k : a->p.err;
        return;
    }
    if (a->p.swallow > 0) {
        a->act = RL_REQUEST_RESPOND;
        a->allow = a->p.swallow;
        return;
    }
    a->act = RL_GATE_GO;
    a->allow = a->p.allow;
    a->wake = a->p.wake;
    a->sock = q->fd;
}

/* ---- a TLS library's write ---- */

/* The connection's address, from the socket its bytes go by, asked once
 * per socket while it has none (a session written through a BIO of the
 * program's own learns its socket late; an address form in `to` matches
 * the address the connection went to). */
static void name_by(struct rl_reqconn *c, const struct rl_request_question *q,
                    int sock)
{
    if (sock < 0 || c->salen != 0 || c->peer_asked == sock + 1)
        return;
    c->peer_asked = sock + 1;
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    if (q->probe->peer(sock, &ss, &len) == NULL || len > sizeof c->peer)
        return;
    memcpy(&c->peer, &ss, len);
    c->salen = len;
    /* Through a proxy: the site's port is the tunnel's. */
    __atomic_store_n(&c->tunnel_port, q->probe->tunnel_port(sock),
                     __ATOMIC_RELAXED);
}

static bool nonblocking(const struct rl_request_question *q, int fd)
{
    return fd >= 0 && q->probe->nonblocking(fd, 0);
}

/* The write is over: the session's next write (or another thread's) is
 * scanned. */
static void tls_let_go(struct rl_reqconn *c)
{
    rl_reqconn_let_go(c);
    __atomic_store_n(&c->writing, 0, __ATOMIC_RELEASE);
}

/* A write of a memory BIO's session whose turn is later (delay mode; the
 * gate reserved it, as for a non-blocking socket): it goes into the BIO
 * now, and its ciphertext leaves at the turn. The socket, when known and
 * non-blocking, is held until then (its sends are answered EAGAIN and
 * the wait calls hide it), and the program's event loop goes on; at the
 * turn its requests are decided again (policy/ready.h RL_READY_TURN): a
 * pause of their destination that came meanwhile holds the socket to
 * the pause's end (SPEC §12), as the other carriers' turns are held.
 * Otherwise the write sleeps after the real call, when it wrote: before
 * it leaves the BIO. */
static void go_later(struct rl_proc *p, struct rl_reqconn *c,
                     const struct rl_request_question *q,
                     struct rl_request_answer *a, const struct rl_reqwrite *w,
                     int wire)
{
    a->p.act = RL_GATE_GO;
    a->p.err = 0;
    a->after = a->p.wake;
    if (wire < 0 || !nonblocking(q, wire))
        return;
    struct rl_reqheld h;
    rl_reqconn_held(c, q->iov, q->n, w, a->p.wake, &h);
    if (rl_ready_hold_turn(p, wire, &h) < 0)
        return;
    a->hide = wire;
    a->after = 0;
}

/* A denied TLS write: its socket, when it must not sleep, is hidden from
 * the program's poll until the write could go. Not a memory BIO's
 * socket: its program does not wait for the socket to retry the write
 * (Twisted drops the connection, and would wait for it to flush). */
static void tls_denied(struct rl_proc *p, const struct rl_request_question *q,
                       struct rl_request_answer *a, bool nb, bool membio,
                       int wire)
{
    int hold = nb                                             ? q->fd
               : q->fd < 0 && !membio && nonblocking(q, wire) ? wire
                                                              : -1;
    if (hold >= 0 && q->probe->kernel_says(hold) != 0) {
        /* Its socket has an error or a hang-up (SPEC §2): the library
         * writes, the kernel refuses, and the program hears it. A TCP
         * socket's pending error comes with a hang-up: none is taken
         * here that the library's send would have needed. */
        a->act = RL_REQUEST_PASS;
        return;
    }
    if (hold >= 0 && a->p.wake != 0 && rl_ready_hold(p, hold, a->p.wake) >= 0)
        a->hide = hold;
    a->act = RL_GATE_FAIL;
    a->err = a->p.err;
}

static void decide_tls(struct rl_proc *p, struct rl_reqconn *c,
                       const struct rl_request_question *q,
                       struct rl_request_answer *a)
{
    /* Another thread writing on the same session at once is not scanned
     * (its bytes interleave with these anyway). */
    if (!rl_reqconn_counting(c) ||
        __atomic_exchange_n(&c->writing, 1, __ATOMIC_ACQUIRE) != 0)
        return;
    if (!rl_reqconn_hold(c, WRITE_WAIT_MAX_NS)) {
        __atomic_store_n(&c->writing, 0, __ATOMIC_RELEASE);
        return;
    }
    bool membio = false;
    int wire = q->fd < 0 ? q->probe->wire(q->ctx, true, &membio) : -1;
    name_by(c, q, q->fd >= 0 ? q->fd : wire);
    if (q->sni != NULL)
        snprintf(c->sni, sizeof c->sni, "%s", q->sni);
    bool nb = nonblocking(q, q->fd);
    /* A memory BIO's turn is reserved as a non-blocking socket's is, and
     * its write is not pieced: its ciphertext leaves when the program
     * sends it, not when the library is handed it. */
    bool mem = q->fd < 0 && membio;
    const struct rl_reqwrite w = {q->fd, q->call, mem ? RL_REQ_WHOLE : q->how,
                                  nb || mem,
                                  q->fd < 0 && !membio ? wire : -1,
                                  q->how == RL_REQ_PIECES};
    late_answers(p, c, q);
    rl_reqconn_plan(p, c, q->iov, q->n, &w, &a->p);
    if (mem && a->p.act == RL_GATE_FAIL && c->turn != 0 &&
        a->p.wake == c->turn)
        go_later(p, c, q, a, &w, wire);
    if (!a->p.scanned) {
        tls_let_go(c);
        return;
    }
    if (a->p.act == RL_GATE_FAIL) {
        tls_denied(p, q, a, nb, membio, wire);
        tls_let_go(c);
        return;
    }
    /* Asleep and in the real call, the write lets the session's reader
     * see answers; `writing` stays, until rl_settle_request. */
    rl_reqconn_let_go(c);
    if (a->p.swallow > 0) {
        a->act = RL_REQUEST_RESPOND; /* `writing` stays to the settle */
        a->allow = a->p.swallow;
        return;
    }
    a->act = RL_GATE_GO;
    a->allow = a->p.allow;
    a->wake = !nb && !mem ? a->p.wake : 0;
    a->sock = q->fd >= 0 ? q->fd : wire;
}

/* The write q as it was planned, for a turn (a.wake: a blocking write,
 * not a memory BIO's). */
static void write_of(const struct rl_request_question *q,
                     const struct rl_request_answer *a, struct rl_reqwrite *w)
{
    if (q->carrier == RL_CARRY_PLAIN) {
        plain_write(q, w);
        return;
    }
    /* Only a blocking write, not a memory BIO's, sleeps to its turn. */
    w->fd = q->fd;
    w->call = q->call;
    w->how = q->how;
    w->nonblocking = false;
    w->wire = q->fd < 0 ? a->sock : -1;
    w->pieces = q->how == RL_REQ_PIECES;
}

static void again(struct rl_proc *p, struct rl_reqconn *c,
                  const struct rl_request_question *q,
                  struct rl_request_answer *a)
{
    /* At its turn: a pause of its destination that came while it slept
     * holds it still (SPEC §12). */
    if (rl_reqconn_hold(c, WRITE_WAIT_MAX_NS)) {
        struct rl_reqwrite w;
        write_of(q, a, &w);
        rl_reqconn_again(p, c, q->iov, q->n, &w, &a->p);
        rl_reqconn_let_go(c);
    } else {
        a->p.wake = 0;
    }
    a->wake = a->p.wake;
    if (a->p.act == RL_GATE_FAIL) {
        a->act = RL_GATE_FAIL;
        a->err = a->p.err;
        if (q->carrier == RL_CARRY_TLS)
            __atomic_store_n(&c->writing, 0, __ATOMIC_RELEASE);
    }
}

void rl_decide_request(struct rl_proc *p, struct rl_reqconn *c,
                       const struct rl_request_question *q,
                       struct rl_request_answer *a)
{
    if (q->again) {
        again(p, c, q, a);
        return;
    }
    answer_init(a, RL_REQUEST_PASS);
    if (q->carrier == RL_CARRY_PLAIN)
        decide_plain(p, c, q, a);
    else
        decide_tls(p, c, q, a);
}

bool rl_settle_request(struct rl_proc *p, struct rl_reqconn *c,
                       const struct rl_request_question *q,
                       struct rl_request_answer *a, long sent)
{
    (void)p;
    /* (Not held after the bound: its holder is gone.) */
    bool held = rl_reqconn_hold(c, WRITE_WAIT_MAX_NS);
    rl_reqconn_done(c, q->iov, q->n, sent, &a->p);
    if (q->carrier == RL_CARRY_TLS) {
        /* Its ciphertext named its socket (a BIO of the program's). */
        if (q->fd < 0 && a->sock < 0) {
            bool membio;
            name_by(c, q, q->probe->wire(q->ctx, false, &membio));
        }
        tls_let_go(c);
        return false;
    }
    bool done = !rl_reqconn_counting(c) && !tls_unbound(c, q);
    if (held)
        rl_reqconn_let_go(c);
    return done;
}

/* The bytes of one read, or of one look (RL_READ_AHEAD), past those the
 * response side has read already: a look shows the stream from the
 * program's next byte, so only what lies past the last look is new; a
 * read takes from its front what a look saw. */
static void received(struct rl_proc *p, struct rl_reqconn *c,
                     const struct iovec *iov, size_t n, size_t got,
                     const struct rl_reqread *r)
{
    uint64_t skip = 0;
    if (r->end == RL_READ_AHEAD) {
        /* A made-up answer's place is among what the program reads. */
        if (got <= c->ahead || (c->made != NULL && c->made->n > 0))
            return;
        skip = c->ahead;
        c->ahead = got;
    } else if (r->end == RL_READ_BYTES && c->ahead > 0) {
        skip = got < c->ahead ? got : c->ahead;
        c->ahead -= skip;
    } else {
        rl_reqconn_received(p, c, iov, n, got, r);
        return;
    }
    const struct rl_reqread bytes = {r->fd, r->call, RL_READ_BYTES};
    size_t left = got - (size_t)skip, i = 0;
    while (i < n && skip >= iov[i].iov_len)
        skip -= iov[i++].iov_len;
    if (left == 0 || i >= n)
        return;
    size_t first = iov[i].iov_len - (size_t)skip;
    first = first < left ? first : left;
    const struct iovec one = {(char *)iov[i].iov_base + skip, first};
    rl_reqconn_received(p, c, &one, 1, first, &bytes);
    if (left > first)
        rl_reqconn_received(p, c, iov + i + 1, n - i - 1, left - first,
                            &bytes);
}

bool rl_request_received(struct rl_proc *p, struct rl_reqconn *c,
                         int carrier, const struct rl_reqread *r, bool lost,
                         const struct iovec *iov, size_t n, size_t got)
{
    bool look = r->end == RL_READ_AHEAD;
    if (lost)
        rl_reqconn_lost(c);
    /* A write of another thread planning or ending: a wait as long as
     * that (a write asleep for its turn, or in its real call, does not
     * hold the state). Past the bound, these bytes go by unseen, and the
     * answers are no longer paired. A look waits for nobody: it is made
     * again later, and the program's reads wait while it is made. */
    if (!rl_reqconn_hold(c, look ? 0 : READ_WAIT_MAX_NS)) {
        if (!look)
            rl_reqconn_lost(c);
        return false;
    }
    int proto = rl_reqscan_proto(&c->scan);
    /* Ciphertext on a socket is the TLS layer's to read (whose socket
     * the send side keeps until its session is found). */
    if (carrier == RL_CARRY_TLS || proto != RL_HTTP_TLS)
        received(p, c, iov, n, got, r);
    rl_reqconn_let_go(c);
    if (look)
        return false;
    return carrier == RL_CARRY_PLAIN && proto == RL_HTTP_NONE;
}
size_t rl_request_madeup(struct rl_reqconn *c, int ask,
                         const struct iovec *iov, size_t n, bool *left)
{
    if (left != NULL)
        *left = true; /* not had: asked again at the next read */
    if (!rl_reqconn_hold(c, ask == RL_MADEUP_DUE_NOW ? 0 : READ_WAIT_MAX_NS))
        return ask == RL_MADEUP_DUE_NOW ? 1 : 0;
    size_t got;
    switch (ask) {
    case RL_MADEUP_PENDING:
        got = rl_reqconn_madeup_pending(c);
        break;
    case RL_MADEUP_DUE:
    case RL_MADEUP_DUE_NOW:
        got = rl_reqconn_madeup_due(c) ? 1 : 0;
        break;
    default:
        got = rl_reqconn_madeup(c, iov, n, ask == RL_MADEUP_PEEK, left);
        break;
    }
    rl_reqconn_let_go(c);
    return got;
}

/* Said once per process (a fork child's line would say the same); every
 * such connection is counted for the exit report and `rlshim stat`. */
void rl_reqconn_unseen_tls(struct rl_proc *proc, const struct rl_reqconn *c)
{
    if (!rl_report_tls_unseen(proc, c->salen > 0 ? &c->peer : NULL,
                              c->salen))
        return;
    char host[RL_NAME_MAX + 1], hp[RL_NAME_MAX + 16];
    unsigned port;
    rl_dests_name_port(&proc->names, c->salen > 0 ? &c->peer : NULL,
                       c->salen, host, sizeof host, &port);
    rl_declog_hostport(hp, sizeof hp, host, port);
    rl_log_stderr("requests to %s are not counted: TLS the shim cannot see",
                  hp);
}
