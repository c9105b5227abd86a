/* fd2data — a daemon that closed its stderr and opened its data file at
 * fd 2 (SPEC §3: the shim's lines must not land there). Runs under the
 * shim:
 *
 *   fd2data swap DATA PORT N   close fd 2, open DATA (it gets fd 2),
 *                              write a line into it, make N non-blocking
 *                              connects to 127.0.0.1:PORT, write another
 *                              line, exit (the shim's exit report then)
 *   fd2data keep DATA PORT N   the same with fd 2 left alone and DATA at
 *                              the next free fd: the control, whose
 *                              stderr shows what the shim said
 *
 * Prints "fd=F", "ok=N" and "denied=M" lines (F: DATA's fd); exits 0. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static void put(int fd, const char *s)
{
    size_t n = strlen(s);
    if (write(fd, s, n) != (ssize_t)n)
        exit(1);
}

int main(int argc, char **argv)
{
    if (argc != 5)
        return 2;
    if (strcmp(argv[1], "swap") == 0)
        close(2);
    else if (strcmp(argv[1], "keep") != 0)
        return 2;
    int fd = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return 1;
    put(fd, "program data 1\n");
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_port = htons((unsigned short)atoi(argv[3]));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int n = atoi(argv[4]), ok = 0, denied = 0;
    for (int i = 0; i < n; i++) {
        int s = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
        if (s < 0)
            return 1;
        if (connect(s, (struct sockaddr *)&a, sizeof a) == 0 ||
            errno == EINPROGRESS) {
            struct pollfd p = {.fd = s, .events = POLLOUT};
            poll(&p, 1, 2000);
            ok++;
        } else {
            denied++;
        }
        close(s);
    }
    put(fd, "program data 2\n");
    printf("fd=%d\nok=%d\ndenied=%d\n", fd, ok, denied);
    return 0;
}
