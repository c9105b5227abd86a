/* tlswrite.h — the one shape of a counted TLS write (SPEC §11), whatever
 * the library: the plaintext the program hands to SSL_write, SSL_write_ex
 * or gnutls_record_send is planned on the session's struct rl_reqconn
 * (tlstab.h). SSL_write, SSL_write_ex and gnutls_record_send go through
 * rl_tlswrite_run (below: in delay mode, one piece a request; a request
 * of a piece of its own may be answered in the process, SPEC §15); the
 * others, and the pieces, as one write that goes whole or not at all,
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

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "policy/decide_request.h"

struct rl_tlsent;

/* What only the library knows, asked at a session's first counted write. */
struct rl_tlsops {
    int (*fd_of)(const void *session); /* its socket, or -1 */
    /* The server name the program set (SNI) into out (RL_NAME_MAX + 1
     * bytes; "" when none). */
    void (*name_of)(const void *session, const struct rl_tlsent *e,
                    char *out);
    /* NULL, or the client random of a session whose ciphertext goes
     * through a BIO the program empties and sends itself (a memory BIO:
     * Twisted), into out: true when it is such a session. */
    bool (*hello_of)(const void *session, uint8_t out[RL_TLS_RANDOM]);
    /* NULL, or a read of the session's plaintext into buf that never
     * waits and leaves the library's error state as it was: its bytes
     * (<= 0: none). Called only while no read of the program is under way
     * on the session, and what it reads is held for the program
     * (tlstab.h rl_tlstab_look). */
    long (*read_ahead)(void *session, void *buf, size_t n);
};

/* RL_TLSW_TAKEN (begin_how within rl_tlswrite_run only): a refused
 * request the shim answers (SPEC §15), its bytes taken, not written. */
enum { RL_TLSW_PASS = 0, RL_TLSW_GO = 1, RL_TLSW_FAIL = 2, RL_TLSW_TAKEN = 3 };

/* What policy may ask of the session (its `wire`): tlswrite.c's. */
struct rl_tlsask {
    struct rl_tlsent *e;
    const void *session;
    const struct rl_tlsops *ops;
};

struct rl_tlswrite {
    struct rl_tlsent *e; /* the session's entry (NULL: none looked up) */
    struct rl_reqconn *c;
    struct iovec iov;
    struct rl_tlsask ask;
    struct rl_request_question q;
    struct rl_request_answer a;
};

int rl_tlswrite_begin(struct rl_tlswrite *w, const void *session,
                      const void *buf, size_t n, const char *call,
                      const struct rl_tlsops *ops);

/* One real call of the library's write: the bytes it wrote (> 0), else
 * its failure (<= 0; ctx keeps the library's own result). */
typedef long (*rl_tlsw_real)(void *ctx, const void *buf, size_t n);

/* A counted write that may go in pieces (SPEC §11), begun and ended here
 * around real calls: in delay mode, a write carrying several requests is
 * handed to the library one piece a request, each at its turn (a
 * non-blocking socket's turn that is later fails as a denied write does,
 * and the program's retry of the same bytes goes on from there, as
 * OpenSSL's own multi-record writes do). RL_TLSW_FAIL: denied (errno set;
 * fail without calling the library). RL_TLSW_GO: *out is the bytes the
 * program's write took (all n, or fewer where the library took fewer:
 * its partial-write mode), or -1: the last real call failed, and its own
 * result is the program's answer. n > 0. */
int rl_tlswrite_run(const void *session, const void *buf, size_t n,
                    const char *call, const struct rl_tlsops *ops,
                    rl_tlsw_real real, void *ctx, long *out);

/* After the real call of a GO: it wrote `sent` bytes (< 0: it failed or
 * asked to be retried; the request stays charged, and a retry of the same
 * bytes is not charged again). Preserves errno. */
void rl_tlswrite_end(struct rl_tlswrite *w, long sent);

/* Inside a real TLS call of this thread: a TLS hook reached from inside
 * the library (SSL_write_ex by way of SSL_write) passes straight through.
 * initial-exec: no allocation on first access. */
extern __thread int rl_tls_depth __attribute__((tls_model("initial-exec")));

/* A TLS write in this thread whose session's socket is not known yet (a
 * BIO of the program's own: curl writes the ciphertext through one): its
 * entry, from the real call's start to its end; NULL otherwise. */
extern __thread struct rl_tlsent *rl_tls_unbound
    __attribute__((tls_model("initial-exec")));

/* Ciphertext reaches socket fd: inside a TLS write of a session whose
 * socket was not known, fd is that socket (its `wire`): a later write
 * denied in fail mode holds it until it could go, instead of leaving the
 * program to spin on a writable socket. Its writes still wait their turn
 * in delay mode as a blocking one's do (curl 7.88 fails an HTTP/2
 * transfer whose request write asked to be retried). True when fd was
 * bound so. */
bool rl_tlswrite_bind(int fd);

/* Around a handshake call (SSL_connect) of a session whose socket the
 * library does not know: its ciphertext names the socket as a write's
 * does, before any request is written (a first request denied then holds
 * it too). NULL: nothing to learn; else pass it to _end. */
struct rl_tlsent *rl_tlswrite_handshake_begin(const void *session,
                                              const struct rl_tlsops *ops);
void rl_tlswrite_handshake_end(struct rl_tlsent *e);

/* The session whose last write this thread denied (NULL: none), and the
 * denial's errno: the next SSL_get_error for it says
 * SSL_ERROR_WANT_WRITE for EAGAIN (write again when the socket is
 * writable), else SSL_ERROR_SYSCALL with that errno (an error the
 * program gives up on: a configured errno, or ETIMEDOUT past max_delay,
 * SPEC §2). */
extern __thread const void *rl_tls_denied
    __attribute__((tls_model("initial-exec")));
extern __thread int rl_tls_denied_err __attribute__((tls_model("initial-exec")));

#endif
