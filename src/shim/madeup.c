/* madeup.c — see madeup.h. */
#include "shim/madeup.h"

#include <errno.h>

#include "policy/decide_request.h"
#include "shim/conntab.h"
#include "shim/epreg.h"
#include "shim/fdtab.h"
#include "shim/shim.h"
#include "shim/tlstab.h"

void rl_madeup_mark(int fd)
{
    if (fd < 0)
        return;
    uint32_t m = rl_fdtab_get(fd);
    while (!(m & RL_FD_MADEUP))
        if (rl_fdtab_cas(fd, &m, m | RL_FD_MADEUP)) {
            __atomic_add_fetch(&rl_shim_self->madeup, 1, __ATOMIC_SEQ_CST);
            break;
        }
    /* Every answer queued is a new edge for an edge-triggered epoll; made
     * only once the mark is up: a thread it wakes, which comes back to
     * wait at once, must find the answer then, or it waits in the kernel
     * for an edge that never comes. */
    rl_epreg_madeup_new(fd);
}

/* One fewer, never below 0 (a dup'ed mark closed twice). */
void rl_madeup_fewer(void)
{
    unsigned n = __atomic_load_n(&rl_shim_self->madeup, __ATOMIC_RELAXED);
    while (n > 0 && !__atomic_compare_exchange_n(&rl_shim_self->madeup, &n,
                                                 n - 1, false, __ATOMIC_RELAXED,
                                                 __ATOMIC_RELAXED))
        ;
}

void rl_madeup_unmark(int fd)
{
    if (fd < 0)
        return;
    uint32_t m = rl_fdtab_get(fd);
    while (m & RL_FD_MADEUP)
        if (rl_fdtab_cas(fd, &m, m & ~RL_FD_MADEUP)) {
            rl_madeup_fewer();
            return;
        }
}

bool rl_madeup_due(int fd)
{
    if (fd < 0 || !(rl_fdtab_get(fd) & RL_FD_MADEUP) || !rl_shim_enter())
        return false;
    int saved = errno;
    bool due = false;
    struct rl_reqconn *c = rl_conntab_acquire_read(fd);
    if (c != NULL) {
        due = rl_request_madeup(c, RL_MADEUP_DUE, NULL, 0, NULL) != 0;
        rl_conntab_release_read(c);
    } else {
        /* A TLS session's socket: its connection is the session's, not
         * the fd's. Readable for the answer only once the server's
         * answers before it were read whole, or the program's read would
         * find nothing and it would wait again at once: a spin. Until
         * then the kernel says what is readable. */
        due = rl_tlstab_madeup_due(fd);
    }
    rl_shim_leave();
    errno = saved;
    return due;
}

int rl_madeup_poll(struct pollfd *f, nfds_t n, bool apply)
{
    int k = 0;
    for (nfds_t i = 0; i < n; i++) {
        if (!(f[i].events & (POLLIN | POLLRDNORM)) || !rl_madeup_due(f[i].fd))
            continue;
        if (!apply) {
            k++;
            continue;
        }
        if (f[i].revents == 0)
            k++;
        f[i].revents |= (short)(f[i].events & (POLLIN | POLLRDNORM));
    }
    return k;
}

int rl_madeup_select(int nfds, const fd_set *want, fd_set *out)
{
    int k = 0;
    for (int fd = 0; want != NULL && fd < nfds; fd++) {
        if (!FD_ISSET(fd, want) || !rl_madeup_due(fd))
            continue;
        if (out == NULL || !FD_ISSET(fd, out))
            k++;
        if (out != NULL)
            FD_SET(fd, out);
    }
    return k;
}
