/* passthrough.so — the control of the benchmarks: a preload that wraps the
 * calls they measure (send, write, read, connect, socket, close,
 * poll, epoll_wait, getaddrinfo, SSL_write) and does nothing but call the next
 * definition.
 * What it costs is the floor any LD_PRELOAD shim starts from. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <netdb.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

/* The next definition of NAME, looked up at its first call. */
#define NEXT(name) \
    static __typeof__(name) *next; \
    if (next == NULL) \
        next = (__typeof__(name) *)dlsym(RTLD_NEXT, #name)

ssize_t send(int fd, const void *buf, size_t len, int flags)
{
    NEXT(send);
    return next(fd, buf, len, flags);
}

ssize_t write(int fd, const void *buf, size_t len)
{
    NEXT(write);
    return next(fd, buf, len);
}

ssize_t read(int fd, void *buf, size_t len)
{
    NEXT(read);
    return next(fd, buf, len);
}

int connect(int fd, const struct sockaddr *sa, socklen_t len)
{
    NEXT(connect);
    return next(fd, sa, len);
}

int socket(int domain, int type, int protocol)
{
    NEXT(socket);
    return next(domain, type, protocol);
}

int close(int fd)
{
    NEXT(close);
    return next(fd);
}

int poll(struct pollfd *fds, nfds_t n, int timeout)
{
    NEXT(poll);
    return next(fds, n, timeout);
}

int epoll_wait(int ep, struct epoll_event *ev, int n, int timeout)
{
    NEXT(epoll_wait);
    return next(ep, ev, n, timeout);
}

int getaddrinfo(const char *node, const char *service,
                const struct addrinfo *hints, struct addrinfo **res)
{
    NEXT(getaddrinfo);
    return next(node, service, hints, res);
}

/* OpenSSL's write (tls_overhead.py), found in the global scope as the
 * shim's TLS hooks find it for a program that links libssl. */
typedef struct ssl_st SSL;

int SSL_write(SSL *ssl, const void *buf, int num)
{
    NEXT(SSL_write);
    return next(ssl, buf, num);
}
