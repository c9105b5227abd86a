/* static_client — a client the preload cannot reach: built with
 * `gcc -static` by the seccomp tests, it makes raw-enough calls (no
 * dynamic libc, so no LD_PRELOAD) against 127.0.0.1:PORT and prints what
 * it saw as key=value lines.
 *
 *   static_client connect PORT N [PAUSE_MS]  N blocking connects, each
 *                                  sends "GET /" and reads the answer
 *   static_client nbconnect PORT N  the same with non-blocking sockets
 *                                  (connect, poll, SO_ERROR)
 *   static_client udp PORT N       N sendto of 100 bytes
 *   static_client count N          N getppid calls (a call the filter
 *                                  does not name), prints ns per call
 *   static_client sendto PORT N    N sendto as fast as it can, prints ns
 *                                  per call (the intercepted-call cost)
 *   static_client uring            io_uring_setup: prints uring=fd or
 *                                  uring=ERRNO-NAME
 *   static_client hold PORT N MS   N connects one after another, each kept
 *                                  open; MS ms later all closed politely
 *                                  (shutdown, wait for the server's close)
 *   static_client forks PORT N MS  N processes at once, each connects,
 *                                  keeps it MS ms and closes politely;
 *                                  they exit when all have closed
 *   static_client paths PORT       max_open = 2: what gives a place back
 *                                  (close, dup2, close_range, exit), one
 *                                  line each: third= after_close=
 *                                  after_dup2= after_close_range=
 *                                  after_exit=
 *   static_client closes N         N socket+close pairs, prints ns per pair
 *   static_client connects PORT N  N socket + connect + close (SO_LINGER 0:
 *                                  no TIME_WAIT), prints ns per call
 *   static_client stuck PORT N     4 threads make blocking connects that
 *                                  cannot complete (to a listener of its
 *                                  own whose queue is full: the SYN is
 *                                  dropped; TCP_SYNCNT 2: ETIMEDOUT after
 *                                  some 7 s) while this one makes N
 *                                  connects to PORT as `connect` does;
 *                                  then stuck_waiting=K: how many of the 4
 *                                  had not returned yet
 *   static_client flip PORT N      a thread flips the family of one shared
 *                                  address between AF_UNIX and AF_INET
 *                                  (127.0.0.1:PORT) while this one makes N
 *                                  connects of inet stream sockets to it:
 *                                  ok= (connected) fail= (refused by the
 *                                  budget) unix= (EAFNOSUPPORT: the kernel
 *                                  read AF_UNIX) other=
 *
 * Output: pid=P first; then ok=K fail=F err=NAME (the last errno seen,
 * or none), done=1. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static struct sockaddr_in target(int port)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return a;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static const char *name(int e)
{
    switch (e) {
    case 0:
        return "none";
    case EAGAIN:
        return "EAGAIN";
    case ENOSYS:
        return "ENOSYS";
    case ECONNREFUSED:
        return "ECONNREFUSED";
    case EINPROGRESS:
        return "EINPROGRESS";
    case ETIMEDOUT:
        return "ETIMEDOUT";
    default:
        return strerror(e);
    }
}

/* One GET on a connected socket: 0 when an answer came back. */
static int get(int s)
{
    static const char req[] = "GET / HTTP/1.0\r\nHost: x\r\n\r\n";
    char buf[512];
    if (write(s, req, sizeof req - 1) != (ssize_t)(sizeof req - 1))
        return errno;
    ssize_t n = read(s, buf, sizeof buf);
    return n > 0 ? 0 : (n == 0 ? EPIPE : errno);
}

static int one_connect(int port, int nonblock)
{
    struct sockaddr_in a = target(port);
    int s = socket(AF_INET, SOCK_STREAM | (nonblock ? SOCK_NONBLOCK : 0), 0);
    int err = 0;
    if (s < 0)
        return errno;
    if (connect(s, (struct sockaddr *)&a, sizeof a) != 0) {
        err = errno;
        if (nonblock && err == EINPROGRESS) {
            struct pollfd p = {.fd = s, .events = POLLOUT};
            socklen_t l = sizeof err;
            poll(&p, 1, 5000);
            err = 0;
            getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &l);
            if (err == 0)
                fcntl(s, F_SETFL, 0);
        }
    }
    if (err == 0)
        err = get(s);
    close(s);
    return err;
}

/* A blocking connect: the socket, or -errno. */
static int open_one(int port)
{
    struct sockaddr_in a = target(port);
    int s = socket(AF_INET, SOCK_STREAM, 0);
    if (s < 0)
        return -errno;
    if (connect(s, (struct sockaddr *)&a, sizeof a) != 0) {
        int e = errno;
        close(s);
        return -e;
    }
    return s;
}

/* Close after the server has: its count of open connections goes down
 * before this place can be given to another connect. */
static void polite(int s)
{
    char buf[64];
    shutdown(s, SHUT_WR);
    while (read(s, buf, sizeof buf) > 0)
        ;
}

static void polite_close(int s)
{
    polite(s);
    close(s);
}

/* How many of `n` connects succeed now (they are closed politely after). */
static int try_open(int port, int n)
{
    int s[8], ok = 0;
    for (int i = 0; i < n && i < 8; i++)
        if ((s[ok] = open_one(port)) >= 0)
            ok++;
    for (int i = 0; i < ok; i++)
        polite_close(s[i]);
    return ok;
}

/* max_open = 2: each way of giving an fd up gives its place back. */
static void paths(int port)
{
    int a = open_one(port), b = open_one(port);
    if (a < 0 || b < 0) {
        printf("error=first two: %s\n", name(a < 0 ? -a : -b));
        return;
    }
    printf("third=%d\n", try_open(port, 1));
    polite_close(a);
    printf("after_close=%d\n", try_open(port, 1));
    /* Both places held again; dup2 of another fd over b closes b's
     * connection. */
    a = open_one(port);
    polite(b);
    int other = socket(AF_INET, SOCK_DGRAM, 0);
    if (a < 0 || dup2(other, b) != b)
        printf("error=refill or dup2: %s\n", name(a < 0 ? -a : errno));
    printf("after_dup2=%d\n", try_open(port, 1));
    close(b);
    close(other);
    /* a and c held; close_range over both. */
    int c = open_one(port);
    if (c < 0)
        printf("error=refill: %s\n", name(-c));
    polite(a);
    polite(c);
    int lo = a < c ? a : c, hi = a < c ? c : a;
    if (syscall(SYS_close_range, lo, hi, 0) != 0)
        printf("error=close_range: %s\n", name(errno));
    printf("after_close_range=%d\n", try_open(port, 2));
    /* A process that exits holding two: its places come back. */
    pid_t pid = fork();
    if (pid == 0) {
        int x = open_one(port), y = open_one(port);
        _exit(x >= 0 && y >= 0 ? 0 : 1);
    }
    int st = 1;
    waitpid(pid, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        printf("error=the child could not open two\n");
    /* The kernel closed them at its exit: wait until the server has. */
    usleep(200 * 1000);
    printf("after_exit=%d\n", try_open(port, 2));
}

/* One address, its family flipped by a thread of its own. Only the
 * family word changes (one aligned 16-bit store): the bytes after it stay
 * 127.0.0.1:PORT, so a read at any moment is either a whole inet address
 * or an AF_UNIX one (a short relative path made of the same bytes; the
 * socket is inet, so the kernel refuses it with EAFNOSUPPORT), never a torn
 * address that would send a SYN elsewhere. */
static union {
    struct sockaddr_un un;
    struct sockaddr_in in;
    _Atomic unsigned short fam;
} flipped;
static atomic_int flipping = 1;

static void *flipper(void *arg)
{
    (void)arg;
    while (atomic_load_explicit(&flipping, memory_order_relaxed))
        for (int i = 0; i < 64; i++)
            atomic_store_explicit(&flipped.fam, i & 1 ? AF_INET : AF_UNIX,
                                  memory_order_relaxed);
    return NULL;
}

static void flip(int port, long n)
{
    long ok = 0, fail = 0, unix_ = 0, other = 0;
    int last = 0;
    pthread_t th;
    flipped.in = target(port);
    if (pthread_create(&th, NULL, flipper, NULL) != 0) {
        printf("error=pthread_create\n");
        return;
    }
    for (long i = 0; i < n; i++) {
        int s = socket(AF_INET, SOCK_STREAM, 0);
        if (s < 0) {
            other++;
            last = errno;
            continue;
        }
        if (connect(s, (struct sockaddr *)&flipped, sizeof flipped.un) == 0)
            ok++;
        else if (errno == EAFNOSUPPORT)
            unix_++;
        else if (errno == EAGAIN)
            fail++;
        else {
            other++;
            last = errno;
        }
        close(s);
    }
    atomic_store(&flipping, 0);
    pthread_join(th, NULL);
    printf("ok=%ld\nfail=%ld\nunix=%ld\nother=%ld\nerr=%s\ndone=1\n", ok, fail,
           unix_, other, name(last));
}

/* The stuck connects: their listener, and how many have returned. */
#define STUCK 4
static int full_port;
static atomic_int stuck_returned;

static void *stuck_connect(void *arg)
{
    (void)arg;
    struct sockaddr_in a = target(full_port);
    int s = socket(AF_INET, SOCK_STREAM, 0), two = 2;
    setsockopt(s, IPPROTO_TCP, TCP_SYNCNT, &two, sizeof two);
    connect(s, (struct sockaddr *)&a, sizeof a);
    atomic_fetch_add(&stuck_returned, 1);
    return NULL;
}

/* A listener on 127.0.0.1 with a queue of one that is full: a connect to
 * it waits for a SYN-ACK that never comes. Its port, or -1. */
static int full_listener(void)
{
    struct sockaddr_in a = target(0);
    socklen_t l = sizeof a;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        listen(fd, 0) != 0 || getsockname(fd, (struct sockaddr *)&a, &l) != 0)
        return -1;
    int port = ntohs(a.sin_port);
    return open_one(port) >= 0 ? port : -1; /* the one the queue holds */
}

static void stuck(int port, long n)
{
    int ok = 0, fail = 0, last = 0;
    pthread_t th;
    full_port = full_listener();
    for (int i = 0; i < STUCK; i++)
        if (full_port < 0 ||
            pthread_create(&th, NULL, stuck_connect, NULL) != 0) {
            printf("error=the stuck connects: %s\n", name(errno));
            return;
        }
    usleep(200 * 1000); /* they wait in their connects by now */
    for (long i = 0; i < n; i++) {
        int e = one_connect(port, 0);
        if (e == 0)
            ok++;
        else {
            fail++;
            last = e;
        }
    }
    printf("stuck_waiting=%d\n", STUCK - atomic_load(&stuck_returned));
    printf("ok=%d\nfail=%d\nerr=%s\ndone=1\n", ok, fail, name(last));
}

int main(int argc, char **argv)
{
    if (argc < 2 || (argc < 3 && strcmp(argv[1], "uring") != 0)) {
        fprintf(stderr, "usage: static_client MODE ARGS\n");
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    printf("pid=%d\n", (int)getpid());
    const char *mode = argv[1];
    int ok = 0, fail = 0, last = 0;
    if (strcmp(mode, "uring") == 0) {
        char params[120]; /* struct io_uring_params */
        memset(params, 0, sizeof params);
        long fd = syscall(SYS_io_uring_setup, 4, params);
        if (fd >= 0)
            printf("uring=fd\n");
        else
            printf("uring=%s\n", name(errno));
        return 0;
    }
    if (strcmp(mode, "count") == 0) {
        long n = atol(argv[2]);
        double t0 = now();
        for (long i = 0; i < n; i++)
            getppid();
        printf("ns_per_call=%.1f\n", (now() - t0) * 1e9 / (double)n);
        return 0;
    }
    if (strcmp(mode, "closes") == 0) {
        long n = atol(argv[2]);
        double t0 = now();
        for (long i = 0; i < n; i++)
            close(socket(AF_INET, SOCK_STREAM, 0));
        printf("ns_per_pair=%.1f\n", (now() - t0) * 1e9 / (double)n);
        return 0;
    }
    int port = atoi(argv[2]);
    long n = argc > 3 ? atol(argv[3]) : 1;
    int hold_ms = argc > 4 ? atoi(argv[4]) : 0;
    if (strcmp(mode, "connects") == 0) {
        struct sockaddr_in a = target(port);
        struct linger lg = {.l_onoff = 1, .l_linger = 0};
        double t0 = now();
        for (long i = 0; i < n; i++) {
            int s = socket(AF_INET, SOCK_STREAM, 0);
            if (s < 0 || connect(s, (struct sockaddr *)&a, sizeof a) != 0) {
                printf("error=%s\n", name(errno));
                return 1;
            }
            setsockopt(s, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
            close(s);
        }
        printf("ns_per_call=%.1f\n", (now() - t0) * 1e9 / (double)n);
        return 0;
    }
    if (strcmp(mode, "stuck") == 0) {
        stuck(port, n);
        return 0;
    }
    if (strcmp(mode, "flip") == 0) {
        flip(port, n);
        return 0;
    }
    if (strcmp(mode, "paths") == 0) {
        paths(port);
        printf("done=1\n");
        return 0;
    }
    if (strcmp(mode, "hold") == 0) {
        int held[64], k = 0;
        for (long i = 0; i < n && i < 64; i++) {
            int s = open_one(port);
            if (s >= 0)
                held[k++] = s;
            else {
                fail++;
                last = -s;
            }
        }
        usleep((useconds_t)hold_ms * 1000);
        for (int i = 0; i < k; i++)
            polite_close(held[i]);
        ok = k;
    } else if (strcmp(mode, "forks") == 0) {
        /* Each child stays alive until all have closed: a place must come
         * back at the close, not at the exit. */
        int done[2], go[2];
        char c = 0;
        if (pipe(done) != 0 || pipe(go) != 0)
            return 1;
        for (long i = 0; i < n; i++)
            if (fork() == 0) {
                close(go[1]);
                int s = open_one(port);
                if (s >= 0) {
                    usleep((useconds_t)hold_ms * 1000);
                    polite_close(s);
                }
                c = s >= 0 ? 'y' : 'n';
                if (write(done[1], &c, 1) != 1 || read(go[0], &c, 1) != 0)
                    _exit(2);
                _exit(s >= 0 ? 0 : 1);
            }
        close(go[0]);
        for (long i = 0; i < n && read(done[0], &c, 1) == 1; i++)
            ;
        close(go[1]);
        int st;
        while (wait(&st) > 0)
            if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
                ok++;
            else
                fail++;
    } else if (strcmp(mode, "connect") == 0 || strcmp(mode, "nbconnect") == 0) {
        int pause_ms = argc > 4 ? atoi(argv[4]) : 0;
        for (long i = 0; i < n; i++) {
            int e = one_connect(port, mode[0] == 'n');
            if (e == 0) {
                ok++;
            } else {
                fail++;
                last = e;
                printf("error=%s\n", name(e));
            }
            if (pause_ms > 0)
                usleep((useconds_t)pause_ms * 1000);
        }
    } else if (strcmp(mode, "udp") == 0 || strcmp(mode, "sendto") == 0) {
        struct sockaddr_in a = target(port);
        char buf[100];
        memset(buf, 'u', sizeof buf);
        int s = socket(AF_INET, SOCK_DGRAM, 0);
        double t0 = now();
        for (long i = 0; i < n; i++) {
            if (sendto(s, buf, sizeof buf, 0, (struct sockaddr *)&a,
                       sizeof a) == (ssize_t)sizeof buf) {
                ok++;
            } else {
                fail++;
                last = errno;
            }
        }
        if (mode[1] == 'e')
            printf("ns_per_call=%.1f\n", (now() - t0) * 1e9 / (double)n);
        close(s);
    } else {
        fprintf(stderr, "unknown mode %s\n", mode);
        return 2;
    }
    printf("ok=%d\nfail=%d\nerr=%s\ndone=1\n", ok, fail, name(last));
    return 0;
}
