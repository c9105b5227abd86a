/* ready.c — the held, reserved and deferred sockets (see ready.h).
 *
 * A flat array searched up to its high-water mark: the table holds the
 * sockets waiting for their budget right now, a handful in practice. The
 * mutex is taken only while an entry exists or is being made, never on a
 * wait call's fast path. */
#include "policy/ready.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "policy/open.h"
#include "policy/proc.h"
#include "util/clock.h"
#include "util/zmap.h"

static struct rl_ready_entry *find(struct rl_ready *rd, int fd)
{
    for (unsigned i = 0; i < rd->hw; i++)
        if (rd->tab[i].what != 0 && rd->tab[i].fd == fd)
            return &rd->tab[i];
    return NULL;
}

#define TABLE_BYTES (RL_READY_MAX * sizeof(struct rl_ready_entry))

/* The entries are mapped by the first socket held (under the mutex), not
 * kept in the library's bss: most processes never hold one, and a fork
 * child then has nothing to clear. */
static bool mapped(struct rl_ready *rd)
{
    if (rd->tab == NULL)
        rd->tab = rl_zmap(TABLE_BYTES);
    return rd->tab != NULL;
}

static struct rl_ready_entry *make(struct rl_ready *rd, int fd)
{
    if (!mapped(rd))
        return NULL; /* not held: the call goes as it would without */
    for (unsigned i = 0; i < RL_READY_MAX; i++) {
        if (rd->tab[i].what != 0)
            continue;
        if (i >= rd->hw)
            rd->hw = i + 1;
        memset(&rd->tab[i], 0, sizeof rd->tab[i]);
        rd->tab[i].fd = fd;
        atomic_fetch_add_explicit(&rd->n, 1, memory_order_relaxed);
        return &rd->tab[i];
    }
    return NULL;
}

static void drop(struct rl_ready *rd, struct rl_ready_entry *e)
{
    e->what = 0;
    e->fd = -1;
    atomic_fetch_sub_explicit(&rd->n, 1, memory_order_relaxed);
    while (rd->hw > 0 && rd->tab[rd->hw - 1].what == 0)
        rd->hw--;
}

/* A reservation or connect not spent: back to the budget (a connect
 * waiting for a place, or failed, holds nothing). */
static void give_back(struct rl_proc *p, struct rl_ready_entry *e)
{
    if (e->what == RL_READY_RESERVE) {
        rl_gate_refund(p, &e->t, RL_KIND_SEND, e->t.calls);
        rl_gate_refund(p, &e->t, RL_KIND_SEND_BYTES, e->t.bytes);
    } else if (e->what == RL_READY_CONNECT) {
        rl_gate_refund(p, &e->t, RL_KIND_CONNECT, 1);
        rl_gate_connected(p, &e->t, -1, false); /* its max_open places */
    }
}

/* fd's entry, under mu: the one it has (*r = 0), else a new one (*r = 1,
 * its `what` for the caller to set before the mutex is let go). NULL and
 * *r = -ENOSPC when the table is full. */
static struct rl_ready_entry *find_or_make(struct rl_ready *rd, int fd, int *r)
{
    struct rl_ready_entry *e = find(rd, fd);
    if (e != NULL) {
        *r = 0;
        return e;
    }
    e = make(rd, fd);
    *r = e != NULL ? 1 : -ENOSPC;
    return e;
}

/* The entry of fd for a newer decision, under mu: an older one (a hold;
 * an older turn cannot be there, a send spends it first) gives its units
 * back and is reused (*r = 0), else a new one is made (*r = 1). NULL and
 * *r = -ENOSPC when the table is full. */
static struct rl_ready_entry *renew(struct rl_proc *p, int fd, int *r)
{
    struct rl_ready_entry *e = find_or_make(&p->ready, fd, r);
    if (*r == 0)
        give_back(p, e);
    return e;
}

int rl_ready_hold(struct rl_proc *p, int fd, uint64_t until)
{
    struct rl_ready *rd = &p->ready;
    pthread_mutex_lock(&rd->mu);
    int r;
    struct rl_ready_entry *e = find_or_make(rd, fd, &r);
    if (r == 1) {
        e->what = RL_READY_HOLD;
        e->until = until;
    } else if (r == 0 && e->what == RL_READY_HOLD && until > e->until) {
        e->until = until;
    }
    pthread_mutex_unlock(&rd->mu);
    return r;
}

/* A turn entry whose request is refused: shown, its sends failing. */
static bool refused(const struct rl_ready_entry *e)
{
    return e->what == RL_READY_TURN && e->err != 0;
}

int rl_ready_hold_turn(struct rl_proc *p, int fd, const struct rl_reqheld *h)
{
    struct rl_ready *rd = &p->ready;
    pthread_mutex_lock(&rd->mu);
    int r;
    struct rl_ready_entry *e = find_or_make(rd, fd, &r);
    if (r == 1) {
        e->what = RL_READY_TURN;
        e->held = *h;
        e->until = h->turn;
    } else if (r == 0 &&
               ((e->what == RL_READY_TURN && !e->taken && e->err == 0) ||
                e->what == RL_READY_HOLD)) {
        /* The later turn names them: at it, both are decided again. */
        uint32_t before = e->what == RL_READY_TURN ? e->held.units : 0;
        if (e->what != RL_READY_TURN || h->turn >= e->held.turn)
            e->held = *h;
        e->held.units = before + h->units;
        if (h->turn > e->until)
            e->until = h->turn;
        e->held.turn = e->until;
        e->what = RL_READY_TURN;
    } else if (r == 0) {
        r = -EBUSY;
    }
    pthread_mutex_unlock(&rd->mu);
    return r;
}

int rl_ready_turn_due(struct rl_proc *p, int fd, uint64_t now, uint64_t *until)
{
    struct rl_ready *rd = &p->ready;
    struct rl_reqheld h;
    pthread_mutex_lock(&rd->mu);
    int r = 1;
    struct rl_ready_entry *e = find(rd, fd);
    if (e == NULL || e->what != RL_READY_TURN) {
        r = 0;
    } else if (e->err != 0) {
        r = e->err;
    } else if (e->taken || now < e->until) {
        *until = e->until;
        r = -EAGAIN;
    } else {
        h = e->held;
        e->taken = true; /* still hidden while decided */
    }
    pthread_mutex_unlock(&rd->mu);
    if (r != 1)
        return r;
    /* Outside the mutex: a fleet budget's decision asks Redis. */
    r = rl_reqheld_again(p, &h, now, until);
    pthread_mutex_lock(&rd->mu);
    e = find(rd, fd);
    if (e != NULL && e->what == RL_READY_TURN && e->taken) {
        e->taken = false;
        if (r == 0) {
            drop(rd, e);
        } else if (r == -EAGAIN) {
            e->held.turn = h.turn;
            e->until = h.turn;
        } else {
            e->err = r;
            e->until = 0;
        }
    }
    pthread_mutex_unlock(&rd->mu);
    return r;
}

static int keep(struct rl_proc *p, int fd, int what,
                const struct rl_gate_ticket *t, const struct sockaddr *sa,
                socklen_t len)
{
    struct rl_ready *rd = &p->ready;
    pthread_mutex_lock(&rd->mu);
    int r;
    struct rl_ready_entry *e = renew(p, fd, &r);
    if (e != NULL) {
        e->what = what;
        e->taken = false;
        e->t = *t;
        e->until = rl_add_sat_u64(t->now, t->wait_ns);
        if (sa != NULL) {
            memcpy(&e->sa, sa, len);
            e->salen = len;
        }
    }
    pthread_mutex_unlock(&rd->mu);
    return r;
}

int rl_ready_reserve(struct rl_proc *p, int fd, const struct rl_gate_ticket *t)
{
    return keep(p, fd, RL_READY_RESERVE, t, NULL, 0);
}

int rl_ready_defer_connect(struct rl_proc *p, int fd,
                           const struct rl_gate_ticket *t,
                           const struct sockaddr *sa, socklen_t len)
{
    if (sa == NULL || len > sizeof(struct sockaddr_storage))
        return -EINVAL;
    return keep(p, fd, RL_READY_CONNECT, t, sa, len);
}

/* The next look at a connect waiting for a place: a step later (doubled
 * each time up to RL_READY_OPEN_STEP), on a multiple of the step, never
 * past the deadline. */
static void next_look(struct rl_ready_entry *e, uint64_t now)
{
    e->step = e->step == 0 ? RL_READY_OPEN_FIRST : e->step * 2;
    if (e->step > RL_READY_OPEN_STEP)
        e->step = RL_READY_OPEN_STEP;
    uint64_t at = (now / e->step + 1) * e->step;
    e->until = at < e->deadline ? at : e->deadline;
}

int rl_ready_defer_open(struct rl_proc *p, int fd,
                        const struct rl_gate_ticket *t,
                        const struct sockaddr *sa, socklen_t len,
                        uint64_t deadline)
{
    struct rl_ready *rd = &p->ready;
    if (sa == NULL || len > sizeof(struct sockaddr_storage) ||
        t->open_full == NULL)
        return -EINVAL;
    pthread_mutex_lock(&rd->mu);
    int r;
    struct rl_ready_entry *e = renew(p, fd, &r);
    if (e != NULL) {
        bool again = r == 0 && e->what == RL_READY_OPEN;
        e->what = RL_READY_OPEN;
        e->taken = false;
        e->t = *t;
        memcpy(&e->sa, sa, len);
        e->salen = len;
        e->area = t->open_full;
        e->seq = t->open_seq;
        e->decided = t->now;
        e->deadline = deadline;
        if (!again)
            e->step = 0; /* a new wait starts small */
        next_look(e, t->now);
    }
    pthread_mutex_unlock(&rd->mu);
    return r;
}

int rl_ready_take_open(struct rl_proc *p, int fd, uint64_t now, bool force,
                       struct sockaddr_storage *sa, socklen_t *len,
                       uint64_t *deadline, uint64_t *until)
{
    struct rl_ready *rd = &p->ready;
    pthread_mutex_lock(&rd->mu);
    int r = 0;
    struct rl_ready_entry *e = find(rd, fd);
    if (e != NULL && e->what == RL_READY_OPEN) {
        bool moved = rl_open_seq(e->area) != e->seq;
        if (e->taken) {
            *until = e->until;
            r = -EAGAIN;
        } else if (force || moved || now >= e->deadline ||
                   now - e->decided >= RL_READY_OPEN_DECIDE) {
            *sa = e->sa;
            *len = e->salen;
            *deadline = e->deadline;
            r = 1;
            e->taken = true;
            /* Kept (still hidden) until the caller's decision replaces
             * it: a connect, a turn, a longer wait or a failure. */
        } else {
            if (now >= e->until)
                next_look(e, now);
            *until = e->until;
            r = -EAGAIN;
        }
    }
    pthread_mutex_unlock(&rd->mu);
    return r;
}

int rl_ready_fail(struct rl_proc *p, int fd, int err)
{
    struct rl_ready *rd = &p->ready;
    pthread_mutex_lock(&rd->mu);
    int r;
    struct rl_ready_entry *e = renew(p, fd, &r);
    if (e != NULL) {
        e->what = RL_READY_FAILED;
        e->taken = false;
        e->err = err;
        e->until = 0;
    }
    pthread_mutex_unlock(&rd->mu);
    return r;
}

int rl_ready_take_error(struct rl_proc *p, int fd, int *err)
{
    struct rl_ready *rd = &p->ready;
    pthread_mutex_lock(&rd->mu);
    int r = 0;
    struct rl_ready_entry *e = find(rd, fd);
    if (e != NULL && e->what == RL_READY_FAILED) {
        *err = e->err;
        drop(rd, e);
        r = 1;
    }
    pthread_mutex_unlock(&rd->mu);
    return r;
}

int rl_ready_claim(struct rl_proc *p, int fd, uint64_t now, bool take_early,
                   struct rl_gate_ticket *t, uint64_t *until, int *what)
{
    struct rl_ready *rd = &p->ready;
    pthread_mutex_lock(&rd->mu);
    int r = 0;
    struct rl_ready_entry *e = find(rd, fd);
    if (e != NULL) {
        *what = e->what;
        *until = e->until;
        if (rl_ready_unconnected(e->what)) {
            r = -EAGAIN;
        } else if (e->what == RL_READY_FAILED) {
            r = 0; /* the kernel answers for an unconnected socket */
        } else if (e->what == RL_READY_HOLD) {
            if (now >= e->until)
                drop(rd, e);
            else
                r = -EAGAIN;
        } else if (e->what == RL_READY_TURN) {
            /* Decided again at its turn by rl_ready_turn_due, never
             * spent here. */
            if (!refused(e) && now < e->until)
                r = -EAGAIN;
        } else if (now >= e->until) {
            *t = e->t;
            drop(rd, e);
            r = 1;
        } else {
            r = -EAGAIN;
            if (take_early) {
                *t = e->t;
                drop(rd, e);
            }
        }
    }
    pthread_mutex_unlock(&rd->mu);
    return r;
}

int rl_ready_take_connect(struct rl_proc *p, int fd, uint64_t now, bool force,
                          struct rl_gate_ticket *t, struct sockaddr_storage *sa,
                          socklen_t *len, uint64_t *until)
{
    struct rl_ready *rd = &p->ready;
    pthread_mutex_lock(&rd->mu);
    int r = 0;
    struct rl_ready_entry *e = find(rd, fd);
    if (e != NULL && e->what == RL_READY_CONNECT) {
        *until = e->until;
        if (force || now >= e->until) {
            *t = e->t;
            *sa = e->sa;
            *len = e->salen;
            drop(rd, e);
            r = 1;
        } else {
            r = -EAGAIN;
        }
    }
    pthread_mutex_unlock(&rd->mu);
    return r;
}

void rl_ready_look(struct rl_proc *p, int fd, uint64_t now,
                   struct rl_ready_look *lk)
{
    struct rl_ready *rd = &p->ready;
    lk->hidden = 0;
    lk->held_until = 0;
    pthread_mutex_lock(&rd->mu);
    struct rl_ready_entry *e = find(rd, fd);
    if (e != NULL && e->what != RL_READY_FAILED && !refused(e)) {
        if (now < e->until || rl_ready_unconnected(e->what) ||
            e->what == RL_READY_TURN)
            lk->hidden = e->what;
        if ((e->what == RL_READY_HOLD || e->what == RL_READY_TURN) &&
            e->until > now)
            lk->held_until = e->until;
    }
    pthread_mutex_unlock(&rd->mu);
}

unsigned rl_ready_snapshot(struct rl_proc *p, uint64_t now,
                           struct rl_ready_view *out, unsigned cap,
                           uint64_t *next)
{
    struct rl_ready *rd = &p->ready;
    unsigned n = 0;
    *next = UINT64_MAX;
    pthread_mutex_lock(&rd->mu);
    for (unsigned i = 0; i < rd->hw; i++) {
        struct rl_ready_entry *e = &rd->tab[i];
        if (e->what == 0 || e->what == RL_READY_FAILED || refused(e))
            continue;
        /* A deferred connect stays hidden until the shim connects it,
         * which it does once due (so it is due "now" for the caller);
         * a held request until it is decided again. */
        if (now >= e->until && !rl_ready_unconnected(e->what) &&
            e->what != RL_READY_TURN) {
            if (e->what == RL_READY_HOLD)
                drop(rd, e);
            continue;
        }
        if (e->until < *next)
            *next = e->until;
        if (n < cap)
            out[n++] = (struct rl_ready_view){e->fd, e->what, e->until};
    }
    pthread_mutex_unlock(&rd->mu);
    return n;
}

void rl_ready_forget(struct rl_proc *p, int fd)
{
    struct rl_ready *rd = &p->ready;
    pthread_mutex_lock(&rd->mu);
    struct rl_ready_entry *e = find(rd, fd);
    if (e != NULL) {
        give_back(p, e);
        drop(rd, e);
    }
    pthread_mutex_unlock(&rd->mu);
}

void rl_ready_forget_range(struct rl_proc *p, unsigned first, unsigned last)
{
    struct rl_ready *rd = &p->ready;
    pthread_mutex_lock(&rd->mu);
    for (unsigned i = 0; i < rd->hw; i++) {
        struct rl_ready_entry *e = &rd->tab[i];
        if (e->what != 0 && (unsigned)e->fd >= first &&
            (unsigned)e->fd <= last) {
            give_back(p, e);
            drop(rd, e);
        }
    }
    pthread_mutex_unlock(&rd->mu);
}

void rl_ready_atfork_child(struct rl_proc *p)
{
    struct rl_ready *rd = &p->ready;
    pthread_mutex_init(&rd->mu, NULL);
    /* Entries at or above hw are free already (make() clears one it
     * takes): only the used prefix is touched, not the whole table. */
    if (rd->tab != NULL)
        memset(rd->tab, 0, rd->hw * sizeof rd->tab[0]);
    rd->hw = 0;
    atomic_store_explicit(&rd->n, 0, memory_order_relaxed);
}
