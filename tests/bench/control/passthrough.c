/* passthrough.so — the control of shim_overhead.py and recv_overhead.py:
 * a preload that wraps send, write, read and connect and does nothing but
 * call the next definition.
 * What it costs is the floor any LD_PRELOAD shim starts from. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <sys/socket.h>
#include <unistd.h>

typedef ssize_t (*send_fn)(int, const void *, size_t, int);
typedef ssize_t (*write_fn)(int, const void *, size_t);
typedef ssize_t (*read_fn)(int, void *, size_t);
typedef int (*connect_fn)(int, const struct sockaddr *, socklen_t);

ssize_t send(int fd, const void *buf, size_t len, int flags)
{
    static send_fn next;
    if (next == NULL)
        next = (send_fn)dlsym(RTLD_NEXT, "send");
    return next(fd, buf, len, flags);
}

ssize_t write(int fd, const void *buf, size_t len)
{
    static write_fn next;
    if (next == NULL)
        next = (write_fn)dlsym(RTLD_NEXT, "write");
    return next(fd, buf, len);
}

ssize_t read(int fd, void *buf, size_t len)
{
    static read_fn next;
    if (next == NULL)
        next = (read_fn)dlsym(RTLD_NEXT, "read");
    return next(fd, buf, len);
}

int connect(int fd, const struct sockaddr *sa, socklen_t len)
{
    static connect_fn next;
    if (next == NULL)
        next = (connect_fn)dlsym(RTLD_NEXT, "connect");
    return next(fd, sa, len);
}
