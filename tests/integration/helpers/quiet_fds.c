/* quiet_fds — what a program that never touches the network does with
 * its fds: registers a pipe with epoll, then makes and closes N pipes and
 * N files (close, dup2, dup3, fclose). Under the shim none of it may set
 * the shim up or cost a system call of its own (SPEC §1: files and pipes
 * pass through untouched).
 *
 *     quiet_fds N FILE [inet|sockets|vfork]     prints "done=1"
 *
 * inet: an inet socket is registered with epoll too (that may set the
 * shim up: the control that shows a set-up is seen). sockets: N inet
 * sockets are also made and closed (marked by the shim: their close may
 * look at its tables, but makes no system call of its own). vfork: as
 * sockets, after a vfork whose child closes an inet socket and exits (the
 * parent's own closes are then as before). */
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc != 3 && argc != 4)
        return 2;
    const char *mode = argc == 4 ? argv[3] : "";
    int n = atoi(argv[1]);
    int ep = epoll_create1(EPOLL_CLOEXEC);
    int p[2];
    if (ep < 0 || pipe(p) != 0)
        return 1;
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = p[0]};
    if (epoll_ctl(ep, EPOLL_CTL_ADD, p[0], &ev) != 0)
        return 1;
    if (strcmp(mode, "inet") == 0) {
        int s = socket(AF_INET, SOCK_STREAM, 0);
        struct epoll_event se = {.events = EPOLLIN, .data.fd = s};
        if (s < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, s, &se) != 0)
            return 1;
    }
    volatile bool socks = strcmp(mode, "sockets") == 0;
    if (strcmp(mode, "vfork") == 0) {
        socks = true;
        int s = socket(AF_INET, SOCK_STREAM, 0);
        pid_t pid = vfork();
        if (pid == 0) {
            close(s);
            _exit(0);
        }
        int st;
        if (pid < 0 || waitpid(pid, &st, 0) != pid || st != 0)
            return 1;
        close(s);
    }
    for (int i = 0; i < n; i++) {
        if (socks) {
            int s = socket(AF_INET, SOCK_STREAM, 0);
            if (s < 0)
                return 1;
            close(s);
        }
        int q[2];
        if (pipe(q) != 0)
            return 1;
        if (dup2(q[0], 100) != 100 || dup3(q[1], 101, O_CLOEXEC) != 101)
            return 1;
        close(q[0]);
        close(q[1]);
        close(100);
        close(101);
        FILE *f = fopen(argv[2], "r");
        if (f == NULL)
            return 1;
        fclose(f);
    }
    epoll_ctl(ep, EPOLL_CTL_DEL, p[0], NULL);
    close(p[0]);
    close(p[1]);
    close(ep);
    printf("done=1\n");
    return 0;
}
