/* tlswrite.h — the one shape of a counted TLS write (SPEC §11), whatever
 * the library: the plaintext the program hands to SSL_write, SSL_write_ex
 * or gnutls_record_send is planned on the session's struct rl_reqconn
 * (tlstab.h) as one write that goes whole or not at all,
 *
 *     struct rl_tlswrite w;
 *     switch (rl_tlswrite_begin(&w, session, buf, n, "SSL_write", &ops)) {
 *     PASS: call the real function, nothing else;
 *     FAIL: fail as the library fails when its socket would block (errno
 *           is set), without calling it;
 *     GO:   (slept already if the turn was later) call the real function
 *           inside rl_tls_depth, then rl_tlswrite_end(&w, bytes or -1).
 *     }
 *
 * The ciphertext the library then writes reaches the socket hooks, whose
 * scanner sees a TLS record and stops (rl_conntab_tls_owned): the count
 * is the TLS layer's alone. */
#ifndef RL_SHIM_TLSWRITE_H
#define RL_SHIM_TLSWRITE_H

#include <stddef.h>
#include <sys/uio.h>

#include "policy/reqconn.h"

struct rl_tlsent;

/* What only the library knows, asked at a session's first counted write. */
struct rl_tlsops {
    int (*fd_of)(const void *session); /* its socket, or -1 */
    /* The server name the program set (SNI) into out (RL_NAME_MAX + 1
     * bytes; "" when none). */
    void (*name_of)(const void *session, const struct rl_tlsent *e,
                    char *out);
};

enum { RL_TLSW_PASS = 0, RL_TLSW_GO = 1, RL_TLSW_FAIL = 2 };

struct rl_tlswrite {
    struct rl_reqconn *c;
    struct iovec iov;
    struct rl_reqplan p;
};

int rl_tlswrite_begin(struct rl_tlswrite *w, const void *session,
                      const void *buf, size_t n, const char *call,
                      const struct rl_tlsops *ops);

/* After the real call of a GO: it wrote `sent` bytes (< 0: it failed or
 * asked to be retried; the request stays charged, and a retry of the same
 * bytes is not charged again). Preserves errno. */
void rl_tlswrite_end(struct rl_tlswrite *w, long sent);

/* Inside a real TLS call of this thread: a TLS hook reached from inside
 * the library (SSL_write_ex by way of SSL_write) passes straight through.
 * initial-exec: no allocation on first access. */
extern __thread int rl_tls_depth __attribute__((tls_model("initial-exec")));

/* The session whose last write this thread denied (NULL: none): the next
 * SSL_get_error for it says SSL_ERROR_WANT_WRITE. */
extern __thread const void *rl_tls_denied
    __attribute__((tls_model("initial-exec")));

#endif
