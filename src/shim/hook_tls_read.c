/* hook_tls_read.c — what the program reads through its TLS library
 * (SPEC §12): SSL_read, SSL_read_ex (OpenSSL, linked or dlopen'ed: the
 * real functions are found as the writes' are, tlsreal.h) and
 * gnutls_record_recv (and gnutls_record_check_pending, below). The plaintext a call really returned goes, after
 * it returned, to the response side of the session's connection, the one
 * its counted writes made (tlstab.h); a session with no such connection
 * costs a look at an empty table (or one bucket, under its lock). The
 * socket layer never reads this ciphertext: it dropped the socket's mark
 * at the TLS record (hook_recv.c).
 *
 * A made-up answer (SPEC §15, on_deny = respond) queued on the session's
 * connection is what SSL_read, SSL_read_ex, SSL_peek and
 * gnutls_record_recv return while it is due, with no real call; and
 * SSL_pending and gnutls_record_check_pending count it: a client that asks
 * them before it waits on the socket (wget does, then select) reads it. Looked for only once the process made one up.
 * SSL_peek is otherwise passed on: what it shows is read again. A call
 * from a signal handler is not read (the table takes a lock; OpenSSL and
 * GnuTLS are not async-signal-safe anyway), nor one made inside another
 * TLS call of the thread (rl_tls_depth). */
#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "policy/decide_request.h"
#include "shim/hooks.h"
#include "shim/madeup.h"
#include "shim/self.h"
#include "shim/shim.h"
#include "shim/tlsreal.h"
#include "shim/tlstab.h"
#include "shim/tlswrite.h"

typedef struct ssl_st SSL;
typedef struct gnutls_session_int *gnutls_session_t;

#define GNUTLS_E_INTERNAL_ERROR (-59)
#define GNUTLS_E_PREMATURE_TERMINATION (-110)
#define GNUTLS_E_PULL_ERROR (-53)

static __attribute__((noinline)) void
tls_received(const void *session, void *buf, size_t n, const char *call,
             int end)
{
    if (rl_tls_depth > 0 || !rl_shim_ready() || rl_hook_in_handler() ||
        rl_shim_in_vfork_child() || !rl_shim_enter())
        return;
    int saved = errno;
    struct rl_tlsent *e = rl_tlstab_get(session, false);
    struct rl_reqconn *c = e != NULL ? e->c : NULL;
    if (c != NULL) {
        struct iovec one = {buf, n};
        size_t got = end == RL_READ_BYTES ? n : 0;
        const struct rl_reqread r = {e->fd, call, end};
        (void)rl_request_received(rl_shim_proc(), c, RL_CARRY_TLS, &r, false,
                                  &one, got > 0 ? 1 : 0, got);
    }
    rl_shim_leave();
    errno = saved;
}

/* What a look read and holds for the program (tlstab.h), into buf (peek:
 * not taken), or with buf NULL its bytes. Its bytes went to the response
 * side when read: the ones taken now only move the program on there. */
static size_t held(struct rl_tlsent *e, void *buf, size_t n, bool peek)
{
    size_t got = e->held_n;
    if (buf == NULL)
        return got;
    got = got < n ? got : n;
    memcpy(buf, e->held, got);
    if (peek)
        return got;
    e->held_n -= (uint32_t)got;
    memmove(e->held, e->held + got, e->held_n);
    struct iovec one = {buf, got};
    const struct rl_reqread r = {e->fd, "SSL_read", RL_READ_BYTES};
    (void)rl_request_received(rl_shim_proc(), e->c, RL_CARRY_TLS, &r, false,
                              &one, 1, got);
    return got;
}

/* What a look holds, else the made-up answer due, on session's connection
 * into buf (peek: not taken), or with buf NULL its bytes left; 0: none. */
static __attribute__((noinline)) size_t tls_madeup(const void *session,
                                                   void *buf, size_t n,
                                                   bool peek)
{
    if (rl_tls_depth > 0 || !rl_shim_ready() || rl_hook_in_handler() ||
        rl_shim_in_vfork_child() || !rl_shim_enter())
        return 0;
    int saved = errno;
    size_t got = 0;
    struct rl_tlsent *e = rl_tlstab_get(session, false);
    if (e != NULL && e->c != NULL) {
        struct iovec one = {buf, n};
        bool left = false;
        int ask = buf == NULL ? RL_MADEUP_PENDING
                  : peek      ? RL_MADEUP_PEEK
                              : RL_MADEUP_TAKE;
        if (e->held_n > 0) {
            got = held(e, buf, n, peek);
            /* Its mark stays while made-up answers are queued too. */
            struct iovec none = {NULL, 0};
            if (buf != NULL && !peek && e->held_n == 0)
                (void)rl_request_madeup(e->c, RL_MADEUP_PEEK, &none, 1,
                                        &left);
        } else {
            got = rl_request_madeup(e->c, ask, &one, 1, &left);
        }
        if (buf != NULL && !peek && !left && e->held_n == 0)
            rl_madeup_unmark(e->fd >= 0 ? e->fd : e->wire);
    }
    rl_shim_leave();
    errno = saved;
    return got;
}

static inline bool madeup_any(void)
{
    return __builtin_expect(
        __atomic_load_n(&rl_shim_self->tls_madeup, __ATOMIC_RELAXED) != 0, 0);
}

/* A read of the program under way on session, for the looks of a write
 * asleep for its turn (readers.h): every session's, since a look may
 * begin on one whose read began before its first counted write. Not one
 * in a signal handler, nor one inside the shim's own peek. */
static inline bool reading(const void *session)
{
    if (rl_tls_depth > 0 || rl_hook_in_handler())
        return false;
    rl_readers_enter(&rl_shim_self->readers, (uintptr_t)session);
    return true;
}

static inline void read_done(const void *session, bool counted)
{
    if (counted)
        rl_readers_leave(&rl_shim_self->readers, (uintptr_t)session);
}

RL_EXPORT int SSL_peek(SSL *ssl, void *buf, int num)
{
    int (*real)(SSL *, void *, int) = rl_tls_real(RL_TLS_SSL_PEEK);
    if (real == NULL) {
        errno = ENOSYS;
        return -1;
    }
    bool counted = reading(ssl);
    size_t k = madeup_any() && num > 0
                   ? tls_madeup(ssl, buf, (size_t)num, true)
                   : 0;
    int r = k > 0 ? (int)k : real(ssl, buf, num);
    read_done(ssl, counted);
    return r;
}

RL_EXPORT int SSL_pending(const SSL *ssl)
{
    int (*real)(const SSL *) = rl_tls_real(RL_TLS_SSL_PENDING);
    if (real == NULL)
        return 0;
    int r = real(ssl);
    if (madeup_any()) {
        size_t k = tls_madeup(ssl, NULL, 0, true);
        if (k > 0 && r >= 0)
            r += (int)k;
    }
    return r;
}

RL_EXPORT int SSL_read(SSL *ssl, void *buf, int num)
{
    int (*real)(SSL *, void *, int) = rl_tls_real(RL_TLS_SSL_READ);
    if (real == NULL) {
        errno = ENOSYS; /* no libssl behind this name: fail as it fails */
        return -1;
    }
    /* Counted first: a look that began before holds what the session
     * had, and this read returns it. */
    bool counted = reading(ssl);
    size_t k = madeup_any() && num > 0
                   ? tls_madeup(ssl, buf, (size_t)num, false)
                   : 0;
    if (k > 0) {
        read_done(ssl, counted);
        return (int)k;
    }
    rl_tls_depth++;
    int r = real(ssl, buf, num);
    rl_tls_depth--;
    if (r > 0)
        tls_received(ssl, buf, (size_t)r, "SSL_read", RL_READ_BYTES);
    else if (num > 0 && (r == 0 || errno == ECONNRESET))
        /* The server's end: its close_notify (SSL_read says a retry,
         * WANT_READ, with -1, never with 0), or its reset. */
        tls_received(ssl, NULL, 0, "SSL_read", RL_READ_ENDED);
    read_done(ssl, counted);
    return r;
}

RL_EXPORT int SSL_read_ex(SSL *ssl, void *buf, size_t num, size_t *readbytes)
{
    int (*real)(SSL *, void *, size_t, size_t *) =
        rl_tls_real(RL_TLS_SSL_READ_EX);
    if (real == NULL) {
        if (readbytes != NULL)
            *readbytes = 0;
        errno = ENOSYS;
        return 0;
    }
    bool counted = reading(ssl);
    size_t k = madeup_any() && num > 0 ? tls_madeup(ssl, buf, num, false) : 0;
    if (k > 0) {
        if (readbytes != NULL)
            *readbytes = k;
        read_done(ssl, counted);
        return 1;
    }
    rl_tls_depth++;
    int r = real(ssl, buf, num, readbytes);
    rl_tls_depth--;
    if (r > 0 && readbytes != NULL && *readbytes > 0)
        tls_received(ssl, buf, *readbytes, "SSL_read_ex", RL_READ_BYTES);
    else if (r <= 0 && num > 0 && errno == ECONNRESET)
        /* The server's reset (its close_notify fails SSL_read_ex as a
         * retry does: not told apart without SSL_get_error). */
        tls_received(ssl, NULL, 0, "SSL_read_ex", RL_READ_ENDED);
    read_done(ssl, counted);
    return r;
}

RL_EXPORT ssize_t gnutls_record_recv(gnutls_session_t session, void *data,
                                     size_t size)
{
    ssize_t (*real)(gnutls_session_t, void *, size_t) =
        rl_tls_real(RL_TLS_GNUTLS_RECORD_RECV);
    if (real == NULL)
        return GNUTLS_E_INTERNAL_ERROR;
    size_t k =
        madeup_any() && size > 0 ? tls_madeup(session, data, size, false) : 0;
    if (k > 0)
        return (ssize_t)k;
    rl_tls_depth++;
    ssize_t r = real(session, data, size);
    rl_tls_depth--;
    if (r > 0)
        tls_received(session, data, (size_t)r, "gnutls_record_recv",
                     RL_READ_BYTES);
    else if ((r == 0 && size > 0) || r == GNUTLS_E_PREMATURE_TERMINATION ||
             (r == GNUTLS_E_PULL_ERROR && errno == ECONNRESET))
        /* The server's end: its close alert, the socket's EOF, or its
         * reset. */
        tls_received(session, NULL, 0, "gnutls_record_recv", RL_READ_ENDED);
    return r;
}

/* GnuTLS's SSL_pending: the plaintext bytes a gnutls_record_recv would
 * return without reading the socket, a made-up answer's included. */
RL_EXPORT size_t gnutls_record_check_pending(gnutls_session_t session)
{
    size_t (*real)(gnutls_session_t) =
        rl_tls_real(RL_TLS_GNUTLS_RECORD_CHECK_PENDING);
    size_t r = real != NULL ? real(session) : 0;
    if (madeup_any())
        r += tls_madeup(session, NULL, 0, true);
    return r;
}
