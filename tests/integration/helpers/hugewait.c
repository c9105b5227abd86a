/* hugewait — wait calls with a timeout of 2^62 seconds on a socket the
 * shim holds (SPEC §2: a wait call never returns empty before the
 * caller's own timeout because of the shim; a huge one is "for ever").
 *
 *     hugewait PORT CALL...    CALL: ppoll select pselect epoll_pwait2
 *
 * One non-blocking connection to 127.0.0.1:PORT; for each CALL: 1-byte
 * sends until one fails with EAGAIN (denied by the shim), then the call
 * with a zero timeout (held: not writable) and with 2^62 s. Prints, per
 * call, "CALL held=R0 huge=R writable=W ms=T": R0 and R the results,
 * W 1 when the huge wait reported the socket writable. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* The call on fd for POLLOUT with a timeout of `sec` s; 1 when writable
 * in *w. */
static int wait_out(const char *call, int fd, int ep, time_t sec, int *w)
{
    struct timespec ts = {sec, 0};
    struct timeval tv = {sec, 0};
    *w = 0;
    if (strcmp(call, "ppoll") == 0) {
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        int r = ppoll(&p, 1, &ts, NULL);
        *w = r > 0 && (p.revents & POLLOUT);
        return r;
    }
    if (strcmp(call, "select") == 0 || strcmp(call, "pselect") == 0) {
        fd_set ws;
        FD_ZERO(&ws);
        FD_SET(fd, &ws);
        int r = call[0] == 's' ? select(fd + 1, NULL, &ws, NULL, &tv)
                               : pselect(fd + 1, NULL, &ws, NULL, &ts, NULL);
        *w = r > 0 && FD_ISSET(fd, &ws);
        return r;
    }
    struct epoll_event ev;
    int r = epoll_pwait2(ep, &ev, 1, &ts, NULL);
    *w = r > 0 && (ev.events & EPOLLOUT);
    return r;
}

int main(int argc, char **argv)
{
    if (argc < 3)
        return 2;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)atoi(argv[1]))};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0 &&
        errno != EINPROGRESS)
        return 1;
    struct pollfd p = {.fd = fd, .events = POLLOUT};
    if (poll(&p, 1, 5000) != 1)
        return 1;
    int ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLOUT, .data.fd = fd};
    if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) != 0)
        return 1;
    for (int i = 2; i < argc; i++) {
        int sent = 0;
        while (send(fd, "x", 1, 0) == 1)
            if (++sent > 100000)
                return 1; /* never denied */
        if (errno != EAGAIN)
            return 1;
        int w0, w;
        int r0 = wait_out(argv[i], fd, ep, 0, &w0);
        double t0 = now_ms();
        int r = wait_out(argv[i], fd, ep, (time_t)1 << 62, &w);
        printf("%s held=%d huge=%d writable=%d ms=%.0f\n", argv[i], r0, r, w,
               now_ms() - t0);
        fflush(stdout);
    }
    return 0;
}
