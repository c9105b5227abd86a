/* bench_calls — one kind of call in a loop, for tests/bench/instructions.py,
 * which runs it under callgrind and reads what each call cost in
 * instructions.
 *
 *   bench_calls send PORT N      N 64-byte send()s on a connected TCP socket
 *   bench_calls write PORT N     N 64-byte write()s on that socket
 *   bench_calls connect PORT N   N socket + connect + close (SO_LINGER 0)
 *   bench_calls epoll N          N epoll_wait(timeout 0) on a set of 8 pipes
 *   bench_calls poll N           N poll(timeout 0) on 8 pipe read ends
 *   bench_calls getaddrinfo N    N getaddrinfo("localhost") + freeaddrinfo
 *   bench_calls read N           N 64-byte read()s of /dev/zero
 *
 * Every measured call is made from a function of its own, `measured_CALL`
 * (measured_socket, measured_connect and measured_close in the connect
 * loop): callgrind's inclusive count of that function, divided by N, is
 * the call's own cost (its hook, the real function and the few
 * instructions of the wrapper), apart from the loop, the other calls and
 * process start-up. A few calls made first through `warm` (never through
 * measured_*) pay what a first call pays once (looking the real function
 * up, reading the config, setting the budgets up), which no later call
 * pays again. The ports are those of bench_net's sink (drain, abort).
 * Exit status 1 when a call fails. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define WARM 16
#define NOINLINE __attribute__((noinline, used))

static long count(const char *s)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < 0) {
        fprintf(stderr, "bench_calls: bad number '%s'\n", s);
        exit(2);
    }
    return v;
}

static _Noreturn void die(const char *what)
{
    perror(what);
    exit(1);
}

static struct sockaddr_in loopback(int port)
{
    struct sockaddr_in sin = {.sin_family = AF_INET,
                              .sin_port = htons((uint16_t)port)};
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return sin;
}

/* The measured calls: external, not inlined, so that callgrind counts each
 * under its own name. */
NOINLINE ssize_t measured_send(int fd, const void *buf, size_t len)
{
    return send(fd, buf, len, 0);
}

NOINLINE ssize_t measured_write(int fd, const void *buf, size_t len)
{
    return write(fd, buf, len);
}

NOINLINE int measured_socket(void)
{
    return socket(AF_INET, SOCK_STREAM, 0);
}

NOINLINE int measured_connect(int fd, const struct sockaddr_in *sin)
{
    return connect(fd, (const struct sockaddr *)sin, sizeof *sin);
}

NOINLINE int measured_close(int fd)
{
    return close(fd);
}

NOINLINE int measured_epoll_wait(int ep, struct epoll_event *out, int n)
{
    return epoll_wait(ep, out, n, 0);
}

NOINLINE int measured_poll(struct pollfd *pf, nfds_t n)
{
    return poll(pf, n, 0);
}

NOINLINE int measured_getaddrinfo(const char *name,
                                  const struct addrinfo *hints,
                                  struct addrinfo **res)
{
    return getaddrinfo(name, NULL, hints, res);
}

NOINLINE ssize_t measured_read(int fd, void *buf, size_t len)
{
    return read(fd, buf, len);
}

static int connected(int port)
{
    struct sockaddr_in sin = loopback(port);
    int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    if (fd < 0 || connect(fd, (struct sockaddr *)&sin, sizeof sin) != 0)
        die("connect");
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

static void sends(int port, long n, bool use_write)
{
    int fd = connected(port);
    char msg[64];
    memset(msg, 'x', sizeof msg);
    for (int i = 0; i < WARM; i++)
        if (send(fd, msg, sizeof msg, 0) != (ssize_t)sizeof msg ||
            write(fd, msg, sizeof msg) != (ssize_t)sizeof msg)
            die("send (warm)");
    for (long i = 0; i < n; i++) {
        ssize_t r = use_write ? measured_write(fd, msg, sizeof msg)
                              : measured_send(fd, msg, sizeof msg);
        if (r != (ssize_t)sizeof msg)
            die(use_write ? "write" : "send");
    }
    close(fd);
}

/* An abortive close leaves no TIME_WAIT: thousands of loops never run out
 * of ports. */
static void connects(int port, long n)
{
    struct sockaddr_in sin = loopback(port);
    struct linger lg = {.l_onoff = 1, .l_linger = 0};
    for (int i = 0; i < WARM; i++) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        if (fd < 0 || connect(fd, (struct sockaddr *)&sin, sizeof sin) != 0)
            die("connect (warm)");
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
        close(fd);
    }
    for (long i = 0; i < n; i++) {
        int fd = measured_socket();
        if (fd < 0 || measured_connect(fd, &sin) != 0)
            die("connect");
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
        if (measured_close(fd) != 0)
            die("close");
    }
}

/* Eight pipes nothing is written to: the wait reports nothing, and none
 * of the fds is a socket the shim holds. */
static void waits(long n, bool use_poll)
{
    struct pollfd pf[8];
    int ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0)
        die("epoll_create1");
    for (int i = 0; i < 8; i++) {
        int p[2];
        if (pipe(p) != 0)
            die("pipe");
        pf[i] = (struct pollfd){.fd = p[0], .events = POLLIN};
        struct epoll_event ev = {.events = EPOLLIN, .data.fd = p[0]};
        if (epoll_ctl(ep, EPOLL_CTL_ADD, p[0], &ev) != 0)
            die("epoll_ctl");
    }
    struct epoll_event out[8];
    for (int i = 0; i < WARM; i++)
        if (poll(pf, 8, 0) != 0 || epoll_wait(ep, out, 8, 0) != 0)
            die("wait (warm)");
    for (long i = 0; i < n; i++)
        if ((use_poll ? measured_poll(pf, 8)
                      : measured_epoll_wait(ep, out, 8)) != 0)
            die(use_poll ? "poll" : "epoll_wait");
}

static void resolves(long n)
{
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM};
    struct addrinfo *res;
    for (int i = 0; i < WARM; i++) {
        if (getaddrinfo("localhost", NULL, &hints, &res) != 0)
            die("getaddrinfo (warm)");
        freeaddrinfo(res);
    }
    for (long i = 0; i < n; i++) {
        if (measured_getaddrinfo("localhost", &hints, &res) != 0)
            die("getaddrinfo");
        freeaddrinfo(res);
    }
}

static void reads(long n)
{
    char buf[64];
    int fd = open("/dev/zero", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        die("/dev/zero");
    for (int i = 0; i < WARM; i++)
        if (read(fd, buf, sizeof buf) != (ssize_t)sizeof buf)
            die("read (warm)");
    for (long i = 0; i < n; i++)
        if (measured_read(fd, buf, sizeof buf) != (ssize_t)sizeof buf)
            die("read");
    close(fd);
}

int main(int argc, char **argv)
{
    const char *what = argc > 1 ? argv[1] : "";
    if (argc == 4 && strcmp(what, "send") == 0)
        sends((int)count(argv[2]), count(argv[3]), false);
    else if (argc == 4 && strcmp(what, "write") == 0)
        sends((int)count(argv[2]), count(argv[3]), true);
    else if (argc == 4 && strcmp(what, "connect") == 0)
        connects((int)count(argv[2]), count(argv[3]));
    else if (argc == 3 && strcmp(what, "epoll") == 0)
        waits(count(argv[2]), false);
    else if (argc == 3 && strcmp(what, "poll") == 0)
        waits(count(argv[2]), true);
    else if (argc == 3 && strcmp(what, "getaddrinfo") == 0)
        resolves(count(argv[2]));
    else if (argc == 3 && strcmp(what, "read") == 0)
        reads(count(argv[2]));
    else {
        fprintf(stderr, "usage: see the comment at the top of bench_calls.c\n");
        return 2;
    }
    return 0;
}
