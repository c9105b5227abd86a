/* bench_net — the workloads of tests/bench/shim_overhead.py, timed from inside.
 *
 *   bench_net sink PORTFILE            listen on two ports of 127.0.0.1 and
 *                                      write "DRAIN ABORT" to PORTFILE: the
 *                                      first drains every connection, the
 *                                      second closes each one at once
 *   bench_net send PORT THREADS COUNT  COUNT 64-byte send()s per thread,
 *                                      one connection per thread
 *   bench_net write COUNT              COUNT 64-byte write()s to /dev/null
 *   bench_net connect PORT COUNT       COUNT connect + close (SO_LINGER 0)
 *
 * Prints the loop's elapsed nanoseconds on stdout: the driver compares
 * medians of alternating runs, so process start-up and the shim's load are
 * outside the figure. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static long arg_long(const char *s)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < 0) {
        fprintf(stderr, "bench_net: bad number '%s'\n", s);
        exit(2);
    }
    return v;
}

static void die(const char *what)
{
    perror(what);
    exit(1);
}

static int connect_to(int port)
{
    struct sockaddr_in sin = {.sin_family = AF_INET,
                              .sin_port = htons((uint16_t)port)};
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        die("socket");
    if (connect(fd, (struct sockaddr *)&sin, sizeof sin) != 0)
        die("connect");
    return fd;
}

static void *drain(void *arg)
{
    int fd = (int)(intptr_t)arg;
    char buf[65536];
    while (read(fd, buf, sizeof buf) > 0)
        ;
    close(fd);
    return NULL;
}

static int listen_any(void)
{
    int ls = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in sin = {.sin_family = AF_INET};
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(ls, (struct sockaddr *)&sin, sizeof sin) != 0 ||
        listen(ls, 4096) != 0)
        die("sink");
    return ls;
}

static int port_of(int ls)
{
    struct sockaddr_in sin;
    socklen_t len = sizeof sin;
    if (getsockname(ls, (struct sockaddr *)&sin, &len) != 0)
        die("getsockname");
    return ntohs(sin.sin_port);
}

/* The connect workload closes each connection at once: accepting and
 * closing inline keeps the accept queue short. A thread per connection
 * fell behind, the queue overflowed and dropped SYNs cost 1 s each. */
static void *accept_and_close(void *arg)
{
    int ls = (int)(intptr_t)arg;
    for (;;) {
        int c = accept(ls, NULL, NULL);
        if (c >= 0)
            close(c);
    }
    return NULL;
}

static _Noreturn void sink(const char *portfile)
{
    int drain_ls = listen_any(), abort_ls = listen_any();
    pthread_t t;
    if (pthread_create(&t, NULL, accept_and_close,
                       (void *)(intptr_t)abort_ls) != 0)
        die("pthread_create");
    FILE *f = fopen(portfile, "w");
    if (!f)
        die(portfile);
    fprintf(f, "%d %d\n", port_of(drain_ls), port_of(abort_ls));
    fclose(f);
    for (;;) {
        int c = accept(drain_ls, NULL, NULL);
        if (c < 0)
            continue;
        if (pthread_create(&t, NULL, drain, (void *)(intptr_t)c) == 0)
            pthread_detach(t);
        else
            close(c);
    }
}

struct sender {
    int port;
    long count;
    pthread_barrier_t *start;
};

static void *send_loop(void *arg)
{
    struct sender *s = arg;
    int fd = connect_to(s->port);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    char msg[64];
    memset(msg, 'x', sizeof msg);
    pthread_barrier_wait(s->start);
    for (long i = 0; i < s->count; i++)
        if (send(fd, msg, sizeof msg, 0) != (ssize_t)sizeof msg)
            die("send");
    close(fd);
    return NULL;
}

static uint64_t run_send(int port, int threads, long count)
{
    pthread_t tid[64];
    pthread_barrier_t start;
    struct sender s = {port, count, &start};
    if (threads < 1 || threads > 64)
        threads = 1;
    pthread_barrier_init(&start, NULL, (unsigned)threads + 1);
    for (int i = 0; i < threads; i++)
        if (pthread_create(&tid[i], NULL, send_loop, &s) != 0)
            die("pthread_create");
    pthread_barrier_wait(&start);
    uint64_t t0 = now_ns();
    for (int i = 0; i < threads; i++)
        pthread_join(tid[i], NULL);
    return now_ns() - t0;
}

static uint64_t run_write(long count)
{
    int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        die("/dev/null");
    char msg[64] = {0};
    uint64_t t0 = now_ns();
    for (long i = 0; i < count; i++)
        if (write(fd, msg, sizeof msg) != (ssize_t)sizeof msg)
            die("write");
    uint64_t dt = now_ns() - t0;
    close(fd);
    return dt;
}

static uint64_t run_connect(int port, long count)
{
    struct linger lg = {.l_onoff = 1, .l_linger = 0};
    uint64_t t0 = now_ns();
    for (long i = 0; i < count; i++) {
        int fd = connect_to(port);
        /* An abortive close leaves no TIME_WAIT, which would otherwise cap
         * the loop near 14k/s and hide any cost of ours. */
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
        close(fd);
    }
    return now_ns() - t0;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "sink") == 0)
        sink(argv[2]);
    uint64_t dt;
    if (argc == 5 && strcmp(argv[1], "send") == 0)
        dt = run_send((int)arg_long(argv[2]), (int)arg_long(argv[3]),
                      arg_long(argv[4]));
    else if (argc == 3 && strcmp(argv[1], "write") == 0)
        dt = run_write(arg_long(argv[2]));
    else if (argc == 4 && strcmp(argv[1], "connect") == 0)
        dt = run_connect((int)arg_long(argv[2]), arg_long(argv[3]));
    else {
        fprintf(stderr, "usage: see the comment at the top of bench_net.c\n");
        return 2;
    }
    printf("%llu\n", (unsigned long long)dt);
    return 0;
}
