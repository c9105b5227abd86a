/* stress_sink — a TCP sink on two loopback ports that counts, per port,
 * the connections it accepted and the bytes it received: what the storm
 * test measures at the receiving side.
 *
 *   stress_sink LOGFILE
 *
 * Prints "PORT <throttled> <untouched>" on stdout once listening. On
 * SIGTERM it keeps reading until nothing has arrived for 200 ms, then
 * writes to LOGFILE
 *     T <connections> <bytes>
 *     U <connections> <bytes>
 *     OPEN <connections still open>
 * and exits. One thread, epoll: it keeps up with hundreds of clients. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define TAG_LISTEN (1ull << 40)

static volatile sig_atomic_t stop;

static void on_term(int sig)
{
    (void)sig;
    stop = 1;
}

static void die(const char *what)
{
    perror(what);
    exit(1);
}

static int listen_any(int *port)
{
    int ls = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    if (ls < 0)
        die("socket");
    int one = 1;
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in sin = {.sin_family = AF_INET};
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof sin;
    if (bind(ls, (struct sockaddr *)&sin, sizeof sin) != 0 ||
        listen(ls, 4096) != 0 ||
        getsockname(ls, (struct sockaddr *)&sin, &len) != 0)
        die("listen");
    *port = ntohs(sin.sin_port);
    return ls;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: stress_sink LOGFILE\n");
        return 2;
    }
    struct sigaction sa = {.sa_handler = on_term};
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    int port[2], ls[2];
    ls[0] = listen_any(&port[0]);
    ls[1] = listen_any(&port[1]);
    int ep = epoll_create1(0);
    if (ep < 0)
        die("epoll");
    for (int i = 0; i < 2; i++) {
        struct epoll_event ev = {.events = EPOLLIN};
        ev.data.u64 = TAG_LISTEN | (unsigned)i;
        epoll_ctl(ep, EPOLL_CTL_ADD, ls[i], &ev);
    }
    printf("PORT %d %d\n", port[0], port[1]);
    fflush(stdout);

    unsigned long long conns[2] = {0, 0}, bytes[2] = {0, 0};
    long open_now = 0;
    static char buf[1 << 16];
    int quiet_ms = 0;
    for (;;) {
        struct epoll_event evs[64];
        int n = epoll_wait(ep, evs, 64, 50);
        if (n < 0 && errno != EINTR)
            die("epoll_wait");
        if (n <= 0) {
            if (stop && (quiet_ms += 50) >= 200)
                break;
            continue;
        }
        quiet_ms = 0;
        for (int i = 0; i < n; i++) {
            uint64_t d = evs[i].data.u64;
            if (d & TAG_LISTEN) {
                int which = (int)(d & 1);
                for (;;) {
                    int c = accept4(ls[which], NULL, NULL, SOCK_NONBLOCK);
                    if (c < 0)
                        break;
                    conns[which]++;
                    open_now++;
                    struct epoll_event ev = {.events = EPOLLIN};
                    ev.data.u64 = ((uint64_t)which << 32) | (unsigned)c;
                    epoll_ctl(ep, EPOLL_CTL_ADD, c, &ev);
                }
                continue;
            }
            int which = (int)(d >> 32);
            int c = (int)(d & 0xffffffffu);
            for (;;) {
                ssize_t r = read(c, buf, sizeof buf);
                if (r > 0) {
                    bytes[which] += (unsigned long long)r;
                    continue;
                }
                if (r < 0 && errno == EAGAIN)
                    break;
                if (r < 0 && errno == EINTR)
                    continue;
                close(c); /* EOF or reset */
                open_now--;
                break;
            }
        }
    }
    FILE *f = fopen(argv[1], "w");
    if (f == NULL)
        die(argv[1]);
    fprintf(f, "T %llu %llu\nU %llu %llu\nOPEN %ld\n", conns[0], bytes[0],
            conns[1], bytes[1], open_now);
    fclose(f);
    return 0;
}
