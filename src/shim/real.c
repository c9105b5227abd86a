/* real.c — dlsym(RTLD_NEXT) once, refusing our own symbols. */
#include "shim/real.h"

#include <dlfcn.h>
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
    rl_real_resolve();
    return rl_real.write(fd, buf, n);
}

static ssize_t first_writev(int fd, const struct iovec *iov, int n)
{
    rl_real_resolve();
    return rl_real.writev(fd, iov, n);
}

struct rl_real rl_real = {.write = first_write, .writev = first_writev};

/* Fallbacks: the raw system call, for a libc without the name or a chain
 * in which RTLD_NEXT finds only ourselves. */
static int fb_connect(int fd, const struct sockaddr *sa, socklen_t len)
{
    return (int)syscall(SYS_connect, fd, sa, len);
}

static ssize_t fb_send(int fd, const void *b, size_t n, int fl)
{
    return syscall(SYS_sendto, fd, b, n, fl, NULL, 0);
}

static ssize_t fb_sendto(int fd, const void *b, size_t n, int fl,
                         const struct sockaddr *sa, socklen_t len)
{
    return syscall(SYS_sendto, fd, b, n, fl, sa, len);
}

static ssize_t fb_sendmsg(int fd, const struct msghdr *m, int fl)
{
    return syscall(SYS_sendmsg, fd, m, fl);
}

static int fb_sendmmsg(int fd, struct mmsghdr *v, unsigned int n, int fl)
{
    return (int)syscall(SYS_sendmmsg, fd, v, n, fl);
}

static ssize_t fb_write(int fd, const void *b, size_t n)
{
    return syscall(SYS_write, fd, b, n);
}

static ssize_t fb_writev(int fd, const struct iovec *v, int n)
{
    return syscall(SYS_writev, fd, v, n);
}

static ssize_t fb_sendfile(int out, int in, off_t *off, size_t n)
{
    return syscall(SYS_sendfile, out, in, off, n);
}

static ssize_t fb_sendfile64(int out, int in, off64_t *off, size_t n)
{
    return syscall(SYS_sendfile, out, in, off, n);
}

static int fb_close(int fd)
{
    return (int)syscall(SYS_close, fd);
}

static int fb_close_range(unsigned int a, unsigned int b, int fl)
{
    return (int)syscall(SYS_close_range, a, b, fl);
}

static void fb_closefrom(int fd)
{
    syscall(SYS_close_range, (unsigned)fd, ~0u, 0);
}

static int fb_dup(int fd)
{
    return (int)syscall(SYS_dup, fd);
}

static int fb_dup2(int a, int b)
{
    if (a == b)
        return (int)syscall(SYS_fcntl, a, F_GETFD) < 0 ? -1 : b;
    return (int)syscall(SYS_dup3, a, b, 0);
}

static int fb_dup3(int a, int b, int fl)
{
    return (int)syscall(SYS_dup3, a, b, fl);
}

/* Like glibc, the third argument is read as a pointer whatever cmd is:
 * on x86-64 and aarch64 an int or a pointer travel in the same register. */
static int fb_fcntl(int fd, int cmd, ...)
{
    va_list ap;
    va_start(ap, cmd);
    void *arg = va_arg(ap, void *);
    va_end(ap);
    return (int)syscall(SYS_fcntl, fd, cmd, arg);
}

static int fb_fclose(FILE *fp)
{
    (void)fp;
    return EOF; /* cannot happen: libc always has fclose */
}

#define fb_fcntl64 fb_fcntl

static void *next(const char *name, void *self, void *fallback)
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

#define RESOLVE(name) tmp.name = next(#name, (void *)name, (void *)fb_##name)

void rl_real_resolve(void)
{
    static _Atomic int done;
    /* Pairs with the release store below: a thread that sees done reads
     * a complete table. Racing resolvers store identical values. */
    if (atomic_load_explicit(&done, memory_order_acquire))
        return;
    struct rl_real tmp;
    RESOLVE(connect);
    RESOLVE(send);
    RESOLVE(sendto);
    RESOLVE(sendmsg);
    RESOLVE(sendmmsg);
    RESOLVE(write);
    RESOLVE(writev);
    RESOLVE(sendfile);
    RESOLVE(sendfile64);
    RESOLVE(close);
    RESOLVE(close_range);
    RESOLVE(closefrom);
    RESOLVE(dup);
    RESOLVE(dup2);
    RESOLVE(dup3);
    RESOLVE(fcntl);
    RESOLVE(fcntl64);
    RESOLVE(fclose);
    /* Word-sized stores of the same values by every racer; a reader that
     * sees a non-NULL pointer may use it. */
    void *const *src = (void *const *)&tmp;
    void **dst = (void **)&rl_real;
    for (size_t i = 0; i < sizeof tmp / sizeof(void *); i++)
        __atomic_store_n(&dst[i], src[i], __ATOMIC_RELAXED);
    atomic_store_explicit(&done, 1, memory_order_release);
}
