/* hook_gnutls.c — GnuTLS's writes (SPEC §11): gnutls_record_send (in
 * pieces, as SSL_write: tlswrite.h); the
 * server name the program sets (gnutls_server_name_set, remembered for
 * the session's first write); gnutls_deinit forgets the session. */
#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <sys/types.h>

#include "shim/hooks.h"
#include "shim/self.h"
#include "shim/tlsreal.h"
#include "shim/tlstab.h"
#include "shim/tlswrite.h"

/* The library's own types stay opaque: no GnuTLS header is needed. */
typedef struct gnutls_session_int *gnutls_session_t;

#define GNUTLS_E_AGAIN (-28)
#define GNUTLS_E_INTERNAL_ERROR (-59)
#define GNUTLS_E_PUSH_ERROR (-53)
#define GNUTLS_NAME_DNS 1

static int fd_of(const void *session)
{
    int (*get)(gnutls_session_t) =
        rl_tls_real(RL_TLS_GNUTLS_TRANSPORT_GET_INT);
    return get != NULL ? get((gnutls_session_t)session) : -1;
}

static void name_of(const void *session, const struct rl_tlsent *e,
                    char *out)
{
    (void)session;
    memcpy(out, e->name, sizeof e->name);
}

/* A session with a push function of the program's (its own transport) is
 * not paired with its socket by its handshake: not done for GnuTLS. */
/* (Never read ahead: readahead.h.) */
static const struct rl_tlsops ops = {fd_of, name_of, NULL, NULL};

/* One real gnutls_record_send of a piece (tlswrite.h). */
struct send_call {
    gnutls_session_t session;
    ssize_t (*real)(gnutls_session_t, const void *, size_t);
    ssize_t r;
};

static long send_piece(void *ctx, const void *buf, size_t n)
{
    struct send_call *x = ctx;
    x->r = x->real(x->session, buf, n);
    return x->r > 0 ? (long)x->r : -1;
}

/* Through rl_tlswrite_run, as SSL_write: a request of a write of its own
 * may be answered in the process (SPEC §15, on_deny = respond), its bytes
 * taken and its answer read from gnutls_record_recv (hook_tls_read.c). */
RL_EXPORT ssize_t gnutls_record_send(gnutls_session_t session,
                                     const void *data, size_t size)
{
    ssize_t (*real)(gnutls_session_t, const void *, size_t) =
        rl_tls_real(RL_TLS_GNUTLS_RECORD_SEND);
    if (real == NULL)
        return GNUTLS_E_INTERNAL_ERROR;
    if (data == NULL || size == 0) {
        /* (NULL, 0) flushes what an interrupted send kept: no request. */
        if (rl_tls_denied == session)
            rl_tls_denied = NULL;
        return real(session, data, size);
    }
    struct send_call x = {session, real, 0};
    long out;
    if (rl_tlswrite_run(session, data, size, "gnutls_record_send", &ops,
                        send_piece, &x, &out) == RL_TLSW_FAIL) {
        /* SSL_get_error has no GnuTLS twin: the code says it (errno
         * is set: a push error's cause, as the library's own). */
        rl_tls_denied = NULL;
        return errno == EAGAIN ? GNUTLS_E_AGAIN : GNUTLS_E_PUSH_ERROR;
    }
    return out >= 0 ? (ssize_t)out : x.r;
}

RL_EXPORT int gnutls_server_name_set(gnutls_session_t session, int type,
                                     const void *name, size_t name_length)
{
    int (*real)(gnutls_session_t, int, const void *, size_t) =
        rl_tls_real(RL_TLS_GNUTLS_SERVER_NAME_SET);
    if (real == NULL)
        return GNUTLS_E_INTERNAL_ERROR;
    int r = real(session, type, name, name_length);
    /* Remembered only where requests are counted (the table allocates:
     * never in a handler). */
    if (r == 0 && type == GNUTLS_NAME_DNS && name != NULL &&
        !rl_hook_in_handler() && !rl_shim_in_vfork_child() && rl_shim_ready() &&
        rl_proc_counts_requests(rl_shim_proc())) {
        struct rl_tlsent *e = rl_tlstab_get(session, true);
        if (e != NULL) {
            size_t l = name_length < RL_NAME_MAX ? name_length : RL_NAME_MAX;
            memcpy(e->name, name, l);
            e->name[l] = '\0';
        }
    }
    return r;
}

RL_EXPORT void gnutls_deinit(gnutls_session_t session)
{
    if (session != NULL && !rl_hook_in_handler() && !rl_shim_in_vfork_child())
        rl_tlstab_drop(session);
    void (*real)(gnutls_session_t) = rl_tls_real(RL_TLS_GNUTLS_DEINIT);
    if (real != NULL)
        real(session);
}
