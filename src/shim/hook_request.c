/* hook_request.c — the requests a plaintext send-like call carries (SPEC
 * §11): the step before the send's own decision (rl_send_begin) and the
 * one after the real call (rl_send_settle), on a connection of
 * shim/conntab.h. The decisions are policy/decide_request.c's; this file
 * holds the connection across the call, sleeps, hides a held socket from
 * the wait calls, and trims the call. */
#include <errno.h>

#include "policy/decide_request.h"
#include "shim/conntab.h"
#include "shim/epreg.h"
#include "shim/fdtab.h"
#include "shim/hooks.h"
#include "shim/madeup.h"
#include "shim/readahead.h"
#include "shim/self.h"
#include "shim/shim.h"
#include "shim/tlswrite.h"
#include "shim/wait.h"
#include "util/clock.h"

/* Not HTTP, or TLS counted by the TLS layer (if at all): the socket's
 * sends cost what any other socket's do from now on. */
static void forget(int fd)
{
    rl_fdtab_set(fd, rl_fdtab_get(fd) & ~RL_FD_HTTP);
    rl_conntab_forget(fd);
}

/* What policy may ask of a plaintext socket's send. */
static const struct rl_request_probe probe = {
    .nonblocking = rl_wait_nonblocking,
    .kernel_says = rl_wait_kernel_says,
    .peer = rl_wait_peer,
    .tunnel_port = rl_conntab_tunnel_port,
    .tls_visible = rl_conntab_tls_visible,
    .tls_bind = rl_tlswrite_bind,
};

static void question(const struct rl_send *s, struct rl_reqconn *c,
                     struct rl_request_question *q)
{
    *q = (struct rl_request_question){
        .head = {RL_CALL_REQUEST},
        .conn = c,
        .call = s->call,
        .carrier = RL_CARRY_PLAIN,
        .fd = s->fd,
        .flags = s->flags,
        .iov = s->iov,
        .n = s->niov,
        .probe = &probe,
    };
}

/* A send of ciphertext: a socket whose session moves its ciphertext
 * itself (a memory BIO) waits while a write of that session waits its
 * turn; a blocking one sleeps to the turn, where it asks again: a pause
 * that came meanwhile holds it still (SPEC §12). */
static int ciphertext(struct rl_send *s, struct rl_reqconn *c)
{
    uint64_t until = 0;
    int r = 0;
    if (s->ra.paced)
        r = rl_wait_paced(s->fd, s->flags, &until);
    else if (s->ra.forget)
        forget(s->fd);
    rl_shim_leave();
    rl_conntab_release(c);
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
    int saved = errno;
    struct rl_request_question q;
    question(s, c, &q);
    rl_decide(rl_shim_proc(), &q.head, (union rl_answer){.request = &s->ra});
    const struct rl_request_answer *ra = &s->ra;
    if (ra->act == RL_REQUEST_CIPHER) {
        errno = saved;
        return ciphertext(s, c);
    }
    if (ra->act == RL_REQUEST_RESPOND) {
        /* Answered by the shim: its bytes are taken, not sent, and the
         * fd's reads ask for the answer (hook_recv.c). */
        rl_madeup_mark(s->fd);
        rl_shim_leave();
        s->rc = c;
        s->len = ra->allow;
        s->grant = ra->allow;
        errno = saved;
        return 1;
    }
    if (ra->hide >= 0)
        rl_epreg_hold(ra->hide);
    if (ra->act != RL_GATE_GO) {
        if (ra->forget)
            forget(s->fd);
        rl_shim_leave();
        rl_conntab_release(c);
        if (ra->act != RL_GATE_FAIL) {
            errno = saved;
            return 0;
        }
        errno = ra->err;
        return -1;
    }
    /* Asleep and in the real call, the connection is held (not its
     * shared state: a read of another thread sees the answers). */
    rl_shim_leave();
    s->rc = c;
    if (ra->allow < s->len) {
        s->len = ra->allow;
        s->grant = ra->allow;
    }
    q.again = true;
    /* Asleep, it hears an answer no thread of the program reads meanwhile
     * (readahead.h). */
    const struct rl_look look = {s->fd, c};
    while (s->ra.wake != 0) {
        if (s->ra.wake > rl_clock_now_ns() &&
            rl_readahead_sleep(s->fd, s->ra.wake, &look))
            break; /* hung up: the kernel answers (its turn stays spent) */
        if (!rl_shim_enter())
            break;
        rl_decide(rl_shim_proc(), &q.head,
                  (union rl_answer){.request = &s->ra});
        rl_shim_leave();
    }
    if (s->ra.act == RL_GATE_FAIL) {
        s->rc = NULL;
        rl_conntab_release(c);
        errno = s->ra.err;
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
    struct rl_request_question q;
    question(s, c, &q);
    if (rl_settle(rl_shim_proc(),
                  &(const struct rl_outcome){
                      .kind = RL_CALL_REQUEST,
                      .request = {.c = c, .q = &q, .a = &s->ra, .sent = sent}}))
        forget(s->fd);
    if (in)
        rl_shim_leave();
    rl_conntab_release(c);
}
