/* sys.c — the system calls themselves: the table's first contents. */
#include "util/sys.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

long rl_raw_syscall(long nr, long a1, long a2, long a3, long a4, long a5,
                    long a6)
{
    long r;
#if defined(__x86_64__)
    register long r10 __asm__("r10") = a4;
    register long r8 __asm__("r8") = a5;
    register long r9 __asm__("r9") = a6;
    __asm__ volatile("syscall"
                     : "=a"(r)
                     : "a"(nr), "D"(a1), "S"(a2), "d"(a3), "r"(r10), "r"(r8),
                       "r"(r9)
                     : "rcx", "r11", "memory");
#elif defined(__aarch64__)
    register long x8 __asm__("x8") = nr;
    register long x0 __asm__("x0") = a1;
    register long x1 __asm__("x1") = a2;
    register long x2 __asm__("x2") = a3;
    register long x3 __asm__("x3") = a4;
    register long x4 __asm__("x4") = a5;
    register long x5 __asm__("x5") = a6;
    __asm__ volatile("svc 0"
                     : "+r"(x0)
                     : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4), "r"(x5)
                     : "memory");
    r = x0;
#else
#error "rl_raw_syscall: add this architecture's system call instruction"
#endif
    if (r < 0 && r > -4096) {
        errno = (int)-r;
        return -1;
    }
    return r;
}

#define RAW(nr, a, b, c, d, e, f)                                              \
    rl_raw_syscall((nr), (long)(a), (long)(b), (long)(c), (long)(d),          \
                   (long)(e), (long)(f))

static int raw_socket(int dom, int type, int proto)
{
    return (int)RAW(SYS_socket, dom, type, proto, 0, 0, 0);
}

static int raw_connect(int fd, const struct sockaddr *sa, socklen_t len)
{
    return (int)RAW(SYS_connect, fd, sa, len, 0, 0, 0);
}

static ssize_t raw_send(int fd, const void *buf, size_t n, int flags)
{
    return RAW(SYS_sendto, fd, buf, n, flags, NULL, 0);
}

static ssize_t raw_recv(int fd, void *buf, size_t n, int flags)
{
    return RAW(SYS_recvfrom, fd, buf, n, flags, NULL, NULL);
}

static int raw_poll(struct pollfd *fds, nfds_t n, int timeout_ms)
{
    struct timespec ts, *tp = NULL;
    if (timeout_ms >= 0) {
        ts.tv_sec = timeout_ms / 1000;
        ts.tv_nsec = (long)(timeout_ms % 1000) * 1000000L;
        tp = &ts;
    }
    return (int)RAW(SYS_ppoll, fds, n, tp, NULL, 0, 0);
}

static int raw_close(int fd)
{
    return (int)RAW(SYS_close, fd, 0, 0, 0, 0, 0);
}

static ssize_t raw_read(int fd, void *buf, size_t n)
{
    return RAW(SYS_read, fd, buf, n, 0, 0, 0);
}

static ssize_t raw_write(int fd, const void *buf, size_t n)
{
    return RAW(SYS_write, fd, buf, n, 0, 0, 0);
}

static int raw_openat(int dirfd, const char *path, int flags, mode_t mode)
{
    return (int)RAW(SYS_openat, dirfd, path, flags, mode, 0, 0);
}

static int raw_fcntl(int fd, int cmd, int arg)
{
    return (int)RAW(SYS_fcntl, fd, cmd, arg, 0, 0, 0);
}

static int raw_getsockopt(int fd, int level, int name, void *val,
                          socklen_t *len)
{
    return (int)RAW(SYS_getsockopt, fd, level, name, val, len, 0);
}

static int raw_getpeername(int fd, struct sockaddr *sa, socklen_t *len)
{
    return (int)RAW(SYS_getpeername, fd, sa, len, 0, 0, 0);
}

static int raw_setsockopt(int fd, int level, int name, const void *val,
                          socklen_t len)
{
    return (int)RAW(SYS_setsockopt, fd, level, name, val, len, 0);
}

static long raw_futex(uint32_t *word, int op, uint32_t val,
                      const struct timespec *timeout)
{
    return RAW(SYS_futex, word, op, val, timeout, NULL, 0);
}

struct rl_sys rl_sys = {
    .socket = raw_socket,
    .connect = raw_connect,
    .send = raw_send,
    .recv = raw_recv,
    .poll = raw_poll,
    .close = raw_close,
    .read = raw_read,
    .write = raw_write,
    .openat = raw_openat,
    .fcntl = raw_fcntl,
    .getsockopt = raw_getsockopt,
    .getpeername = raw_getpeername,
    .setsockopt = raw_setsockopt,
    .futex = raw_futex,
};

void rl_sys_write_all(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n > 0) {
        ssize_t w = rl_sys.write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return;
        p += w;
        n -= (size_t)w;
    }
}
