/* sigsend — sends from a signal handler while the program's own thread
 * is busy in malloc/free, under the shim.
 *
 *   sigsend PORT N HOW [quiet|-] [CPORT]
 *
 * One TCP connection to 127.0.0.1:PORT. A second thread sends the main
 * thread N signals (pthread_kill, SIGUSR1, 50 us apart); the handler
 * sends 1 byte on the connection (MSG_DONTWAIT). The main thread loops in
 * malloc/free of varied sizes and, every 64th round (not when quiet), sends 1 byte itself, so that some
 * signals interrupt the shim too. HOW says how the
 * handler is installed: "info" (sigaction with SA_SIGINFO), "plain"
 * (signal()), "reset" (first once with SA_RESETHAND, raised: the
 * action must read back SIG_DFL, then as "info"). Prints key=value lines: handler_ok, handler_denied, main_ok,
 * main_denied, old_is_ours (sigaction's old action is the handler the
 * program installed: 1), wall_ms. With CPORT, "connect" connects to
 * 127.0.0.1:CPORT instead of PORT (a port nobody listens on: refused at
 * once, with no server to keep up with the connects). "late": one signal
 * (raised) whose handler connects to PORT and keeps the socket; the
 * program then sends N requests of REQ_LEN bytes on it (MSG_DONTWAIT)
 * and prints late_ok, late_denied. */
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static int fd = -1;
static volatile sig_atomic_t ok, denied;
static atomic_int handled;

static int connects; /* "connect": the handler connects instead */
static int late = -1; /* "late": the handler's connection, kept */
static struct sockaddr_in peer;

static void on_signal_body(void)
{
    int saved = errno;
    ssize_t r;
    if (connects == 2) {
        late = socket(AF_INET, SOCK_STREAM, 0);
        r = connect(late, (struct sockaddr *)&peer, sizeof peer) == 0;
    } else if (connects) {
        int c = socket(AF_INET, SOCK_STREAM, 0);
        r = connect(c, (struct sockaddr *)&peer, sizeof peer) == 0;
        close(c);
    } else {
        r = send(fd, "s", 1, MSG_DONTWAIT | MSG_NOSIGNAL);
    }
    if (r == 1)
        ok = ok + 1;
    else
        denied = denied + 1;
    atomic_fetch_add_explicit(&handled, 1, memory_order_relaxed);
    errno = saved;
}

static void on_info(int sig, siginfo_t *si, void *uc)
{
    (void)sig;
    (void)si;
    (void)uc;
    on_signal_body();
}

static void on_plain(int sig)
{
    (void)sig;
    on_signal_body();
}

static pthread_t main_thread;
static long nsignals;
static atomic_int done;

static void *kicker(void *arg)
{
    (void)arg;
    for (long i = 0; i < nsignals; i++) {
        pthread_kill(main_thread, SIGUSR1);
        struct timespec ts = {0, 50 * 1000};
        nanosleep(&ts, NULL);
    }
    atomic_store(&done, 1);
    return NULL;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: sigsend PORT N info|plain|reset\n");
        return 2;
    }
    int port = atoi(argv[1]);
    nsignals = atol(argv[2]);
    const char *how = argv[3];
    int how_reset;
    bool quiet = argc > 4 && strcmp(argv[4], "quiet") == 0;
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(0x7f000001)};
    peer = a;
    connects = strcmp(how, "connect") == 0;
    if (argc > 5)
        peer.sin_port = htons((uint16_t)atoi(argv[5]));
    fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        perror("connect");
        return 1;
    }
    int old_is_ours = 0;
    if (strcmp(how, "plain") == 0) {
        signal(SIGUSR1, on_plain);
        /* Reported back as the program's own handler. */
        old_is_ours = signal(SIGUSR1, on_plain) == on_plain;
    } else {
        how_reset = strcmp(how, "reset") == 0;
        struct sigaction sa, old;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = on_info;
        sa.sa_flags = SA_SIGINFO;
        if (how_reset) {
            /* Once with SA_RESETHAND: the handler runs (and sends), then
             * the action reads back as SIG_DFL, as the kernel left it. */
            sa.sa_flags |= SA_RESETHAND;
            sigaction(SIGUSR1, &sa, NULL);
            raise(SIGUSR1);
            sigaction(SIGUSR1, NULL, &old);
            if (old.sa_handler != SIG_DFL || handled != 1) {
                printf("reset_failed=1\n");
                return 1;
            }
            sa.sa_flags = SA_SIGINFO;
        }
        sigaction(SIGUSR1, &sa, NULL);
        sigaction(SIGUSR1, NULL, &old);
        old_is_ours = (old.sa_flags & SA_SIGINFO) && old.sa_sigaction == on_info;
    }
    if (strcmp(how, "late") == 0) {
        static const char req[] = "GET /late HTTP/1.1\r\nHost: x\r\n\r\n";
        connects = 2;
        raise(SIGUSR1);
        long lok = 0, ldenied = 0;
        for (long i = 0; late >= 0 && i < nsignals; i++) {
            if (send(late, req, sizeof req - 1, MSG_DONTWAIT | MSG_NOSIGNAL) ==
                (ssize_t)(sizeof req - 1))
                lok++;
            else
                ldenied++;
        }
        shutdown(late, SHUT_WR);
        close(late);
        close(fd);
        printf("handler_ok=%ld\nlate_ok=%ld\nlate_denied=%ld\nreq_len=%zu\n",
               (long)ok, lok, ldenied, sizeof req - 1);
        return 0;
    }
    main_thread = pthread_self();
    /* One send before the signals: the shim is set up (and a fleet
     * budget's Redis connected) outside any handler. */
    long main_ok = 0, main_denied = 0;
    main_ok += send(fd, "w", 1, MSG_NOSIGNAL) == 1;
    pthread_t k;
    double t0 = now_ms();
    pthread_create(&k, NULL, kicker, NULL);
    unsigned x = 12345;
    void *keep[64] = {0};
    for (unsigned long i = 0; !atomic_load(&done); i++) {
        x = x * 1103515245u + 12345u;
        unsigned slot = (x >> 8) % 64;
        free(keep[slot]);
        keep[slot] = malloc(16 + (x >> 16) % 4096);
        if (keep[slot] != NULL)
            memset(keep[slot], 1, 16);
        if (i % 64 == 0 && !quiet) {
            if (send(fd, "m", 1, MSG_DONTWAIT | MSG_NOSIGNAL) == 1)
                main_ok++;
            else
                main_denied++;
        }
    }
    pthread_join(k, NULL);
    for (unsigned i = 0; i < 64; i++)
        free(keep[i]);
    double wall = now_ms() - t0;
    /* Signals still pending are handled before the counts are read. */
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
    shutdown(fd, SHUT_WR);
    close(fd);
    printf("handler_ok=%ld\nhandler_denied=%ld\nhandled=%d\nmain_ok=%ld\n"
           "main_denied=%ld\nold_is_ours=%d\nwall_ms=%.0f\n",
           (long)ok, (long)denied, atomic_load(&handled), main_ok,
           main_denied, old_is_ours, wall);
    return 0;
}
