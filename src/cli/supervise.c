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
 * holding up the others. The heap and the timer are shared: `lock` guards
 * them. The threads share nothing else but the listener fd (the kernel
 * serialises answers) and the gate (thread-safe as in the shim). */
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

#include "cli/sup_calls.h"
#include "cli/sup_open.h"
#include "cli/sup_receive.h"
#include "cli/sup_target.h"
#include "util/clock.h"

/* Connects waiting for a max_open place look again this often: a place
 * freed by a preloaded process wakes only its futex, and a holder that
 * died wakes nobody. A close the supervisor sees itself looks at once. */
#define OPEN_POLL_NS 10000000u

struct sup {
    int listener, timer, sig, ep;
    int dead; /* eventfd: the receivers stopped (rx_err says why) */
    _Atomic int rx_err;
    pthread_mutex_t lock; /* heap, n, cap and the timer's setting */
    pid_t child;
    bool child_done;
    int status;
    struct sup_job **heap; /* min-heap by due */
    size_t n, cap;
    /* Connects waiting for a max_open place, oldest first (under `lock`),
     * looked at again at poll_at or when `kick` (an eventfd) says that a
     * place was given back. */
    struct sup_job **waitq;
    size_t nw, capw;
    uint64_t poll_at;
    int kick;
};

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
static int connect_result(struct sup_job *j)
{
    int r;
    while ((r = connect(j->sock, (struct sockaddr *)&j->sa, j->salen)) != 0 &&
           errno == EINTR)
        ;
    int err = r == 0 ? 0 : errno;
    sup_settle(j, err == 0 || err == EINPROGRESS || err == EALREADY);
    return err;
}

struct blocking {
    int listener;
    struct sup_job *job;
};

static void *blocking_connect(void *arg)
{
    struct blocking *b = arg;
    int err = connect_result(b->job);
    answer(b->listener, b->job->id, false, err);
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
 * receiver makes it itself while another receiver waits in the ioctl, or
 * when it cannot block (the cheapest look first); the main thread only
 * when it cannot block. */
static void do_connect(struct sup *s, struct sup_job *j, bool receiver)
{
    bool here = receiver ? sup_receive_others_wait() || nonblocking(j->sock) ||
                               sup_receive_call() == 0
                         : nonblocking(j->sock);
    if (here) {
        int err = connect_result(j);
        /* A blocking connect returns its outcome, a non-blocking one
         * EINPROGRESS. */
        if (receiver && err != EINPROGRESS)
            sup_receive_blocked();
        answer(s->listener, j->id, false, err);
        job_free(j);
        return;
    }
    struct blocking *b = malloc(sizeof *b);
    pthread_attr_t attr;
    pthread_t th;
    bool started = false;
    if (b != NULL && pthread_attr_init(&attr) == 0) {
        b->listener = s->listener;
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

static void heap_swap(struct sup *s, size_t a, size_t b)
{
    struct sup_job *t = s->heap[a];
    s->heap[a] = s->heap[b];
    s->heap[b] = t;
}

static int heap_push(struct sup *s, struct sup_job *j)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 64;
        struct sup_job **h = realloc(s->heap, cap * sizeof *h);
        if (h == NULL)
            return -ENOMEM;
        s->heap = h;
        s->cap = cap;
    }
    size_t i = s->n++;
    s->heap[i] = j;
    while (i > 0 && s->heap[(i - 1) / 2]->due > s->heap[i]->due) {
        heap_swap(s, i, (i - 1) / 2);
        i = (i - 1) / 2;
    }
    return 0;
}

static struct sup_job *heap_pop(struct sup *s)
{
    struct sup_job *top = s->heap[0];
    s->heap[0] = s->heap[--s->n];
    for (size_t i = 0;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < s->n && s->heap[l]->due < s->heap[m]->due)
            m = l;
        if (r < s->n && s->heap[r]->due < s->heap[m]->due)
            m = r;
        if (m == i)
            break;
        heap_swap(s, i, m);
        i = m;
    }
    return top;
}

static void arm(struct sup *s)
{
    struct itimerspec its;
    memset(&its, 0, sizeof its);
    if (s->n > 0 || s->nw > 0) {
        uint64_t due = s->n > 0 ? s->heap[0]->due : UINT64_MAX;
        if (s->nw > 0 && s->poll_at < due)
            due = s->poll_at;
        due = due ? due : 1;
        its.it_value.tv_sec = (time_t)(due / 1000000000u);
        its.it_value.tv_nsec = (long)(due % 1000000000u);
    }
    timerfd_settime(s->timer, TFD_TIMER_ABSTIME, &its, NULL);
}

/* A held call's turn has come: if its thread still waits, connect or let
 * it go; if it is gone, its units go back to the budget. */
static void due(struct sup *s, struct sup_job *j)
{
    if (!sup_id_valid(s->listener, j->id)) {
        sup_refund(j);
        job_free(j);
        return;
    }
    if (j->connect) {
        do_connect(s, j, false);
        return;
    }
    sup_settle(j, true); /* a MSG_FASTOPEN send: its connection */
    answer(s->listener, j->id, true, 0);
    job_free(j);
}

static int hold(struct sup *s, struct sup_job *j);
static int wait_place(struct sup *s, struct sup_job *j);

/* What a decision said, carried out (by a receiver, or by the main
 * thread for a call decided again). */
static void act(struct sup *s, struct sup_job *j, enum sup_act a, bool receiver)
{
    switch (a) {
    case SUP_CONTINUE:
        sup_settle(j, true);
        answer(s->listener, j->id, true, 0);
        job_free(j);
        break;
    case SUP_ERROR:
        answer(s->listener, j->id, false, j->err);
        job_free(j);
        break;
    case SUP_CONNECT:
        do_connect(s, j, receiver);
        break;
    case SUP_DUE:
    case SUP_OPEN_WAIT:
        if ((a == SUP_DUE ? hold(s, j) : wait_place(s, j)) < 0) {
            sup_refund(j);
            answer(s->listener, j->id, false, ENOBUFS);
            job_free(j);
        }
        break;
    }
}

/* Connects waiting for a place: those that may go now are decided again,
 * oldest first; the others keep their order, before any that came
 * meanwhile. */
static void on_places(struct sup *s)
{
    uint64_t now = rl_clock_now_ns();
    pthread_mutex_lock(&s->lock);
    struct sup_job **q = s->waitq;
    size_t n = s->nw, cap = s->capw, kept = 0;
    s->waitq = NULL;
    s->nw = s->capw = 0;
    pthread_mutex_unlock(&s->lock);
    for (size_t i = 0; i < n; i++) {
        struct sup_job *j = q[i];
        if (!sup_open_ready(j, now)) {
            q[kept++] = j;
            continue;
        }
        enum sup_act a = sup_redecide(s->listener, j);
        if (a == SUP_OPEN_WAIT)
            q[kept++] = j;
        else
            act(s, j, a, false);
    }
    pthread_mutex_lock(&s->lock);
    size_t need = kept + s->nw;
    struct sup_job **g = need > cap ? realloc(q, need * sizeof *g) : q;
    if (g == NULL) {
        /* No memory to keep them: they get the error a connect could give
         * under memory pressure, never a connect past max_open. */
        for (size_t i = 0; i < kept; i++) {
            sup_refund(q[i]);
            answer(s->listener, q[i]->id, false, ENOBUFS);
            job_free(q[i]);
        }
        free(q);
    } else {
        if (s->nw > 0)
            memcpy(g + kept, s->waitq, s->nw * sizeof *g);
        free(s->waitq);
        s->waitq = g;
        s->nw = need;
        s->capw = need > cap ? need : cap;
    }
    s->poll_at = now + OPEN_POLL_NS;
    arm(s);
    pthread_mutex_unlock(&s->lock);
}

static void on_timer(struct sup *s)
{
    uint64_t ticks;
    if (read(s->timer, &ticks, sizeof ticks) < 0 && errno != EAGAIN)
        return;
    pthread_mutex_lock(&s->lock);
    bool places = s->nw > 0 && s->poll_at <= rl_clock_now_ns();
    pthread_mutex_unlock(&s->lock);
    if (places)
        on_places(s);
    for (;;) {
        /* One at a time: answering (and a connect) happens unlocked. */
        uint64_t now = rl_clock_now_ns();
        struct sup_job *j = NULL;
        pthread_mutex_lock(&s->lock);
        if (s->n > 0 && s->heap[0]->due <= now)
            j = heap_pop(s);
        else
            arm(s);
        pthread_mutex_unlock(&s->lock);
        if (j == NULL)
            break;
        due(s, j);
    }
}

/* Hold a call until its turn. */
static int hold(struct sup *s, struct sup_job *j)
{
    pthread_mutex_lock(&s->lock);
    int r = heap_push(s, j);
    if (r == 0 && s->heap[0] == j)
        arm(s);
    pthread_mutex_unlock(&s->lock);
    return r;
}

/* Wait for a max_open place. */
static int wait_place(struct sup *s, struct sup_job *j)
{
    pthread_mutex_lock(&s->lock);
    if (s->nw == s->capw) {
        size_t cap = s->capw ? s->capw * 2 : 64;
        struct sup_job **q = realloc(s->waitq, cap * sizeof *q);
        if (q == NULL) {
            pthread_mutex_unlock(&s->lock);
            return -ENOMEM;
        }
        s->waitq = q;
        s->capw = cap;
    }
    s->waitq[s->nw++] = j;
    if (s->nw == 1) {
        s->poll_at = rl_clock_now_ns() + OPEN_POLL_NS;
        arm(s);
    }
    pthread_mutex_unlock(&s->lock);
    return 0;
}

/* A place was given back (sup_open.c, any thread): look at the waiting
 * connects now. */
static int kick_fd = -1;

static void kick(void)
{
    uint64_t one = 1;
    if (kick_fd >= 0 && write(kick_fd, &one, sizeof one) < 0)
        return; /* the counter is full: a kick is pending anyway */
}

/* ---- notifications --------------------------------------------------*/

static void on_notification(void *arg, const struct seccomp_notif *rq)
{
    struct sup *s = arg;
    struct seccomp_notif req = *rq;
    struct sup_job *j = calloc(1, sizeof *j);
    if (j == NULL) {
        answer(s->listener, req.id, false, ENOBUFS);
        return;
    }
    j->id = req.id;
    j->pid = (pid_t)req.pid;
    j->sock = -1;
    act(s, j, sup_decide(s->listener, &req, j), true);
}

/* A receiver stopped for good: the loop ends on it. */
static void on_receive_failed(void *arg, int err)
{
    struct sup *s = arg;
    uint64_t one = 1;
    atomic_store(&s->rx_err, err);
    if (write(s->dead, &one, sizeof one) < 0)
        abort();
}

/* ---- children and signals -------------------------------------------*/

/* Reap every child that has exited. Returns true when none is left. */
static bool reap(struct sup *s)
{
    for (;;) {
        int st;
        pid_t p = waitpid(-1, &st, WNOHANG);
        if (p == 0)
            return false;
        if (p < 0)
            return errno == ECHILD;
        if (p == s->child) {
            s->child_done = true;
            s->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        }
    }
}

static const int passed_on[] = {SIGTERM, SIGHUP,  SIGINT,
                                SIGQUIT, SIGUSR1, SIGUSR2};

/* Returns true when no child is left. */
static bool on_signal(struct sup *s)
{
    struct signalfd_siginfo si;
    while (read(s->sig, &si, sizeof si) == (ssize_t)sizeof si) {
        if (si.ssi_signo == SIGCHLD)
            continue;
        /* A signal another process sent us (kill, systemd) goes on to the
         * child; one the kernel sent (the terminal's ^C to the whole
         * group) reached the child already. */
        if ((int)si.ssi_code <= 0 && !s->child_done)
            kill(s->child, (int)si.ssi_signo);
    }
    return reap(s);
}

static int setup(struct sup *s, sigset_t *old)
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
    s->sig = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
    s->timer = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    s->ep = epoll_create1(EPOLL_CLOEXEC);
    s->dead = eventfd(0, EFD_CLOEXEC);
    s->kick = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (s->sig < 0 || s->timer < 0 || s->ep < 0 || s->dead < 0 || s->kick < 0)
        return -errno;
    kick_fd = s->kick;
    sup_open_on_release(kick);
    int fds[] = {s->timer, s->sig, s->dead, s->kick};
    for (int i = 0; i < 4; i++) {
        struct epoll_event ev = {.events = EPOLLIN, .data.fd = fds[i]};
        if (epoll_ctl(s->ep, EPOLL_CTL_ADD, fds[i], &ev) != 0)
            return -errno;
    }
    return 0;
}

int rl_supervise(int listener, pid_t child)
{
    static struct sup s = {.timer = -1,
                           .sig = -1,
                           .ep = -1,
                           .status = 1,
                           .kick = -1,
                           .lock = PTHREAD_MUTEX_INITIALIZER};
    s.listener = listener;
    s.child = child;
    sigset_t old;
    int rc = setup(&s, &old);
    if (rc == 0)
        rc =
            sup_receive_start(listener, on_notification, on_receive_failed, &s);
    bool done = rc < 0 || reap(&s);
    while (!done) {
        struct epoll_event ev[8];
        int n = epoll_wait(s.ep, ev, 8, -1);
        if (n < 0 && errno != EINTR) {
            rc = -errno;
            break;
        }
        for (int i = 0; i < n; i++) {
            int fd = ev[i].data.fd;
            if (fd == s.timer)
                on_timer(&s);
            else if (fd == s.kick) {
                uint64_t v;
                if (read(s.kick, &v, sizeof v) == (ssize_t)sizeof v)
                    on_places(&s);
            } else if (fd == s.dead) {
                /* Pairs with the write after rx_err is set. */
                uint64_t v;
                if (read(s.dead, &v, sizeof v) == (ssize_t)sizeof v)
                    rc = -atomic_load(&s.rx_err);
                done = true;
            } else if (fd == s.sig && on_signal(&s))
                done = true;
        }
    }
    /* Every target is gone (or the loop failed, and the caller stops
     * them): no held call will get its turn, and the turns they reserved
     * go back to the budget (other programs of the user share it). The
     * receiver may still be in the ioctl (it dies with the process): the
     * listener stays open until then. */
    pthread_mutex_lock(&s.lock);
    while (s.n > 0) {
        struct sup_job *j = heap_pop(&s);
        sup_refund(j);
        job_free(j);
    }
    while (s.nw > 0) {
        struct sup_job *j = s.waitq[--s.nw];
        sup_refund(j);
        job_free(j);
    }
    pthread_mutex_unlock(&s.lock);
    if (s.ep >= 0)
        close(s.ep);
    if (s.timer >= 0)
        close(s.timer);
    if (s.sig >= 0)
        close(s.sig);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc < 0)
        return rc;
    return s.status;
}
