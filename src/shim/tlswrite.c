/* tlswrite.c — a counted TLS write, before and after the real call (see
 * tlswrite.h). The decisions are policy/reqconn.c's; this file finds the
 * session's connection, sleeps, holds a non-blocking socket until its
 * turn, and hands the library a write of several requests in pieces
 * (rl_tlswrite_run). */
#include "shim/tlswrite.h"
#include "shim/self.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "policy/gate.h"
#include "policy/ready.h"
#include "shim/conntab.h"
#include "shim/epreg.h"
#include "shim/hooks.h"
#include "shim/real.h"
#include "shim/shim.h"
#include "shim/tlstab.h"
#include "shim/wait.h"
#include "util/clock.h"

__thread int rl_tls_depth __attribute__((tls_model("initial-exec")));
__thread const void *rl_tls_denied __attribute__((tls_model("initial-exec")));
__thread int rl_tls_denied_err __attribute__((tls_model("initial-exec")));
__thread struct rl_tlsent *rl_tls_unbound
    __attribute__((tls_model("initial-exec")));

/* The connection's peer, from its socket (getpeername is not hooked:
 * this is libc's). */
static void peer_of(struct rl_reqconn *c, int fd)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    if (fd >= 0 && getpeername(fd, (struct sockaddr *)&ss, &len) == 0 &&
        len <= sizeof c->peer) {
        memcpy(&c->peer, &ss, len);
        c->salen = len;
        /* Through a proxy: the site's port is the tunnel's. */
        __atomic_store_n(&c->tunnel_port, rl_conntab_tunnel_port(fd),
                         __ATOMIC_RELAXED);
    }
}

/* The session's first counted write: its destination (the peer of its
 * socket, or of the socket its handshake's ciphertext went through: a
 * BIO of the program's own has no fd, and an address form in `to`
 * matches the address the connection went to; the server name the
 * program gave the library), and the socket layer told that this fd's
 * requests are the TLS layer's. */
static struct rl_reqconn *first_write(struct rl_tlsent *e, const void *session,
                                      const struct rl_tlsops *ops)
{
    struct rl_reqconn *c = calloc(1, sizeof *c);
    if (c == NULL)
        return NULL;
    int fd = ops->fd_of(session);
    rl_reqconn_init(c, NULL, 0);
    peer_of(c, fd >= 0 ? fd : e->wire);
    /* c->tls_owned stays false: on this connection it would mean "counted
     * elsewhere" (rl_reqconn_counting); it is the fd's plaintext
     * connection that is told, below. */
    ops->name_of(session, e, c->sni);
    e->fd = fd;
    if (fd >= 0)
        rl_conntab_tls_owned(fd);
    e->c = c;
    return c;
}

/* A socket that must not sleep. A session with no socket the shim knows
 * is taken as blocking: it waits its turn rather than hand an event loop
 * a failure it does not expect for such a write. */
static bool nonblocking(int fd)
{
    return fd >= 0 && rl_wait_nonblocking(fd, 0);
}

/* Looks for the socket of a memory BIO's session by its handshake: its
 * first write may come before the ClientHello has left (the write drives
 * the handshake and asks to be retried), the retry after it. */
#define HELLO_LOOKS 4

/* A session whose ciphertext the program moves itself (a memory BIO:
 * `membio`) is paired with its socket by its handshake's client random. */
static void find_wire(struct rl_tlsent *e, struct rl_reqconn *c,
                      const void *session, const struct rl_tlsops *ops)
{
    uint8_t random[RL_TLS_RANDOM];
    if (e->fd >= 0 || e->wire >= 0 || ops->hello_of == NULL ||
        e->hello_looks >= HELLO_LOOKS)
        return;
    e->hello_looks++;
    if (!ops->hello_of(session, random))
        return;
    e->membio = true;
    int fd = rl_conntab_claim_hello(random);
    if (fd < 0)
        return;
    e->wire = fd;
    if (c->salen == 0)
        peer_of(c, fd);
}

/* A write of a memory BIO's session whose turn is later (delay mode; the
 * gate reserved it, as for a non-blocking socket): it goes into the BIO
 * now, and its ciphertext leaves at the turn. The socket, when known and
 * non-blocking, is held until then (hook_request.c answers its sends
 * EAGAIN and the wait calls hide it), and the program's event loop goes
 * on; at the turn its requests are decided again (policy/ready.h
 * RL_READY_TURN): a pause of their destination that came meanwhile holds
 * the socket to the pause's end (SPEC §12), as the other carriers' turns
 * are held. Otherwise the write sleeps after the real call, when it
 * wrote: before it leaves the BIO. */
static void go_later(struct rl_tlswrite *w, const struct rl_tlsent *e,
                     const struct rl_reqwrite *q)
{
    w->p.act = RL_GATE_GO;
    w->p.err = 0;
    w->after = w->p.wake;
    if (e->wire < 0 || !nonblocking(e->wire))
        return;
    struct rl_reqheld h;
    rl_reqconn_held(e->c, &w->iov, 1, q, w->p.wake, &h);
    if (rl_ready_hold_turn(rl_shim_proc(), e->wire, &h) < 0)
        return;
    rl_epreg_hold(e->wire);
    w->after = 0;
}

/* FNV-1a: a retry's bytes are the write's that stopped (tlstab.h). */
static uint64_t hash_of(const void *buf, size_t n)
{
    const unsigned char *b = buf;
    uint64_t h = 14695981039346656037ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

/* The bytes of (buf, n) that went already: a write that stopped between
 * its pieces, retried with the same bytes (OpenSSL asks for the same
 * buffer, or the same bytes in a moved one). Anything else forgets it. */
static size_t resumed(struct rl_tlsent *e, const void *buf, size_t n)
{
    size_t done = 0;
    if (e->part_n != 0 && e->part_n == n && e->part_done < n &&
        e->part_hash == hash_of(buf, n))
        done = e->part_done;
    e->part_n = 0;
    return done;
}

/* A write that may go in pieces (how RL_REQ_PIECES) plans on the bytes
 * from *done on: SIZE_MAX at its first piece, where the session's entry
 * says how many went before (resumed). */
static int begin_how(struct rl_tlswrite *w, const void *session,
                     const void *buf, size_t n, size_t *done,
                     const char *call, const struct rl_tlsops *ops, int how);

int rl_tlswrite_begin(struct rl_tlswrite *w, const void *session,
                      const void *buf, size_t n, const char *call,
                      const struct rl_tlsops *ops)
{
    size_t done = 0;
    return begin_how(w, session, buf, n, &done, call, ops, RL_REQ_WHOLE);
}

/* A write waits this long at most for the connection's state
 * (rl_reqconn_hold): held by a write only while it plans or ends, by the
 * session's reader while it looks at an answer (and pauses its
 * destination). No holder waits for anything else meanwhile, so the wait
 * ends; the bound is for a holder that never came back (a cancelled
 * thread). */
#define HOLD_MAX_NS 1000000000ull

static void let_go(struct rl_reqconn *c)
{
    rl_reqconn_let_go(c);
    __atomic_store_n(&c->writing, 0, __ATOMIC_RELEASE);
}

static int begin_how(struct rl_tlswrite *w, const void *session,
                     const void *whole, size_t total, size_t *done,
                     const char *call, const struct rl_tlsops *ops, int how)
{
    w->e = NULL;
    w->c = NULL;
    bool first = *done == SIZE_MAX;
    size_t skip = first ? 0 : *done;
    if (first)
        *done = 0;
    const void *buf = (const char *)whole + skip;
    size_t n = total - skip;
    if (rl_tls_denied == session)
        rl_tls_denied = NULL;
    /* A handler's write is not scanned (reqconn is not async-signal-safe);
     * a vfork child's writes are in its parent's memory. */
    if (n == 0 || rl_tls_depth > 0 || rl_hook_in_handler() ||
        rl_shim_in_vfork_child())
        return RL_TLSW_PASS;
    if (!rl_shim_enter())
        return RL_TLSW_PASS;
    int saved = errno;
    struct rl_tlsent *e = NULL;
    struct rl_reqconn *c = NULL;
    if (rl_gate_counts_requests(rl_shim_proc()) &&
        (e = rl_tlstab_get(session, true)) != NULL)
        c = e->c != NULL ? e->c : first_write(e, session, ops);
    w->e = e; /* (a write that stops is remembered there, PASS or not) */
    if (e != NULL && how == RL_REQ_PIECES && first &&
        (skip = resumed(e, buf, n)) > 0) {
        *done = skip;
        buf = (const char *)whole + skip;
        n = total - skip;
    }
    /* Another thread writing on the same session at once is not scanned
     * (its bytes interleave with these anyway). */
    if (c == NULL || !rl_reqconn_counting(c) ||
        __atomic_exchange_n(&c->writing, 1, __ATOMIC_ACQUIRE) != 0) {
        rl_shim_leave();
        errno = saved;
        return RL_TLSW_PASS;
    }
    if (!rl_reqconn_hold(c, HOLD_MAX_NS)) {
        __atomic_store_n(&c->writing, 0, __ATOMIC_RELEASE);
        rl_shim_leave();
        errno = saved;
        return RL_TLSW_PASS;
    }
    find_wire(e, c, session, ops);
    bool nb = nonblocking(e->fd);
    /* A memory BIO's turn is reserved as a non-blocking socket's is. */
    bool mem = e->fd < 0 && e->membio;
    w->iov.iov_base = (void *)buf;
    w->iov.iov_len = n;
    w->after = 0;
    /* (A memory BIO's write is not pieced: its ciphertext leaves when the
     * program sends it, not when the library is handed it.) */
    const struct rl_reqwrite q = {
        e->fd, call, mem ? RL_REQ_WHOLE : how, nb || mem,
        e->fd < 0 && !e->membio ? e->wire : -1};
    rl_reqconn_plan(rl_shim_proc(), c, &w->iov, 1, &q, &w->p);
    if (mem && w->p.act == RL_GATE_FAIL && c->turn != 0 &&
        w->p.wake == c->turn)
        go_later(w, e, &q);
    if (!w->p.scanned) {
        let_go(c);
        rl_shim_leave();
        errno = saved;
        return RL_TLSW_PASS;
    }
    if (w->p.act == RL_GATE_FAIL) {
        /* Hidden from the program's poll until it could go. Not a
         * memory BIO's socket: its program does not wait for the socket
         * to retry the write (Twisted drops the connection, and would
         * wait for it to flush). */
        int hold = nb ? e->fd
                   : e->fd < 0 && !e->membio && nonblocking(e->wire) ? e->wire
                                                                     : -1;
        if (hold >= 0 && rl_wait_kernel_says(hold) != 0) {
            /* Its socket has an error or a hang-up (SPEC §2): the library
             * writes, the kernel refuses, and the program hears it. A
             * TCP socket's pending error comes with a hang-up: none is
             * taken here that the library's send would have needed. */
            let_go(c);
            rl_shim_leave();
            errno = saved;
            return RL_TLSW_PASS;
        }
        if (hold >= 0 && w->p.wake != 0 &&
            rl_ready_hold(rl_shim_proc(), hold, w->p.wake) >= 0)
            rl_epreg_hold(hold);
        let_go(c);
        rl_shim_leave();
        rl_tls_denied = session;
        rl_tls_denied_err = w->p.err;
        errno = w->p.err;
        return RL_TLSW_FAIL;
    }
    /* Asleep and in the real call, the write lets the session's reader
     * see answers: a 429 that comes while it waits pauses its
     * destination, and holds it at its turn. */
    rl_reqconn_let_go(c);
    rl_shim_leave();
    int sock = e->fd >= 0 ? e->fd : e->wire;
    while (!nb && !mem && w->p.wake != 0) {
        if (w->p.wake > rl_clock_now_ns() &&
            rl_shim_sleep_on(sock, w->p.wake))
            break; /* hung up: the library's send hears the kernel */
        /* At its turn: a pause of its destination that came while it
         * slept holds it still (SPEC §12). */
        if (!rl_shim_enter())
            break;
        if (rl_reqconn_hold(c, HOLD_MAX_NS)) {
            rl_reqconn_again(rl_shim_proc(), c, &w->iov, 1, &q, &w->p);
            rl_reqconn_let_go(c);
        } else {
            w->p.wake = 0;
        }
        rl_shim_leave();
    }
    if (w->p.act == RL_GATE_FAIL) {
        let_go(c);
        rl_tls_denied = session;
        rl_tls_denied_err = w->p.err;
        errno = w->p.err;
        return RL_TLSW_FAIL;
    }
    w->c = c;
    /* Its ciphertext will name the socket (rl_tlswrite_bind). */
    rl_tls_unbound = e->fd < 0 && e->wire < 0 ? e : NULL;
    errno = saved;
    return RL_TLSW_GO;
}

struct rl_tlsent *rl_tlswrite_handshake_begin(const void *session,
                                              const struct rl_tlsops *ops)
{
    if (rl_tls_depth > 0 || rl_hook_in_handler() || rl_shim_in_vfork_child())
        return NULL;
    if (!rl_shim_enter())
        return NULL;
    int saved = errno;
    struct rl_tlsent *e = NULL;
    if (rl_gate_counts_requests(rl_shim_proc()) && ops->fd_of(session) < 0 &&
        (e = rl_tlstab_get(session, true)) != NULL && e->wire >= 0)
        e = NULL;
    rl_tls_unbound = e;
    rl_shim_leave();
    errno = saved;
    return e;
}

void rl_tlswrite_handshake_end(struct rl_tlsent *e)
{
    (void)e;
    rl_tls_unbound = NULL;
}

bool rl_tlswrite_bind(int fd)
{
    struct rl_tlsent *e = rl_tls_unbound;
    if (e == NULL || rl_tls_depth == 0 || fd < 0)
        return false;
    rl_tls_unbound = NULL;
    e->wire = fd;
    /* This thread's write holds the connection (`writing`) until its
     * end. */
    if (e->c != NULL && e->c->salen == 0)
        peer_of(e->c, fd);
    return true;
}

void rl_tlswrite_end(struct rl_tlswrite *w, long sent)
{
    struct rl_reqconn *c = w->c;
    rl_tls_unbound = NULL;
    if (c == NULL)
        return;
    w->c = NULL;
    int saved = errno;
    bool in = rl_shim_enter();
    /* (Not held after the bound: its holder is gone.) */
    (void)rl_reqconn_hold(c, HOLD_MAX_NS);
    rl_reqconn_done(c, &w->iov, 1, sent, &w->p);
    if (in)
        rl_shim_leave();
    let_go(c);
    /* (A write asked to be retried keeps its turn: the retry holds.) */
    if (sent > 0 && w->after > rl_clock_now_ns())
        rl_shim_sleep_until(w->after);
    errno = saved;
}

/* Remembered for the program's retry of (buf, n): `done` bytes went. */
static void stopped(struct rl_tlsent *e, const void *buf, size_t n,
                    size_t done)
{
    if (e == NULL || done == 0 || done >= n)
        return;
    e->part_hash = hash_of(buf, n);
    e->part_done = done;
    e->part_n = n;
}

int rl_tlswrite_run(const void *session, const void *buf, size_t n,
                    const char *call, const struct rl_tlsops *ops,
                    rl_tlsw_real real, void *ctx, long *out)
{
    size_t done = SIZE_MAX;
    struct rl_tlsent *e = NULL;
    for (;;) {
        struct rl_tlswrite w;
        int act = begin_how(&w, session, buf, n, &done, call, ops,
                            RL_REQ_PIECES);
        if (w.e != NULL)
            e = w.e;
        if (act == RL_TLSW_FAIL) {
            stopped(e, buf, n, done);
            return RL_TLSW_FAIL;
        }
        const char *at = (const char *)buf + done;
        size_t len = n - done;
        if (act == RL_TLSW_GO && w.p.scanned && w.p.allow > 0 &&
            w.p.allow < len)
            len = w.p.allow;
        rl_tls_depth++;
        long r = real(ctx, at, len);
        rl_tls_depth--;
        if (act == RL_TLSW_GO)
            rl_tlswrite_end(&w, r > 0 ? r : -1);
        if (r <= 0) {
            /* The library keeps what it began of this piece: the retry
             * hands it the same piece again. */
            stopped(e, buf, n, done);
            *out = -1;
            return RL_TLSW_GO;
        }
        done += (size_t)r < len ? (size_t)r : len;
        if ((size_t)r < len || done >= n) {
            *out = (long)done;
            return RL_TLSW_GO;
        }
    }
}
