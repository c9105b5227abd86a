/* spawnclose — a child that runs in the parent's memory closes its copy
 * of the parent's connected socket, under the shim.
 *
 *   spawnclose PORT HOW [http]
 *
 * One TCP connection to 127.0.0.1:PORT, then a child made as HOW says:
 *   spawn        posix_spawn of this program as "closer", with
 *                posix_spawn_file_actions_addclose of the socket;
 *   clone_vfork  clone(CLONE_VM | CLONE_VFORK) whose child closes the
 *                socket and execs this program as "closer" (posix_spawn's
 *                own shape, with the program's close);
 *   clone_vm     clone(CLONE_VM) whose child closes the socket and exits,
 *                the parent waiting for it;
 *   closer       (the child program) closes fds 3 to 255 and exits.
 * Once the child is gone: 5 one-byte sends on the socket (MSG_DONTWAIT;
 * with "http", 5 HTTP requests of req_len bytes each instead), then a
 * second connection to the same address. Prints key=value lines: child
 * (its exit status), sent, denied, connect2 (0 or the errno), req_len. */
#include <errno.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static int fd = -1;
static char self[4096];
static char stack[256 * 1024] __attribute__((aligned(16)));

static int child(void *arg)
{
    close(fd);
    if (arg != NULL) {
        char *argv[] = {self, "0", "closer", NULL};
        execve(self, argv, environ);
    }
    _exit(arg != NULL ? 127 : 0);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: spawnclose PORT spawn|clone_vfork|clone_vm\n");
        return 2;
    }
    const char *how = argv[2];
    if (strcmp(how, "closer") == 0) {
        for (int i = 3; i < 256; i++)
            close(i);
        return 0;
    }
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        return 1;
    self[n] = '\0';
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)atoi(argv[1])),
                            .sin_addr.s_addr = htonl(0x7f000001)};
    fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        perror("connect");
        return 1;
    }
    pid_t pid = -1;
    if (strcmp(how, "spawn") == 0) {
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_addclose(&fa, fd);
        char *cargv[] = {self, "0", "closer", NULL};
        int e = posix_spawn(&pid, self, &fa, NULL, cargv, environ);
        posix_spawn_file_actions_destroy(&fa);
        if (e != 0) {
            fprintf(stderr, "posix_spawn: %s\n", strerror(e));
            return 1;
        }
    } else if (strcmp(how, "clone_vfork") == 0) {
        pid = clone(child, stack + sizeof stack, CLONE_VM | CLONE_VFORK | SIGCHLD,
                    self);
    } else if (strcmp(how, "clone_vm") == 0) {
        pid = clone(child, stack + sizeof stack, CLONE_VM | SIGCHLD, NULL);
    } else {
        return 2;
    }
    int status = -1;
    if (pid < 0 || waitpid(pid, &status, 0) != pid) {
        perror("child");
        return 1;
    }
    static const char req[] = "GET /s HTTP/1.1\r\nHost: x\r\n\r\n";
    bool http = argc > 3 && strcmp(argv[3], "http") == 0;
    const char *b = http ? req : "x";
    size_t len = http ? sizeof req - 1 : 1;
    long sent = 0, denied = 0;
    for (int i = 0; i < 5; i++) {
        if (send(fd, b, len, MSG_DONTWAIT | MSG_NOSIGNAL) == (ssize_t)len)
            sent++;
        else
            denied++;
    }
    int fd2 = socket(AF_INET, SOCK_STREAM, 0);
    int c2 = connect(fd2, (struct sockaddr *)&a, sizeof a) == 0 ? 0 : errno;
    printf("child=%d\nsent=%ld\ndenied=%ld\nconnect2=%d\nreq_len=%zu\n",
           WIFEXITED(status) ? WEXITSTATUS(status) : -1, sent, denied, c2,
           len);
    close(fd2);
    shutdown(fd, SHUT_WR);
    close(fd);
    return 0;
}
