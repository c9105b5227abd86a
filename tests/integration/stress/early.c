/* early.c — a library whose constructor connects and sends before the
 * shim's constructor has run (test_robust.c builds it with cc and links
 * early_main.c against it; a library the program needs is initialised
 * before LD_PRELOAD ones, which the test checks with LD_DEBUG=init).
 *
 * The constructor makes one connection to 127.0.0.1:$EARLY_PORT and
 * sends "early\n" on it, then leaves a thread connecting and sending in a
 * loop for 300 ms, racing the shim's own start-up. early_join() waits for
 * that thread; early_ok / early_denied count what it saw. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

_Atomic int early_ok, early_denied, early_other;
static pthread_t racer;
static int started;

static void one(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) {
        early_other++;
        return;
    }
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0) {
        if (send(fd, "early\n", 6, MSG_NOSIGNAL) == 6)
            early_ok++;
        else
            early_other++;
    } else if (errno == EAGAIN) {
        early_denied++;
    } else {
        early_other++;
    }
    close(fd);
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *race(void *arg)
{
    int port = (int)(long)arg;
    double end = now() + 0.3;
    while (now() < end)
        one(port);
    return NULL;
}

__attribute__((constructor)) static void early(void)
{
    const char *p = getenv("EARLY_PORT");
    if (p == NULL)
        return;
    int port = (int)strtol(p, NULL, 10);
    one(port);
    started = pthread_create(&racer, NULL, race, (void *)(long)port) == 0;
}

void early_join(void)
{
    if (started)
        pthread_join(racer, NULL);
}
