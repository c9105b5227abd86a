/* bench_names — the workloads of tests/bench/names_overhead.py.
 *
 *   bench_names gai NAME COUNT           COUNT getaddrinfo(NAME) + free
 *   bench_names connect NAME PORT COUNT  getaddrinfo(NAME) once, then COUNT
 *                                        connect + close (SO_LINGER 0) to
 *                                        its first IPv4 answer on PORT
 *
 * Prints the loop's elapsed nanoseconds on stdout (start-up and the first
 * resolution are outside the figure). */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
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

static long num(const char *s)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < 0) {
        fprintf(stderr, "bench_names: bad number '%s'\n", s);
        exit(2);
    }
    return v;
}

static struct addrinfo *resolve(const char *name)
{
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM};
    struct addrinfo *res = NULL;
    int r = getaddrinfo(name, NULL, &hints, &res);
    if (r != 0) {
        fprintf(stderr, "bench_names: %s: %s\n", name, gai_strerror(r));
        exit(1);
    }
    return res;
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "gai") == 0) {
        long n = num(argv[3]);
        uint64_t t0 = now_ns();
        for (long i = 0; i < n; i++)
            freeaddrinfo(resolve(argv[2]));
        printf("%llu\n", (unsigned long long)(now_ns() - t0));
        return 0;
    }
    if (argc == 5 && strcmp(argv[1], "connect") == 0) {
        struct addrinfo *res = resolve(argv[2]);
        struct sockaddr_in sin;
        memcpy(&sin, res->ai_addr, sizeof sin);
        freeaddrinfo(res);
        sin.sin_port = htons((uint16_t)num(argv[3]));
        long n = num(argv[4]);
        struct linger lg = {.l_onoff = 1, .l_linger = 0};
        uint64_t t0 = now_ns();
        for (long i = 0; i < n; i++) {
            int fd = socket(AF_INET, SOCK_STREAM, 0);
            if (fd < 0 || connect(fd, (struct sockaddr *)&sin, sizeof sin) != 0) {
                perror("bench_names: connect");
                return 1;
            }
            setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
            close(fd);
        }
        printf("%llu\n", (unsigned long long)(now_ns() - t0));
        return 0;
    }
    fprintf(stderr, "usage: bench_names gai NAME COUNT | connect NAME PORT "
                    "COUNT\n");
    return 2;
}
