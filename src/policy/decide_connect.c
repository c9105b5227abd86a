/* decide_connect.c — the whole decision of an inet connect, asked once
 * (decide_connect.h): the marks its socket gets, the gate's verdict, and
 * what a connect that must not sleep gets instead of a sleep. The kernel
 * is asked through the carrier's probe, only when the answer depends on
 * it. */
#include <errno.h>

#include "policy/decide_connect.h"
#include "policy/proc.h"
#include "policy/ready.h"
#include "policy/reload.h"

/* From a signal handler: rl_gate_handler, all or nothing, at once. */
static __attribute__((noinline)) void
decide_in_handler(struct rl_proc *p, const struct rl_connect_question *q,
                  struct rl_connect_answer *a)
{
    /* Under the generation the covered check was of (the decision's one
     * load, rl_decide_connect). */
    const struct rl_gate_q hq = {RL_KIND_CONNECT, q->sa, q->salen, 1, 0, 0,
                                 a->t.gen};
    uint64_t granted;
    int err = 0;
    a->t.now = 0;
    a->t.wait_ns = 0;
    a->t.handler = true;
    a->t.nopen = 0; /* nothing to settle: it holds no place */
    if (rl_gate_handler(p, &hq, &granted, &err) == RL_GATE_FAIL) {
        a->t.err = err;
        a->act = RL_CONNECT_FAIL;
    } else {
        a->act = RL_CONNECT_GO;
    }
}

/* A connect the program made granted a later turn: a socket that must
 * not sleep has it deferred to that turn (else it sleeps as granted). */
static void later_turn(struct rl_proc *p, const struct rl_connect_question *q,
                       const struct rl_connect_probe *probe,
                       struct rl_connect_answer *a)
{
    if (q->asker != RL_CONNECT_DUE && probe->nonblocking(q->fd) != 1)
        return;
    if (rl_ready_defer_connect(p, q->fd, &a->t, q->sa, q->salen) >= 0)
        a->act = RL_CONNECT_DEFERRED;
}

/* A connect denied: when a max_open place is worth waiting for (delay
 * mode, before max_delay), a socket that must not sleep waits for it in
 * the ready table, a blocking one sleeps for it. */
static void denied(struct rl_proc *p, const struct rl_connect_question *q,
                   const struct rl_connect_probe *probe,
                   struct rl_connect_answer *a)
{
    a->deadline = q->deadline;
    if (!rl_gate_open_waits(&a->t, &a->deadline))
        return;
    int nb = q->asker == RL_CONNECT_DUE ? 1 : probe->nonblocking(q->fd);
    if (nb == 1 && q->asker != RL_CONNECT_WAITED) {
        /* The deadline the connect was first given, kept. */
        uint64_t dl = q->asker == RL_CONNECT_DUE ? q->deadline : a->deadline;
        if (rl_ready_defer_open(p, q->fd, &a->t, q->sa, q->salen, dl) >= 0)
            a->act = RL_CONNECT_DEFERRED;
    } else if (nb == 0 && q->asker != RL_CONNECT_DUE) {
        a->act = RL_CONNECT_WAIT;
    }
}

/* A wait call's (RL_CONNECT_DUE), not deferred again: the entry that
 * waited for a place goes (it held nothing), or tells the failure
 * (SO_ERROR, connect) once. */
static void settle_entry(struct rl_proc *p, const struct rl_connect_question *q,
                         const struct rl_connect_answer *a)
{
    if (a->act == RL_CONNECT_FAIL)
        rl_ready_fail(p, q->fd, a->t.err);
    else if (a->act != RL_CONNECT_DEFERRED)
        rl_ready_forget(p, q->fd);
}

/* A log line the rate limit admitted names the destination of a connect
 * asked without it (RL_CONNECT_SUPERVISOR): read now, once. */
static void say_address(struct rl_proc *p, const struct rl_connect_question *q,
                        const struct rl_connect_probe *probe,
                        struct rl_connect_answer *a)
{
    struct sockaddr_storage ss;
    socklen_t len = 0;
    const struct sockaddr *sa = probe->address(probe->ctx, &ss, &len);
    rl_gate_say_peer(p, &a->t, q->call, q->fd, sa, sa != NULL ? len : 0);
}

/* The gate's verdict turned into what the asker may do with it. */
static __attribute__((noinline)) void
shape(struct rl_proc *p, const struct rl_connect_question *q,
      const struct rl_connect_probe *probe, struct rl_connect_answer *a)
{
    if (q->asker == RL_CONNECT_FASTOPEN)
        return;
    if (a->t.say_due)
        say_address(p, q, probe, a);
    if (a->act == RL_CONNECT_FAIL)
        denied(p, q, probe, a);
    else if (q->asker != RL_CONNECT_WAITED && a->t.wait_ns > 0)
        later_turn(p, q, probe, a);
    if (q->asker == RL_CONNECT_DUE)
        settle_entry(p, q, a);
}

/* The supervisor's new attempt on a stream socket when every connect is
 * charged alike: whatever address it names (decide_connect.h). */
static __attribute__((noinline, cold)) bool
charged_alike(const struct rl_proc *p, const struct rl_connect_question *q)
{
    return q->asker == RL_CONNECT_SUPERVISOR && q->sock == RL_CONNECT_STREAM &&
           !q->charged && rl_gate_connects_alike(p);
}

void rl_decide_connect(struct rl_proc *p, const struct rl_connect_question *q,
                       struct rl_connect_answer *a)
{
    const struct rl_connect_probe *probe = q->probe;
    /* The file is looked at (SPEC §16) before the set-up is read, so
     * this very decision uses what the look finds (a fork child's first
     * connect is charged to its own cgroup). Never in a signal handler:
     * a reload reads a file and allocates. The clock is read once: the
     * look is due by the reading the gate decides at. */
    uint64_t now = 0;
    if (q->asker != RL_CONNECT_HANDLER) {
        now = rl_clock_now_ns();
        if (__builtin_expect(rl_reload_due_at(p, now), 0)) {
            (void)rl_reload_look_at(p, now);
            now = rl_clock_now_ns(); /* the look took its time */
        }
    }
    /* The decision's one load of the config's generation (proc.h): the
     * set-up read here and the gate's decision below are of one config. */
    struct rl_gen *G = rl_proc_gen(p);
    a->t.gen = G;
    /* The gate's set-up, read as rl_gate_charges_sends would (every
     * connect asks: no call). */
    const struct rl_gate *g = &G->gate;
    a->counts_requests = g->counts_requests;
    bool covered = rl_gate_covers_in(p, G, q->sa, q->salen);
    /* With a connect-only quota, sends on the socket stay as cheap as on
     * any other fd. */
    a->matched = covered && g->charges_sends;
    a->deadline = 0;
    if ((q->sock != RL_CONNECT_STREAM || !covered || q->charged) &&
        !charged_alike(p, q)) {
        a->act = RL_CONNECT_PASS;
        a->charged = false;
        if (q->asker == RL_CONNECT_DUE)
            settle_entry(p, q, a);
        return;
    }
    if (q->asker == RL_CONNECT_HANDLER) {
        decide_in_handler(p, q, a);
        a->charged = a->act == RL_CONNECT_GO;
        return;
    }
    bool go = rl_gate_connect_now(&a->t, now) ||
              rl_gate_connect_whole(p, &a->t, now, q->call, q->fd, q->sa,
                                    q->salen) != RL_GATE_FAIL;
    a->act = go ? RL_CONNECT_GO : RL_CONNECT_FAIL;
    a->charged = go;
    /* The common connect: granted now, to the program. */
    if (!go || a->t.wait_ns > 0 || q->asker != RL_CONNECT_CALL)
        shape(p, q, probe, a);
}

void rl_settle_connect(struct rl_proc *p, struct rl_connect_answer *a, int fd,
                       int r, int err)
{
    if (a->act == RL_CONNECT_WAIT) {
        rl_gate_open_wait(&a->t, a->deadline);
        return;
    }
    if (a->act != RL_CONNECT_GO || a->t.handler)
        return;
    rl_gate_connected(p, &a->t, fd,
                      r == 0 || err == EINPROGRESS || err == EINTR);
}

bool rl_connect_wait_over(const struct rl_connect_answer *a, uint64_t now)
{
    return now >= a->deadline || rl_gate_open_freed(&a->t);
}

void rl_settle_connect_unmade(struct rl_proc *p, struct rl_connect_answer *a)
{
    if (a->act != RL_CONNECT_GO || a->t.handler)
        return;
    rl_gate_refund(p, &a->t, RL_KIND_CONNECT, 1);
    rl_gate_connected(p, &a->t, -1, false);
}
