/* real.c — dlsym(RTLD_NEXT) once, refusing our own symbols. */
#include "shim/real.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <sys/sendfile.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The hottest names start out as trampolines that resolve the table and
 * call on, so that their hooks can jump through the pointer with no test
 * for NULL (hook_write.c). Every other entry starts NULL (REAL resolves). */
static ssize_t first_write(int fd, const void *buf, size_t n)
{
    ssize_t (*w)(int, const void *, size_t) =
        (ssize_t (*)(int, const void *, size_t))rl_real_slot(
            RL_REAL_INDEX(write));
    return w(fd, buf, n);
}

static ssize_t first_writev(int fd, const struct iovec *iov, int n)
{
    ssize_t (*w)(int, const struct iovec *, int) =
        (ssize_t (*)(int, const struct iovec *, int))rl_real_slot(
            RL_REAL_INDEX(writev));
    return w(fd, iov, n);
}

static ssize_t first_read(int fd, void *buf, size_t n)
{
    ssize_t (*r)(int, void *, size_t) = (ssize_t (*)(int, void *, size_t))
        rl_real_slot(RL_REAL_INDEX(read));
    return r(fd, buf, n);
}

static ssize_t first_recv(int fd, void *buf, size_t n, int fl)
{
    ssize_t (*r)(int, void *, size_t, int) =
        (ssize_t (*)(int, void *, size_t, int))rl_real_slot(
            RL_REAL_INDEX(recv));
    return r(fd, buf, n, fl);
}

struct rl_real rl_real = {.write = first_write, .writev = first_writev,
                          .read = first_read, .recv = first_recv};

/* Fallbacks: the raw system call, for a libc without the name or a chain
 * in which RTLD_NEXT finds only ourselves. */
static int fb_connect(int fd, const struct sockaddr *sa, socklen_t len)
{
    return (int)rl_raw_syscall(SYS_connect, (long)fd, (long)(sa), (long)len, 0,
                               0, 0);
}

static int fb_getsockopt(int fd, int level, int name, void *val, socklen_t *len)
{
    return (int)rl_raw_syscall(SYS_getsockopt, (long)fd, (long)level,
                               (long)name, (long)val, (long)len, 0);
}

static ssize_t fb_send(int fd, const void *b, size_t n, int fl)
{
    return rl_raw_syscall(SYS_sendto, (long)fd, (long)(b), (long)n, (long)fl,
                          (long)(NULL), (long)0);
}

static ssize_t fb_sendto(int fd, const void *b, size_t n, int fl,
                         const struct sockaddr *sa, socklen_t len)
{
    return rl_raw_syscall(SYS_sendto, (long)fd, (long)(b), (long)n, (long)fl,
                          (long)(sa), (long)len);
}

static ssize_t fb_sendmsg(int fd, const struct msghdr *m, int fl)
{
    return rl_raw_syscall(SYS_sendmsg, (long)fd, (long)(m), (long)fl, 0, 0, 0);
}

static int fb_sendmmsg(int fd, struct mmsghdr *v, unsigned int n, int fl)
{
    return (int)rl_raw_syscall(SYS_sendmmsg, (long)fd, (long)(v), (long)n,
                               (long)fl, 0, 0);
}

static ssize_t fb_write(int fd, const void *b, size_t n)
{
    return rl_raw_syscall(SYS_write, (long)fd, (long)(b), (long)n, 0, 0, 0);
}

static ssize_t fb_writev(int fd, const struct iovec *v, int n)
{
    return rl_raw_syscall(SYS_writev, (long)fd, (long)(v), (long)n, 0, 0, 0);
}

static ssize_t fb_sendfile(int out, int in, off_t *off, size_t n)
{
    return rl_raw_syscall(SYS_sendfile, (long)out, (long)in, (long)(off),
                          (long)n, 0, 0);
}

static ssize_t fb_sendfile64(int out, int in, off64_t *off, size_t n)
{
    return rl_raw_syscall(SYS_sendfile, (long)out, (long)in, (long)(off),
                          (long)n, 0, 0);
}

static int fb_close(int fd)
{
    return (int)rl_raw_syscall(SYS_close, (long)fd, 0, 0, 0, 0, 0);
}

static int fb_close_range(unsigned int a, unsigned int b, int fl)
{
    return (int)rl_raw_syscall(SYS_close_range, (long)a, (long)(b), (long)fl, 0,
                               0, 0);
}

static void fb_closefrom(int fd)
{
    rl_raw_syscall(SYS_close_range, (long)((unsigned)fd), (long)(~0u), (long)0,
                   0, 0, 0);
}

static int fb_dup(int fd)
{
    return (int)rl_raw_syscall(SYS_dup, (long)fd, 0, 0, 0, 0, 0);
}

static int fb_dup2(int a, int b)
{
    if (a == b)
        return (int)rl_raw_syscall(SYS_fcntl, (long)a, (long)F_GETFD, 0, 0, 0,
                                   0) < 0
                   ? -1
                   : b;
    return (int)rl_raw_syscall(SYS_dup3, (long)a, (long)(b), (long)0, 0, 0, 0);
}

static int fb_dup3(int a, int b, int fl)
{
    return (int)rl_raw_syscall(SYS_dup3, (long)a, (long)(b), (long)fl, 0, 0, 0);
}

/* Like glibc, the third argument is read as a pointer whatever cmd is:
 * on x86-64 and aarch64 an int or a pointer travel in the same register. */
static int fb_fcntl(int fd, int cmd, ...)
{
    va_list ap;
    va_start(ap, cmd);
    void *arg = va_arg(ap, void *);
    va_end(ap);
    return (int)rl_raw_syscall(SYS_fcntl, (long)fd, (long)cmd, (long)arg, 0, 0,
                               0);
}

static int fb_fclose(FILE *fp)
{
    (void)fp;
    return EOF; /* cannot happen: libc always has fclose */
}

#define fb_fcntl64 fb_fcntl

static int fb_socket(int dom, int type, int proto)
{
    return (int)rl_raw_syscall(SYS_socket, dom, type, proto, 0, 0, 0);
}

static int fb_socketpair(int dom, int type, int proto, int sv[2])
{
    return (int)rl_raw_syscall(SYS_socketpair, dom, type, proto, (long)sv, 0,
                               0);
}

static int fb_accept(int fd, struct sockaddr *sa, socklen_t *len)
{
    return (int)rl_raw_syscall(SYS_accept4, fd, (long)sa, (long)len, 0, 0, 0);
}

static int fb_accept4(int fd, struct sockaddr *sa, socklen_t *len, int fl)
{
    return (int)rl_raw_syscall(SYS_accept4, fd, (long)sa, (long)len, fl, 0, 0);
}

static ssize_t fb_read(int fd, void *b, size_t n)
{
    return rl_raw_syscall(SYS_read, (long)fd, (long)b, (long)n, 0, 0, 0);
}

static ssize_t fb_readv(int fd, const struct iovec *v, int n)
{
    return rl_raw_syscall(SYS_readv, (long)fd, (long)v, (long)n, 0, 0, 0);
}

static ssize_t fb_recv(int fd, void *b, size_t n, int fl)
{
    return rl_raw_syscall(SYS_recvfrom, (long)fd, (long)b, (long)n, (long)fl,
                          0, 0);
}

static ssize_t fb_recvfrom(int fd, void *b, size_t n, int fl,
                           struct sockaddr *sa, socklen_t *len)
{
    return rl_raw_syscall(SYS_recvfrom, (long)fd, (long)b, (long)n, (long)fl,
                          (long)sa, (long)len);
}

static ssize_t fb_recvmsg(int fd, struct msghdr *m, int fl)
{
    return rl_raw_syscall(SYS_recvmsg, (long)fd, (long)m, (long)fl, 0, 0, 0);
}

/* libc always has syscall(); should RTLD_NEXT find only ourselves, the
 * raw call with six arguments is what it does. */
static long fb_syscall(long nr, ...)
{
    va_list ap;
    va_start(ap, nr);
    long a[6];
    for (int i = 0; i < 6; i++)
        a[i] = va_arg(ap, long);
    va_end(ap);
    return rl_raw_syscall(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
}

void *rl_real_next(const char *name, void *self, void *fallback)
{
    void *p = dlsym(RTLD_NEXT, name);
    if (p == NULL || p == self)
        return fallback;
    return p;
}

/* Our own exported definitions, to refuse them. */
int connect(int, const struct sockaddr *, socklen_t);
int fcntl64(int, int, ...);
void closefrom(int);
int close_range(unsigned int, unsigned int, int);
int accept4(int, struct sockaddr *, socklen_t *, int);
long syscall(long, ...);

/* The core's own system calls (util/sys.h): libc's functions behind our
 * hooks, found as the hooks find theirs. A name libc lacks keeps the
 * system call the table started with. */
static int sys_fcntl(int fd, int cmd, int arg)
{
    return rl_real.fcntl(fd, cmd, arg);
}

static void fill_sys(void)
{
    void *p;
    rl_sys.socket = rl_real.socket;
    rl_sys.connect = rl_real.connect;
    rl_sys.send = rl_real.send;
    rl_sys.close = rl_real.close;
    rl_sys.write = rl_real.write;
    rl_sys.getsockopt = rl_real.getsockopt;
    rl_sys.fcntl = sys_fcntl;
    if ((p = rl_real_next("recv", NULL, NULL)) != NULL)
        rl_sys.recv = (ssize_t (*)(int, void *, size_t, int))p;
    if ((p = rl_real_next("poll", NULL, NULL)) != NULL)
        rl_sys.poll = (int (*)(struct pollfd *, nfds_t, int))p;
    if ((p = rl_real_next("read", NULL, NULL)) != NULL)
        rl_sys.read = (ssize_t (*)(int, void *, size_t))p;
    if ((p = rl_real_next("setsockopt", NULL, NULL)) != NULL)
        rl_sys.setsockopt =
            (int (*)(int, int, int, const void *, socklen_t))p;
}

/* One row per member of struct rl_real, in its order: the name, our own
 * definition (refused), the fallback. */
#define SLOT(name) {#name, (void *)name, (void *)fb_##name}
static const struct {
    const char *name;
    void *self, *fallback;
} slots[] = {
    SLOT(connect),    SLOT(getsockopt), SLOT(send),      SLOT(sendto),
    SLOT(sendmsg),    SLOT(sendmmsg),   SLOT(write),     SLOT(writev),
    SLOT(sendfile),   SLOT(sendfile64), SLOT(close),     SLOT(close_range),
    SLOT(closefrom),  SLOT(dup),        SLOT(dup2),      SLOT(dup3),
    SLOT(fcntl),      SLOT(fcntl64),    SLOT(fclose),    SLOT(socket),
    SLOT(socketpair), SLOT(accept),     SLOT(accept4),   SLOT(syscall),
    SLOT(read),       SLOT(readv),      SLOT(recv),      SLOT(recvfrom),
    SLOT(recvmsg),
};
_Static_assert(sizeof slots / sizeof slots[0] ==
                   sizeof(struct rl_real) / sizeof(void *),
               "a row of slots[] per member of struct rl_real");

/* Each name is looked up the first time a hook needs it, not at load: a
 * process pays dlsym (about a microsecond a name) only for the calls it
 * makes. Racing resolvers store the same value. */
void *rl_real_slot(unsigned i)
{
    void **dst = (void **)&rl_real;
    void *p = __atomic_load_n(&dst[i], __ATOMIC_ACQUIRE);
    if (p != NULL && p != (void *)first_write && p != (void *)first_writev &&
        p != (void *)first_read && p != (void *)first_recv)
        return p;
    p = rl_real_next(slots[i].name, slots[i].self, slots[i].fallback);
    __atomic_store_n(&dst[i], p, __ATOMIC_RELEASE);
    return p;
}

void rl_real_resolve(void)
{
    static _Atomic int done;
    if (atomic_load_explicit(&done, memory_order_acquire))
        return;
    for (unsigned i = 0; i < sizeof slots / sizeof slots[0]; i++)
        rl_real_slot(i);
    fill_sys();
    atomic_store_explicit(&done, 1, memory_order_release);
}
