/* counter.c — another preload, stacked with the shim in either order: it
 * wraps connect and send through dlsym(RTLD_NEXT) like any logging
 * preload, counts the calls that reach it, and at exit writes
 *     counter: connect=N send=M
 * to stderr (one write). test_robust.c builds it with cc. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

static _Atomic long connects, sends;

int connect(int fd, const struct sockaddr *sa, socklen_t len)
{
    static int (*next)(int, const struct sockaddr *, socklen_t);
    if (next == NULL)
        next = (int (*)(int, const struct sockaddr *, socklen_t))dlsym(
            RTLD_NEXT, "connect");
    if (sa != NULL && sa->sa_family != AF_UNIX)
        connects++;
    return next(fd, sa, len);
}

ssize_t send(int fd, const void *buf, size_t len, int flags)
{
    static ssize_t (*next)(int, const void *, size_t, int);
    if (next == NULL)
        next = (ssize_t(*)(int, const void *, size_t, int))dlsym(RTLD_NEXT,
                                                                "send");
    sends++;
    return next(fd, buf, len, flags);
}

__attribute__((destructor)) static void report(void)
{
    char line[80];
    int n = snprintf(line, sizeof line, "counter: connect=%ld send=%ld\n",
                     (long)connects, (long)sends);
    syscall(SYS_write, 2, line, (size_t)n);
}
