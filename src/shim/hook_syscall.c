/* hook_syscall.c — libc's variadic syscall(): the numbers of the calls the
 * shim wraps take the same path as the named call.
 *
 * Some runtimes and libraries make raw calls on purpose (libuv's io_uring
 * set-up, code that avoids a libc symbol). syscall() reads six long
 * arguments whatever the number (as glibc's own does), so this hook does
 * too, and hands the numbers it knows to the hooks of their names; every
 * other number (getrandom, futex, ... 133 binaries and libraries on a
 * Debian host import syscall) goes straight on, for the price of a switch.
 *
 * While the shim does its own work on this thread (the re-entry guard),
 * every number goes straight to the kernel: the shim's own raw writes and
 * sockets (util/log.c) are never charged or marked. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "policy/config.h"
#include "policy/gate.h"
#include "shim/hooks.h"
#include "shim/real.h"
#include "shim/shim.h"

/* The named hooks (hook_*.c): the entry points a program's own call of
 * that name reaches. */
int connect(int, const struct sockaddr *, socklen_t);
int close_range(unsigned int, unsigned int, int);
int accept4(int, struct sockaddr *, socklen_t *, int);

/* io_uring_setup under a rule: ENOSYS, the answer of a kernel without
 * io_uring, so libuv and the like fall back to epoll and calls the shim
 * sees; unless `[rlshim] io_uring = allow`. The set-up runs first if it
 * has not yet: whether a rule applies is the question. */
static bool refuse_io_uring(void)
{
    if (!rl_shim_enter())
        return false;
    bool refuse = !rl_shim_io_uring_allowed();
    rl_shim_leave();
    return refuse;
}

RL_EXPORT long syscall(long nr, ...)
{
    va_list ap;
    va_start(ap, nr);
    long a = va_arg(ap, long), b = va_arg(ap, long), c = va_arg(ap, long),
         d = va_arg(ap, long), e = va_arg(ap, long), f = va_arg(ap, long);
    va_end(ap);
    if (__builtin_expect(rl_shim_busy, 0))
        return REAL(syscall)(nr, a, b, c, d, e, f);
    switch (nr) {
    case SYS_connect:
        return connect((int)a, (const struct sockaddr *)b, (socklen_t)c);
    case SYS_sendto:
        return sendto((int)a, (const void *)b, (size_t)c, (int)d,
                      (const struct sockaddr *)e, (socklen_t)f);
    case SYS_sendmsg:
        return sendmsg((int)a, (const struct msghdr *)b, (int)c);
    case SYS_sendmmsg:
        return sendmmsg((int)a, (struct mmsghdr *)b, (unsigned)c, (int)d);
    case SYS_write:
        return write((int)a, (const void *)b, (size_t)c);
    case SYS_writev:
        return writev((int)a, (const struct iovec *)b, (int)c);
    case SYS_sendfile: /* the 64-bit offset form on every 64-bit ABI */
        return sendfile64((int)a, (int)b, (off64_t *)c, (size_t)d);
    case SYS_close:
        return close((int)a);
    case SYS_close_range:
        return close_range((unsigned)a, (unsigned)b, (int)c);
    case SYS_dup:
        return dup((int)a);
#ifdef SYS_dup2
    case SYS_dup2:
        return dup2((int)a, (int)b);
#endif
    case SYS_dup3:
        return dup3((int)a, (int)b, (int)c);
    case SYS_fcntl:
        return fcntl((int)a, (int)b, (void *)c);
    case SYS_socket:
        return socket((int)a, (int)b, (int)c);
    case SYS_socketpair:
        return socketpair((int)a, (int)b, (int)c, (int *)d);
#ifdef SYS_accept
    case SYS_accept:
        return accept((int)a, (struct sockaddr *)b, (socklen_t *)c);
#endif
    case SYS_accept4:
        return accept4((int)a, (struct sockaddr *)b, (socklen_t *)c, (int)d);
    case SYS_io_uring_setup:
        if (refuse_io_uring()) {
            errno = ENOSYS;
            return -1;
        }
        break;
    default:
        break;
    }
    return REAL(syscall)(nr, a, b, c, d, e, f);
}
