/* hook_wait.c — poll, ppoll, __poll_chk, __ppoll_chk, select, pselect,
 * epoll_wait, epoll_pwait, epoll_pwait2, epoll_ctl (SPEC §2).
 *
 * While no socket is held (policy/ready.h) and no epoll registration is
 * shown less than the program made it (epreg.h), every hook is one or two
 * relaxed loads and a tail call: no lock, no clock. Otherwise the hook
 * loops around the real call:
 *   - makes the deferred connects whose turn has come (decides again
 *     those waiting for a max_open place when one has freed), gives the
 *     registrations of sockets whose turn has come back to the kernel
 *     (an EPOLL_CTL_MOD, which re-arms an edge-triggered one);
 *   - hides what a held socket must not report: POLLOUT (poll), its bit
 *     in the write set (select), everything for a deferred connect (an
 *     unconnected TCP socket reports POLLHUP whatever the mask); a
 *     connected one with an error or a hang-up is shown as the kernel
 *     has it;
 *   - waits no longer than the earliest turn (or the next look for a
 *     max_open place: ready.h), then goes round again, so
 *     that the socket is reported at its turn and an empty result is
 *     returned only when the caller's own timeout has passed (CPython
 *     takes an empty poll for its socket timeout).
 * The re-entry guard is held only between real calls, never across one. */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <time.h>

#include "policy/ready.h"
#include "shim/epreg.h"
#include "shim/fdtab.h"
#include "shim/hooks.h"
#include "shim/madeup.h"
#include "shim/self.h"
#include "shim/shim.h"
#include "shim/wait.h"
#include "shim/waitbuf.h"
#include "shim/waitlook.h"
#include "shim/waittime.h"
#include "shim/wreal.h"
#include "util/clock.h"

/* The slow halves live out of line, so that each exported name is two
 * loads, a test and a tail call while nothing is held. */
#define COLD __attribute__((noinline, cold))
#define MADEUP_LOOK_NS 20000000u /* how often epoll looks for a made-up answer */

static inline bool busy(void)
{
    return __builtin_expect(
        (atomic_load_explicit(&rl_shim_proc()->ready.n, memory_order_relaxed) |
         atomic_load_explicit(&rl_shim_self->epreg.npending,
                              memory_order_relaxed) |
         __atomic_load_n(&rl_shim_self->madeup, __ATOMIC_RELAXED)) != 0,
        0);
}

static bool waits_open(const struct rl_ready_view *v, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        if (v[i].what == RL_READY_OPEN)
            return true;
    return false;
}

/* The work between two real calls: returns the sockets hidden now (in
 * v, *n) and the earliest turn (NEVER: none). False when the shim cannot
 * act (a handler inside the shim): the caller makes its call as asked. */
static bool tend(uint64_t now, struct rl_ready_view *v, unsigned *n,
                 uint64_t *next)
{
    if (!rl_shim_enter())
        return false;
    int saved = errno;
    unsigned k = rl_ready_snapshot(rl_shim_proc(), now, v, VIEW_MAX, next);
    if (*next <= now || waits_open(v, k)) {
        /* Deferred connects due, and connects waiting for a max_open
         * place (one may have freed since the last look: a close by this
         * process is seen here, at its next wait call): made or decided
         * again now, then seen afresh. */
        rl_wait_connect_due(now, v, k);
        k = rl_ready_snapshot(rl_shim_proc(), now, v, VIEW_MAX, next);
    }
    *n = k;
    if (atomic_load_explicit(&rl_shim_self->epreg.npending,
                             memory_order_relaxed) != 0)
        rl_epreg_settle(now);
    errno = saved;
    rl_shim_leave();
    return true;
}

/* Time to wait in the real call: to the caller's deadline or the next
 * turn, whichever comes first; NEVER for no limit. */
static uint64_t wait_ns(uint64_t now, uint64_t deadline, uint64_t next)
{
    uint64_t end = deadline < next ? deadline : next;
    if (end == NEVER)
        return NEVER;
    return end > now ? end - now : 0;
}


/* ---- poll family ---- */

enum poll_kind { P_POLL, P_PPOLL, P_POLL_CHK, P_PPOLL_CHK };

struct poll_call {
    int kind;
    const sigset_t *mask;
    unsigned long fdslen;
};

static int poll_real(const struct poll_call *c, struct pollfd *f, nfds_t n,
                     uint64_t ns)
{
    struct timespec ts = to_ts(ns);
    const struct timespec *tp = ns == NEVER ? NULL : &ts;
    switch (c->kind) {
    case P_PPOLL:
        return WREAL(ppoll)(f, n, tp, c->mask);
    case P_POLL_CHK:
        return WREAL(poll_chk)(f, n, to_ms(ns), c->fdslen);
    case P_PPOLL_CHK:
        return WREAL(ppoll_chk)(f, n, tp, c->mask, c->fdslen);
    default:
        return WREAL(poll)(f, n, to_ms(ns));
    }
}

/* Has the kernel an error or a hang-up to report on fd (SPEC §2: never
 * hidden)? Then a held socket is shown as the kernel has it: writable
 * too, so that its send goes and hears the kernel's answer. Asked only of
 * held sockets among the caller's, once a round. */
static bool kernel_says(int fd)
{
    int saved = errno;
    struct pollfd p = {fd, 0, 0};
    bool r = WREAL(poll)(&p, 1, 0) == 1 && (p.revents & (POLLERR | POLLHUP));
    errno = saved;
    return r;
}

/* Hide the held sockets among f; what was changed goes in saved[]
 * (index, fd, events) to be put back. */
static unsigned poll_hide(struct pollfd *f, nfds_t n,
                          const struct rl_ready_view *v, unsigned nv,
                          struct poll_saved *saved, unsigned cap)
{
    unsigned k = 0;
    for (nfds_t i = 0; i < n && k < cap; i++) {
        for (unsigned j = 0; j < nv; j++) {
            if (v[j].fd != f[i].fd || f[i].fd < 0)
                continue;
            if (!rl_ready_unconnected(v[j].what) && kernel_says(f[i].fd))
                break;
            saved[k++] = (struct poll_saved){i, f[i].fd, f[i].events};
            if (rl_ready_unconnected(v[j].what))
                f[i].fd = -1; /* ignored: revents 0 */
            else
                f[i].events &= (short)~(POLLOUT | POLLWRNORM | POLLWRBAND);
            break;
        }
    }
    return k;
}

static void poll_unhide(struct pollfd *f, const struct poll_saved *saved,
                        unsigned k)
{
    for (unsigned i = 0; i < k; i++) {
        f[saved[i].i].fd = saved[i].fd;
        f[saved[i].i].events = saved[i].events;
    }
}

static int poll_loop_in(const struct poll_call *c, struct pollfd *f,
                        nfds_t n, uint64_t timeout, struct rl_waitbuf *b)
{
    uint64_t start = rl_clock_now_ns();
    uint64_t deadline = deadline_of(start, timeout);
    struct rl_waitlook look = {0};
    for (;;) {
        /* A made-up answer due (SPEC §15): readable now, with what the
         * kernel says of the others at this moment. */
        if (rl_madeup_any() && rl_madeup_poll(f, n, false) > 0) {
            int r = poll_real(c, f, n, 0);
            return r < 0 ? r : r + rl_madeup_poll(f, n, true);
        }
        uint64_t now = rl_clock_now_ns(), next = NEVER;
        unsigned nv = 0;
        if (!tend(now, b->v, &nv, &next))
            return poll_real(c, f, n, timeout);
        unsigned k = poll_hide(f, n, b->v, nv, b->saved, VIEW_MAX);
        /* What the server sends a held socket meanwhile is looked at
         * (waitlook.h): a slice at a time, once it has been. */
        uint64_t most = rl_waitlook_arm(&look, f, b->saved, k);
        uint64_t ns = wait_ns(now, deadline, next);
        int r = poll_real(c, f, n, ns < most ? ns : most);
        int err = errno;
        r = rl_waitlook_take(&look, f, r);
        poll_unhide(f, b->saved, k);
        errno = err;
        if (r != 0 || timeout == 0 ||
            (next == NEVER && most == NEVER && !look.took) ||
            rl_clock_now_ns() >= deadline)
            return r;
    }
}

static COLD int poll_loop(const struct poll_call *c, struct pollfd *f, nfds_t n,
                     uint64_t timeout)
{
    unsigned slot;
    struct rl_waitbuf *b = rl_waitbuf_take(&slot);
    if (b == NULL)
        return poll_real(c, f, n, timeout);
    int r = poll_loop_in(c, f, n, timeout, b);
    int err = errno;
    rl_waitbuf_give(b, slot);
    errno = err;
    return r;
}

static COLD int poll_slow(struct pollfd *f, nfds_t n, int ms)
{
    struct poll_call c = {P_POLL, NULL, 0};
    return poll_loop(&c, f, n, ms_ns(ms));
}

RL_EXPORT int poll(struct pollfd *f, nfds_t n, int ms)
{
    if (!busy())
        return WREAL(poll)(f, n, ms);
    return poll_slow(f, n, ms);
}

RL_EXPORT int __poll_chk(struct pollfd *f, nfds_t n, int ms,
                         unsigned long fdslen)
{
    if (!busy() || fdslen / sizeof *f < n)
        return WREAL(poll_chk)(f, n, ms, fdslen); /* it reports overflow */
    struct poll_call c = {P_POLL_CHK, NULL, fdslen};
    return poll_loop(&c, f, n, ms_ns(ms));
}

RL_EXPORT int ppoll(struct pollfd *f, nfds_t n, const struct timespec *ts,
                    const sigset_t *mask)
{
    if (!busy() || !ts_ok(ts))
        return WREAL(ppoll)(f, n, ts, mask);
    struct poll_call c = {P_PPOLL, mask, 0};
    return poll_loop(&c, f, n, ts_ns(ts));
}

RL_EXPORT int __ppoll_chk(struct pollfd *f, nfds_t n,
                          const struct timespec *ts, const sigset_t *mask,
                          unsigned long fdslen)
{
    if (!busy() || fdslen / sizeof *f < n || !ts_ok(ts))
        return WREAL(ppoll_chk)(f, n, ts, mask, fdslen);
    struct poll_call c = {P_PPOLL_CHK, mask, fdslen};
    return poll_loop(&c, f, n, ts_ns(ts));
}

/* ---- select family ---- */

struct sel_sets {
    fd_set *r, *w, *e;
    fd_set r0, w0, e0; /* the caller's sets, as given */
};

static int select_real(bool p, int nfds, struct sel_sets *s, uint64_t ns,
                       const sigset_t *mask)
{
    if (p) {
        struct timespec ts = to_ts(ns);
        return WREAL(pselect)(nfds, s->r, s->w, s->e,
                              ns == NEVER ? NULL : &ts, mask);
    }
    /* Rounded up to the next us (never wake early). */
    uint64_t us = ns / 1000u + (ns % 1000u != 0);
    struct timeval tv = {(time_t)(us / 1000000u), (long)(us % 1000000u)};
    return WREAL(select)(nfds, s->r, s->w, s->e, ns == NEVER ? NULL : &tv);
}

static void sel_restore(int nfds, struct sel_sets *s)
{
    size_t bytes = ((size_t)nfds + 7) / 8;
    if (s->r != NULL)
        memcpy(s->r, &s->r0, bytes);
    if (s->w != NULL)
        memcpy(s->w, &s->w0, bytes);
    if (s->e != NULL)
        memcpy(s->e, &s->e0, bytes);
}

static void sel_hide(int nfds, struct sel_sets *s, const struct rl_ready_view *v,
                     unsigned nv)
{
    for (unsigned j = 0; j < nv; j++) {
        int fd = v[j].fd;
        if (fd < 0 || fd >= nfds)
            continue;
        bool unconnected = rl_ready_unconnected(v[j].what);
        if (!unconnected && (s->w == NULL || !FD_ISSET(fd, s->w) ||
                             kernel_says(fd)))
            continue;
        if (s->w != NULL)
            FD_CLR(fd, s->w);
        if (!unconnected)
            continue;
        if (s->r != NULL)
            FD_CLR(fd, s->r);
        if (s->e != NULL)
            FD_CLR(fd, s->e);
    }
}

static int select_loop_in(bool p, int nfds, fd_set *r, fd_set *w, fd_set *e,
                          uint64_t timeout, const sigset_t *mask,
                          struct timeval *left, struct rl_ready_view *v)
{
    struct sel_sets s = {.r = r, .w = w, .e = e};
    size_t bytes = ((size_t)nfds + 7) / 8;
    if (r != NULL)
        memcpy(&s.r0, r, bytes);
    if (w != NULL)
        memcpy(&s.w0, w, bytes);
    if (e != NULL)
        memcpy(&s.e0, e, bytes);
    uint64_t start = rl_clock_now_ns();
    uint64_t deadline = deadline_of(start, timeout);
    int res;
    for (;;) {
        if (rl_madeup_any() && r != NULL &&
            rl_madeup_select(nfds, &s.r0, NULL) > 0) {
            sel_restore(nfds, &s);
            res = select_real(p, nfds, &s, 0, mask);
            if (res >= 0) /* (a timed-out select cleared the set) */
                res += rl_madeup_select(nfds, &s.r0, r);
            break;
        }
        uint64_t now = rl_clock_now_ns(), next = NEVER;
        unsigned nv = 0;
        if (!tend(now, v, &nv, &next)) {
            res = select_real(p, nfds, &s, wait_ns(now, deadline, NEVER), mask);
            break;
        }
        sel_restore(nfds, &s);
        sel_hide(nfds, &s, v, nv);
        res = select_real(p, nfds, &s, wait_ns(now, deadline, next), mask);
        if (res != 0 || timeout == 0 || next == NEVER ||
            rl_clock_now_ns() >= deadline)
            break;
    }
    if (left != NULL && res >= 0) {
        /* Linux tells the time left, as the real select would. */
        uint64_t now = rl_clock_now_ns();
        uint64_t l = deadline == NEVER || now >= deadline ? 0 : deadline - now;
        *left = (struct timeval){(time_t)(l / NS), (long)(l % NS / 1000u)};
    }
    return res;
}

static COLD int select_loop(bool p, int nfds, fd_set *r, fd_set *w, fd_set *e,
                            uint64_t timeout, const sigset_t *mask,
                            struct timeval *left)
{
    unsigned slot;
    struct rl_waitbuf *b = rl_waitbuf_take(&slot);
    if (b == NULL) {
        if (p) {
            struct timespec ts = to_ts(timeout);
            return WREAL(pselect)(nfds, r, w, e,
                                  timeout == NEVER ? NULL : &ts, mask);
        }
        return WREAL(select)(nfds, r, w, e, left);
    }
    int res = select_loop_in(p, nfds, r, w, e, timeout, mask, left, b->v);
    int err = errno;
    rl_waitbuf_give(b, slot);
    errno = err;
    return res;
}

RL_EXPORT int select(int nfds, fd_set *r, fd_set *w, fd_set *e,
                     struct timeval *tv)
{
    /* A negative timeval is the kernel's EINVAL; tv_usec past a second
     * counts as seconds, as the kernel counts it. */
    if (!busy() || nfds < 0 || nfds > FD_SETSIZE ||
        (tv != NULL && (tv->tv_sec < 0 || tv->tv_usec < 0)))
        return WREAL(select)(nfds, r, w, e, tv);
    uint64_t timeout = NEVER;
    if (tv != NULL) {
        uint64_t us = (uint64_t)tv->tv_usec;
        uint64_t sec = (uint64_t)tv->tv_sec;
        sec = sec > FOREVER - us / 1000000u ? FOREVER : sec + us / 1000000u;
        timeout = sat_ns(sec, us % 1000000u * 1000u);
    }
    return select_loop(false, nfds, r, w, e, timeout, NULL, tv);
}

RL_EXPORT int pselect(int nfds, fd_set *r, fd_set *w, fd_set *e,
                      const struct timespec *ts, const sigset_t *mask)
{
    if (!busy() || nfds < 0 || nfds > FD_SETSIZE || !ts_ok(ts))
        return WREAL(pselect)(nfds, r, w, e, ts, mask);
    return select_loop(true, nfds, r, w, e, ts_ns(ts), mask, NULL);
}

/* ---- epoll ---- */

enum ep_kind { E_WAIT, E_PWAIT, E_PWAIT2 };

static int ep_real(int kind, int ep, struct epoll_event *ev, int max,
                   uint64_t ns, const sigset_t *mask)
{
    if (kind == E_PWAIT2) {
        struct timespec ts = to_ts(ns);
        return WREAL(epoll_pwait2)(ep, ev, max, ns == NEVER ? NULL : &ts,
                                   mask);
    }
    if (kind == E_PWAIT)
        return WREAL(epoll_pwait)(ep, ev, max, to_ms(ns), mask);
    return WREAL(epoll_wait)(ep, ev, max, to_ms(ns));
}

/* The kernel already shows held sockets less (epreg.h): the loop only
 * wakes at their turns and gives their registrations back. */
static int ep_loop(int kind, int ep, struct epoll_event *ev, int max,
                   uint64_t timeout, const sigset_t *mask,
                   struct rl_ready_view *v)
{
    uint64_t start = rl_clock_now_ns();
    uint64_t deadline = deadline_of(start, timeout);
    for (;;) {
        /* A made-up answer due (SPEC §15): reported now, with what the
         * kernel says of the others at this moment. */
        int k = rl_madeup_any() ? rl_epreg_madeup(ep, ev, max) : 0;
        if (k > 0) {
            int got = k < max ? ep_real(kind, ep, ev + k, max - k, 0, mask) : 0;
            return got < 0 ? k : rl_epreg_madeup_merge(ev, k, got);
        }
        uint64_t now = rl_clock_now_ns(), next = NEVER;
        unsigned nv = 0;
        if (!tend(now, v, &nv, &next))
            return ep_real(kind, ep, ev, max, timeout, mask);
        /* An answer queued, not for this set or not due yet: another
         * thread may make it due while this one waits, so look again. */
        if (rl_madeup_any() && next > now + MADEUP_LOOK_NS)
            next = now + MADEUP_LOOK_NS;
        int r = ep_real(kind, ep, ev, max, wait_ns(now, deadline, next), mask);
        if (r != 0 || timeout == 0 || next == NEVER ||
            rl_clock_now_ns() >= deadline)
            return r;
    }
}

static COLD int ep_slow(int kind, int ep, struct epoll_event *ev, int max,
                        uint64_t timeout, const sigset_t *mask)
{
    unsigned slot;
    struct rl_waitbuf *b = rl_waitbuf_take(&slot);
    if (b == NULL)
        return ep_real(kind, ep, ev, max, timeout, mask);
    int r = ep_loop(kind, ep, ev, max, timeout, mask, b->v);
    int err = errno;
    rl_waitbuf_give(b, slot);
    errno = err;
    return r;
}

RL_EXPORT int epoll_wait(int ep, struct epoll_event *ev, int max, int ms)
{
    if (!busy())
        return WREAL(epoll_wait)(ep, ev, max, ms);
    return ep_slow(E_WAIT, ep, ev, max, ms_ns(ms), NULL);
}

RL_EXPORT int epoll_pwait(int ep, struct epoll_event *ev, int max, int ms,
                          const sigset_t *mask)
{
    if (!busy())
        return WREAL(epoll_pwait)(ep, ev, max, ms, mask);
    return ep_slow(E_PWAIT, ep, ev, max, ms_ns(ms), mask);
}

RL_EXPORT int epoll_pwait2(int ep, struct epoll_event *ev, int max,
                           const struct timespec *ts, const sigset_t *mask)
{
    if (!busy() || !ts_ok(ts))
        return WREAL(epoll_pwait2)(ep, ev, max, ts, mask);
    return ep_slow(E_PWAIT2, ep, ev, max, ts_ns(ts), mask);
}

/* Could fd's registration ever need to be shown less? Only an inet
 * socket's (its mark says so: made through socket(), seen connecting, or
 * inherited and found by the look at inherited sockets, which an ADD of an
 * unmarked fd runs if it is still due, as a send would). A file, a pipe,
 * an AF_UNIX socket pass straight through: no set-up, no record, so that
 * their close costs nothing either (hook_close.c). An unmarked inet
 * socket made behind the shim's back (a raw system call, SCM_RIGHTS) is
 * not recorded: its sends are not charged unless it connects through the
 * shim, and its registrations then stay as the program made them. MOD and
 * DEL only ever find records once the shim is ready. */
static bool ep_recordable(int op, int fd)
{
    uint32_t m = rl_fdtab_get(fd);
    if (m == 0 && op == EPOLL_CTL_ADD && rl_shim_scan_due()) {
        rl_shim_scan_now();
        m = rl_fdtab_get(fd);
    }
    if (!(m & RL_FD_INET))
        return false;
    return op == EPOLL_CTL_ADD || rl_shim_ready();
}

RL_EXPORT int epoll_ctl(int ep, int op, int fd, struct epoll_event *ev)
{
    /* Recorded only while a rule applies (then a socket may be held): an
     * ADD of an inet socket may run the deferred set-up. */
    if (!ep_recordable(op, fd) || !rl_shim_enter())
        return WREAL(epoll_ctl)(ep, op, fd, ev);
    int mode = rl_epreg_mode_now(fd, rl_clock_now_ns());
    if (mode == RL_EPREG_FULL) {
        /* The program's own call, recorded once it succeeded. */
        rl_shim_leave();
        int r = WREAL(epoll_ctl)(ep, op, fd, ev);
        if (r == 0 && rl_shim_enter()) {
            rl_epreg_record(ep, op, fd, ev);
            rl_shim_leave();
        }
        return r;
    }
    int r = rl_epreg_ctl(ep, op, fd, ev, mode);
    int err = errno;
    rl_shim_leave();
    errno = err;
    return r;
}

