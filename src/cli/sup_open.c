/* sup_open.c — the targets' connections under --seccomp (see sup_open.h).
 *
 * Few entries (one per fd that holds places: at most the sum of the
 * max_open of the areas), so plain arrays searched in full; the close of
 * an fd number no entry has is answered without the lock, from a count of
 * entries per fd number modulo HITS. */
#include "cli/sup_open.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "util/ownerlock.h"

#define HITS 1024u

struct conn {
    unsigned refs; /* fds that refer to it */
    unsigned n;
    rl_atomic_u64 *areas[RL_OPEN_MAX_AREAS];
    struct rl_open_holder h;
};

struct ent {
    pid_t tgid;
    int fd;
    struct conn *c;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct ent *ents;
static size_t nents, capents;
static struct rl_open_holder *procs; /* processes seen holding places */
static size_t nprocs, capprocs;
static _Atomic unsigned hits[HITS];
static void (*_Atomic released)(void);

void sup_open_on_release(void (*fn)(void))
{
    atomic_store(&released, fn);
}

static void tell_released(bool any)
{
    void (*fn)(void) = atomic_load(&released);
    if (any && fn != NULL)
        fn();
}

bool sup_open_maybe(int fd)
{
    return fd >= 0 && atomic_load_explicit(&hits[(unsigned)fd % HITS],
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

static bool drop(size_t i)
{
    struct conn *c = ents[i].c;
    atomic_fetch_sub_explicit(&hits[(unsigned)ents[i].fd % HITS], 1,
                              memory_order_release);
    ents[i] = ents[--nents];
    return unref(c);
}

static bool add(pid_t tgid, int fd, struct conn *c)
{
    if (nents == capents) {
        size_t cap = capents ? 2 * capents : 64;
        struct ent *e = realloc(ents, cap * sizeof *e);
        if (e == NULL)
            return false;
        ents = e;
        capents = cap;
    }
    ents[nents++] = (struct ent){tgid, fd, c};
    c->refs++;
    atomic_fetch_add_explicit(&hits[(unsigned)fd % HITS], 1,
                              memory_order_release);
    return true;
}

/* Forget fds first..last of `tgid` (lock held). */
static bool forget(pid_t tgid, unsigned first, unsigned last)
{
    bool any = false;
    for (size_t i = nents; i-- > 0;)
        if (ents[i].tgid == tgid && (unsigned)ents[i].fd >= first &&
            (unsigned)ents[i].fd <= last)
            any |= drop(i);
    return any;
}

void sup_open_close(pid_t tgid, unsigned first, unsigned last)
{
    pthread_mutex_lock(&lock);
    bool any = forget(tgid, first, last);
    pthread_mutex_unlock(&lock);
    tell_released(any);
}

void sup_open_dup(pid_t tgid, int from, int to)
{
    if (from < 0 || to < 0 || from == to)
        return;
    pthread_mutex_lock(&lock);
    bool any = forget(tgid, (unsigned)to, (unsigned)to);
    for (size_t i = 0; i < nents; i++)
        if (ents[i].tgid == tgid && ents[i].fd == from) {
            /* No room to follow the copy: it counts as closed with
             * `from` (never a place held for ever). */
            (void)add(tgid, to, ents[i].c);
            break;
        }
    pthread_mutex_unlock(&lock);
    tell_released(any);
}

void sup_open_bind(const struct rl_open_holder *h, int fd,
                   rl_atomic_u64 *const *areas, unsigned n)
{
    if (n == 0)
        return;
    struct conn *c = calloc(1, sizeof *c);
    pthread_mutex_lock(&lock);
    /* An entry for the number already: a close we never saw (the number
     * was closed some other way, e.g. at exec, and reused). */
    bool any = forget((pid_t)h->pid, (unsigned)fd, (unsigned)fd);
    if (c != NULL) {
        c->n = n < RL_OPEN_MAX_AREAS ? n : RL_OPEN_MAX_AREAS;
        for (unsigned i = 0; i < c->n; i++)
            c->areas[i] = areas[i];
        c->h = *h;
    }
    if (c == NULL || fd < 0 || !add((pid_t)h->pid, fd, c)) {
        /* Untracked: given back at once, never held for ever. */
        for (unsigned i = 0; i < n; i++)
            rl_open_release_as(areas[i], h);
        free(c);
        any = true;
    }
    pthread_mutex_unlock(&lock);
    tell_released(any);
}

/* Has the process `p` named gone (its pid free, or reused)? */
static bool gone(const struct rl_open_holder *p)
{
    return rl_pid_gone(p->pid, p->start);
}

int sup_open_holder(pid_t tgid, struct rl_open_holder *h)
{
    /* Read each time: a pid reused by a later process must not be named
     * with the start time of the one before (its places would be taken
     * back as a dead holder's). */
    h->pid = (uint32_t)tgid;
    h->start = rl_open_start_of(tgid);
    if (tgid <= 0 || h->start == 0)
        return -ESRCH;
    pthread_mutex_lock(&lock);
    bool known = false, any = false;
    for (size_t i = 0; i < nprocs && !known; i++)
        known = procs[i].pid == h->pid && procs[i].start == h->start;
    /* A process seen first: drop those that are gone (their places, unless
     * a decision took them back already), so that the tables stay small
     * and a reused pid finds nothing of its predecessor. */
    for (size_t i = nprocs; !known && i-- > 0;) {
        if (procs[i].pid != h->pid && !gone(&procs[i]))
            continue;
        any |= forget((pid_t)procs[i].pid, 0, ~0u);
        procs[i] = procs[--nprocs];
    }
    if (!known) {
        if (nprocs == capprocs) {
            size_t cap = capprocs ? 2 * capprocs : 16;
            struct rl_open_holder *p = realloc(procs, cap * sizeof *p);
            if (p != NULL) {
                procs = p;
                capprocs = cap;
            }
        }
        if (nprocs < capprocs)
            procs[nprocs++] = *h;
    }
    pthread_mutex_unlock(&lock);
    tell_released(any);
    return 0;
}
