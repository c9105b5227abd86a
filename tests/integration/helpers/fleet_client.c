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
 * second destination).
 *
 *   fleet_client sends PORT PROCS RATE SECONDS
 *
 * Forks PROCS processes; each opens one connection to 127.0.0.1:PORT and
 * sends one byte per send() at RATE a second (paced, a denied send is not
 * tried again) for SECONDS. FLEET_CHAOS=K: the parent SIGKILLs one of its
 * children at random, K times spread over the first
 * FLEET_CHAOS_SECS (default: half the run), and forks a replacement each
 * time. Prints ok=N denied=N kills=N (ok and denied as the children
 * counted them; the server counts what arrived). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
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
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
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
            usleep(2000);
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

int main(int argc, char **argv)
{
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
    if (getenv("FLEET_PARENT_FIRST") != NULL) {
        double forever = now_s() + 5;
        once = 1;
        worker(&forever);
        once = 0;
    }
    double end = now_s() + seconds;
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
        _exit(0);
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
