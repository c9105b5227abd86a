/* sup_open.c — the targets' connections under --seccomp (see sup_open.h).
 *
 * Few entries (one per fd that holds places: at most the sum of the
 * max_open of the areas), so plain arrays searched in full; the close of
 * an fd number no entry has is answered without the lock, from a count of
 * entries per fd number modulo SUP_OPEN_HITS. */
#include "cli/sup_open.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "util/ownerlock.h"

struct conn {
    unsigned refs; /* fds that refer to it */
    unsigned n;
    rl_atomic_u64 *areas[RL_OPEN_MAX_AREAS];
    struct rl_open_holder h;
};

struct sup_open_ent {
    pid_t tgid;
    int fd;
    struct conn *c;
};

void sup_open_init(struct sup_open *o)
{
    memset(o, 0, sizeof *o);
    pthread_mutex_init(&o->lock, NULL);
}

void sup_open_on_release(struct sup_open *o, void (*fn)(void *), void *arg)
{
    o->released = fn;
    o->released_arg = arg;
}

static void tell_released(struct sup_open *o, bool any)
{
    if (any && o->released != NULL)
        o->released(o->released_arg);
}

bool sup_open_maybe(struct sup_open *o, int fd)
{
    return fd >= 0 &&
           atomic_load_explicit(&o->hits[(unsigned)fd % SUP_OPEN_HITS],
                                memory_order_acquire) != 0;
}

/* One fd fewer refers to `c`: true when that was the last and its places
 * went back. */
static bool unref(struct conn *c)
{
    if (--c->refs > 0)
        return false;
    for (unsigned i = 0; i < c->n; i++)
        rl_open_release_as(c->areas[i], &c->h);
    free(c);
    return true;
}

static bool drop(struct sup_open *o, size_t i)
{
    struct conn *c = o->ents[i].c;
    atomic_fetch_sub_explicit(&o->hits[(unsigned)o->ents[i].fd % SUP_OPEN_HITS],
                              1, memory_order_release);
    o->ents[i] = o->ents[--o->nents];
    return unref(c);
}

static bool add(struct sup_open *o, pid_t tgid, int fd, struct conn *c)
{
    if (o->nents == o->capents) {
        size_t cap = o->capents ? 2 * o->capents : 64;
        struct sup_open_ent *e = realloc(o->ents, cap * sizeof *e);
        if (e == NULL)
            return false;
        o->ents = e;
        o->capents = cap;
    }
    o->ents[o->nents++] = (struct sup_open_ent){tgid, fd, c};
    c->refs++;
    atomic_fetch_add_explicit(&o->hits[(unsigned)fd % SUP_OPEN_HITS], 1,
                              memory_order_release);
    return true;
}

/* Forget fds first..last of `tgid` (lock held). */
static bool forget(struct sup_open *o, pid_t tgid, unsigned first,
                   unsigned last)
{
    bool any = false;
    for (size_t i = o->nents; i-- > 0;)
        if (o->ents[i].tgid == tgid && (unsigned)o->ents[i].fd >= first &&
            (unsigned)o->ents[i].fd <= last)
            any |= drop(o, i);
    return any;
}

void sup_open_close(struct sup_open *o, pid_t tgid, unsigned first,
                    unsigned last)
{
    pthread_mutex_lock(&o->lock);
    bool any = forget(o, tgid, first, last);
    pthread_mutex_unlock(&o->lock);
    tell_released(o, any);
}

void sup_open_dup(struct sup_open *o, pid_t tgid, int from, int to)
{
    if (from < 0 || to < 0 || from == to)
        return;
    pthread_mutex_lock(&o->lock);
    bool any = forget(o, tgid, (unsigned)to, (unsigned)to);
    for (size_t i = 0; i < o->nents; i++)
        if (o->ents[i].tgid == tgid && o->ents[i].fd == from) {
            /* No room to follow the copy: it counts as closed with
             * `from` (never a place held for ever). */
            (void)add(o, tgid, to, o->ents[i].c);
            break;
        }
    pthread_mutex_unlock(&o->lock);
    tell_released(o, any);
}

void sup_open_bind(struct sup_open *o, const struct rl_open_holder *h, int fd,
                   rl_atomic_u64 *const *areas, unsigned n)
{
    if (n == 0)
        return;
    struct conn *c = calloc(1, sizeof *c);
    pthread_mutex_lock(&o->lock);
    /* An entry for the number already: a close we never saw (the number
     * was closed some other way, e.g. at exec, and reused). */
    bool any = forget(o, (pid_t)h->pid, (unsigned)fd, (unsigned)fd);
    if (c != NULL) {
        c->n = n < RL_OPEN_MAX_AREAS ? n : RL_OPEN_MAX_AREAS;
        for (unsigned i = 0; i < c->n; i++)
            c->areas[i] = areas[i];
        c->h = *h;
    }
    if (c == NULL || fd < 0 || !add(o, (pid_t)h->pid, fd, c)) {
        /* Untracked: given back at once, never held for ever. */
        for (unsigned i = 0; i < n; i++)
            rl_open_release_as(areas[i], h);
        free(c);
        any = true;
    }
    pthread_mutex_unlock(&o->lock);
    tell_released(o, any);
}

/* Has the process `p` named gone (its pid free, or reused)? */
static bool gone(const struct rl_open_holder *p)
{
    return rl_pid_gone(p->pid, p->start);
}

int sup_open_holder(struct sup_open *o, pid_t tgid, struct rl_open_holder *h)
{
    /* Read each time: a pid reused by a later process must not be named
     * with the start time of the one before (its places would be taken
     * back as a dead holder's). */
    h->pid = (uint32_t)tgid;
    h->start = rl_open_start_of(tgid);
    if (tgid <= 0 || h->start == 0)
        return -ESRCH;
    pthread_mutex_lock(&o->lock);
    bool known = false, any = false;
    for (size_t i = 0; i < o->nprocs && !known; i++)
        known = o->procs[i].pid == h->pid && o->procs[i].start == h->start;
    /* A process seen first: drop those that are gone (their places, unless
     * a decision took them back already), so that the tables stay small
     * and a reused pid finds nothing of its predecessor. */
    for (size_t i = o->nprocs; !known && i-- > 0;) {
        if (o->procs[i].pid != h->pid && !gone(&o->procs[i]))
            continue;
        any |= forget(o, (pid_t)o->procs[i].pid, 0, ~0u);
        o->procs[i] = o->procs[--o->nprocs];
    }
    if (!known) {
        if (o->nprocs == o->capprocs) {
            size_t cap = o->capprocs ? 2 * o->capprocs : 16;
            struct rl_open_holder *p = realloc(o->procs, cap * sizeof *p);
            if (p != NULL) {
                o->procs = p;
                o->capprocs = cap;
            }
        }
        if (o->nprocs < o->capprocs)
            o->procs[o->nprocs++] = *h;
    }
    pthread_mutex_unlock(&o->lock);
    tell_released(o, any);
    return 0;
}
