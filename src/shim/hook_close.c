/* hook_close.c — bookkeeping: every way an fd number is freed or copied.
 *
 * fd numbers are reused at once (the next socket() gets the lowest free
 * one), so a mark must be forgotten before the number can come back:
 * close paths clear the mark *before* the real call (after it, another
 * thread's new socket could already own the number and its new mark).
 * Copies (dup, F_DUPFD) carry the mark after the real call succeeds. None
 * of these consult the config: they work before init and never block.
 *
 * An fd the shim never marked (a file, a pipe: nothing the shim made or
 * saw connect) costs one table look-up here and nothing else: no system
 * call, no lock. Only an inet socket can have wait-table entries
 * (shim/wait.h), and only those look for them. */
#include <errno.h>
#include <fcntl.h>
#include <linux/close_range.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <unistd.h>

#include "policy/proc.h"
#include "shim/conntab.h"
#include "shim/fdtab.h"
#include "shim/hooks.h"
#include "shim/madeup.h"
#include "shim/real.h"
#include "shim/shim.h"
#include "shim/wait.h"

/* The close of a marked fd (out of line: a file or a pipe never comes
 * here). A vfork child's close leaves its parent's marks and entries be.
 * A signal handler's leaves the request connection (forgetting it locks
 * and frees): the number's next connect replaces it (conntab.h). */
static __attribute__((noinline)) void forget(int fd, uint32_t m,
                                             _Atomic uint32_t *slot)
{
    if (rl_shim_in_vfork_child())
        return;
    /* Its requests' answers looked at while it is still the number's. */
    if ((m & RL_FD_HTTP) && !rl_hook_in_handler())
        rl_recv_closing(fd);
    /* rl_fdtab_clear(fd), where close found the mark. */
    atomic_store_explicit(slot, 0, memory_order_relaxed);
    rl_madeup_closed(m);
    rl_wait_forget(fd, m);
    if ((m & RL_FD_HTTP) && !rl_hook_in_handler())
        rl_conntab_forget(fd);
}

/* After a copy of `from` onto `to` (dup*, F_DUPFD) succeeded: `to` carries
 * `from`'s mark, and what the number carried before is forgotten (dup2
 * and dup3 replaced it). Only when one of them is marked. */
static void copy_mark(int from, int to)
{
    uint32_t old = rl_fdtab_get(to);
    if ((rl_fdtab_get(from) | old) == 0 || rl_shim_in_vfork_child())
        return;
    int saved = errno;
    rl_wait_forget_dup(from, to, old);
    if ((old & RL_FD_HTTP) && !rl_hook_in_handler())
        rl_conntab_forget(to);
    rl_fdtab_copy(from, to);
    errno = saved;
}

/* The program closes or replaces fds [first, last]: the decision log
 * lets go of its kept fd first if it is among them (util/declog.h). A
 * vfork child's table is its own copy: the parent's log keeps its fd. */
static void release_log(unsigned first, unsigned last)
{
    struct rl_declog *d = &rl_shim_proc()->declog;
    if (__builtin_expect(rl_declog_holds(d, first, last), 0) &&
        !rl_shim_in_vfork_child())
        rl_declog_release(d);
}

RL_EXPORT int close(int fd)
{
    _Atomic uint32_t *slot = rl_fdtab_at(fd);
    uint32_t m =
        slot != NULL ? atomic_load_explicit(slot, memory_order_relaxed) : 0;
    if (__builtin_expect(m != 0, 0))
        forget(fd, m, slot);
    /* (One load and compare: the log's kept fd is fd + 1 there.) */
    if (__builtin_expect(atomic_load_explicit(&rl_shim_proc()->declog.kept,
                                              memory_order_relaxed) == fd + 1,
                         0))
        release_log((unsigned)fd, (unsigned)fd);
    return REAL(close)(fd);
}

RL_EXPORT int close_range(unsigned int first, unsigned int last, int flags)
{
    /* CLOSE_RANGE_CLOEXEC closes nothing now (only at exec, where a new
     * image starts with an empty table): the marks stay. Invalid ranges
     * close nothing either. */
    if (first <= last && !(flags & CLOSE_RANGE_CLOEXEC) &&
        !rl_shim_in_vfork_child()) {
        rl_fdtab_clear_range(first, last);
        rl_wait_forget_range(first, last);
        if (!rl_hook_in_handler())
            rl_conntab_forget_range(first, last);
    }
    if (first <= last && !(flags & CLOSE_RANGE_CLOEXEC))
        release_log(first, last);
    return REAL(close_range)(first, last, flags);
}

RL_EXPORT void closefrom(int lowfd)
{
    if (lowfd >= 0 && !rl_shim_in_vfork_child()) {
        rl_fdtab_clear_range((unsigned)lowfd, ~0u);
        rl_wait_forget_range((unsigned)lowfd, ~0u);
        if (!rl_hook_in_handler())
            rl_conntab_forget_range((unsigned)lowfd, ~0u);
    }
    if (lowfd >= 0)
        release_log((unsigned)lowfd, ~0u);
    REAL(closefrom)(lowfd);
}

RL_EXPORT int dup(int fd)
{
    int r = REAL(dup)(fd);
    if (r >= 0)
        copy_mark(fd, r);
    return r;
}

/* dup2 and dup3 forget what `to` carried once it is replaced (a number
 * that stays taken throughout: no other socket can get it meanwhile). */
RL_EXPORT int dup2(int from, int to)
{
    if (from != to)
        release_log((unsigned)to, (unsigned)to);
    int r = REAL(dup2)(from, to);
    if (r >= 0 && from != to)
        copy_mark(from, to);
    return r;
}

RL_EXPORT int dup3(int from, int to, int flags)
{
    if (from != to)
        release_log((unsigned)to, (unsigned)to);
    int r = REAL(dup3)(from, to, flags);
    if (r >= 0)
        copy_mark(from, to);
    return r;
}

/* fcntl is variadic and its third argument is an int, a long or a
 * pointer depending on cmd. Like glibc, read it as a pointer-sized value
 * whatever cmd is (an int and a pointer travel in the same register on
 * x86-64 and aarch64) and hand it on unchanged. */
static int after_fcntl(int fd, int cmd, int r)
{
    if (r >= 0 && (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC))
        copy_mark(fd, r);
    return r;
}

RL_EXPORT int fcntl(int fd, int cmd, ...)
{
    va_list ap;
    va_start(ap, cmd);
    void *arg = va_arg(ap, void *);
    va_end(ap);
    return after_fcntl(fd, cmd, REAL(fcntl)(fd, cmd, arg));
}

RL_EXPORT int fcntl64(int fd, int cmd, ...)
{
    va_list ap;
    va_start(ap, cmd);
    void *arg = va_arg(ap, void *);
    va_end(ap);
    return after_fcntl(fd, cmd, REAL(fcntl64)(fd, cmd, arg));
}

RL_EXPORT int fclose(FILE *fp)
{
    if (fp != NULL) {
        int saved = errno;
        int fd = fileno(fp); /* -1 and EBADF for a stream without one */
        errno = saved;
        _Atomic uint32_t *slot = rl_fdtab_at(fd);
        uint32_t m =
            slot != NULL ? atomic_load_explicit(slot, memory_order_relaxed) : 0;
        if (__builtin_expect(m != 0, 0))
            forget(fd, m, slot);
    }
    return REAL(fclose)(fp);
}
