/* ping_control.h — the machine's own lateness, measured beside a test.
 *
 * A thread of the test (never under the shim) sends Redis a PING every
 * 10 ms and records the slowest answer. It waits in the same queues as
 * the shim's threads (Redis, a proxy in front of it, the scheduler), so
 * when it saw a round trip come late, a reply of the shim's that came
 * past SPEC §8's 50 ms was the machine's doing, not the shim's: the
 * test then allows what §8 allows a process that took Redis for away.
 * With no port (0), the thread sleeps 10 ms at a time instead and records
 * how far past the 10 ms the scheduler woke it: the machine's lateness
 * where there is no Redis to ask (while it is down, say). */
#ifndef RLSHIM_TEST_PING_CONTROL_H
#define RLSHIM_TEST_PING_CONTROL_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"

struct ping_control {
    int port;
    atomic_bool stop;
    double slowest_ms; /* -1: could not connect */
    int pings;
    pthread_t thread;
};

static void ping_control_sleep(struct ping_control *pc)
{
    while (!atomic_load(&pc->stop)) {
        double t0 = h_now();
        usleep(10000);
        double late = (h_now() - t0) * 1e3 - 10;
        if (late > pc->slowest_ms)
            pc->slowest_ms = late;
        pc->pings++;
    }
}

static void *ping_control_run(void *arg)
{
    struct ping_control *pc = arg;
    if (pc->port == 0) {
        ping_control_sleep(pc);
        return NULL;
    }
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)pc->port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        pc->slowest_ms = -1;
        if (fd >= 0)
            close(fd);
        return NULL;
    }
    while (!atomic_load(&pc->stop)) {
        double t0 = h_now();
        char reply[16];
        if (write(fd, "PING\r\n", 6) != 6 || read(fd, reply, 7) != 7)
            break;
        double ms = (h_now() - t0) * 1e3;
        if (ms > pc->slowest_ms)
            pc->slowest_ms = ms;
        pc->pings++;
        usleep(10000);
    }
    close(fd);
    return NULL;
}

/* Start pinging the Redis (or proxy) on 127.0.0.1:port; with port 0,
 * sleeping. */
H_FN void ping_control_start(struct ping_control *pc, int port)
{
    pc->port = port;
    atomic_store(&pc->stop, false);
    pc->slowest_ms = 0;
    pc->pings = 0;
    cr_assert_eq(pthread_create(&pc->thread, NULL, ping_control_run, pc), 0);
}

/* Stop, and check that the control measured something. */
H_FN void ping_control_stop(struct ping_control *pc)
{
    atomic_store(&pc->stop, true);
    pthread_join(pc->thread, NULL);
    cr_assert_gt(pc->pings, 10, "the control pinged %d times (slowest %.1f)",
                 pc->pings, pc->slowest_ms);
}

#endif
