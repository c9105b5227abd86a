/* stackdepth — how deep a wait call goes into its thread's stack while
 * the shim holds the socket it waits on (issue: at most 4 KiB of the
 * program's stack), on a thread with a 64 KiB stack.
 *
 *     stackdepth PORT      prints control=B poll=B select=B epoll=B
 *                          fails=N, a line each (B: bytes; N: waits that
 *                          did not report the socket)
 *
 * One non-blocking connection to 127.0.0.1:PORT. The stack below the
 * caller is painted, the call made, and the deepest byte it changed gives
 * the bytes it used. control: poll on the socket before any denial (the
 * shim's fast path). Then, for each call, 1-byte sends until the shim
 * denies one (the socket is held) and the call waits for the turn. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <unistd.h>

#define STACK (64 * 1024)
#define PAINT 0xa5
#define GAP 256 /* left unpainted below the caller: paint's own frame */

static unsigned char *lo;
static int fd, ep;
static int fails;

/* Not instrumented: under ASan the paint goes where no frame is now. */
__attribute__((noinline, no_sanitize_address)) static void
paint(unsigned char *below)
{
    for (volatile unsigned char *p = lo; p < below - GAP; p++)
        *p = PAINT;
}

__attribute__((noinline, no_sanitize_address)) static size_t
used(unsigned char *below)
{
    unsigned char *p = lo;
    while (p < below - GAP && *p == PAINT)
        p++;
    return (size_t)(below - p);
}

static int call(const char *what, int ms)
{
    if (strcmp(what, "poll") == 0) {
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        return poll(&p, 1, ms);
    }
    if (strcmp(what, "select") == 0) {
        fd_set w;
        FD_ZERO(&w);
        FD_SET(fd, &w);
        struct timeval tv = {ms / 1000, ms % 1000 * 1000};
        return select(fd + 1, NULL, &w, NULL, &tv);
    }
    struct epoll_event ev;
    return epoll_wait(ep, &ev, 1, ms);
}

__attribute__((noinline)) static size_t measure(const char *what, int ms)
{
    unsigned char here;
    paint(&here);
    int r = call(what, ms);
    if (r != 1)
        fails++;
    return used(&here);
}

static void hold(void)
{
    int n = 0;
    while (send(fd, "x", 1, 0) == 1)
        if (++n > 100000)
            exit(1); /* never denied */
    if (errno != EAGAIN)
        exit(1);
}

static void *run(void *arg)
{
    (void)arg;
    /* Bound once first: the lazy binding of a call's first use takes
     * stack of its own (the loader's). */
    call("poll", 0);
    call("select", 0);
    call("epoll", 0);
    size_t c = measure("poll", 0);
    hold();
    size_t p = measure("poll", 5000);
    hold();
    size_t s = measure("select", 5000);
    hold();
    size_t e = measure("epoll", 5000);
    printf("control=%zu\npoll=%zu\nselect=%zu\nepoll=%zu\nfails=%d\n", c, p,
           s, e, fails);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 2)
        return 2;
    fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)atoi(argv[1]))};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0 &&
        errno != EINPROGRESS)
        return 1;
    struct pollfd p = {.fd = fd, .events = POLLOUT};
    if (poll(&p, 1, 5000) != 1)
        return 1;
    ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLOUT, .data.fd = fd};
    if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) != 0)
        return 1;
    lo = mmap(NULL, STACK, PROT_READ | PROT_WRITE,
              MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (lo == MAP_FAILED)
        return 1;
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setstack(&at, lo, STACK);
    pthread_t t;
    if (pthread_create(&t, &at, run, NULL) != 0)
        return 1;
    pthread_join(t, NULL);
    return 0;
}
