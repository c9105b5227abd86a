/* conntab.c — see conntab.h. */
#include "shim/conntab.h"

#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "policy/decide_request.h"
#include "policy/fdlife.h"
#include "shim/fdtab.h"
#include "shim/self.h"

/* c->holds: the write and the read that hold it, each from another
 * thread maybe; an entry unlinked while either holds it is freed by the
 * last to let go. */
#define WRITER 1
#define READER 2
#define CLOSED 4

struct rl_reqconn *rl_conn_begun(const struct sockaddr *sa, socklen_t len)
{
    struct rl_reqconn *c = NULL;
    const struct rl_fd_event ev = {
        .what = RL_FDLIFE_CONN_BEGUN, .conn = &c, .sa = sa, .salen = len};
    rl_policy_fd_event(rl_shim_proc(), &ev);
    return c;
}

void rl_conn_over(struct rl_reqconn *c)
{
    if (c == NULL)
        return;
    const struct rl_fd_event ev = {.what = RL_FDLIFE_CONN_OVER, .conn = &c};
    rl_policy_fd_event(rl_shim_proc(), &ev);
}

static void drop(struct rl_reqconn *c)
{
    rl_conn_over(c);
}

/* Room for fd (the lock held). */
static bool grow(unsigned fd)
{
    struct rl_conntab *tab = &rl_shim_self->conntab;
    if (fd < tab->cap)
        return true;
    if (fd >= RL_FDTAB_MAX)
        return false;
    unsigned cap = tab->cap != 0 ? tab->cap : 64;
    while (cap <= fd)
        cap *= 2;
    struct rl_reqconn **p = realloc(tab->by_fd, cap * sizeof *p);
    if (p == NULL)
        return false;
    memset(p + tab->cap, 0, (cap - tab->cap) * sizeof *p);
    tab->by_fd = p;
    tab->cap = cap;
    return true;
}

/* Unlink fd's connection (the lock held); the caller drops what this
 * returns. */
static struct rl_reqconn *unlink_fd(unsigned fd)
{
    struct rl_conntab *tab = &rl_shim_self->conntab;
    if (fd >= tab->cap || tab->by_fd[fd] == NULL)
        return NULL;
    struct rl_reqconn *c = tab->by_fd[fd];
    tab->by_fd[fd] = NULL;
    atomic_fetch_sub(&tab->n, 1);
    if (c->holds & (WRITER | READER)) {
        c->holds |= CLOSED;
        return NULL;
    }
    return c;
}

bool rl_conntab_open(int fd, const struct sockaddr *sa, socklen_t len)
{
    struct rl_conntab *tab = &rl_shim_self->conntab;
    if (fd < 0)
        return false;
    struct rl_reqconn *c = rl_conn_begun(sa, len);
    if (c == NULL)
        return false;
    pthread_mutex_lock(&tab->lock);
    struct rl_reqconn *old = unlink_fd((unsigned)fd);
    bool ok = grow((unsigned)fd);
    if (ok) {
        tab->by_fd[fd] = c;
        atomic_fetch_add(&tab->n, 1);
    }
    pthread_mutex_unlock(&tab->lock);
    if (old != NULL)
        drop(old);
    if (!ok)
        drop(c);
    return ok;
}

void rl_conntab_late(int fd)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    int saved = errno;
    /* getpeername is not hooked: libc's. */
    if (getpeername(fd, (struct sockaddr *)&ss, &len) != 0 || len > sizeof ss) {
        errno = saved;
        return;
    }
    uint32_t m = rl_fdtab_get(fd);
    /* The thread that takes the bit off makes the connection. */
    while (m & RL_FD_HTTP_LATE) {
        if (!rl_fdtab_cas(fd, &m, m & ~RL_FD_HTTP_LATE))
            continue;
        if (!rl_conntab_open(fd, (struct sockaddr *)&ss, len)) {
            m &= ~RL_FD_HTTP_LATE;
            while ((m & RL_FD_HTTP) && !rl_fdtab_cas(fd, &m, m & ~RL_FD_HTTP))
                ;
        }
        break;
    }
    errno = saved;
}

static struct rl_reqconn *acquire(int fd, int side)
{
    struct rl_conntab *tab = &rl_shim_self->conntab;
    if (fd < 0 || atomic_load_explicit(&tab->n, memory_order_relaxed) == 0)
        return NULL;
    pthread_mutex_lock(&tab->lock);
    struct rl_reqconn *c = (unsigned)fd < tab->cap ? tab->by_fd[fd] : NULL;
    if (c != NULL && (c->holds & side)) {
        /* Another thread's of the same side at once. */
        if (side == READER)
            rl_reqconn_lost(c);
        c = NULL;
    }
    if (c != NULL)
        c->holds |= side;
    pthread_mutex_unlock(&tab->lock);
    return c;
}

static void release(struct rl_reqconn *c, int side)
{
    struct rl_conntab *tab = &rl_shim_self->conntab;
    pthread_mutex_lock(&tab->lock);
    c->holds &= ~side;
    bool last = c->holds == CLOSED;
    pthread_mutex_unlock(&tab->lock);
    if (last)
        drop(c);
}

struct rl_reqconn *rl_conntab_acquire(int fd)
{
    return acquire(fd, WRITER);
}

void rl_conntab_release(struct rl_reqconn *c)
{
    release(c, WRITER);
}

struct rl_reqconn *rl_conntab_acquire_read(int fd)
{
    return acquire(fd, READER);
}

void rl_conntab_release_read(struct rl_reqconn *c)
{
    release(c, READER);
}

void rl_conntab_forget_range(unsigned first, unsigned last)
{
    struct rl_conntab *tab = &rl_shim_self->conntab;
    if (atomic_load_explicit(&tab->n, memory_order_relaxed) == 0)
        return;
    pthread_mutex_lock(&tab->lock);
    for (unsigned fd = first; fd < tab->cap && fd <= last; fd++) {
        struct rl_reqconn *c = unlink_fd(fd);
        if (c != NULL)
            drop(c); /* free under the lock: it never waits for a hook */
    }
    pthread_mutex_unlock(&tab->lock);
}

void rl_conntab_forget(int fd)
{
    if (fd >= 0)
        rl_conntab_forget_range((unsigned)fd, (unsigned)fd);
}

int rl_conntab_claim_hello(const uint8_t random[RL_TLS_RANDOM])
{
    struct rl_conntab *tab = &rl_shim_self->conntab;
    if (atomic_load(&tab->n) == 0)
        return -1;
    int fd = -1;
    pthread_mutex_lock(&tab->lock);
    for (unsigned i = 0; i < tab->cap && fd < 0; i++) {
        struct rl_reqconn *c = tab->by_fd[i];
        /* One a write or a read holds is left for the next look: its
         * fields are theirs until they let go. */
        if (c != NULL && c->holds == 0 && c->hello_seen && !c->tls_owned &&
            memcmp(c->hello, random, RL_TLS_RANDOM) == 0) {
            c->hello_seen = false;
            c->tls_paced = true;
            c->tls_owned = true;
            fd = (int)i;
        }
    }
    pthread_mutex_unlock(&tab->lock);
    return fd;
}

void rl_conntab_tls_owned(int fd)
{
    struct rl_conntab *tab = &rl_shim_self->conntab;
    if (fd < 0 || atomic_load_explicit(&tab->n, memory_order_relaxed) == 0)
        return;
    pthread_mutex_lock(&tab->lock);
    if ((unsigned)fd < tab->cap && tab->by_fd[fd] != NULL)
        tab->by_fd[fd]->tls_owned = true;
    pthread_mutex_unlock(&tab->lock);
}

uint16_t rl_conntab_tunnel_port(int fd)
{
    struct rl_conntab *tab = &rl_shim_self->conntab;
    uint16_t port = 0;
    if (fd < 0 || atomic_load_explicit(&tab->n, memory_order_relaxed) == 0)
        return 0;
    pthread_mutex_lock(&tab->lock);
    if ((unsigned)fd < tab->cap && tab->by_fd[fd] != NULL)
        port = __atomic_load_n(&tab->by_fd[fd]->tunnel_port, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&tab->lock);
    return port;
}

static int find_tls(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    (void)data;
    const char *n = info->dlpi_name;
    return n != NULL &&
           (strstr(n, "/libssl.so") != NULL || strstr(n, "/libgnutls.so") != NULL);
}

bool rl_conntab_tls_visible(void)
{
    struct rl_conntab *tab = &rl_shim_self->conntab;
    if (atomic_load(&tab->tls_loaded))
        return true;
    bool loaded = dl_iterate_phdr(find_tls, NULL) != 0;
    if (loaded)
        atomic_store(&tab->tls_loaded, true);
    return loaded;
}

void rl_conntab_atfork_child(void)
{
    struct rl_conntab *tab = &rl_shim_self->conntab;
    pthread_mutex_init(&tab->lock, NULL);
    for (unsigned fd = 0; fd < tab->cap; fd++)
        if (tab->by_fd[fd] != NULL) {
            tab->by_fd[fd]->holds = 0;
            tab->by_fd[fd]->busy = 0;
        }
}
