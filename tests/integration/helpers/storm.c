/* storm — many threads mixing throttled and untouched calls, to be run
 * under the shim (several processes at once) against stress_sink.
 *
 *   storm TPORT UPORT SECONDS THREADS
 *
 * TPORT is covered by the test's rule, UPORT is not. Each thread keeps one
 * connection to each port and, until SECONDS have passed, picks at random:
 * a new connection to TPORT (sends 32 B, closes), send or write of 64 B on
 * its TPORT connection, send of 64 B on its UPORT connection, write to
 * /dev/null, an AF_UNIX round trip, and now and then a new connection to
 * UPORT. A throttled call may be denied (EAGAIN); an untouched one must
 * never fail or come back short. Prints one line, in one write:
 *   tconn=N tdeny=N tbytes=N tsdeny=N uconn=N ubytes=N ops=N errors=N
 *   over_ms=N
 * where tbytes/ubytes are what send/write returned, over_ms how long
 * after SECONDS the last thread ended (the call it was inside), and the
 * first unexpected error, if any, as err="...". Exits 0 unless it could
 * not start. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static int tport, uport;
static uint64_t deadline;
static _Atomic long tconn, tdeny, tbytes, tsdeny, uconn, ubytes, ops,
    errors;
static char first_err[160];
static atomic_flag err_taken = ATOMIC_FLAG_INIT;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void error(const char *what, int e)
{
    atomic_fetch_add(&errors, 1);
    if (!atomic_flag_test_and_set(&err_taken))
        snprintf(first_err, sizeof first_err, "%s: %s", what, strerror(e));
}

/* A blocking TCP connection to port; -1 with errno when it failed. */
static int dial(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

/* A connect to the throttled port: counted, and a denial is no error. */
static int dial_t(void)
{
    int fd = dial(tport);
    if (fd >= 0)
        atomic_fetch_add(&tconn, 1);
    else if (errno == EAGAIN)
        atomic_fetch_add(&tdeny, 1);
    else
        error("connect T", errno);
    return fd;
}

/* A send or write on the throttled connection. */
static void send_t(int *fd, bool use_write)
{
    if (*fd < 0) {
        *fd = dial_t();
        if (*fd < 0)
            return;
    }
    char msg[64];
    memset(msg, 't', sizeof msg);
    ssize_t r = use_write ? write(*fd, msg, sizeof msg)
                          : send(*fd, msg, sizeof msg, MSG_NOSIGNAL);
    if (r > 0)
        atomic_fetch_add(&tbytes, r);
    else if (r < 0 && errno == EAGAIN)
        atomic_fetch_add(&tsdeny, 1);
    else
        error(use_write ? "write T" : "send T", r < 0 ? errno : EIO);
}

static void full(int fd, const char *what, ssize_t r, size_t want)
{
    (void)fd;
    if (r != (ssize_t)want)
        error(what, r < 0 ? errno : EIO);
}

static void *storm(void *arg)
{
    uint64_t rnd = (uint64_t)(uintptr_t)arg * 0x9e3779b97f4a7c15u + now_ns();
    int t = -1, u = dial(uport);
    if (u < 0)
        error("connect U", errno);
    else
        atomic_fetch_add(&uconn, 1);
    int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
    int sp[2];
    if (null < 0 || socketpair(AF_UNIX, SOCK_STREAM, 0, sp) != 0) {
        error("open", errno);
        return NULL;
    }
    uint64_t next_udial = 0;
    char msg[64], back[64];
    memset(msg, 'u', sizeof msg);
    while (now_ns() < deadline) {
        rnd ^= rnd << 13;
        rnd ^= rnd >> 7;
        rnd ^= rnd << 17;
        unsigned op = (unsigned)(rnd % 100);
        atomic_fetch_add_explicit(&ops, 1, memory_order_relaxed);
        if (op < 10) {
            int fd = dial_t();
            if (fd >= 0) {
                char hi[32];
                memset(hi, 'c', sizeof hi);
                ssize_t r = send(fd, hi, sizeof hi, MSG_NOSIGNAL);
                if (r > 0)
                    atomic_fetch_add(&tbytes, r);
                else if (r < 0 && errno == EAGAIN)
                    atomic_fetch_add(&tsdeny, 1);
                else
                    error("send T new", r < 0 ? errno : EIO);
                close(fd);
            }
        } else if (op < 35) {
            send_t(&t, false);
        } else if (op < 55) {
            send_t(&t, true);
        } else if (op < 70) {
            full(null, "write /dev/null", write(null, msg, sizeof msg),
                 sizeof msg);
        } else if (op < 85) {
            if (u >= 0) {
                ssize_t r = send(u, msg, sizeof msg, MSG_NOSIGNAL);
                full(u, "send U", r, sizeof msg);
                if (r > 0)
                    atomic_fetch_add(&ubytes, r);
            }
        } else if (op < 95) {
            full(sp[0], "write unix", write(sp[0], msg, sizeof msg),
                 sizeof msg);
            full(sp[1], "read unix", read(sp[1], back, sizeof back),
                 sizeof back);
        } else if (now_ns() >= next_udial) {
            /* Rare: a TIME_WAIT per connection must not run out ports. */
            next_udial = now_ns() + 250000000u;
            int fd = dial(uport);
            if (fd < 0) {
                error("connect U new", errno);
                continue;
            }
            atomic_fetch_add(&uconn, 1);
            ssize_t r = send(fd, msg, 16, MSG_NOSIGNAL);
            full(fd, "send U new", r, 16);
            if (r > 0)
                atomic_fetch_add(&ubytes, r);
            close(fd);
        }
    }
    if (t >= 0)
        close(t);
    if (u >= 0)
        close(u);
    close(null);
    close(sp[0]);
    close(sp[1]);
    return NULL;
}

static long number(const char *s)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v <= 0 || v > 65535) {
        fprintf(stderr, "storm: bad number '%s'\n", s);
        exit(2);
    }
    return v;
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: storm TPORT UPORT SECONDS THREADS\n");
        return 2;
    }
    tport = (int)number(argv[1]);
    uport = (int)number(argv[2]);
    long secs = number(argv[3]);
    long n = number(argv[4]);
    if (n > 256)
        n = 256;
    deadline = now_ns() + (uint64_t)secs * 1000000000u;
    pthread_t tid[256];
    for (long i = 0; i < n; i++)
        if (pthread_create(&tid[i], NULL, storm, (void *)(uintptr_t)i) != 0) {
            perror("pthread_create");
            return 1;
        }
    for (long i = 0; i < n; i++)
        pthread_join(tid[i], NULL);
    uint64_t end = now_ns();
    long over_ms = end > deadline ? (long)((end - deadline) / 1000000u) : 0;
    char line[512];
    int len = snprintf(line, sizeof line,
                       "tconn=%ld tdeny=%ld tbytes=%ld tsdeny=%ld uconn=%ld "
                       "ubytes=%ld ops=%ld errors=%ld over_ms=%ld "
                       "err=\"%s\"\n",
                       tconn, tdeny, tbytes, tsdeny, uconn, ubytes, ops,
                       errors, over_ms, first_err);
    if (write(1, line, (size_t)len) != len)
        return 1;
    return 0;
}
