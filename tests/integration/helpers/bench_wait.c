/* bench_wait — the wait-call workloads of tests/bench/wait_overhead.py,
 * timed from inside (the shim's load and process start-up are outside the
 * figure).
 *
 *   bench_wait poll NFDS COUNT    COUNT poll(NFDS pipe ends, timeout 0)
 *   bench_wait epoll NFDS COUNT   COUNT epoll_wait(set of NFDS, timeout 0)
 *
 * The fds are pipe read ends with nothing to read: the kernel reports
 * nothing, so the loop measures the call itself. Prints the loop's CPU
 * time in ns. */
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

/* The process's CPU time, not the wall clock: on a shared machine the wall
 * clock counts the time other programs held the CPU. */
static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: bench_wait poll|epoll NFDS COUNT\n");
        return 2;
    }
    long nfds = atol(argv[2]), count = atol(argv[3]);
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    if (rl.rlim_cur < (rlim_t)nfds + 64) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    struct pollfd *pf = calloc((size_t)nfds, sizeof *pf);
    int ep = epoll_create1(0);
    for (long i = 0; i < nfds; i += 2) {
        int p[2];
        if (pipe(p) != 0) {
            perror("pipe");
            return 3;
        }
        pf[i] = (struct pollfd){.fd = p[0], .events = POLLIN};
        if (i + 1 < nfds)
            pf[i + 1] = (struct pollfd){.fd = p[1], .events = POLLIN};
        struct epoll_event ev = {.events = EPOLLIN, .data.fd = p[0]};
        epoll_ctl(ep, EPOLL_CTL_ADD, p[0], &ev);
    }
    struct epoll_event out[64];
    uint64_t t0 = now_ns();
    if (strcmp(argv[1], "poll") == 0) {
        for (long i = 0; i < count; i++)
            poll(pf, (nfds_t)nfds, 0);
    } else {
        for (long i = 0; i < count; i++)
            epoll_wait(ep, out, 64, 0);
    }
    printf("%llu\n", (unsigned long long)(now_ns() - t0));
    return 0;
}
