/* smallstack — sends, connects and waits from a thread with a 64 KB stack
 * under a guard page, and how much of that stack they used.
 *
 *   smallstack PORT [KB [nowait]]
 *
 * The thread's stack is mapped here (KB KiB, 64 by default) with a
 * PROT_NONE page below it: an overflow is a SIGSEGV, not a quiet write
 * into another thread's memory. It is painted first; at the end the
 * deepest byte no longer painted says how much was used. The thread, on
 * connections to 127.0.0.1:PORT: a blocking connect; send, write, writev,
 * sendmsg, sendto of 200 bytes each, 10 rounds; the same on the socket
 * made non-blocking, each followed by a poll for POLLOUT (10 ms) when
 * refused; a non-blocking connect, polled for; a MSG_FASTOPEN sendto on a
 * fresh socket. With "nowait", no poll: a sleep instead (the stack of
 * the sends and connects alone). The shim is set up before, by a connect on the main
 * thread. Prints stack_used=BYTES, sent=BYTES, refused=N. */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#define PAINT 0xA5

static struct sockaddr_in to;
static long sent, refused;

static void count(ssize_t r)
{
    if (r > 0)
        sent += r;
    else
        refused++;
}

static bool no_wait_calls;

static void wait_out(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLOUT};
    if (no_wait_calls)
        usleep(10 * 1000);
    else
        poll(&p, 1, 10);
}

static void rounds(int fd, bool nonblocking)
{
    char buf[200];
    memset(buf, 'x', sizeof buf);
    for (int i = 0; i < 10; i++) {
        struct iovec iov[3] = {{buf, 50}, {buf, 100}, {buf, 50}};
        struct msghdr m = {.msg_iov = iov, .msg_iovlen = 3};
        ssize_t r[5];
        r[0] = send(fd, buf, sizeof buf, MSG_NOSIGNAL);
        r[1] = write(fd, buf, sizeof buf);
        r[2] = writev(fd, iov, 3);
        r[3] = sendmsg(fd, &m, MSG_NOSIGNAL);
        r[4] = sendto(fd, buf, sizeof buf, MSG_NOSIGNAL, NULL, 0);
        for (int k = 0; k < 5; k++) {
            count(r[k]);
            if (r[k] < 0 && nonblocking)
                wait_out(fd);
        }
    }
}

static void *work(void *arg)
{
    (void)arg;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&to, sizeof to) != 0)
        refused++;
    rounds(fd, false);
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    rounds(fd, true);
    close(fd);
    /* A non-blocking connect, waited for. */
    fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    if (connect(fd, (struct sockaddr *)&to, sizeof to) != 0 &&
        errno == EINPROGRESS) {
        wait_out(fd);
        int err = 0;
        socklen_t l = sizeof err;
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &l);
    }
    rounds(fd, true);
    close(fd);
    /* A connect made by a send (MSG_FASTOPEN). */
    fd = socket(AF_INET, SOCK_STREAM, 0);
    count(sendto(fd, "fastopen", 8, MSG_FASTOPEN | MSG_NOSIGNAL,
                 (struct sockaddr *)&to, sizeof to));
    close(fd);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: smallstack PORT [KB]\n");
        return 2;
    }
    to = (struct sockaddr_in){.sin_family = AF_INET,
                              .sin_port = htons((uint16_t)atoi(argv[1])),
                              .sin_addr.s_addr = htonl(0x7f000001)};
    /* A write on a socket whose connect was refused is EPIPE, not death. */
    signal(SIGPIPE, SIG_IGN);
    /* One connect first, on the main thread: the shim's one-time set-up
     * (config, identity, segment) runs there, and the small stack
     * measures the calls themselves. */
    int first = socket(AF_INET, SOCK_STREAM, 0);
    connect(first, (struct sockaddr *)&to, sizeof to);
    close(first);
    size_t size = (size_t)(argc > 2 ? atoi(argv[2]) : 64) * 1024;
    no_wait_calls = argc > 3 && strcmp(argv[3], "nowait") == 0;
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    unsigned char *map = mmap(NULL, size + page, PROT_READ | PROT_WRITE,
                              MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (map == MAP_FAILED || mprotect(map, page, PROT_NONE) != 0) {
        perror("mmap");
        return 1;
    }
    unsigned char *stack = map + page;
    memset(stack, PAINT, size);
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setstack(&a, stack, size);
    pthread_t t;
    if (pthread_create(&t, &a, work, NULL) != 0) {
        perror("pthread_create");
        return 1;
    }
    pthread_join(t, NULL);
    size_t untouched = 0;
    while (untouched < size && stack[untouched] == PAINT)
        untouched++;
    printf("stack_used=%zu\nsent=%ld\nrefused=%ld\n", size - untouched, sent,
           refused);
    return 0;
}
