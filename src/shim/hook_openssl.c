/* hook_openssl.c — OpenSSL's writes (SPEC §11): SSL_write, SSL_write_ex,
 * and what a denied write makes of SSL_get_error; SSL_connect, for the
 * socket of a session written through the program's own BIO; SSL_free
 * forgets the session.
 *
 * The hooks are unversioned: they satisfy the program's versioned
 * references (SSL_write@OPENSSL_3.0.0). SSL_sendfile (kTLS: the file's
 * bytes go to the kernel's TLS without passing the program) is counted
 * as a write of those bytes, read from the file at most SENDFILE_SCAN at
 * a time. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "policy/gate.h"
#include "shim/hooks.h"
#include "shim/real.h"
#include "shim/self.h"
#include "shim/tlsreal.h"
#include "shim/tlstab.h"
#include "shim/tlswrite.h"

/* The library's own types stay opaque: no OpenSSL header is needed. */
typedef struct ssl_st SSL;

#define SSL_ERROR_WANT_WRITE 3
#define SSL_ERROR_SYSCALL 5
#define TLSEXT_NAMETYPE_host_name 0
/* The most of a file one SSL_sendfile is let send while requests are
 * counted: what the shim reads to scan (sendfile may send less than
 * asked; the program sends the rest in its next call). */
#define SENDFILE_SCAN (128u * 1024u)

static int fd_of(const void *session)
{
    int (*get_fd)(const SSL *) = rl_tls_real(RL_TLS_SSL_GET_FD);
    return get_fd != NULL ? get_fd(session) : -1;
}

static void name_of(const void *session, const struct rl_tlsent *e,
                    char *out)
{
    (void)e;
    const char *(*get)(const SSL *, int) =
        rl_tls_real(RL_TLS_SSL_GET_SERVERNAME);
    /* On a client: the name the program set (SSL_set_tlsext_host_name). */
    const char *n = get != NULL ? get(session, TLSEXT_NAMETYPE_host_name)
                                : NULL;
    out[0] = '\0';
    if (n != NULL) {
        size_t l = strnlen(n, RL_NAME_MAX);
        memcpy(out, n, l);
        out[l] = '\0';
    }
}

/* BIO_TYPE_MEM and BIO_TYPE_BIO (a pair): BIOs the program reads the
 * ciphertext out of and sends itself, later. */
#define BIO_TYPE_MEM_ (1 | 0x0400)
#define BIO_TYPE_PAIR_ (19 | 0x0400)

static bool hello_of(const void *session, uint8_t out[RL_TLS_RANDOM])
{
    void *(*wbio_of)(const SSL *) = rl_tls_real(RL_TLS_SSL_GET_WBIO);
    int (*type_of)(const void *) = rl_tls_real(RL_TLS_BIO_METHOD_TYPE);
    size_t (*random_of)(const SSL *, unsigned char *, size_t) =
        rl_tls_real(RL_TLS_SSL_GET_CLIENT_RANDOM);
    if (wbio_of == NULL || type_of == NULL || random_of == NULL)
        return false;
    void *bio = wbio_of(session);
    int type = bio != NULL ? type_of(bio) : 0;
    return (type == BIO_TYPE_MEM_ || type == BIO_TYPE_PAIR_) &&
           random_of(session, out, RL_TLS_RANDOM) == RL_TLS_RANDOM;
}

/* A read that never waits (tlswrite.h): on a socket the program made
 * non-blocking only (setting O_NONBLOCK on a blocking one would hand
 * another thread's write a WANT_WRITE it never asked for), with what it
 * adds to the thread's error queue popped again. The end of the stream
 * or an error is left for the program's own read to meet: the library
 * says it again. */
static long read_ahead(void *session, void *buf, size_t n)
{
    int (*real)(SSL *, void *, int) = rl_tls_real(RL_TLS_SSL_READ);
    int (*mark)(void) = rl_tls_real(RL_TLS_ERR_SET_MARK);
    int (*pop)(void) = rl_tls_real(RL_TLS_ERR_POP_TO_MARK);
    int fd = fd_of(session);
    if (real == NULL || mark == NULL || pop == NULL || fd < 0)
        return 0;
    int fl = REAL(fcntl)(fd, F_GETFL);
    if (fl < 0 || !(fl & O_NONBLOCK))
        return 0;
    (void)mark();
    rl_tls_depth++;
    int r = real(session, buf, n > INT_MAX ? INT_MAX : (int)n);
    rl_tls_depth--;
    (void)pop();
    return r > 0 ? r : 0;
}

static const struct rl_tlsops ops = {fd_of, name_of, hello_of, read_ahead};

/* One real SSL_write of a piece (tlswrite.h). */
struct write_call {
    SSL *ssl;
    int (*real)(SSL *, const void *, int);
    int r;
};

static long write_piece(void *ctx, const void *buf, size_t n)
{
    struct write_call *x = ctx;
    x->r = x->real(x->ssl, buf, (int)n);
    return x->r > 0 ? x->r : -1;
}

RL_EXPORT int SSL_write(SSL *ssl, const void *buf, int num)
{
    int (*real)(SSL *, const void *, int) = rl_tls_real(RL_TLS_SSL_WRITE);
    if (real == NULL) {
        /* No libssl in the process behind this name: fail as it fails. */
        errno = ENOSYS;
        return -1;
    }
    if (num <= 0) {
        if (rl_tls_denied == ssl)
            rl_tls_denied = NULL;
        return real(ssl, buf, num);
    }
    struct write_call x = {ssl, real, 0};
    long out;
    if (rl_tlswrite_run(ssl, buf, (size_t)num, "SSL_write", &ops, write_piece,
                        &x, &out) == RL_TLSW_FAIL)
        return -1;
    return out >= 0 ? (int)out : x.r;
}

/* One real SSL_write_ex of a piece. */
struct write_ex_call {
    SSL *ssl;
    int (*real)(SSL *, const void *, size_t, size_t *);
    int r;
};

static long write_ex_piece(void *ctx, const void *buf, size_t n)
{
    struct write_ex_call *x = ctx;
    size_t wrote = 0;
    x->r = x->real(x->ssl, buf, n, &wrote);
    return x->r > 0 && wrote > 0 ? (long)wrote : -1;
}

RL_EXPORT int SSL_write_ex(SSL *ssl, const void *buf, size_t num,
                           size_t *written)
{
    int (*real)(SSL *, const void *, size_t, size_t *) =
        rl_tls_real(RL_TLS_SSL_WRITE_EX);
    if (real == NULL) {
        if (written != NULL)
            *written = 0;
        errno = ENOSYS;
        return 0;
    }
    if (num == 0) {
        if (rl_tls_denied == ssl)
            rl_tls_denied = NULL;
        return real(ssl, buf, num, written);
    }
    struct write_ex_call x = {ssl, real, 0};
    long out;
    int act = rl_tlswrite_run(ssl, buf, num, "SSL_write_ex", &ops,
                              write_ex_piece, &x, &out);
    if (written != NULL)
        *written = act == RL_TLSW_GO && out > 0 ? (size_t)out : 0;
    if (act == RL_TLSW_FAIL)
        return 0;
    return out > 0 ? 1 : x.r;
}

/* Are requests counted in this process (the set-up made first)? */
static bool counting(void)
{
    if (rl_tls_depth > 0 || rl_hook_in_handler() || rl_shim_in_vfork_child() ||
        !rl_shim_enter())
        return false;
    bool on = rl_proc_counts_requests(rl_shim_proc());
    rl_shim_leave();
    return on;
}

/* Up to SENDFILE_SCAN bytes of the file at `off` into a buffer of its
 * own (NULL: none to be had; the call then goes as the program made it:
 * the library says what is wrong with it). */
static char *file_bytes(int fd, off_t off, size_t size, size_t *n)
{
    struct stat st;
    int saved = errno;
    char *buf = NULL;
    *n = 0;
    if (size > 0 && off >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
        off < st.st_size) {
        size_t want = (uint64_t)(st.st_size - off) < size
                          ? (size_t)(st.st_size - off)
                          : size;
        if (want > SENDFILE_SCAN)
            want = SENDFILE_SCAN;
        buf = malloc(want);
        ssize_t got = buf != NULL ? pread(fd, buf, want, off) : -1;
        if (got > 0) {
            *n = (size_t)got;
        } else {
            free(buf);
            buf = NULL;
        }
    }
    errno = saved;
    return buf;
}

RL_EXPORT ssize_t SSL_sendfile(SSL *ssl, int fd, off_t offset, size_t size,
                               int flags)
{
    ssize_t (*real)(SSL *, int, off_t, size_t, int) =
        rl_tls_real(RL_TLS_SSL_SENDFILE);
    if (real == NULL) {
        errno = ENOSYS;
        return -1;
    }
    size_t n = 0;
    char *buf = counting() ? file_bytes(fd, offset, size, &n) : NULL;
    if (buf == NULL)
        return real(ssl, fd, offset, size, flags);
    struct rl_tlswrite w;
    int act = rl_tlswrite_begin(&w, ssl, buf, n, "SSL_sendfile", &ops);
    if (act == RL_TLSW_FAIL) {
        free(buf);
        return -1;
    }
    rl_tls_depth++;
    ssize_t r = real(ssl, fd, offset, act == RL_TLSW_GO ? n : size, flags);
    rl_tls_depth--;
    if (act == RL_TLSW_GO)
        rl_tlswrite_end(&w, r > 0 ? (long)r : -1);
    free(buf);
    return r;
}

RL_EXPORT int SSL_connect(SSL *ssl)
{
    int (*real)(SSL *) = rl_tls_real(RL_TLS_SSL_CONNECT);
    if (real == NULL) {
        errno = ENOSYS;
        return -1;
    }
    struct rl_tlsent *e = rl_tlswrite_handshake_begin(ssl, &ops);
    rl_tls_depth++;
    int r = real(ssl);
    rl_tls_depth--;
    if (e != NULL)
        rl_tlswrite_handshake_end(e);
    return r;
}

RL_EXPORT int SSL_get_error(const SSL *ssl, int ret)
{
    if (ret <= 0 && ssl != NULL && rl_tls_denied == ssl) {
        /* Once: the denial is the answer to the call just made. */
        rl_tls_denied = NULL;
        if (rl_tls_denied_err == EAGAIN)
            return SSL_ERROR_WANT_WRITE;
        errno = rl_tls_denied_err; /* read by the program after this */
        return SSL_ERROR_SYSCALL;
    }
    int (*real)(const SSL *, int) = rl_tls_real(RL_TLS_SSL_GET_ERROR);
    return real != NULL ? real(ssl, ret) : SSL_ERROR_SYSCALL;
}

RL_EXPORT void SSL_free(SSL *ssl)
{
    if (rl_tls_denied == ssl)
        rl_tls_denied = NULL;
    /* A handler's SSL_free leaves the entry (the table's lock may be
     * held by the code it interrupted): a stale entry at worst. */
    if (ssl != NULL && !rl_hook_in_handler() && !rl_shim_in_vfork_child())
        rl_tlstab_drop(ssl);
    void (*real)(SSL *) = rl_tls_real(RL_TLS_SSL_FREE);
    if (real != NULL)
        real(ssl);
}
