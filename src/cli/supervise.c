/* supervise.c — the supervisor's event loop (see supervise.h).
 *
 * The receivers (sup_receive.c) pass each notification here, in their
 * thread: it is decided at once (sup_calls.c) and answered. A connect is
 * made here on a copy of the socket: on a non-blocking socket it returns
 * at once (0, EINPROGRESS or an error: exactly what the program would have
 * seen); on a blocking one it may take as long as the network does, so a
 * receiver makes it only while another waits for notifications (no thread
 * is made per connect, and a slow connect never holds up the other
 * calls). A call that must wait joins a min-heap by its turn; the main
 * thread waits in epoll on a timerfd armed for the earliest turn and on a
 * signalfd (SIGCHLD and the signals passed on to the child), and answers
 * held calls when their turn comes (a blocking connect then gets a thread
 * of its own), so any number of target threads can wait at once without
 * holding up the others. The heap and the timer are shared: the loop's
 * `lock` guards them. The threads share nothing else but the listener fd
 * (the kernel serialises answers), the gate (thread-safe as in the shim)
 * and the max_open table (sup_open.c's lock): all of it struct rl_sup's
 * (sup.h). */
#include "cli/supervise.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/sup.h"
#include "cli/sup_calls.h"
#include "util/clock.h"

/* Connects waiting for a max_open place look again this often: a place
 * freed by a preloaded process wakes only its futex, and a holder that
 * died wakes nobody. A close the supervisor sees itself looks at once. */
#define OPEN_POLL_NS 10000000u

/* ---- answers --------------------------------------------------------*/

/* Answer `id`: continue, or the result `err` (0: the call returned 0).
 * An answer to a call whose thread is gone fails with ENOENT: nothing to
 * do then. */
static void answer(int listener, uint64_t id, bool cont, int err)
{
    struct seccomp_notif_resp r;
    memset(&r, 0, sizeof r);
    r.id = id;
    if (cont)
        r.flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
    else
        r.error = -err;
    while (ioctl(listener, SECCOMP_IOCTL_NOTIF_SEND, &r) != 0 && errno == EINTR)
        ;
}

static void job_free(struct sup_job *j)
{
    if (j->sock >= 0)
        close(j->sock);
    free(j);
}

/* Make the connect and settle its max_open places (before the answer:
 * the program may close the fd as soon as it has it). */
static int connect_result(struct sup_open *o, struct sup_job *j)
{
    int r;
    while ((r = connect(j->sock, (struct sockaddr *)&j->sa, j->salen)) != 0 &&
           errno == EINTR)
        ;
    int err = r == 0 ? 0 : errno;
    sup_settle(o, j, err == 0 || err == EINPROGRESS || err == EALREADY);
    return err;
}

struct blocking {
    struct rl_sup *sup;
    struct sup_job *job;
};

static void *blocking_connect(void *arg)
{
    struct blocking *b = arg;
    int err = connect_result(&b->sup->open, b->job);
    answer(b->sup->listener, b->job->id, false, err);
    job_free(b->job);
    free(b);
    return NULL;
}

static bool nonblocking(int sock)
{
    int fl = fcntl(sock, F_GETFL);
    return fl >= 0 && (fl & O_NONBLOCK);
}

/* Make the connect on our copy of the socket and answer its result. A
 * receiver (`self`) makes it itself while another receiver waits in the
 * ioctl, or when it cannot block (the cheapest look first); the main
 * thread (`self` NULL) only when it cannot block. */
static void do_connect(struct rl_sup *s, struct sup_job *j,
                       struct sup_receiver *self)
{
    bool here = self != NULL
                    ? sup_receive_others_wait(&s->rx) || nonblocking(j->sock) ||
                          sup_receive_call(&s->rx) == 0
                    : nonblocking(j->sock);
    if (here) {
        int err = connect_result(&s->open, j);
        /* A blocking connect returns its outcome, a non-blocking one
         * EINPROGRESS. */
        if (self != NULL && err != EINPROGRESS)
            sup_receive_blocked(self);
        answer(s->listener, j->id, false, err);
        job_free(j);
        return;
    }
    struct blocking *b = malloc(sizeof *b);
    pthread_attr_t attr;
    pthread_t th;
    bool started = false;
    if (b != NULL && pthread_attr_init(&attr) == 0) {
        b->sup = s;
        b->job = j;
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        pthread_attr_setstacksize(&attr, 64 * 1024);
        started = pthread_create(&th, &attr, blocking_connect, b) == 0;
        pthread_attr_destroy(&attr);
    }
    if (!started) {
        /* No thread: the program gets the error a connect could give
         * under memory pressure, never a connect we did not check. */
        free(b);
        answer(s->listener, j->id, false, ENOBUFS);
        job_free(j);
    }
}

/* ---- the timer queue ------------------------------------------------*/

static void heap_swap(struct sup_loop *l, size_t a, size_t b)
{
    struct sup_job *t = l->heap[a];
    l->heap[a] = l->heap[b];
    l->heap[b] = t;
}

static int heap_push(struct sup_loop *l, struct sup_job *j)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        struct sup_job **h = realloc(l->heap, cap * sizeof *h);
        if (h == NULL)
            return -ENOMEM;
        l->heap = h;
        l->cap = cap;
    }
    size_t i = l->n++;
    l->heap[i] = j;
    while (i > 0 && l->heap[(i - 1) / 2]->due > l->heap[i]->due) {
        heap_swap(l, i, (i - 1) / 2);
        i = (i - 1) / 2;
    }
    return 0;
}

static struct sup_job *heap_pop(struct sup_loop *l)
{
    struct sup_job *top = l->heap[0];
    l->heap[0] = l->heap[--l->n];
    for (size_t i = 0;;) {
        size_t left = 2 * i + 1, right = left + 1, m = i;
        if (left < l->n && l->heap[left]->due < l->heap[m]->due)
            m = left;
        if (right < l->n && l->heap[right]->due < l->heap[m]->due)
            m = right;
        if (m == i)
            break;
        heap_swap(l, i, m);
        i = m;
    }
    return top;
}

static void arm(struct sup_loop *l)
{
    struct itimerspec its;
    memset(&its, 0, sizeof its);
    if (l->n > 0 || l->nw > 0) {
        uint64_t due = l->n > 0 ? l->heap[0]->due : UINT64_MAX;
        if (l->nw > 0 && l->poll_at < due)
            due = l->poll_at;
        due = due ? due : 1;
        its.it_value.tv_sec = (time_t)(due / 1000000000u);
        its.it_value.tv_nsec = (long)(due % 1000000000u);
    }
    timerfd_settime(l->timer, TFD_TIMER_ABSTIME, &its, NULL);
}

/* A held call's turn has come: if its thread still waits, connect or let
 * it go; if it is gone, its units go back to the budget. */
static void due(struct rl_sup *s, struct sup_job *j)
{
    if (!sup_id_valid(s->listener, j->id)) {
        sup_refund(s, j);
        job_free(j);
        return;
    }
    if (j->connect) {
        do_connect(s, j, NULL);
        return;
    }
    sup_settle(&s->open, j, true); /* a MSG_FASTOPEN send: its connection */
    answer(s->listener, j->id, true, 0);
    job_free(j);
}

static int hold(struct sup_loop *l, struct sup_job *j);
static int wait_place(struct sup_loop *l, struct sup_job *j);

/* What a decision said, carried out (by receiver `self`, or by the main
 * thread for a call decided again: `self` NULL). */
static void act(struct rl_sup *s, struct sup_job *j, enum sup_act a,
                struct sup_receiver *self)
{
    switch (a) {
    case SUP_CONTINUE:
        sup_settle(&s->open, j, true);
        answer(s->listener, j->id, true, 0);
        job_free(j);
        break;
    case SUP_ERROR:
        answer(s->listener, j->id, false, j->err);
        job_free(j);
        break;
    case SUP_CONNECT:
        do_connect(s, j, self);
        break;
    case SUP_DUE:
    case SUP_OPEN_WAIT:
        if ((a == SUP_DUE ? hold(&s->loop, j) : wait_place(&s->loop, j)) < 0) {
            sup_refund(s, j);
            answer(s->listener, j->id, false, ENOBUFS);
            job_free(j);
        }
        break;
    }
}

/* Connects waiting for a place: those that may go now are decided again,
 * oldest first; the others keep their order, before any that came
 * meanwhile. */
static void on_places(struct rl_sup *s)
{
    uint64_t now = rl_clock_now_ns();
    pthread_mutex_lock(&s->loop.lock);
    struct sup_job **q = s->loop.waitq;
    size_t n = s->loop.nw, cap = s->loop.capw, kept = 0;
    s->loop.waitq = NULL;
    s->loop.nw = s->loop.capw = 0;
    pthread_mutex_unlock(&s->loop.lock);
    for (size_t i = 0; i < n; i++) {
        struct sup_job *j = q[i];
        if (!sup_open_ready(j, now)) {
            q[kept++] = j;
            continue;
        }
        enum sup_act a = sup_redecide(s, &s->loop.pidfds, j);
        if (a == SUP_OPEN_WAIT)
            q[kept++] = j;
        else
            act(s, j, a, NULL);
    }
    pthread_mutex_lock(&s->loop.lock);
    size_t need = kept + s->loop.nw;
    struct sup_job **g = need > cap ? realloc(q, need * sizeof *g) : q;
    if (g == NULL) {
        /* No memory to keep them: they get the error a connect could give
         * under memory pressure, never a connect past max_open. */
        for (size_t i = 0; i < kept; i++) {
            sup_refund(s, q[i]);
            answer(s->listener, q[i]->id, false, ENOBUFS);
            job_free(q[i]);
        }
        free(q);
    } else {
        if (s->loop.nw > 0)
            memcpy(g + kept, s->loop.waitq, s->loop.nw * sizeof *g);
        free(s->loop.waitq);
        s->loop.waitq = g;
        s->loop.nw = need;
        s->loop.capw = need > cap ? need : cap;
    }
    s->loop.poll_at = now + OPEN_POLL_NS;
    arm(&s->loop);
    pthread_mutex_unlock(&s->loop.lock);
}

static void on_timer(struct rl_sup *s)
{
    uint64_t ticks;
    if (read(s->loop.timer, &ticks, sizeof ticks) < 0 && errno != EAGAIN)
        return;
    pthread_mutex_lock(&s->loop.lock);
    bool places = s->loop.nw > 0 && s->loop.poll_at <= rl_clock_now_ns();
    pthread_mutex_unlock(&s->loop.lock);
    if (places)
        on_places(s);
    for (;;) {
        /* One at a time: answering (and a connect) happens unlocked. */
        uint64_t now = rl_clock_now_ns();
        struct sup_job *j = NULL;
        pthread_mutex_lock(&s->loop.lock);
        if (s->loop.n > 0 && s->loop.heap[0]->due <= now)
            j = heap_pop(&s->loop);
        else
            arm(&s->loop);
        pthread_mutex_unlock(&s->loop.lock);
        if (j == NULL)
            break;
        due(s, j);
    }
}

/* Hold a call until its turn. */
static int hold(struct sup_loop *l, struct sup_job *j)
{
    pthread_mutex_lock(&l->lock);
    int r = heap_push(l, j);
    if (r == 0 && l->heap[0] == j)
        arm(l);
    pthread_mutex_unlock(&l->lock);
    return r;
}

/* Wait for a max_open place. */
static int wait_place(struct sup_loop *l, struct sup_job *j)
{
    pthread_mutex_lock(&l->lock);
    if (l->nw == l->capw) {
        size_t cap = l->capw ? l->capw * 2 : 64;
        struct sup_job **q = realloc(l->waitq, cap * sizeof *q);
        if (q == NULL) {
            pthread_mutex_unlock(&l->lock);
            return -ENOMEM;
        }
        l->waitq = q;
        l->capw = cap;
    }
    l->waitq[l->nw++] = j;
    if (l->nw == 1) {
        l->poll_at = rl_clock_now_ns() + OPEN_POLL_NS;
        arm(l);
    }
    pthread_mutex_unlock(&l->lock);
    return 0;
}

/* A place was given back (sup_open.c, any thread): look at the waiting
 * connects now. */
static void kick(void *arg)
{
    const struct sup_loop *l = arg;
    uint64_t one = 1;
    if (l->kick >= 0 && write(l->kick, &one, sizeof one) < 0)
        return; /* the counter is full: a kick is pending anyway */
}

/* ---- notifications --------------------------------------------------*/

static void on_notification(void *arg, struct sup_receiver *self,
                            const struct seccomp_notif *rq)
{
    struct rl_sup *s = arg;
    struct seccomp_notif req = *rq;
    struct sup_job *j = calloc(1, sizeof *j);
    if (j == NULL) {
        answer(s->listener, req.id, false, ENOBUFS);
        return;
    }
    j->id = req.id;
    j->pid = (pid_t)req.pid;
    j->sock = -1;
    act(s, j, sup_decide(s, &self->pidfds, &req, j), self);
}

/* A receiver stopped for good: the loop ends on it. */
static void on_receive_failed(void *arg, int err)
{
    struct rl_sup *s = arg;
    uint64_t one = 1;
    atomic_store(&s->loop.rx_err, err);
    if (write(s->loop.dead, &one, sizeof one) < 0)
        abort();
}

/* ---- children and signals -------------------------------------------*/

/* Reap every child that has exited. Returns true when none is left. */
static bool reap(struct sup_loop *l)
{
    for (;;) {
        int st;
        pid_t p = waitpid(-1, &st, WNOHANG);
        if (p == 0)
            return false;
        if (p < 0)
            return errno == ECHILD;
        if (p == l->child) {
            l->child_done = true;
            l->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        }
    }
}

static const int passed_on[] = {SIGTERM, SIGHUP,  SIGINT,
                                SIGQUIT, SIGUSR1, SIGUSR2};

/* Returns true when no child is left. */
static bool on_signal(struct sup_loop *l)
{
    struct signalfd_siginfo si;
    while (read(l->sig, &si, sizeof si) == (ssize_t)sizeof si) {
        if (si.ssi_signo == SIGCHLD)
            continue;
        /* A signal another process sent us (kill, systemd) goes on to the
         * child; one the kernel sent (the terminal's ^C to the whole
         * group) reached the child already. */
        if ((int)si.ssi_code <= 0 && !l->child_done)
            kill(l->child, (int)si.ssi_signo);
    }
    return reap(l);
}

static int setup(struct rl_sup *s, sigset_t *old)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    for (size_t i = 0; i < sizeof passed_on / sizeof passed_on[0]; i++)
        sigaddset(&set, passed_on[i]);
    /* Blocked before any thread starts: the connect threads inherit it and
     * never take a signal meant for the loop. */
    if (pthread_sigmask(SIG_BLOCK, &set, old) != 0)
        return -EINVAL;
    signal(SIGPIPE, SIG_IGN);
    s->loop.sig = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
    s->loop.timer = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    s->loop.ep = epoll_create1(EPOLL_CLOEXEC);
    s->loop.dead = eventfd(0, EFD_CLOEXEC);
    s->loop.kick = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (s->loop.sig < 0 || s->loop.timer < 0 || s->loop.ep < 0 ||
        s->loop.dead < 0 || s->loop.kick < 0)
        return -errno;
    sup_open_on_release(&s->open, kick, &s->loop);
    int fds[] = {s->loop.timer, s->loop.sig, s->loop.dead, s->loop.kick};
    for (int i = 0; i < 4; i++) {
        struct epoll_event ev = {.events = EPOLLIN, .data.fd = fds[i]};
        if (epoll_ctl(s->loop.ep, EPOLL_CTL_ADD, fds[i], &ev) != 0)
            return -errno;
    }
    return 0;
}

void rl_sup_init(struct rl_sup *s)
{
    memset(s, 0, sizeof *s);
    s->listener = -1;
    sup_open_init(&s->open);
    sup_receive_init(&s->rx, &s->kernel);
    struct sup_loop *l = &s->loop;
    l->timer = l->sig = l->ep = l->dead = l->kick = -1;
    l->status = 1;
    pthread_mutex_init(&l->lock, NULL);
    sup_pidfds_init(&l->pidfds, &s->kernel);
}

int rl_supervise(struct rl_sup *s, int listener, pid_t child)
{
    s->listener = listener;
    s->loop.child = child;
    sigset_t old;
    int rc = setup(s, &old);
    if (rc == 0)
        rc = sup_receive_start(&s->rx, listener, on_notification,
                               on_receive_failed, s);
    bool done = rc < 0 || reap(&s->loop);
    while (!done) {
        struct epoll_event ev[8];
        int n = epoll_wait(s->loop.ep, ev, 8, -1);
        if (n < 0 && errno != EINTR) {
            rc = -errno;
            break;
        }
        for (int i = 0; i < n; i++) {
            int fd = ev[i].data.fd;
            if (fd == s->loop.timer)
                on_timer(s);
            else if (fd == s->loop.kick) {
                uint64_t v;
                if (read(s->loop.kick, &v, sizeof v) == (ssize_t)sizeof v)
                    on_places(s);
            } else if (fd == s->loop.dead) {
                /* Pairs with the write after rx_err is set. */
                uint64_t v;
                if (read(s->loop.dead, &v, sizeof v) == (ssize_t)sizeof v)
                    rc = -atomic_load(&s->loop.rx_err);
                done = true;
            } else if (fd == s->loop.sig && on_signal(&s->loop))
                done = true;
        }
    }
    /* Every target is gone (or the loop failed, and the caller stops
     * them): no held call will get its turn, and the turns they reserved
     * go back to the budget (other programs of the user share it). The
     * receiver may still be in the ioctl (it dies with the process): the
     * listener stays open until then. */
    pthread_mutex_lock(&s->loop.lock);
    while (s->loop.n > 0) {
        struct sup_job *j = heap_pop(&s->loop);
        sup_refund(s, j);
        job_free(j);
    }
    while (s->loop.nw > 0) {
        struct sup_job *j = s->loop.waitq[--s->loop.nw];
        sup_refund(s, j);
        job_free(j);
    }
    pthread_mutex_unlock(&s->loop.lock);
    if (s->loop.ep >= 0)
        close(s->loop.ep);
    if (s->loop.timer >= 0)
        close(s->loop.timer);
    if (s->loop.sig >= 0)
        close(s->loop.sig);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc < 0)
        return rc;
    return s->loop.status;
}
