/* fleet_client — many processes and threads making connects, for the
 * fleet-budget tests. Runs under the shim; the server counts.
 *
 *   fleet_client connects PORT PROCS THREADS SECONDS
 *
 * Forks PROCS processes of THREADS threads; each thread connects to
 * 127.0.0.1:PORT and closes, again and again, for SECONDS (a denied
 * connect sleeps 2 ms before the next). Prints, summed over all:
 *   ok=N denied=N slowest_us=N
 * where slowest_us is the longest a single connect call took (a decision
 * waiting on Redis must be bounded).
 *
 * FLEET_SWEEP=1: after each connect, the thread closes every descriptor
 * from 3 up (close_range, as daemons and spawn helpers do), the shim's
 * connection to Redis included. FLEET_PARENT_FIRST=1: the parent makes
 * one connect before it forks (so that the children inherit a process
 * that has a connection to Redis: each must open its own);
 * FLEET_PARENT_TOO=1: the parent runs THREADS threads of its own as well
 * (its connection and its children's are then in use at once).
 * FLEET_PORT2=P: every other thread connects to 127.0.0.2:P instead (a
 * second destination). FLEET_HOST=A: connect to the IPv4 address A
 * rather than 127.0.0.1 (a simulated host in a network namespace of its
 * own reaches the server on a bridge). FLEET_DENY_SLEEP_MS=N: a denied
 * connect sleeps N ms (default 2) before the next (hundreds of threads
 * on a small machine).
 *
 *   fleet_client sends PORT PROCS RATE SECONDS
 *
 * Forks PROCS processes; each opens one connection to 127.0.0.1:PORT and
 * sends one byte per send() at RATE a second (paced, a denied send is not
 * tried again) for SECONDS. FLEET_CHAOS=K: the parent SIGKILLs one of its
 * children at random, K times spread over the first
 * FLEET_CHAOS_SECS (default: half the run), and forks a replacement each
 * time. Prints ok=N denied=N kills=N (ok and denied as the children
 * counted them; the server counts what arrived).
 *
 *   fleet_client sweep PORT THREADS SECONDS
 *
 * One process: one connect first (the shim's connection to Redis opens
 * then, before any number is taken), then fills every free fd number below
 * 512 with a copy of one end W of a socketpair, and starts THREADS threads
 * of connect loops while one thread dup2s W over every number from 3 to
 * 511 that is not its own, again and again, for SECONDS (the shim's own
 * descriptors included, should any be down there). A number it finds
 * closed, or holding something other than W, was closed or taken by
 * someone else; bytes arriving at the socketpair's other end were written
 * by someone else. Prints ok=N denied=N lost=N foreign=N passes=N.
 * FLEET_REDIS_PORT=P: just before the sweep starts, Redis on 127.0.0.1:P is
 * kept busy for 150 ms (a Lua loop), so that the shim is in the middle of
 * a call on its connection when the first pass goes over the numbers.
 *
 *   fleet_client stderr PORT
 *
 * Connects a socket to 127.0.0.1:PORT, makes it fd 2, and execs itself as
 * `stderr-child PORT`: a process whose stderr is an inherited connected
 * socket, which makes one connect to PORT, writes "child\n" (6 bytes) to
 * fd 2 and exits. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct totals {
    _Atomic long ok, denied, slowest_us;
};

static struct totals *tot;
static int port;
static double seconds;
static int sweep, once;
static int port2;
static _Atomic int nthreads;
static uint32_t host_addr;     /* network order; 127.0.0.1 by default */
static useconds_t deny_sleep = 2000;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *worker(void *arg)
{
    double end = *(double *)arg;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    a.sin_addr.s_addr = host_addr;
    if (port2 != 0 && atomic_fetch_add(&nthreads, 1) % 2 == 1) {
        a.sin_port = htons(port2);
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK + 1);
    }
    while (now_s() < end) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        if (fd < 0)
            break;
        double t0 = now_s();
        int r = connect(fd, (struct sockaddr *)&a, sizeof a);
        long us = (long)((now_s() - t0) * 1e6);
        long cur = atomic_load(&tot->slowest_us);
        while (us > cur &&
               !atomic_compare_exchange_weak(&tot->slowest_us, &cur, us))
            ;
        close(fd);
        if (sweep)
            syscall(SYS_close_range, 3u, ~0u, 0u);
        if (r == 0) {
            atomic_fetch_add(&tot->ok, 1);
            if (once)
                break;
        } else {
            atomic_fetch_add(&tot->denied, 1);
            usleep(deny_sleep);
        }
    }
    return NULL;
}

/* One connection, one byte per send at `rate`/s until `end`. */
static void sender(double rate, double end)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0)
        _exit(1);
    double next = now_s();
    while (now_s() < end) {
        ssize_t r = send(fd, "x", 1, MSG_NOSIGNAL);
        if (r == 1) {
            atomic_fetch_add(&tot->ok, 1);
        } else if (errno == EPIPE || errno == ECONNRESET || errno == EBADF) {
            break;
        } else {
            atomic_fetch_add(&tot->denied, 1);
        }
        next += 1.0 / rate;
        double w = next - now_s();
        if (w > 0)
            usleep((useconds_t)(w * 1e6));
    }
    close(fd);
    _exit(0);
}

static pid_t spawn_sender(double rate, double end)
{
    pid_t pid = fork();
    if (pid == 0)
        sender(rate, end);
    return pid;
}

static int sends(int procs, double rate)
{
    pid_t kids[64];
    int n = procs < 64 ? procs : 64, kills = 0;
    const char *chaos = getenv("FLEET_CHAOS");
    const char *csecs = getenv("FLEET_CHAOS_SECS");
    int k = chaos != NULL ? atoi(chaos) : 0;
    double span = csecs != NULL ? atof(csecs) : seconds / 2;
    double t0 = now_s(), end = t0 + seconds;
    for (int i = 0; i < n; i++)
        kids[i] = spawn_sender(rate, end);
    srand((unsigned)getpid());
    for (int j = 0; j < k; j++) {
        double at = t0 + span * (j + 1) / (k + 1);
        while (now_s() < at)
            usleep(1000);
        int i = rand() % n;
        if (kill(kids[i], SIGKILL) == 0) {
            waitpid(kids[i], NULL, 0);
            kills++;
        }
        kids[i] = spawn_sender(rate, end);
    }
    while (wait(NULL) > 0)
        ;
    printf("ok=%ld denied=%ld kills=%d\n", atomic_load(&tot->ok),
           atomic_load(&tot->denied), kills);
    return 0;
}

/* ---- sweep ---------------------------------------------------------------*/

#define SWEEP_TOP 512 /* RL_SYS_FD_FLOOR: the shim keeps its fds above */

static int sp[2];
static _Atomic int sweeping;
static _Atomic long lost, foreign, passes;

static bool own_fd(int n)
{
    return n <= 2 || n == sp[0] || n == sp[1];
}

static void *sweeper(void *arg)
{
    double end = *(double *)arg;
    struct stat w;
    if (fstat(sp[0], &w) != 0)
        _exit(1);
    while (now_s() < end) {
        for (int n = 3; n < SWEEP_TOP; n++) {
            if (own_fd(n))
                continue;
            /* From the second pass on every number holds W: anything
             * else is someone else's doing (the first finds what was
             * open before the fill, and takes it over). */
            struct stat st;
            bool gone = fcntl(n, F_GETFD) < 0 || fstat(n, &st) != 0;
            if (atomic_load(&passes) > 0 &&
                (gone || st.st_ino != w.st_ino || st.st_dev != w.st_dev)) {
                atomic_fetch_add(&lost, 1);
                fprintf(stderr, "fd %d %s\n", n, gone ? "closed" : "taken");
            }
            if (dup2(sp[0], n) < 0)
                _exit(1);
        }
        atomic_fetch_add(&passes, 1);
    }
    atomic_store(&sweeping, 0);
    return NULL;
}

/* Whatever arrives at W's peer: written into one of the program's
 * numbers by someone else. */
static void *drain(void *arg)
{
    (void)arg;
    char buf[4096];
    while (atomic_load(&sweeping)) {
        struct pollfd p = {.fd = sp[1], .events = POLLIN};
        if (poll(&p, 1, 20) <= 0)
            continue;
        ssize_t r = recv(sp[1], buf, sizeof buf, MSG_DONTWAIT);
        if (r > 0)
            atomic_fetch_add(&foreign, r);
    }
    return NULL;
}

/* Redis on 127.0.0.1:port busy for 150 ms from now; the socket (its reply
 * is not waited for). */
static int redis_busy(int rport)
{
    static const char lua[] =
        "local t = redis.call('TIME') "
        "local t0 = t[1] * 1000000 + t[2] "
        "while true do "
        "  local n = redis.call('TIME') "
        "  if n[1] * 1000000 + n[2] - t0 > 150000 then return 1 end "
        "end";
    char cmd[512];
    int n = snprintf(cmd, sizeof cmd, "*3\r\n$4\r\nEVAL\r\n$%zu\r\n%s\r\n$1\r\n0\r\n",
                     sizeof lua - 1, lua);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(rport)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        send(fd, cmd, (size_t)n, MSG_NOSIGNAL) != n)
        _exit(1);
    return fd;
}

static int sweep_run(int threads)
{
    /* The shim's connection to Redis opens with this first decision,
     * while the low numbers are free. */
    double first = now_s() + 5;
    once = 1;
    worker(&first);
    once = 0;
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) != 0)
        return 1;
    /* The fill: every free number below the floor holds W, so that the
     * program's own sockets (and a shim that opens anything) land above
     * it, and the sweep below replaces only W and whatever the shim left
     * down here. */
    for (int n = 3; n < SWEEP_TOP; n++)
        if (!own_fd(n) && fcntl(n, F_GETFD) < 0 && dup2(sp[0], n) < 0)
            return 1;
    atomic_store(&sweeping, 1);
    double end = now_s() + seconds;
    pthread_t sw, dr, th[64];
    int n = threads < 64 ? threads : 64;
    pthread_create(&dr, NULL, drain, NULL);
    for (int i = 0; i < n; i++)
        pthread_create(&th[i], NULL, worker, &end);
    const char *rp = getenv("FLEET_REDIS_PORT");
    int busy = -1;
    if (rp != NULL) {
        usleep(300000);
        busy = redis_busy(atoi(rp));
        usleep(20000);
    }
    pthread_create(&sw, NULL, sweeper, &end);
    for (int i = 0; i < n; i++)
        pthread_join(th[i], NULL);
    pthread_join(sw, NULL);
    pthread_join(dr, NULL);
    if (busy >= 0)
        close(busy);
    printf("ok=%ld denied=%ld lost=%ld foreign=%ld passes=%ld\n",
           atomic_load(&tot->ok), atomic_load(&tot->denied),
           atomic_load(&lost), atomic_load(&foreign), atomic_load(&passes));
    return 0;
}

/* ---- stderr a socket ------------------------------------------------------*/

static int stderr_run(char *self, const char *p)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0)
        return 1;
    if (dup2(fd, 2) < 0)
        return 1;
    close(fd);
    char *argv[] = {self, "stderr-child", (char *)p, NULL};
    execv(self, argv);
    return 127;
}

static int stderr_child(void)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    int r = fd >= 0 ? connect(fd, (struct sockaddr *)&a, sizeof a) : -1;
    printf("connect=%d\n", r);
    close(fd);
    /* The program's own line on its stderr: charged, as any send there. */
    ssize_t w = write(2, "child\n", 6);
    printf("wrote=%zd\n", w);
    return 0;
}

int main(int argc, char **argv)
{
    host_addr = htonl(INADDR_LOOPBACK);
    if (getenv("FLEET_HOST") != NULL &&
        inet_pton(AF_INET, getenv("FLEET_HOST"), &host_addr) != 1)
        return 2;
    if (argc == 3 && strcmp(argv[1], "stderr") == 0) {
        port = atoi(argv[2]);
        return stderr_run(argv[0], argv[2]);
    }
    if (argc == 3 && strcmp(argv[1], "stderr-child") == 0) {
        port = atoi(argv[2]);
        return stderr_child();
    }
    if (argc == 5 && strcmp(argv[1], "sweep") == 0) {
        port = atoi(argv[2]);
        seconds = atof(argv[4]);
        tot = mmap(NULL, sizeof *tot, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (tot == MAP_FAILED)
            return 1;
        return sweep_run(atoi(argv[3]));
    }
    if (argc == 6 && strcmp(argv[1], "sends") == 0) {
        port = atoi(argv[2]);
        seconds = atof(argv[5]);
        tot = mmap(NULL, sizeof *tot, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (tot == MAP_FAILED)
            return 1;
        return sends(atoi(argv[3]), atof(argv[4]));
    }
    if (argc != 6 || strcmp(argv[1], "connects") != 0) {
        fprintf(stderr, "usage: fleet_client connects PORT PROCS THREADS "
                        "SECONDS\n");
        return 2;
    }
    port = atoi(argv[2]);
    int procs = atoi(argv[3]), threads = atoi(argv[4]);
    seconds = atof(argv[5]);
    tot = mmap(NULL, sizeof *tot, PROT_READ | PROT_WRITE,
               MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (tot == MAP_FAILED)
        return 1;
    sweep = getenv("FLEET_SWEEP") != NULL;
    port2 = getenv("FLEET_PORT2") != NULL ? atoi(getenv("FLEET_PORT2")) : 0;
    if (getenv("FLEET_DENY_SLEEP_MS") != NULL)
        deny_sleep = (useconds_t)atoi(getenv("FLEET_DENY_SLEEP_MS")) * 1000;
    if (getenv("FLEET_PARENT_FIRST") != NULL) {
        double forever = now_s() + 5;
        once = 1;
        worker(&forever);
        once = 0;
    }
    double end = now_s() + seconds;
    fflush(stdout);
    for (int p = 0; p < procs; p++) {
        pid_t pid = fork();
        if (pid < 0)
            return 1;
        if (pid > 0)
            continue;
        pthread_t th[64];
        int n = threads < 64 ? threads : 64;
        for (int i = 0; i < n; i++)
            pthread_create(&th[i], NULL, worker, &end);
        for (int i = 0; i < n; i++)
            pthread_join(th[i], NULL);
        /* exit, not _exit: a program's end, with the shim's (a fleet
         * budget's debt is charged there). */
        exit(0);
    }
    if (getenv("FLEET_PARENT_TOO") != NULL) {
        pthread_t th[64];
        int n = threads < 64 ? threads : 64;
        for (int i = 0; i < n; i++)
            pthread_create(&th[i], NULL, worker, &end);
        for (int i = 0; i < n; i++)
            pthread_join(th[i], NULL);
    }
    while (wait(NULL) > 0)
        ;
    printf("ok=%ld denied=%ld slowest_us=%ld\n", atomic_load(&tot->ok),
           atomic_load(&tot->denied), atomic_load(&tot->slowest_us));
    return 0;
}
