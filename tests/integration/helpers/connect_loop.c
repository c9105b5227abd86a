/* connect_loop — connects to 127.0.0.1:PORT over and over for SECONDS,
 * closing each connection at once, for the state tests (test_state.c).
 * Runs under the shim; a denied connect (any error) is counted and
 * retried after GAP_US microseconds, an allowed one right away.
 *
 *   connect_loop PORT SECONDS GAP_US
 *
 * Prints "ok=N denied=M" and exits 0. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    struct sockaddr_in a = {.sin_family = AF_INET};
    long ok = 0, denied = 0;
    double end;
    useconds_t gap;

    if (argc != 4)
        return 2;
    a.sin_port = htons((unsigned short)atoi(argv[1]));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    end = now() + atof(argv[2]);
    gap = (useconds_t)atol(argv[3]);
    while (now() < end) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);

        if (fd < 0)
            return 1;
        if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0) {
            ok++;
        } else {
            denied++;
            usleep(gap);
        }
        close(fd);
    }
    printf("ok=%ld denied=%ld\n", ok, denied);
    return 0;
}
