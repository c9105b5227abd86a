/* robust — programs that do what real programs do to a preload shim, run
 * under it by test_robust.c against servers/sink.py on 127.0.0.1:PORT.
 *
 *   robust forksleep PORT    a thread sleeps in a delayed send while the
 *                            main thread forks; the child connects and
 *                            sends too; then the parent sends again.
 *                            Prints a_ms= child_ms= child= parent_ms=
 *   robust closerange PORT   sends 32 KiB, close_range(3, ~0U, 0), then
 *                            two new connections (fds 3 and 4) send 32
 *                            and 16 KiB. Prints fd_after= fd2_after=
 *                            sent_a= sent_b= sent_c=
 *   robust sighandler PORT   for one second a thread sends 64 B at a time
 *                            on one connection while a 200 us timer's
 *                            handler sends 1 B on another, landing inside
 *                            the shim now and then. Prints main_bytes=
 *                            handler_bytes= signals=
 *
 * Times are milliseconds from the start of the program. Payloads are the
 * bytes i % 251, (i * 7) % 253 and (i * 13) % 241, which the test
 * hashes. */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/close_range.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CHUNK 8192

static int port;
static double t0;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static long ms(void)
{
    return (long)((now() - t0) * 1000);
}

static int dial(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        printf("connect_errno=%d\n", errno);
        exit(3);
    }
    return fd;
}

/* Send all of buf (a short grant is followed by the rest). */
static long send_all(int fd, const char *buf, size_t len)
{
    size_t off = 0;
    while (off < len) {
        ssize_t r = send(fd, buf + off, len - off, 0);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            printf("send_errno=%d\n", errno);
            return -1;
        }
        off += (size_t)r;
    }
    return (long)off;
}

static char chunk[CHUNK];
static long a_ms = -1;

static void *sleeper(void *arg)
{
    (void)arg;
    int fd = dial();
    send_all(fd, chunk, CHUNK); /* the burst */
    send_all(fd, chunk, CHUNK); /* sleeps about one second */
    a_ms = ms();
    close(fd);
    return NULL;
}

static int forksleep(void)
{
    memset(chunk, 'f', sizeof chunk);
    pthread_t t;
    if (pthread_create(&t, NULL, sleeper, NULL) != 0)
        return 1;
    usleep(300000); /* the thread is asleep in its second send now */
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        int fd = dial();
        send_all(fd, chunk, CHUNK);
        close(fd);
        printf("child_ms=%ld\n", ms());
        fflush(stdout);
        _exit(0);
    }
    int st = -1;
    waitpid(pid, &st, 0);
    pthread_join(t, NULL);
    /* The parent again, after the child spent from the budget: shared,
     * it queues behind the child's reservation too. */
    int fd = dial();
    send_all(fd, chunk, CHUNK);
    close(fd);
    printf("a_ms=%ld\nchild=%d\nparent_ms=%ld\n", a_ms,
           WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st), ms());
    return 0;
}

static int closerange(void)
{
    static char a[32768], b[32768], c[16384];
    for (size_t i = 0; i < sizeof a; i++) {
        a[i] = (char)(i % 251);
        b[i] = (char)(i * 7 % 253);
    }
    for (size_t i = 0; i < sizeof c; i++)
        c[i] = (char)(i * 13 % 241);
    int fd = dial();
    long sa = send_all(fd, a, sizeof a);
    /* What python's subprocess, ssh and glib do: close everything above
     * stderr, whoever opened it. */
    if (close_range(3, ~0u, 0) != 0)
        return 1;
    /* Two new connections take the two lowest numbers, where anything the
     * shim kept open would have been. */
    fd = dial();
    int fd2 = dial();
    long sb = 0, sc = 0;
    for (size_t off = 0; off < sizeof b; off += 4096) {
        sb += send_all(fd, b + off, 4096);
        if (off < sizeof c)
            sc += send_all(fd2, c + off, 4096);
    }
    close(fd);
    close(fd2);
    printf("fd_after=%d\nfd2_after=%d\nsent_a=%ld\nsent_b=%ld\n"
           "sent_c=%ld\n",
           fd, fd2, sa, sb, sc);
    return 0;
}

static int sig_fd = -1;
static volatile sig_atomic_t sig_bytes, sig_count;

static void on_alarm(int sig)
{
    (void)sig;
    int e = errno;
    sig_count++;
    if (send(sig_fd, "s", 1, MSG_NOSIGNAL | MSG_DONTWAIT) == 1)
        sig_bytes++;
    errno = e;
}

static int sighandler(void)
{
    int fd = dial();
    sig_fd = dial();
    struct sigaction sa = {.sa_handler = on_alarm, .sa_flags = SA_RESTART};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGALRM, &sa, NULL);
    struct itimerval it = {{0, 200}, {0, 200}};
    setitimer(ITIMER_REAL, &it, NULL);
    char msg[64];
    memset(msg, 'm', sizeof msg);
    long sent = 0;
    while (now() - t0 < 1.0) {
        ssize_t r = send(fd, msg, sizeof msg, MSG_NOSIGNAL);
        if (r > 0)
            sent += r;
        else if (r < 0 && errno != EAGAIN && errno != EINTR) {
            printf("send_errno=%d\n", errno);
            return 1;
        }
    }
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, NULL);
    signal(SIGALRM, SIG_IGN);
    close(fd);
    close(sig_fd);
    printf("main_bytes=%ld\nhandler_bytes=%ld\nsignals=%ld\n", sent,
           (long)sig_bytes, (long)sig_count);
    return 0;
}

int main(int argc, char **argv)
{
    t0 = now();
    if (argc != 3) {
        fprintf(stderr, "usage: robust forksleep|closerange|sighandler PORT\n");
        return 2;
    }
    char *end;
    long p = strtol(argv[2], &end, 10);
    if (end == argv[2] || *end != '\0' || p <= 0 || p > 65535)
        return 2;
    port = (int)p;
    if (strcmp(argv[1], "forksleep") == 0)
        return forksleep();
    if (strcmp(argv[1], "closerange") == 0)
        return closerange();
    if (strcmp(argv[1], "sighandler") == 0)
        return sighandler();
    return 2;
}
