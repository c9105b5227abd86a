/* decide_send.c — the whole decision of a charged send, asked once
 * (decide_send.h): what the fd already holds (policy/ready.h), the grant
 * worth giving, the gate's verdict, and what a socket that must not sleep
 * gets instead of a sleep. The kernel is asked through the carrier's
 * probe, only when the answer depends on it. */
#include <errno.h>
#include <string.h>

#include "policy/decide_send.h"
#include "policy/lease_take.h"
#include "policy/overdue.h"
#include "policy/proc.h"
#include "policy/ready.h"
#include "policy/reload.h"
#include "policy/sites.h"
#include "util/clock.h"

/* One decision: the question, the answer being written, and what was
 * asked of the kernel so far (each asked once at most). */
struct asking {
    struct rl_proc *p;
    /* The config's generation, loaded once for the whole decision: the
     * checks before the gate's (max_bytes, needs_peer, the least grant)
     * and the gate's own are of one config, whatever a reload does
     * meanwhile (proc.h). */
    struct rl_gen *G;
    const struct rl_send_question *q;
    struct rl_send_answer *a;
    uint64_t want, min; /* the bytes asked, and the least grant */
    int nb;             /* nonblocking: -1 until asked */
    const struct sockaddr *sa;
    socklen_t salen;
    struct sockaddr_storage peer;
};

static bool nonblocking(struct asking *k)
{
    if (k->nb < 0)
        k->nb = k->q->probe->nonblocking(k->q->fd, k->q->flags);
    return k->nb != 0;
}

/* The destination: the explicit one, or the fd's peer, asked now. */
static void ask_peer(struct asking *k)
{
    if (k->sa == NULL)
        k->sa = k->q->probe->peer(k->q->fd, &k->peer, &k->salen);
}

/* What the kernel has to say of the fd that a send would hear. Nothing
 * of a socket the send connects (MSG_FASTOPEN): poll reports one with no
 * connection yet as hung up, and the kernel would make the connection
 * and send, so a denied send left to it would go uncharged. */
static int kernel_says(const struct asking *k)
{
    if (k->q->fastopen != NULL)
        return 0;
    return k->q->probe->kernel_says(k->q->fd);
}

static void give_back(struct rl_proc *p, struct rl_gate_ticket *t)
{
    rl_gate_refund(p, t, RL_KIND_SEND, t->calls);
    rl_gate_refund(p, t, RL_KIND_SEND_BYTES, t->bytes);
}

static void fail(struct rl_send_answer *a, int err)
{
    a->t.err = err;
    a->act = RL_GATE_FAIL;
}

/* A send the shim would hold back, on a socket of which the kernel had
 * `said` (non-zero) to say: its pending error is the answer, or the
 * kernel answers a hang-up itself. Nothing is taken. Without this a
 * client told POLLERR or POLLHUP tries again at once, is told EAGAIN,
 * and spins until the hold ends. */
static void kernel_answers(struct rl_send_answer *a, int said)
{
    if (said < 0)
        a->act = RL_DECIDE_KERNEL;
    else
        fail(a, said);
}

/* After a denial: hold fd until a sizeable part of the send could go, so
 * that the client is woken once for it, not for every byte that frees up:
 * 1/8 of the burst, 8 wake-ups a second of a loop that waits (a smaller
 * part wakes python asyncio so often that its CPU per second of waiting
 * passes make bench's bar; events::asyncio_upload_fail bounds both). */
#define HOLD_PART 8

static void hold_after_denial(struct asking *k, uint64_t want, uint64_t min)
{
    uint64_t chunk = min;
    if (min < want) {
        uint64_t m = k->G->gate.max_bytes;
        uint64_t part = m == UINT64_MAX ? 1 : m / HOLD_PART;
        chunk = part > min ? part : min;
        if (chunk > want)
            chunk = want;
    }
    uint64_t eta = rl_gate_send_eta_in(k->G, chunk);
    if (eta == 0 || eta == UINT64_MAX)
        return; /* free now (a refund), or never: nothing to wait for */
    if (rl_ready_hold(k->p, k->q->fd, rl_clock_now_ns() + eta) >= 0)
        k->a->view |= RL_DECIDE_HIDE;
}

/* What the fd holds already (a hold, a reserved turn, a deferred
 * connect). true when that answers the send; false: decide it. */
static bool claimed(struct asking *k)
{
    struct rl_send_answer *a = k->a;
    struct rl_gate_ticket *t = &a->t;
    uint64_t now = rl_clock_now_ns(), until = 0;
    int what = 0;
    bool block = !nonblocking(k);
    int r = rl_ready_claim(k->p, k->q->fd, now, block, t, &until, &what);
    if (r == -EAGAIN && rl_ready_unconnected(what)) {
        a->connect_due = what;
        a->connect_now = now;
        fail(a, EAGAIN);
        return true;
    }
    /* A blocking socket is held for the wait calls only: its send is
     * decided (and sleeps) as usual. */
    if (r == -EAGAIN && !block) {
        int said = kernel_says(k);
        if (said != 0)
            kernel_answers(a, said);
        else
            fail(a, EAGAIN);
        return true;
    }
    bool have = r == 1 || (r == -EAGAIN && what == RL_READY_RESERVE);
    if (have || (r == 0 && what == RL_READY_HOLD))
        a->view |= RL_DECIDE_SHOW; /* no longer held */
    if (have) {
        /* Its reserved turn (a blocking socket sleeps until then). */
        if (t->bytes >= k->min) {
            if (r == 1)
                t->wait_ns = 0;
            a->act = RL_GATE_GO;
            return true;
        }
        give_back(k->p, t); /* a datagram larger than the turn taken */
    }
    return false;
}

/* The least a stream send may be granted when it cannot go whole. */
static uint64_t least_grant(struct asking *k)
{
    struct rl_gen *G = k->G;
    uint64_t min = k->min, want = k->want;
    if (min < want && G->gate.max_bytes != UINT64_MAX) {
        /* A short grant only of a sizeable part (gate.h): else EAGAIN
         * and a hold until it is free. With 1 byte as the least, python
         * asyncio sends the few bytes refilled at each call and is never
         * held (events::asyncio_upload_fail counts its decisions). A
         * blocking socket keeps its short grants (a denial would fail
         * it). The fcntl only when the budget is short of that part (a
         * probe changes nothing) or a site may be. */
        uint64_t least = rl_gate_send_least_nonblocking(G, want);
        if (least > min &&
            (rl_sites_any(&G->sites) || rl_gate_send_eta_in(G, least) > 0) &&
            nonblocking(k))
            min = least;
    }
    return min;
}

/* A denial (the gate's, on a socket that answers nothing itself). */
static void denied(struct asking *k, uint64_t min)
{
    struct rl_send_answer *a = k->a;
    int said = kernel_says(k);
    if (said != 0) {
        kernel_answers(a, said);
        return;
    }
    int err;
    if (rl_overdue(&a->t, &err) && nonblocking(k)) {
        /* Past max_delay: failed at once, not held (overdue.h). */
        ask_peer(k);
        rl_overdue_say(k->p, &a->t, NULL, k->sa, k->salen);
        a->t.err = err;
        return;
    }
    if (k->q->asker != RL_SEND_SUPERVISOR)
        hold_after_denial(k, k->want, min);
}

/* A later turn granted: a socket that must not sleep keeps it and is
 * answered EAGAIN till then; a blocking one sleeps, unless SO_SNDTIMEO
 * would expire first. */
static void later_turn(struct asking *k)
{
    struct rl_send_answer *a = k->a;
    if (nonblocking(k)) {
        int said = kernel_says(k);
        if (said != 0) {
            /* No turn to wait for on a socket the kernel refuses. */
            give_back(k->p, &a->t);
            kernel_answers(a, said);
            return;
        }
        /* Its turn is reserved for it; EAGAIN until then. */
        if (rl_ready_reserve(k->p, k->q->fd, &a->t) >= 0)
            a->view |= RL_DECIDE_HIDE;
        else
            give_back(k->p, &a->t);
        fail(a, EAGAIN);
        return;
    }
    uint64_t limit = k->q->probe->send_timeout(k->q->fd);
    if (limit > 0 && a->t.wait_ns > limit) {
        /* The kernel's own answer when SO_SNDTIMEO expires. */
        give_back(k->p, &a->t);
        fail(a, EAGAIN);
    }
}

/* The bytes to ask for and the least grant (the question's min 0: a
 * stream send may be cut short, to the largest grant and at least 1 byte;
 * a datagram goes whole). */
static void byte_range(const struct rl_gen *G,
                       const struct rl_send_question *q, uint64_t *want,
                       uint64_t *min)
{
    *want = q->want;
    *min = q->min != 0 ? q->min : q->want;
    if (q->stream && q->min == 0) {
        uint64_t cap = G->gate.max_bytes;
        if (*want > cap)
            *want = cap;
        *min = 1;
    }
}

/* From a signal handler: rl_gate_handler, at once, nothing waited for. The
 * handler may have interrupted anything of its thread (malloc, a lock,
 * the shim itself), so nothing here allocates, locks, sleeps or logs, and
 * the one thing asked of the kernel is the peer (getpeername is
 * async-signal-safe): a stream's sends go to its peer, and `sa` counts
 * only when it has none. */
static __attribute__((noinline)) void
decide_in_handler(struct rl_proc *p, const struct rl_send_question *q,
                  struct rl_send_answer *a)
{
    struct rl_gate_q hq = {.kind = RL_KIND_SEND,
                           .sa = q->sa,
                           .salen = q->salen,
                           .calls = q->calls,
                           .gen = rl_proc_gen(p)}; /* the one load */
    struct sockaddr_storage peer;
    if (q->stream || q->sa == NULL) {
        socklen_t len = 0;
        const struct sockaddr *sa = q->probe->peer(q->fd, &peer, &len);
        if (sa != NULL) {
            hq.sa = sa;
            hq.salen = len;
        }
    }
    byte_range(hq.gen, q, &hq.bytes, &hq.bytes_min);
    uint64_t granted = 0;
    int err = 0;
    a->t.now = 0;
    a->t.wait_ns = 0;
    a->t.handler = true; /* nothing to settle */
    a->t.calls = q->calls;
    if (rl_gate_handler(p, &hq, &granted, &err) == RL_GATE_FAIL) {
        fail(a, err);
        return;
    }
    a->act = RL_GATE_GO;
    a->t.bytes = granted;
}

/* One unit to the fd's own peer out of the thread's lease: true when it
 * covered the call (no decision, nothing logged), false: decide it. */
static bool leased(struct rl_proc *p, const struct rl_send_question *q,
                   struct rl_send_answer *a)
{
    uint64_t g = rl_gate_send_leased(p, q->want, q->stream);
    if (g == 0)
        return false;
    a->act = RL_GATE_GO;
    a->leased = true;
    a->t.wait_ns = 0;
    a->t.calls = 1;
    a->t.bytes = g;
    return true;
}

/* A send decided by the gate (outside a handler, not leased). */
static void decide(struct asking *k)
{
    struct rl_proc *p = k->p;
    const struct rl_send_question *q = k->q;
    struct rl_send_answer *a = k->a;
    if (rl_ready_any(&p->ready) && claimed(k))
        return;
    uint64_t min = least_grant(k);
    /* The whole question: a send without an address goes to the fd's
     * peer, asked of the kernel here, once, and only when the gate needs
     * it to decide. */
    if (k->sa == NULL && k->G->gate.needs_peer)
        ask_peer(k);
    uint64_t least_calls = q->asker == RL_SEND_SUPERVISOR ? q->calls : 1;
    a->act = rl_gate_send_in(p, k->G, &a->t, q->call, q->fd, k->sa, k->salen,
                             q->calls, least_calls, k->want, min);
    if (a->t.say_due) {
        /* A log line the rate limit admitted names the destination: the
         * peer is asked now only if the decision did not need it. */
        ask_peer(k);
        rl_gate_say_peer(p, &a->t, q->call, q->fd, k->sa, k->salen);
    }
    if (a->act == RL_GATE_FAIL)
        denied(k, min);
    else if (a->t.wait_ns > 0)
        later_turn(k);
}

/* A question that is not a decision: whether a send is charged at all,
 * or whether the lease covers it alone. */
static void asked_aside(struct rl_proc *p, const struct rl_send_question *q,
                        struct rl_send_answer *a)
{
    const struct rl_gen *G = rl_proc_gen(p); /* one load for both */
    bool yes = q->asker == RL_SEND_CLASSIFY
                   ? G->gate.charges_sends &&
                         rl_gate_covers_in(p, G, q->sa, q->salen)
                   : leased(p, q, a);
    a->act = yes ? RL_GATE_GO : RL_DECIDE_NO;
}

void rl_decide_send(struct rl_proc *p, const struct rl_send_question *q,
                    struct rl_send_answer *a)
{
    a->leased = false;
    a->view = 0;
    a->connect_due = 0;
    a->stamp = NULL;
    if (__builtin_expect(q->asker >= RL_SEND_CLASSIFY, 0)) {
        asked_aside(p, q, a);
        return;
    }
    if (q->handler) {
        decide_in_handler(p, q, a);
        return;
    }
    if (q->lease && leased(p, q, a))
        return;
    /* Past the lease: a leased send stays as cheap as it was, and a
     * process that sends at all decides here often (a lease is small). */
    if (rl_reload_due(p))
        (void)rl_reload_look(p);
    struct asking k = {.p = p,
                       .G = rl_proc_gen(p), /* the decision's one load */
                       .q = q,
                       .a = a,
                       .nb = -1,
                       .sa = q->sa,
                       .salen = q->salen};
    byte_range(k.G, q, &k.want, &k.min);
    decide(&k);
    if (a->act == RL_GATE_FAIL && q->fastopen != NULL)
        /* The denied call leaves nothing behind: its connect goes back
         * (the carrier unmarks the socket). */
        rl_gate_refund(p, q->fastopen, RL_KIND_CONNECT, 1);
}

void rl_settle_send(struct rl_proc *p, struct rl_send_answer *a, bool leased,
                    uint64_t calls, uint64_t bytes)
{
    if (a->stamp != NULL)
        rl_lease_stamp(a->stamp);
    uint64_t gc = a->t.calls, gb = a->t.bytes;
    if (calls > gc)
        calls = gc;
    if (bytes > gb)
        bytes = gb;
    if (leased) {
        if (calls < gc || bytes < gb)
            rl_gate_lease_refund(p, gc - calls, gb - bytes);
    } else {
        if (calls < gc)
            rl_gate_refund(p, &a->t, RL_KIND_SEND, gc - calls);
        if (bytes < gb)
            rl_gate_refund(p, &a->t, RL_KIND_SEND_BYTES, gb - bytes);
    }
    a->t.calls = calls;
    a->t.bytes = bytes;
}
