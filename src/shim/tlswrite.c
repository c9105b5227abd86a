/* tlswrite.c — a counted TLS write, before and after the real call (see
 * tlswrite.h). The decisions are policy/decide_request.c's; this file
 * finds the session's connection and what the library knows of it (its
 * socket, its server name, its handshake's client random), sleeps, hides
 * a held socket from the wait calls, and hands the library a write of
 * several requests in pieces (rl_tlswrite_run). */
#include "shim/tlswrite.h"
#include "shim/self.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "policy/gate.h"
#include "shim/conntab.h"
#include "shim/epreg.h"
#include "shim/hooks.h"
#include "shim/madeup.h"
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

/* The session's first counted write: its connection, and the socket
 * layer told that this fd's requests are the TLS layer's (its name and
 * address are policy's, from what the write's question says). */
static struct rl_reqconn *first_write(struct rl_tlsent *e, const void *session,
                                      const struct rl_tlsops *ops)
{
    struct rl_reqconn *c = rl_conn_begun(NULL, 0);
    if (c == NULL)
        return NULL;
    int fd = ops->fd_of(session);
    e->fd = fd;
    e->read_ahead = fd >= 0 ? ops->read_ahead : NULL;
    if (fd >= 0)
        rl_conntab_tls_owned(fd);
    e->c = c;
    return c;
}

/* Looks for the socket of a memory BIO's session by its handshake: its
 * first write may come before the ClientHello has left (the write drives
 * the handshake and asks to be retried), the retry after it. */
#define HELLO_LOOKS 4

/* A session whose ciphertext the program moves itself (a memory BIO:
 * `membio`) is paired with its socket by its handshake's client random. */
static void find_wire(struct rl_tlsent *e, const void *session,
                      const struct rl_tlsops *ops)
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
    if (fd >= 0)
        e->wire = fd;
}

/* The probe's `wire`: the socket a session without an fd writes by. */
static int wire_of(void *ctx, bool look, bool *membio)
{
    struct rl_tlsask *k = ctx;
    if (look)
        find_wire(k->e, k->session, k->ops);
    *membio = k->e->membio;
    return k->e->wire;
}

/* What policy may ask of a TLS write. */
static const struct rl_request_probe probe = {
    .nonblocking = rl_wait_nonblocking,
    .kernel_says = rl_wait_kernel_says,
    .peer = rl_wait_peer,
    .tunnel_port = rl_conntab_tunnel_port,
    .wire = wire_of,
};

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

static void denied(const void *session, int err)
{
    rl_tls_denied = session;
    rl_tls_denied_err = err;
    errno = err;
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
    char sni[RL_NAME_MAX + 1];
    bool fresh = false;
    if (rl_proc_counts_requests(rl_shim_proc()) &&
        (e = rl_tlstab_get(session, true)) != NULL) {
        c = e->c;
        if (c == NULL && (c = first_write(e, session, ops)) != NULL) {
            ops->name_of(session, e, sni);
            fresh = true;
        }
    }
    w->e = e; /* (a write that stops is remembered there, PASS or not) */
    if (e != NULL && how == RL_REQ_PIECES && first &&
        (skip = resumed(e, buf, n)) > 0) {
        *done = skip;
        buf = (const char *)whole + skip;
        n = total - skip;
    }
    if (c == NULL) {
        rl_shim_leave();
        errno = saved;
        return RL_TLSW_PASS;
    }
    w->iov.iov_base = (void *)buf;
    w->iov.iov_len = n;
    w->ask = (struct rl_tlsask){e, session, ops};
    w->q = (struct rl_request_question){
        .head = {RL_CALL_REQUEST},
        .conn = c,
        .call = call,
        .carrier = RL_CARRY_TLS,
        .fd = e->fd,
        .how = how,
        .iov = &w->iov,
        .n = 1,
        .sni = fresh ? sni : NULL,
        .probe = &probe,
        .ctx = &w->ask,
    };
    struct rl_request_answer *a = &w->a;
    rl_decide(rl_shim_proc(), &w->q.head, (union rl_answer){.request = a});
    w->q.sni = NULL; /* (this frame's: read by the decision alone) */
    if (a->hide >= 0)
        rl_epreg_hold(a->hide);
    if (a->act == RL_GATE_FAIL) {
        rl_shim_leave();
        denied(session, a->err);
        return RL_TLSW_FAIL;
    }
    if (a->act == RL_REQUEST_RESPOND) {
        /* Its answer is read from the session (hook_tls_read.c), whose
         * reads look for one from now on. */
        __atomic_store_n(&rl_shim_self->tls_madeup, 1, __ATOMIC_RELAXED);
        /* Its socket readable for the wait calls until it is read. */
        rl_madeup_mark(e->fd >= 0 ? e->fd : e->wire);
        rl_shim_leave();
        w->c = c;
        errno = saved;
        return RL_TLSW_TAKEN;
    }
    if (a->act != RL_GATE_GO) {
        rl_shim_leave();
        errno = saved;
        return RL_TLSW_PASS;
    }
    rl_shim_leave();
    w->q.again = true;
    /* (A blocking socket's session is never read ahead: readahead.h.) */
    while (a->wake != 0) {
        if (a->wake > rl_clock_now_ns() && rl_shim_sleep_on(a->sock, a->wake))
            break; /* hung up: the library's send hears the kernel */
        if (!rl_shim_enter())
            break;
        rl_decide(rl_shim_proc(), &w->q.head, (union rl_answer){.request = a});
        rl_shim_leave();
    }
    if (a->act == RL_GATE_FAIL) {
        denied(session, a->err);
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
    if (rl_proc_counts_requests(rl_shim_proc()) && ops->fd_of(session) < 0 &&
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
    /* The connection's address is asked of it when the write settles. */
    e->wire = fd;
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
    (void)rl_settle(rl_shim_proc(),
                    &(const struct rl_outcome){
                        .kind = RL_CALL_REQUEST,
                        .request = {
                            .c = c, .q = &w->q, .a = &w->a, .sent = sent}});
    if (in)
        rl_shim_leave();
    /* (A write asked to be retried keeps its turn: the retry holds.) */
    if (sent > 0 && w->a.after > rl_clock_now_ns())
        rl_shim_sleep_until(w->a.after);
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
        if (act == RL_TLSW_TAKEN) {
            if (w.a.allow < len)
                len = w.a.allow;
            rl_tlswrite_end(&w, (long)len);
            done += len;
            if (done >= n) {
                *out = (long)done;
                return RL_TLSW_GO;
            }
            continue;
        }
        if (act == RL_TLSW_GO && w.a.allow > 0 && w.a.allow < len)
            len = w.a.allow;
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
