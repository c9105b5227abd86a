/* mtloop — an upload the way a multi-threaded runtime (tokio's, for one)
 * makes it: a reactor thread waits in epoll_wait with no timeout on an
 * edge-triggered registration (EPOLLIN|EPOLLOUT|EPOLLET, made once), and
 * another thread does the sends, waiting for the reactor's word that the
 * socket is writable after each EAGAIN. Nothing else is in the epoll set,
 * so only an edge for the socket ever wakes the reactor.
 *
 *   mtloop PORT FILE
 *       one non-blocking connection to 127.0.0.1:PORT; writes FILE in
 *       64 KiB sends; prints sends=N eagain=N edges=N
 *
 * The reactor is already blocked in the kernel when the sender's send is
 * denied: the shim must wake it (SPEC §2: the socket is reported writable
 * at its turn, also to a wait that began before the denial). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static unsigned long edges; /* EPOLLOUT reports, counted by the reactor */
static int ep, stop_fd;

static void *reactor(void *arg)
{
    (void)arg;
    for (;;) {
        struct epoll_event ev[8];
        int n = epoll_wait(ep, ev, 8, -1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            perror("epoll_wait");
            exit(1);
        }
        for (int i = 0; i < n; i++) {
            if (ev[i].data.fd == stop_fd)
                return NULL;
            if (ev[i].events & (EPOLLOUT | EPOLLERR | EPOLLHUP)) {
                pthread_mutex_lock(&mu);
                edges++;
                pthread_cond_broadcast(&cv);
                pthread_mutex_unlock(&mu);
            }
        }
    }
}

static void die(const char *what)
{
    perror(what);
    exit(1);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: mtloop PORT FILE\n");
        return 2;
    }
    int in = open(argv[2], O_RDONLY);
    struct stat st;
    if (in < 0 || fstat(in, &st) != 0)
        die(argv[2]);
    char *data = malloc((size_t)st.st_size + 1);
    if (data == NULL || read(in, data, (size_t)st.st_size) != st.st_size)
        die("read");
    close(in);

    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    ep = epoll_create1(EPOLL_CLOEXEC);
    stop_fd = eventfd(0, EFD_CLOEXEC);
    if (fd < 0 || ep < 0 || stop_fd < 0)
        die("socket");
    /* Registered once, before the connect, as mio does. */
    struct epoll_event e = {.events = EPOLLIN | EPOLLOUT | EPOLLET,
                            .data.fd = fd};
    struct epoll_event s = {.events = EPOLLIN, .data.fd = stop_fd};
    if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e) != 0 ||
        epoll_ctl(ep, EPOLL_CTL_ADD, stop_fd, &s) != 0)
        die("epoll_ctl");
    pthread_t th;
    if (pthread_create(&th, NULL, reactor, NULL) != 0)
        die("pthread_create");

    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)atoi(argv[1]))};
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    pthread_mutex_lock(&mu);
    unsigned long seen = edges;
    pthread_mutex_unlock(&mu);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0 &&
        errno != EINPROGRESS)
        die("connect");

    long off = 0, sends = 0, eagain = 0;
    bool wait = true; /* for the connect's own edge first */
    while (off < st.st_size) {
        if (wait) {
            pthread_mutex_lock(&mu);
            while (edges == seen)
                pthread_cond_wait(&cv, &mu);
            pthread_mutex_unlock(&mu);
            wait = false;
        }
        /* The edges seen before this send: one that comes after its
         * EAGAIN is waited for, none is missed. */
        pthread_mutex_lock(&mu);
        seen = edges;
        pthread_mutex_unlock(&mu);
        size_t n = (size_t)(st.st_size - off);
        if (n > 65536)
            n = 65536;
        ssize_t w = send(fd, data + off, n, MSG_NOSIGNAL);
        if (w > 0) {
            off += w;
            sends++;
        } else if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            eagain++;
            wait = true;
        } else if (w < 0 && errno != EINTR) {
            die("send");
        }
    }
    close(fd);
    uint64_t one = 1;
    if (write(stop_fd, &one, sizeof one) != sizeof one)
        die("eventfd");
    pthread_join(th, NULL);
    printf("sends=%ld\neagain=%ld\nedges=%lu\n", sends, eagain, edges);
    return 0;
}
