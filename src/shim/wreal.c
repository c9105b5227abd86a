/* wreal.c — dlsym(RTLD_NEXT) of the wait calls, once (see wreal.h). */
#include "shim/wreal.h"
#include "shim/real.h"
#include "util/sys.h"

#include <dlfcn.h>
#include <stdatomic.h>
#include <stddef.h>
#include <sys/syscall.h>
#include <unistd.h>

struct rl_wreal rl_wreal;

/* Fallbacks: the raw system call. ppoll and pselect pass the kernel's
 * sigset size; the kernel updates their timeouts, which is harmless (the
 * hooks hand it a copy). */
static int fb_poll(struct pollfd *f, nfds_t n, int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    return (int)rl_raw_syscall(SYS_ppoll, (long)f, (long)n, (long)(ms < 0 ? NULL : &ts), 0, 8, 0);
}

static int fb_ppoll(struct pollfd *f, nfds_t n, const struct timespec *ts,
                    const sigset_t *m)
{
    struct timespec copy, *tp = NULL;
    if (ts != NULL) {
        copy = *ts;
        tp = &copy;
    }
    return (int)rl_raw_syscall(SYS_ppoll, (long)f, (long)n, (long)tp, (long)m, 8, 0);
}

static int fb_poll_chk(struct pollfd *f, nfds_t n, int ms, unsigned long len)
{
    (void)len;
    return fb_poll(f, n, ms);
}

static int fb_ppoll_chk(struct pollfd *f, nfds_t n, const struct timespec *ts,
                        const sigset_t *m, unsigned long len)
{
    (void)len;
    return fb_ppoll(f, n, ts, m);
}

static int fb_select(int n, fd_set *r, fd_set *w, fd_set *e,
                     struct timeval *tv)
{
    return (int)rl_raw_syscall(SYS_select, (long)(n), (long)(r), (long)(w), (long)(e), (long)(tv), 0);
}

static int fb_pselect(int n, fd_set *r, fd_set *w, fd_set *e,
                      const struct timespec *ts, const sigset_t *m)
{
    struct timespec copy, *tp = NULL;
    if (ts != NULL) {
        copy = *ts;
        tp = &copy;
    }
    struct {
        const sigset_t *ss;
        size_t len;
    } data = {m, 8};
    return (int)rl_raw_syscall(SYS_pselect6, (long)(n), (long)(r), (long)(w), (long)(e), (long)(tp), (long)(m ? &data : NULL));
}

static int fb_epoll_wait(int ep, struct epoll_event *ev, int n, int ms)
{
    return (int)rl_raw_syscall(SYS_epoll_pwait, (long)(ep), (long)(ev), (long)(n), (long)(ms), (long)(NULL), (long)(8));
}

static int fb_epoll_pwait(int ep, struct epoll_event *ev, int n, int ms,
                          const sigset_t *m)
{
    return (int)rl_raw_syscall(SYS_epoll_pwait, (long)(ep), (long)(ev), (long)(n), (long)(ms), (long)(m), (long)(8));
}

static int fb_epoll_pwait2(int ep, struct epoll_event *ev, int n,
                           const struct timespec *ts, const sigset_t *m)
{
    return (int)rl_raw_syscall(SYS_epoll_pwait2, (long)(ep), (long)(ev), (long)(n), (long)(ts), (long)(m), (long)(8));
}

static int fb_epoll_ctl(int ep, int op, int fd, struct epoll_event *ev)
{
    return (int)rl_raw_syscall(SYS_epoll_ctl, (long)(ep), (long)(op), (long)(fd), (long)(ev), 0, 0);
}

/* Our own exported definitions, to refuse them. */
int __poll_chk(struct pollfd *, nfds_t, int, unsigned long);
int __ppoll_chk(struct pollfd *, nfds_t, const struct timespec *,
                const sigset_t *, unsigned long);
int epoll_pwait2(int, struct epoll_event *, int, const struct timespec *,
                 const sigset_t *);

#define RESOLVE(field, name)                                                   \
    tmp.field = rl_real_next(#name, (void *)name, (void *)fb_##field)

void rl_wreal_resolve(void)
{
    static _Atomic int done;
    /* Pairs with the release store below (as real.c). */
    if (atomic_load_explicit(&done, memory_order_acquire))
        return;
    struct rl_wreal tmp;
    RESOLVE(poll, poll);
    RESOLVE(ppoll, ppoll);
    RESOLVE(poll_chk, __poll_chk);
    RESOLVE(ppoll_chk, __ppoll_chk);
    RESOLVE(select, select);
    RESOLVE(pselect, pselect);
    RESOLVE(epoll_wait, epoll_wait);
    RESOLVE(epoll_pwait, epoll_pwait);
    RESOLVE(epoll_pwait2, epoll_pwait2);
    RESOLVE(epoll_ctl, epoll_ctl);
    void *const *src = (void *const *)&tmp;
    void **dst = (void **)&rl_wreal;
    for (size_t i = 0; i < sizeof tmp / sizeof(void *); i++)
        __atomic_store_n(&dst[i], src[i], __ATOMIC_RELAXED);
    atomic_store_explicit(&done, 1, memory_order_release);
}
