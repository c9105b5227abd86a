/* fdfull_connect — a first connect made while the process's fd table is
 * full, then more with room again, for the config read's passing errors
 * (SPEC §4, test_init.c). Runs under the shim: the first call that needs
 * the config finds no fd for reading it (EMFILE).
 *
 *   fdfull_connect PORT N
 *
 * Lowers RLIMIT_NOFILE to 64, makes one socket, fills every other fd with
 * /dev/null, connects (the shim's config read fails then), frees the fds,
 * and connects N times more on fresh sockets, each closed at once. Prints
 * "filled=1" when the table was full at the first connect, "first=1"
 * when that connect succeeded, and "ok=A denied=D" for the N others. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#define LIMIT 64

int main(int argc, char **argv)
{
    struct sockaddr_in a = {.sin_family = AF_INET};
    struct rlimit rl = {LIMIT, LIMIT};
    int fill[LIMIT], nfill = 0, ok = 0, denied = 0;

    if (argc != 3)
        return 2;
    a.sin_port = htons((unsigned short)atoi(argv[1]));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
        return 3;
    int s = socket(AF_INET, SOCK_STREAM, 0);
    if (s < 0)
        return 4;
    for (;;) {
        int fd = open("/dev/null", O_RDONLY);
        if (fd < 0)
            break;
        if (nfill == LIMIT)
            return 5;
        fill[nfill++] = fd;
    }
    int full = errno == EMFILE;
    int first = connect(s, (struct sockaddr *)&a, sizeof a) == 0;
    for (int i = 0; i < nfill; i++)
        close(fill[i]);
    close(s);
    printf("filled=%d\nfirst=%d\n", full, first);
    for (int i = 0; i < atoi(argv[2]); i++) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        if (fd < 0)
            return 6;
        if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0)
            ok++;
        else
            denied++;
        close(fd);
    }
    printf("ok=%d\ndenied=%d\n", ok, denied);
    return 0;
}
