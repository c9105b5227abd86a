/* evloop — a single-threaded event-loop client in C, on edge-triggered
 * epoll (the way tokio/mio and Go register: once, EPOLLIN|EPOLLOUT|EPOLLET,
 * before the connect) or on select, for the event-loop tests (SPEC §2).
 *
 *   evloop et|select upload PORT FILE MIN
 *       one non-blocking connection to 127.0.0.1:PORT; writes FILE in
 *       64 KiB calls until EAGAIN, then waits for the loop to say
 *       writable, while a 50 ms timerfd ticks; prints sends=N eagain=N
 *       late_ms=(worst tick lateness)
 *   evloop et|select connects PORTA N PORTB MIN
 *       N non-blocking connects to 127.0.0.1:PORTA at once (each sends
 *       "a" once connected, then closes), while a 50 ms timerfd ticks and
 *       every 100 ms a connection to 127.0.0.2:PORTB sends "b"; runs until
 *       the N are done; prints a_done=N a_errors=N b_done=N
 *       late_ms=(worst tick lateness) b_ms=(worst B connect time)
 * Either way the timer keeps ticking until MIN seconds have passed.
 *   evloop - again PORT
 *       two non-blocking connects; on the second: connect again at once
 *       (as Twisted does), SO_ERROR, then poll for POLLOUT; prints
 *       again_errno=N so_error=N revents=N wait_ms=T sent=N
 *   evloop - sndtimeo PORT MS
 *       a blocking socket with SO_SNDTIMEO of MS ms (0: none) sends
 *       100,000 bytes twice; prints second_errno=N second_ms=T for the
 *       second send
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#define MAXFD 1024

static bool et;
static double min_end; /* the timer ticks until then at least */
static int ep = -1;
/* select: what each fd waits for. */
static bool want_w[MAXFD], want_r[MAXFD];

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void watch(int fd, bool w, bool r)
{
    if (fd >= MAXFD) {
        fprintf(stderr, "fd %d too high\n", fd);
        exit(2);
    }
    if (et) {
        struct epoll_event ev = {.events = EPOLLET, .data.fd = fd};
        ev.events |= (w ? EPOLLOUT : 0) | (r ? EPOLLIN : 0);
        if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) != 0) {
            perror("epoll_ctl");
            exit(2);
        }
    }
    want_w[fd] = w;
    want_r[fd] = r;
}

static void unwatch(int fd)
{
    want_w[fd] = want_r[fd] = false;
    /* close() drops the epoll registration. */
}

/* Wait: fds ready for writing (or hung up) in w[], reading in r[]. */
static int wait_ready(int *w, int *nw, int *r, int *nr, int ms)
{
    *nw = *nr = 0;
    if (et) {
        struct epoll_event ev[64];
        int n = epoll_wait(ep, ev, 64, ms);
        for (int i = 0; i < n; i++) {
            if (ev[i].events & (EPOLLOUT | EPOLLERR | EPOLLHUP))
                w[(*nw)++] = ev[i].data.fd;
            if (ev[i].events & EPOLLIN)
                r[(*nr)++] = ev[i].data.fd;
        }
        return n;
    }
    fd_set rs, ws;
    FD_ZERO(&rs);
    FD_ZERO(&ws);
    int top = 0;
    for (int fd = 0; fd < MAXFD; fd++) {
        if (want_w[fd])
            FD_SET(fd, &ws);
        if (want_r[fd])
            FD_SET(fd, &rs);
        if ((want_w[fd] || want_r[fd]) && fd + 1 > top)
            top = fd + 1;
    }
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    int n = select(top, &rs, &ws, NULL, ms < 0 ? NULL : &tv);
    for (int fd = 0; fd < top && n > 0; fd++) {
        if (FD_ISSET(fd, &ws))
            w[(*nw)++] = fd;
        if (FD_ISSET(fd, &rs))
            r[(*nr)++] = fd;
    }
    return n;
}

static int connect_to(const char *ip, int port)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    inet_pton(AF_INET, ip, &a.sin_addr);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    if (et)
        watch(fd, true, true); /* before the connect, as mio does */
    int r = connect(fd, (struct sockaddr *)&a, sizeof a);
    if (r != 0 && errno != EINPROGRESS) {
        fprintf(stderr, "connect: %s\n", strerror(errno));
        close(fd);
        return -1;
    }
    if (!et)
        watch(fd, true, false);
    return fd;
}

static int upload(int port, const char *path)
{
    int f = open(path, O_RDONLY);
    struct stat st;
    if (f < 0 || fstat(f, &st) != 0) {
        perror(path);
        return 2;
    }
    char *data = malloc((size_t)st.st_size + 1);
    if (read(f, data, (size_t)st.st_size) != st.st_size)
        return 2;
    close(f);
    int fd = connect_to("127.0.0.1", port);
    if (fd < 0)
        return 3;
    int tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK);
    struct itimerspec its = {{0, 50000000}, {0, 50000000}};
    timerfd_settime(tfd, 0, &its, NULL);
    watch(tfd, false, true);
    double next_tick = now() + 0.05, worst_late = 0;
    size_t off = 0, total = (size_t)st.st_size;
    long sends = 0, eagain = 0, waits = 0;
    bool writable = false;
    while (off < total) {
        if (!writable) {
            int w[64], r[64], nw, nr;
            waits++;
            if (wait_ready(w, &nw, r, &nr, 30000) <= 0) {
                fprintf(stderr, "wait timed out at %zu\n", off);
                return 4;
            }
            for (int i = 0; i < nw; i++)
                writable |= w[i] == fd;
            uint64_t exp = 0;
            if (nr > 0 && read(tfd, &exp, sizeof exp) == sizeof exp) {
                if (now() - next_tick > worst_late)
                    worst_late = now() - next_tick;
                next_tick += 0.05 * (double)exp;
            }
            continue;
        }
        size_t n = total - off < 65536 ? total - off : 65536;
        ssize_t k = send(fd, data + off, n, MSG_NOSIGNAL);
        sends++;
        /* The timer between sends too: a send that sleeps stalls it. */
        uint64_t ticked = 0;
        if (read(tfd, &ticked, sizeof ticked) == sizeof ticked) {
            if (now() - next_tick > worst_late)
                worst_late = now() - next_tick;
            next_tick += 0.05 * (double)ticked;
        }
        if (k > 0) {
            off += (size_t)k;
        } else if (errno == EAGAIN) {
            eagain++;
            writable = false; /* edge-triggered: wait for the next edge */
        } else if (errno != ENOTCONN) {
            perror("send");
            return 5;
        } else {
            writable = false;
        }
    }
    free(data);
    unwatch(fd);
    close(fd);
    while (now() < min_end) {
        int w[64], r[64], nw, nr;
        wait_ready(w, &nw, r, &nr, 1000);
        uint64_t exp = 0;
        if (nr > 0 && read(tfd, &exp, sizeof exp) == sizeof exp) {
            if (now() - next_tick > worst_late)
                worst_late = now() - next_tick;
            next_tick += 0.05 * (double)exp;
        }
    }
    printf("sends=%ld\neagain=%ld\nwaits=%ld\nlate_ms=%d\n", sends, eagain,
           waits, (int)(worst_late * 1000));
    return 0;
}

static int connects(int pa, int n, int pb)
{
    int tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK);
    struct itimerspec its = {{0, 50000000}, {0, 50000000}};
    timerfd_settime(tfd, 0, &its, NULL);
    watch(tfd, false, true);
    double next_tick = now() + 0.05, worst_late = 0, worst_b = 0;
    int kind[MAXFD] = {0}; /* 1: A, 2: B */
    double started[MAXFD] = {0};
    int a_done = 0, a_err = 0, b_done = 0, ticks = 0;
    for (int i = 0; i < n; i++) {
        int fd = connect_to("127.0.0.1", pa);
        if (fd < 0) {
            a_err++;
            continue;
        }
        kind[fd] = 1;
    }
    double end = now() + 30;
    while ((a_done + a_err < n || now() < min_end) && now() < end) {
        int w[64], r[64], nw, nr;
        wait_ready(w, &nw, r, &nr, 1000);
        for (int i = 0; i < nr; i++) {
            if (r[i] != tfd)
                continue;
            uint64_t exp = 0;
            if (read(tfd, &exp, sizeof exp) != sizeof exp)
                continue;
            double late = now() - next_tick;
            if (late > worst_late)
                worst_late = late;
            next_tick += 0.05 * (double)exp;
            ticks += (int)exp;
            if (ticks % 2 == 0) {
                int fd = connect_to("127.0.0.2", pb);
                if (fd >= 0) {
                    kind[fd] = 2;
                    started[fd] = now();
                }
            }
        }
        for (int i = 0; i < nw; i++) {
            int fd = w[i];
            if (kind[fd] == 0)
                continue;
            int err = 0;
            socklen_t l = sizeof err;
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &l);
            const char *msg = kind[fd] == 1 ? "a" : "b";
            if (err == 0 && send(fd, msg, 1, MSG_NOSIGNAL) == 1) {
                if (kind[fd] == 1) {
                    a_done++;
                } else {
                    b_done++;
                    if (now() - started[fd] > worst_b)
                        worst_b = now() - started[fd];
                }
            } else {
                fprintf(stderr, "fd %d: so_error %d send %s\n", fd, err,
                        strerror(errno));
                if (kind[fd] == 1)
                    a_err++;
            }
            kind[fd] = 0;
            unwatch(fd);
            close(fd);
        }
    }
    printf("a_done=%d\na_errors=%d\nb_done=%d\nlate_ms=%d\nb_ms=%d\n", a_done,
           a_err, b_done, (int)(worst_late * 1000), (int)(worst_b * 1000));
    return 0;
}

static int again(int port)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    int fds[2];
    for (int i = 0; i < 2; i++) {
        fds[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
        if (connect(fds[i], (struct sockaddr *)&a, sizeof a) != 0 &&
            errno != EINPROGRESS) {
            perror("connect");
            return 3;
        }
    }
    /* The first goes now: its byte marks the start at the server. */
    struct pollfd p0 = {.fd = fds[0], .events = POLLOUT};
    poll(&p0, 1, 1000);
    send(fds[0], "y", 1, MSG_NOSIGNAL);
    int fd = fds[1];
    int r = connect(fd, (struct sockaddr *)&a, sizeof a);
    int again_errno = r == 0 ? 0 : errno;
    int err = -1;
    socklen_t l = sizeof err;
    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &l);
    double t0 = now();
    struct pollfd p = {.fd = fd, .events = POLLOUT | POLLIN};
    int n = poll(&p, 1, 5000);
    double waited = now() - t0;
    int err2 = -1;
    l = sizeof err2;
    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err2, &l);
    ssize_t sent = send(fd, "x", 1, MSG_NOSIGNAL);
    printf("again_errno=%d\nso_error=%d\npolled=%d\nrevents=%d\n"
           "so_error_after=%d\nwait_ms=%d\nsent=%d\n",
           again_errno, err, n, p.revents, err2, (int)(waited * 1000),
           (int)sent);
    close(fds[0]);
    close(fd);
    return 0;
}

static int sndtimeo(int port, int ms)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        perror("connect");
        return 3;
    }
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    static char buf[100000];
    if (send(fd, buf, sizeof buf, MSG_NOSIGNAL) != (ssize_t)sizeof buf) {
        perror("first send");
        return 4;
    }
    double t0 = now();
    ssize_t r = send(fd, buf, sizeof buf, MSG_NOSIGNAL);
    int err = r < 0 ? errno : 0;
    printf("second_errno=%d\nsecond_ms=%d\n", err, (int)((now() - t0) * 1000));
    close(fd);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: see the comment at the top\n");
        return 2;
    }
    et = strcmp(argv[1], "et") == 0;
    if (et)
        ep = epoll_create1(EPOLL_CLOEXEC);
    if (strcmp(argv[2], "again") == 0 && argc == 4)
        return again(atoi(argv[3]));
    if (strcmp(argv[2], "sndtimeo") == 0 && argc == 5)
        return sndtimeo(atoi(argv[3]), atoi(argv[4]));
    min_end = now() + atof(argv[argc - 1]);
    if (strcmp(argv[2], "upload") == 0 && argc == 6)
        return upload(atoi(argv[3]), argv[4]);
    if (strcmp(argv[2], "connects") == 0 && argc == 7)
        return connects(atoi(argv[3]), atoi(argv[4]), atoi(argv[5]));
    fprintf(stderr, "bad arguments\n");
    return 2;
}
