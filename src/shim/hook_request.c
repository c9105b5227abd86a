/* hook_request.c — the requests a plaintext send-like call carries (SPEC
 * §11): the step before the send's own decision (rl_send_begin) and the
 * one after the real call (rl_send_settle), on a connection of
 * shim/conntab.h. The decisions are policy/reqconn.c's; this file holds
 * the connection across the call (its shared state only while it plans,
 * decides again and ends: rl_reqconn_hold), sleeps, holds a non-blocking
 * socket until its turn, and trims the call. */
#include <errno.h>

#include "policy/gate.h"
#include "policy/ready.h"
#include "policy/reqconn.h"
#include "shim/conntab.h"
#include "shim/epreg.h"
#include "shim/fdtab.h"
#include "shim/hooks.h"
#include "shim/self.h"
#include "shim/shim.h"
#include "shim/tlswrite.h"
#include "shim/wait.h"
#include "util/clock.h"

/* How long a write waits for a read of another thread that looks at an
 * answer (and pauses its destination); the bound is for a holder that
 * never came back (a cancelled thread). */
#define WRITE_WAIT_MAX_NS 1000000000ull

/* A TLS record on a plaintext socket that no TLS library of the process
 * could have written: its requests cannot be seen (said once). */
static void tls_check(struct rl_reqconn *c)
{
    if (!c->tls_seen || c->tls_owned)
        return;
    c->tls_seen = false;
    if (!rl_conntab_tls_visible())
        rl_reqconn_unseen_tls(rl_shim_proc(), c);
}

/* Not HTTP, or TLS counted by the TLS layer (if at all): the socket's
 * sends cost what any other socket's do from now on. */
static void forget(int fd)
{
    rl_fdtab_set(fd, rl_fdtab_get(fd) & ~RL_FD_HTTP);
    rl_conntab_forget(fd);
}

/* A TLS connection whose session the TLS layer may yet find here: one
 * written through a BIO of the program's own (curl's) is known by its
 * socket only when its first write's ciphertext comes by. */
static bool tls_unbound(const struct rl_reqconn *c)
{
    return rl_reqscan_proto(&c->scan) == RL_HTTP_TLS &&
           (c->tls_paced || (!c->tls_owned && rl_conntab_tls_visible()));
}

/* A send of ciphertext: kept only until a TLS write it is made inside
 * names its session, or the session named this socket itself (its
 * handshake's client random, or its fd). The socket of a session that
 * moves its ciphertext itself (a memory BIO) stays: its sends wait while
 * a write of that session waits its turn. */
static int ciphertext(struct rl_send *s, struct rl_reqconn *c)
{
    if (!c->tls_owned && rl_tlswrite_bind(s->fd))
        c->tls_owned = true;
    uint64_t until = 0;
    int r = 0;
    bool paced = c->tls_paced, owned = c->tls_owned;
    rl_reqconn_let_go(c);
    if (paced)
        r = rl_wait_paced(s->fd, s->flags, &until);
    else if (owned)
        forget(s->fd);
    rl_shim_leave();
    rl_conntab_release(c);
    /* A blocking socket sleeps to the turn, where it asks again: a pause
     * that came meanwhile holds it still (SPEC §12). */
    while (until != 0 && r == 0) {
        if (rl_shim_sleep_on(s->fd, until) || !rl_shim_enter())
            break; /* hung up: the kernel answers */
        r = rl_wait_paced(s->fd, s->flags, &until);
        rl_shim_leave();
    }
    return r;
}

int rl_request_begin(struct rl_send *s)
{
    if (!rl_shim_enter())
        return 0;
    if (__builtin_expect(s->mark & RL_FD_HTTP_LATE, 0))
        rl_conntab_late(s->fd);
    struct rl_reqconn *c = rl_conntab_acquire(s->fd);
    if (c == NULL) {
        rl_shim_leave();
        return 0;
    }
    /* A read of another thread looking at an answer holds the state a
     * moment. Not had (its holder never came back), or bytes the shim
     * does not see (sendfile): the stream's place is lost, so its
     * requests are counted no further. */
    bool held = rl_reqconn_hold(c, WRITE_WAIT_MAX_NS);
    if (!held || s->iov == NULL) {
        if (held)
            rl_reqconn_let_go(c);
        forget(s->fd);
        rl_shim_leave();
        rl_conntab_release(c);
        return 0;
    }
    if (rl_reqscan_proto(&c->scan) == RL_HTTP_TLS)
        return ciphertext(s, c);
    int saved = errno;
    const struct rl_reqwrite w = {s->fd, s->call, RL_REQ_PLAIN,
                                  (s->flags & MSG_DONTWAIT) != 0, -1};
    rl_reqconn_plan(rl_shim_proc(), c, s->iov, s->niov, &w, &s->rp);
    tls_check(c);
    if (!s->rp.scanned) {
        rl_reqconn_let_go(c);
        rl_shim_leave();
        rl_conntab_release(c);
        return 0;
    }
    if (s->rp.act == RL_GATE_FAIL) {
        /* Held back, unless the kernel has something to say (SPEC §2):
         * a hang-up goes to the kernel, which refuses it, uncounted. */
        rl_reqconn_let_go(c);
        int k = rl_wait_kernel_says(s->fd);
        if (k == 0 && s->rp.wake != 0 &&
            rl_ready_hold(rl_shim_proc(), s->fd, s->rp.wake) >= 0)
            rl_epreg_hold(s->fd);
        rl_shim_leave();
        rl_conntab_release(c);
        if (k < 0) {
            errno = saved;
            return 0;
        }
        errno = k > 0 ? k : s->rp.err;
        return -1;
    }
    /* Asleep and in the real call, the write lets a read of another
     * thread see the answers: a 429 that comes while it waits pauses its
     * destination, and holds it at its turn. */
    rl_reqconn_let_go(c);
    rl_shim_leave();
    s->rc = c;
    if (s->rp.allow < s->len) {
        s->len = s->rp.allow;
        s->grant = s->rp.allow;
    }
    while (s->rp.wake != 0) {
        if (s->rp.wake > rl_clock_now_ns() &&
            rl_shim_sleep_on(s->fd, s->rp.wake))
            break; /* hung up: the kernel answers (its turn stays spent) */
        /* At its turn: a pause of its destination that came while it
         * slept holds it still (SPEC §12). */
        if (!rl_shim_enter())
            break;
        if (rl_reqconn_hold(c, WRITE_WAIT_MAX_NS)) {
            rl_reqconn_again(rl_shim_proc(), c, s->iov, s->niov, &w, &s->rp);
            rl_reqconn_let_go(c);
        } else {
            s->rp.wake = 0;
        }
        rl_shim_leave();
    }
    if (s->rp.act == RL_GATE_FAIL) {
        s->rc = NULL;
        rl_conntab_release(c);
        errno = s->rp.err;
        return -1;
    }
    errno = saved;
    return 0;
}

void rl_request_end(struct rl_send *s, long sent)
{
    struct rl_reqconn *c = s->rc;
    s->rc = NULL;
    bool in = rl_shim_enter();
    /* (Not held after the bound: its holder is gone.) */
    bool held = rl_reqconn_hold(c, WRITE_WAIT_MAX_NS);
    rl_reqconn_done(c, s->iov, s->niov, sent, &s->rp);
    bool done = !rl_reqconn_counting(c) && !tls_unbound(c);
    if (held)
        rl_reqconn_let_go(c);
    if (done)
        forget(s->fd);
    if (in)
        rl_shim_leave();
    rl_conntab_release(c);
}
