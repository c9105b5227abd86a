/* tlstab.c — TLS session → its requests' connection (see tlstab.h). */
#include "shim/tlstab.h"
#include "policy/decide_request.h"
#include "shim/madeup.h"
#include "shim/self.h"
#include "shim/shim.h"
#include "shim/conntab.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/uio.h>

#define NBUCKETS RL_TLSTAB_BUCKETS

static unsigned bucket(const void *key)
{
    uintptr_t k = (uintptr_t)key;
    k ^= k >> 17;
    k *= UINT64_C(0x9e3779b97f4a7c15);
    return (unsigned)(k >> 56) % NBUCKETS;
}

static struct rl_tlsent *find(unsigned b, const void *key)
{
    struct rl_tlstab *tab = &rl_shim_self->tlstab;
    struct rl_tlsent *e = tab->head[b];
    while (e != NULL && e->key != key)
        e = e->next;
    return e;
}

struct rl_tlsent *rl_tlstab_get(const void *key, bool make)
{
    struct rl_tlstab *tab = &rl_shim_self->tlstab;
    if (!make && atomic_load_explicit(&tab->n, memory_order_relaxed) == 0)
        return NULL;
    unsigned b = bucket(key);
    pthread_mutex_lock(&tab->lock);
    struct rl_tlsent *e = find(b, key);
    if (e == NULL && make && (e = calloc(1, sizeof *e)) != NULL) {
        e->key = key;
        e->fd = -1;
        e->wire = -1;
        e->next = tab->head[b];
        /* Complete before it is linked (a fork child sees either). */
        __atomic_store_n(&tab->head[b], e, __ATOMIC_RELEASE);
        atomic_fetch_add_explicit(&tab->n, 1, memory_order_relaxed);
    }
    pthread_mutex_unlock(&tab->lock);
    return e;
}

void rl_tlstab_drop(const void *key)
{
    struct rl_tlstab *tab = &rl_shim_self->tlstab;
    if (atomic_load_explicit(&tab->n, memory_order_relaxed) == 0)
        return;
    unsigned b = bucket(key);
    pthread_mutex_lock(&tab->lock);
    struct rl_tlsent **pp = &tab->head[b];
    struct rl_tlsent *e;
    while ((e = *pp) != NULL && e->key != key)
        pp = &e->next;
    if (e != NULL) {
        __atomic_store_n(pp, e->next, __ATOMIC_RELEASE);
        atomic_fetch_sub_explicit(&tab->n, 1, memory_order_relaxed);
    }
    pthread_mutex_unlock(&tab->lock);
    if (e == NULL)
        return;
    rl_conn_over(e->c);
    free(e->held);
    free(e);
}

bool rl_tlstab_madeup_due(int fd)
{
    struct rl_tlstab *tab = &rl_shim_self->tlstab;
    if (fd < 0 || atomic_load_explicit(&tab->n, memory_order_relaxed) == 0)
        return false;
    bool due = false;
    pthread_mutex_lock(&tab->lock);
    for (unsigned b = 0; b < NBUCKETS && !due; b++)
        for (struct rl_tlsent *e = tab->head[b]; e != NULL && !due;
             e = e->next)
            if (e->c != NULL && (e->fd >= 0 ? e->fd : e->wire) == fd)
                /* Not waited for under the lock: its holder may be
                 * about to ask for the lock. Plaintext a look read and
                 * holds is due first. */
                due = e->held_n > 0 ||
                      rl_request_madeup(e->c, RL_MADEUP_DUE_NOW, NULL, 0,
                                        NULL) != 0;
    pthread_mutex_unlock(&tab->lock);
    return due;
}

/* One look at e (its table's lock held): true when made; *held, whether
 * the program has held bytes to read now. */
static bool look_at(struct rl_tlsent *e, int fd, bool *held)
{
    struct rl_readers *t = &rl_shim_self->readers;
    if (e->held == NULL && (e->held = malloc(RL_TLS_HELD_MAX)) == NULL)
        return false;
    if (!rl_readers_look(t, (uintptr_t)e->key))
        return false;
    uint32_t before = e->held_n;
    while (e->held_n < RL_TLS_HELD_MAX) {
        long k = e->read_ahead((void *)e->key, e->held + e->held_n,
                               RL_TLS_HELD_MAX - e->held_n);
        if (k <= 0)
            break;
        e->held_n += (uint32_t)k;
    }
    if (e->held_n > before && rl_shim_enter()) {
        const struct iovec one = {e->held, e->held_n};
        const struct rl_reqread r = {fd, "SSL_read", RL_READ_AHEAD};
        (void)rl_request_received(rl_shim_proc(), e->c, RL_CARRY_TLS, &r,
                                  false, &one, 1, e->held_n);
        rl_shim_leave();
    }
    rl_readers_looked(t, (uintptr_t)e->key);
    *held = e->held_n > 0;
    return true;
}

bool rl_tlstab_look(int fd, bool look)
{
    struct rl_tlstab *tab = &rl_shim_self->tlstab;
    if (fd < 0 || atomic_load_explicit(&tab->n, memory_order_relaxed) == 0)
        return false;
    bool found = false, held = false;
    pthread_mutex_lock(&tab->lock);
    for (unsigned b = 0; b < NBUCKETS && !found; b++)
        for (struct rl_tlsent *e = tab->head[b]; e != NULL && !found;
             e = e->next) {
            if (e->c == NULL || e->read_ahead == NULL || e->fd != fd)
                continue;
            found = !look || look_at(e, fd, &held);
        }
    pthread_mutex_unlock(&tab->lock);
    if (held) {
        /* Its reads look for what is held, and the wait calls report its
         * socket readable (marked outside the table's lock). */
        __atomic_store_n(&rl_shim_self->tls_madeup, 1, __ATOMIC_RELAXED);
        rl_madeup_mark(fd);
    }
    return found;
}

void rl_tlstab_atfork_child(void)
{
    struct rl_tlstab *tab = &rl_shim_self->tlstab;
    pthread_mutex_init(&tab->lock, NULL);
    /* A write another thread of the parent had in flight is not the
     * child's: its session is free to be written on again. */
    for (unsigned b = 0; b < NBUCKETS; b++)
        for (struct rl_tlsent *e = tab->head[b]; e != NULL; e = e->next)
            if (e->c != NULL) {
                e->c->busy = 0;
                e->c->writing = 0;
            }
}
