/* epreg.c — the program's epoll registrations (see epreg.h). */
#include "shim/epreg.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "policy/ready.h"
#include "shim/fdtab.h"
#include "shim/madeup.h"
#include "shim/self.h"
#include "shim/shim.h"
#include "shim/wreal.h"

#define SLOTS RL_EPREG_SLOTS
#define PENDING_MAX RL_EPREG_PENDING_MAX

int rl_epreg_mode_now(int fd, uint64_t now)
{
    if (!rl_ready_any(&rl_shim_proc()->ready))
        return RL_EPREG_FULL;
    struct rl_ready_take lk = {.what = RL_READY_LOOK};
    (void)rl_ready_take(rl_shim_proc(), fd, now, &lk);
    switch (lk.look.hidden) {
    case RL_READY_CONNECT:
    case RL_READY_OPEN:
        return RL_EPREG_ABSENT;
    case RL_READY_HOLD:
    case RL_READY_RESERVE:
    case RL_READY_TURN:
        return RL_EPREG_NOOUT;
    default:
        return RL_EPREG_FULL;
    }
}

static bool grow(unsigned fd)
{
    struct rl_epreg *e = &rl_shim_self->epreg;
    if (fd < e->cap)
        return true;
    unsigned n = e->cap ? e->cap : 256;
    while (n <= fd)
        n *= 2;
    struct rl_epreg_reg(*p)[SLOTS] = realloc(e->regs, (size_t)n * sizeof *p);
    if (p == NULL)
        return false;
    for (unsigned i = e->cap; i < n; i++)
        for (int s = 0; s < SLOTS; s++)
            p[i][s].epfd = -1;
    e->regs = p;
    e->cap = n;
    return true;
}

static struct rl_epreg_reg *slot(int epfd, int fd, bool make)
{
    struct rl_epreg *e = &rl_shim_self->epreg;
    if (fd < 0 || (!make && (unsigned)fd >= e->cap))
        return NULL;
    if (make && !grow((unsigned)fd))
        return NULL;
    struct rl_epreg_reg *free_slot = NULL;
    for (int s = 0; s < SLOTS; s++) {
        if (e->regs[fd][s].epfd == epfd)
            return &e->regs[fd][s];
        if (e->regs[fd][s].epfd < 0 && free_slot == NULL)
            free_slot = &e->regs[fd][s];
    }
    if (!make || free_slot == NULL)
        return NULL;
    free_slot->epfd = epfd;
    free_slot->mode = RL_EPREG_FULL;
    free_slot->madeup_told = 0;
    atomic_fetch_add_explicit(&e->n, 1, memory_order_relaxed);
    return free_slot;
}

static void unslot(struct rl_epreg_reg *r)
{
    struct rl_epreg *e = &rl_shim_self->epreg;
    r->epfd = -1;
    atomic_fetch_sub_explicit(&e->n, 1, memory_order_relaxed);
}

/* Put fd on the list settle goes through; false when the list is full. */
static bool mark_pending(int fd)
{
    struct rl_epreg *e = &rl_shim_self->epreg;
    unsigned n = atomic_load_explicit(&e->npending, memory_order_relaxed);
    for (unsigned i = 0; i < n; i++)
        if (e->pending[i] == fd)
            return true;
    if (n >= PENDING_MAX)
        return false;
    e->pending[n] = fd;
    atomic_store_explicit(&e->npending, n + 1, memory_order_relaxed);
    return true;
}

/* Put one registration in the kernel into `mode`. */
static void apply(int fd, struct rl_epreg_reg *r, int mode)
{
    if (r->mode == mode)
        return;
    struct epoll_event ev = {.events = r->events, .data.u64 = r->data};
    if (mode == RL_EPREG_NOOUT)
        ev.events &= ~(uint32_t)EPOLLOUT;
    int op = mode == RL_EPREG_ABSENT  ? EPOLL_CTL_DEL
             : r->mode == RL_EPREG_ABSENT ? EPOLL_CTL_ADD
                                          : EPOLL_CTL_MOD;
    if (op == EPOLL_CTL_MOD && !(r->events & EPOLLOUT)) {
        /* Nothing to take out or put back. */
        r->mode = mode;
        return;
    }
    int saved = errno;
    WREAL(epoll_ctl)(r->epfd, op, fd, &ev);
    errno = saved;
    r->mode = mode;
}

static void sync_locked(int fd, int mode)
{
    struct rl_epreg *e = &rl_shim_self->epreg;
    if (fd < 0 || (unsigned)fd >= e->cap)
        return;
    for (int s = 0; s < SLOTS; s++)
        if (e->regs[fd][s].epfd >= 0)
            apply(fd, &e->regs[fd][s], mode);
    if (mode != RL_EPREG_FULL)
        mark_pending(fd);
}

void rl_epreg_sync(int fd, int mode)
{
    struct rl_epreg *e = &rl_shim_self->epreg;
    pthread_mutex_lock(&e->mu);
    sync_locked(fd, mode);
    pthread_mutex_unlock(&e->mu);
}

void rl_epreg_hold(int fd)
{
    struct rl_epreg *e = &rl_shim_self->epreg;
    pthread_mutex_lock(&e->mu);
    bool settled_later = mark_pending(fd);
    if (fd >= 0 && (unsigned)fd < e->cap)
        for (int s = 0; s < SLOTS; s++) {
            struct rl_epreg_reg *g = &e->regs[fd][s];
            if (g->epfd < 0)
                continue;
            if (!settled_later || (g->events & EPOLLONESHOT)) {
                /* Nothing would put it right later (the e->pending list is
                 * full), or a one-shot registration the program re-arms
                 * itself: EPOLLOUT out now. */
                apply(fd, g, RL_EPREG_NOOUT);
            } else if (g->mode == RL_EPREG_FULL &&
                       (g->events & (EPOLLOUT | EPOLLET)) ==
                           (EPOLLOUT | EPOLLET)) {
                /* The same registration again: a new edge, which wakes
                 * a thread blocked on the set since before the hold. */
                struct epoll_event ev = {.events = g->events,
                                         .data.u64 = g->data};
                int saved = errno;
                WREAL(epoll_ctl)(g->epfd, EPOLL_CTL_MOD, fd, &ev);
                errno = saved;
            }
        }
    pthread_mutex_unlock(&e->mu);
}

void rl_epreg_record(int epfd, int op, int fd, const struct epoll_event *ev)
{
    struct rl_epreg *e = &rl_shim_self->epreg;
    int saved = errno;
    pthread_mutex_lock(&e->mu);
    struct rl_epreg_reg *g = slot(epfd, fd, op != EPOLL_CTL_DEL);
    if (g != NULL && op == EPOLL_CTL_DEL) {
        unslot(g);
    } else if (g != NULL && ev != NULL) {
        g->events = ev->events;
        g->data = ev->data.u64;
        g->mode = RL_EPREG_FULL;
        g->madeup_told = 0; /* re-armed, as the kernel re-arms it */
    }
    pthread_mutex_unlock(&e->mu);
    errno = saved;
}

int rl_epreg_ctl(int epfd, int op, int fd, struct epoll_event *ev, int mode)
{
    struct rl_epreg *e = &rl_shim_self->epreg;
    /* Held: the program's view here, the mode's in the kernel. */
    pthread_mutex_lock(&e->mu);
    int r = 0, err = 0;
    struct rl_epreg_reg *g = slot(epfd, fd, false);
    if (op == EPOLL_CTL_ADD) {
        if (g != NULL) {
            err = EEXIST;
        } else if (ev == NULL) {
            err = EFAULT;
        } else {
            struct epoll_event kev = *ev;
            if (mode == RL_EPREG_NOOUT) {
                kev.events &= ~(uint32_t)EPOLLOUT;
                r = WREAL(epoll_ctl)(epfd, op, fd, &kev);
                err = r != 0 ? errno : 0;
            }
            if (err == 0) {
                g = slot(epfd, fd, true);
                if (g != NULL) {
                    g->events = ev->events;
                    g->data = ev->data.u64;
                    g->mode = mode;
                    mark_pending(fd);
                }
            }
        }
    } else if (g == NULL) {
        /* Not recorded: the kernel decides (ENOENT, or a registration
         * made where the shim could not record it). */
        r = WREAL(epoll_ctl)(epfd, op, fd, ev);
        err = r != 0 ? errno : 0;
    } else if (op == EPOLL_CTL_DEL) {
        if (g->mode != RL_EPREG_ABSENT) {
            r = WREAL(epoll_ctl)(epfd, op, fd, ev);
            err = r != 0 ? errno : 0;
        }
        unslot(g);
    } else if (op == EPOLL_CTL_MOD && ev != NULL) {
        g->events = ev->events;
        g->data = ev->data.u64;
        g->madeup_told = 0;
        if (g->mode != RL_EPREG_ABSENT) {
            struct epoll_event kev = *ev;
            if (mode == RL_EPREG_NOOUT)
                kev.events &= ~(uint32_t)EPOLLOUT;
            r = WREAL(epoll_ctl)(epfd, op, fd, &kev);
            err = r != 0 ? errno : 0;
        }
        g->mode = g->mode == RL_EPREG_ABSENT ? RL_EPREG_ABSENT : mode;
        mark_pending(fd);
    } else {
        err = EINVAL;
    }
    pthread_mutex_unlock(&e->mu);
    if (err != 0) {
        errno = err;
        return -1;
    }
    return 0;
}

void rl_epreg_settle(uint64_t now)
{
    struct rl_epreg *e = &rl_shim_self->epreg;
    pthread_mutex_lock(&e->mu);
    unsigned n = atomic_load_explicit(&e->npending, memory_order_relaxed);
    unsigned keep = 0;
    for (unsigned i = 0; i < n; i++) {
        int fd = e->pending[i];
        int mode = rl_epreg_mode_now(fd, now);
        bool left = false;
        if ((unsigned)fd < e->cap)
            for (int s = 0; s < SLOTS; s++) {
                struct rl_epreg_reg *g = &e->regs[fd][s];
                if (g->epfd < 0)
                    continue;
                apply(fd, g, mode);
                left = true;
            }
        if (left && mode != RL_EPREG_FULL)
            e->pending[keep++] = fd;
    }
    atomic_store_explicit(&e->npending, keep, memory_order_relaxed);
    pthread_mutex_unlock(&e->mu);
}

/* Report fd's registration in epfd for its made-up answer, if it asks
 * for reads and has not been shown this answer (edge-triggered). */
static int madeup_one(int epfd, int fd, struct epoll_event *out)
{
    struct rl_epreg *e = &rl_shim_self->epreg;
    if (!rl_shim_enter())
        return 0;
    int saved = errno, k = 0;
    pthread_mutex_lock(&e->mu);
    struct rl_epreg_reg *g = slot(epfd, fd, false);
    uint32_t rd = g != NULL ? g->events & (EPOLLIN | EPOLLRDNORM) : 0;
    if (rd != 0 && !g->madeup_told) {
        *out = (struct epoll_event){.events = rd, .data.u64 = g->data};
        k = 1;
        if (g->events & (EPOLLET | EPOLLONESHOT))
            g->madeup_told = 1;
    }
    pthread_mutex_unlock(&e->mu);
    errno = saved;
    rl_shim_leave();
    return k;
}

int rl_epreg_madeup(int epfd, struct epoll_event *ev, int max)
{
    struct rl_epreg *e = &rl_shim_self->epreg;
    if (max <= 0 || atomic_load_explicit(&e->n, memory_order_relaxed) == 0 ||
        !rl_shim_enter())
        return 0;
    pthread_mutex_lock(&e->mu);
    unsigned cap = e->cap; /* every fd registered is below it */
    pthread_mutex_unlock(&e->mu);
    rl_shim_leave();
    int k = 0;
    /* The fd's answer is asked for before its registration is looked at:
     * the connection's lock is never taken under e->mu (a request's
     * refusal takes them the other way round). */
    for (unsigned fd = 0; fd < cap && k < max; fd++)
        if ((rl_fdtab_get((int)fd) & RL_FD_MADEUP) && rl_madeup_due((int)fd))
            k += madeup_one(epfd, (int)fd, &ev[k]);
    return k;
}

int rl_epreg_madeup_merge(struct epoll_event *ev, int k, int got)
{
    int n = k;
    for (int i = k; i < k + got; i++) {
        int j = 0;
        while (j < k && ev[j].data.u64 != ev[i].data.u64)
            j++;
        if (j < k)
            ev[j].events |= ev[i].events;
        else
            ev[n++] = ev[i];
    }
    return n;
}

void rl_epreg_madeup_new(int fd)
{
    struct rl_epreg *e = &rl_shim_self->epreg;
    if (fd < 0 || atomic_load_explicit(&e->n, memory_order_relaxed) == 0)
        return;
    pthread_mutex_lock(&e->mu);
    if ((unsigned)fd < e->cap)
        for (int s = 0; s < SLOTS; s++) {
            struct rl_epreg_reg *g = &e->regs[fd][s];
            g->madeup_told = 0;
            if (g->epfd < 0 || g->mode != RL_EPREG_FULL ||
                (g->events & (EPOLLOUT | EPOLLET)) != (EPOLLOUT | EPOLLET))
                continue;
            /* The same registration again: a new edge of the writable
             * socket wakes a thread blocked on the set since before the
             * answer was queued (tokio's reactor), whose loop then finds
             * the answer (as rl_epreg_hold wakes it). */
            struct epoll_event ev = {.events = g->events, .data.u64 = g->data};
            int saved = errno;
            WREAL(epoll_ctl)(g->epfd, EPOLL_CTL_MOD, fd, &ev);
            errno = saved;
        }
    pthread_mutex_unlock(&e->mu);
}

void rl_epreg_forget(unsigned first, unsigned last)
{
    struct rl_epreg *e = &rl_shim_self->epreg;
    pthread_mutex_lock(&e->mu);
    if (e->cap > 0 && first < e->cap) {
        unsigned end = last < e->cap - 1 ? last : e->cap - 1;
        for (unsigned fd = first; fd <= end; fd++)
            for (int s = 0; s < SLOTS; s++)
                if (e->regs[fd][s].epfd >= 0)
                    unslot(&e->regs[fd][s]);
    }
    pthread_mutex_unlock(&e->mu);
}

void rl_epreg_atfork_child(void)
{
    struct rl_epreg *e = &rl_shim_self->epreg;
    pthread_mutex_init(&e->mu, NULL);
}
