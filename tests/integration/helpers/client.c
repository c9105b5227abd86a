/* client — a C client that exercises one send path or connect case per
 * run, against 127.0.0.1:PORT, and prints what it saw as key=value lines.
 * It runs under the shim; the test compares its lines with what the
 * server received.
 *
 *   client connects PORT N        N non-blocking connects, each closed
 *   client sends PORT N SIZE      one connection, N sends of SIZE bytes
 *   client udp PORT OTHER N       N sendto to PORT and N to OTHER
 *   client udpmsg PORT OTHER      unconnected sendmsg/sendmmsg with names
 *   client udpconnect PORT        UDP connect + 2 sends, then a TCP connect
 *   client writev PORT            two writev of 1500 bytes in 3 pieces
 *   client sendmmsg PORT          two sendmmsg of 5 datagrams of 100 B
 *   client sendfile PORT FILE     two sendfile of 1500 bytes of FILE
 *   client v4mapped PORT          two AF_INET6 connects to ::ffff:127.0.0.1
 *   client fastopen PORT          two TCP sendto(MSG_FASTOPEN)
 *   client repeat PORT            connect repeated on one socket, then 2 more
 *   client untouched PORT OUT     file, pipe, AF_UNIX, outside `to`
 *   client reuse PORT             fd reuse after each close path
 *   client bigfd PORT             a marked socket at fd 1,000,000
 *   client closerange PORT        close_range(3, ~0U) then connect+send
 *   client fork PORT              parent and child share one send budget
 *   client sendall PORT TOTAL     blocking sends of 64 KiB until TOTAL,
 *                                 20 us of work between calls
 *   client shortfill PORT TOTAL   non-blocking sends of 10000 B into a
 *                                 small send buffer, up to TOTAL bytes
 *   client rawconnect PORT        two syscall(SYS_socket)+syscall(SYS_connect)
 *   client rawsend PORT           syscall() write, sendto, writev, sendmsg,
 *                                 sendmmsg of 600 B each on one connection
 *   client rawclose PORT DIR      syscall(SYS_close/close_range/dup/dup3)
 *                                 forget or copy marks like the named calls
 *   client iouring PORT           syscall(SYS_io_uring_setup): errno
 *   client stale PORT OTHER       a socket closed behind the shim's back
 *                                 (inline system call), its number reused
 *                                 by socket() and by an inline socket
 *   client inherit PORT OTHER     connect to both, then exec `inherited`
 *   client inherited PORT FD FD2  (after exec) 10 B twice on FD, 100 kB on
 *                                 FD2
 *   client freshaccept PORT       accept and socketpair on numbers a
 *                                 spent socket left behind unseen
 *   client firstcalls PORT N      N threads make the process's first
 *                                 covered call (a connect) at once
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <linux/io_uring.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int port;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static struct sockaddr_in addr4(int p)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(p)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return a;
}

static int parse_int(const char *s)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < 0 || v > 100000000) {
        fprintf(stderr, "bad number '%s'\n", s);
        exit(2);
    }
    return (int)v;
}

/* A connect that waits for a non-blocking one to finish. Returns 0 or
 * the errno. */
static int connect_wait(int fd, const struct sockaddr *sa, socklen_t len)
{
    if (connect(fd, sa, len) == 0)
        return 0;
    if (errno != EINPROGRESS)
        return errno;
    struct pollfd p = {.fd = fd, .events = POLLOUT};
    if (poll(&p, 1, 2000) != 1)
        return ETIMEDOUT;
    int err = 0;
    socklen_t l = sizeof err;
    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &l);
    return err;
}

static int tcp_connected(int p)
{
    struct sockaddr_in a = addr4(p);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    int e = connect_wait(fd, (struct sockaddr *)&a, sizeof a);
    if (e != 0) {
        printf("connect_errno=%d\n", e);
        exit(3);
    }
    return fd;
}

static int connects(int n)
{
    int ok = 0, denied = 0, other = 0;
    double worst = 0;
    for (int i = 0; i < n; i++) {
        struct sockaddr_in a = addr4(port);
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
        double t0 = now();
        int r = connect(fd, (struct sockaddr *)&a, sizeof a);
        int e = errno;
        double dt = now() - t0;
        if (r == 0 || e == EINPROGRESS) {
            struct pollfd p = {.fd = fd, .events = POLLOUT};
            poll(&p, 1, 2000);
            ok++;
        } else if (e == EAGAIN) {
            denied++;
            if (dt > worst)
                worst = dt;
        } else {
            other++;
        }
        close(fd);
    }
    printf("ok=%d\ndenied=%d\nother=%d\ndeny_us=%ld\n", ok, denied, other,
           (long)(worst * 1e6));
    return 0;
}

static int sends(int n, int size)
{
    int fd = tcp_connected(port);
    char *buf = malloc((size_t)size);
    memset(buf, 'x', (size_t)size);
    long sent = 0;
    int calls_ok = 0, denied = 0, other = 0;
    double t0 = now();
    for (int i = 0; i < n; i++) {
        ssize_t r = send(fd, buf, (size_t)size, MSG_NOSIGNAL);
        if (r >= 0) {
            sent += r;
            calls_ok++;
        } else if (errno == EAGAIN) {
            denied++;
        } else {
            other++;
        }
    }
    double dt = now() - t0;
    close(fd);
    printf("sent=%ld\ncalls_ok=%d\ndenied=%d\nother=%d\nelapsed_ms=%ld\n", sent,
           calls_ok, denied, other, (long)(dt * 1e3));
    return 0;
}

static int udp(int other, int n)
{
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    char buf[100];
    memset(buf, 'u', sizeof buf);
    int mok = 0, mden = 0, ook = 0, oden = 0;
    for (int i = 0; i < n; i++) {
        struct sockaddr_in a = addr4(port);
        if (sendto(fd, buf, sizeof buf, 0, (struct sockaddr *)&a, sizeof a) ==
            (ssize_t)sizeof buf)
            mok++;
        else
            mden++;
        struct sockaddr_in b = addr4(other);
        if (sendto(fd, buf, sizeof buf, 0, (struct sockaddr *)&b, sizeof b) ==
            (ssize_t)sizeof buf)
            ook++;
        else
            oden++;
    }
    printf("match_ok=%d\nmatch_denied=%d\nother_ok=%d\nother_denied=%d\n", mok,
           mden, ook, oden);
    return 0;
}

/* One datagram through sendmsg to `p`; returns what sendmsg returned. */
static ssize_t msg_to(int fd, int p)
{
    struct sockaddr_in a = addr4(p);
    struct iovec iov = {"m", 1};
    struct msghdr h = {.msg_name = &a,
                       .msg_namelen = sizeof a,
                       .msg_iov = &iov,
                       .msg_iovlen = 1};
    return sendmsg(fd, &h, 0);
}

static int udpmsg(int other)
{
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    ssize_t m1 = msg_to(fd, port);
    struct sockaddr_in a = addr4(port), b = addr4(other);
    struct iovec iov = {"n", 1};
    struct mmsghdr v[4];
    memset(v, 0, sizeof v);
    for (int i = 0; i < 4; i++) {
        /* matching, other, matching, matching */
        v[i].msg_hdr.msg_name = i == 1 ? &b : &a;
        v[i].msg_hdr.msg_namelen = sizeof a;
        v[i].msg_hdr.msg_iov = &iov;
        v[i].msg_hdr.msg_iovlen = 1;
    }
    int mm = sendmmsg(fd, v, 4, 0);
    ssize_t m2 = msg_to(fd, port);
    int e2 = errno;
    ssize_t m3 = msg_to(fd, other);
    close(fd);
    printf("sendmsg1=%zd\nsendmmsg=%d\nsendmsg2=%zd\nsendmsg2_errno=%d\n"
           "sendmsg_other=%zd\n",
           m1, mm, m2, m2 < 0 ? e2 : 0, m3);
    return 0;
}

static int udpconnect(void)
{
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in a = addr4(port);
    int c = connect(fd, (struct sockaddr *)&a, sizeof a);
    int s1 = (int)send(fd, "a", 1, 0);
    int s2 = (int)send(fd, "b", 1, 0);
    int e2 = s2 < 0 ? errno : 0;
    close(fd);
    int tcp = socket(AF_INET, SOCK_STREAM, 0);
    int t = connect_wait(tcp, (struct sockaddr *)&a, sizeof a);
    close(tcp);
    printf("udp_connect=%d\nsend1=%d\nsend2=%d\nsend2_errno=%d\n"
           "tcp_connect_errno=%d\n",
           c, s1, s2, e2, t);
    return 0;
}

static int do_writev(void)
{
    int fd = tcp_connected(port);
    static char a[500], b[500], c[500];
    memset(a, 'a', sizeof a);
    memset(b, 'b', sizeof b);
    memset(c, 'c', sizeof c);
    struct iovec iov[3] = {{a, 500}, {b, 500}, {c, 500}};
    ssize_t r1 = writev(fd, iov, 3);
    ssize_t r2 = writev(fd, iov, 3);
    int e2 = errno;
    close(fd);
    printf("first=%zd\nsecond=%zd\nsecond_errno=%d\n", r1, r2, r2 < 0 ? e2 : 0);
    return 0;
}

static int do_sendmmsg(void)
{
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in a = addr4(port);
    connect(fd, (struct sockaddr *)&a, sizeof a);
    static char buf[5][100];
    struct iovec iov[5];
    struct mmsghdr m[5];
    memset(m, 0, sizeof m);
    for (int i = 0; i < 5; i++) {
        memset(buf[i], '0' + i, 100);
        iov[i] = (struct iovec){buf[i], 100};
        m[i].msg_hdr.msg_iov = &iov[i];
        m[i].msg_hdr.msg_iovlen = 1;
    }
    int r1 = sendmmsg(fd, m, 5, 0);
    int r2 = sendmmsg(fd, m, 5, 0);
    int e2 = errno;
    close(fd);
    printf("first=%d\nsecond=%d\nsecond_errno=%d\n", r1, r2, r2 < 0 ? e2 : 0);
    return 0;
}

static int do_sendfile(const char *path)
{
    int fd = tcp_connected(port);
    int in = open(path, O_RDONLY);
    off_t off = 0;
    ssize_t r1 = sendfile(fd, in, &off, 1500);
    ssize_t r2 = sendfile(fd, in, &off, 1500);
    int e2 = errno;
    close(in);
    close(fd);
    printf("first=%zd\nsecond=%zd\nsecond_errno=%d\n", r1, r2, r2 < 0 ? e2 : 0);
    return 0;
}

static int v4mapped(void)
{
    int res[2];
    for (int i = 0; i < 2; i++) {
        int fd = socket(AF_INET6, SOCK_STREAM, 0);
        struct sockaddr_in6 a = {.sin6_family = AF_INET6,
                                 .sin6_port = htons(port)};
        inet_pton(AF_INET6, "::ffff:127.0.0.1", &a.sin6_addr);
        res[i] = connect_wait(fd, (struct sockaddr *)&a, sizeof a);
        close(fd);
    }
    printf("first_errno=%d\nsecond_errno=%d\n", res[0], res[1]);
    return 0;
}

static int fastopen(void)
{
    ssize_t r[2];
    int e[2];
    for (int i = 0; i < 2; i++) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in a = addr4(port);
        r[i] = sendto(fd, "hello", 5, MSG_FASTOPEN, (struct sockaddr *)&a,
                      sizeof a);
        e[i] = r[i] < 0 ? errno : 0;
        close(fd);
    }
    printf("first=%zd\nfirst_errno=%d\nsecond=%zd\nsecond_errno=%d\n", r[0],
           e[0], r[1], e[1]);
    return 0;
}

static int repeat(void)
{
    struct sockaddr_in a = addr4(port);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    int r1 = connect(fd, (struct sockaddr *)&a, sizeof a);
    int e1 = r1 < 0 ? errno : 0;
    struct pollfd p = {.fd = fd, .events = POLLOUT};
    poll(&p, 1, 2000);
    /* hiredis confirms with a second connect; loops see EISCONN. */
    int r2 = connect(fd, (struct sockaddr *)&a, sizeof a);
    int e2 = r2 < 0 ? errno : 0;
    int r3 = connect(fd, (struct sockaddr *)&a, sizeof a);
    int e3 = r3 < 0 ? errno : 0;
    int b = socket(AF_INET, SOCK_STREAM, 0);
    int eb = connect_wait(b, (struct sockaddr *)&a, sizeof a);
    int c = socket(AF_INET, SOCK_STREAM, 0);
    int ec = connect_wait(c, (struct sockaddr *)&a, sizeof a);
    close(fd);
    close(b);
    close(c);
    printf("a1_errno=%d\na2=%d\na2_errno=%d\na3_errno=%d\nb_errno=%d\n"
           "c_errno=%d\n",
           e1, r2, e2, e3, eb, ec);
    return 0;
}

/* Write `n` bytes to fd in 64 KiB writes; returns the bytes written. */
static long write_n(int fd, long n)
{
    static char buf[65536];
    long done = 0;
    while (done < n) {
        size_t k =
            n - done < (long)sizeof buf ? (size_t)(n - done) : sizeof buf;
        ssize_t r = write(fd, buf, k);
        if (r <= 0)
            break;
        done += r;
    }
    return done;
}

static int untouched(int outside, const char *dir)
{
    long mb = 1 << 20;
    char path[512];
    snprintf(path, sizeof path, "%s/untouched.dat", dir);
    int f = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    printf("file=%ld\n", write_n(f, mb));
    close(f);
    int p[2];
    pipe(p);
    fcntl(p[1], F_SETFL, O_NONBLOCK);
    printf("pipe=%ld\n", write_n(p[1], 32768));
    close(p[0]);
    close(p[1]);
    int u[2];
    socketpair(AF_UNIX, SOCK_STREAM, 0, u);
    printf("unix_send=%zd\n", send(u[0], "abcdef", 6, 0));
    printf("unix_write=%zd\n", write(u[0], "abcdef", 6));
    close(u[0]);
    close(u[1]);
    int o = tcp_connected(outside);
    printf("outside=%ld\n", write_n(o, mb));
    close(o);
    /* The control: the covered destination is throttled here. */
    int c = tcp_connected(port);
    ssize_t c1 = write(c, "0123456789", 10);
    ssize_t c2 = write(c, "0123456789", 10);
    printf("covered_first=%zd\ncovered_second=%zd\n", c1, c2);
    close(c);
    return 0;
}

/* A marked socket at `fd`; checks the mark works (a short grant of the
 * 1-byte budget, then EAGAIN... only for the first, which consumes the
 * budget; later ones must at least be marked: they get EAGAIN). */
static int marked_socket(void)
{
    return tcp_connected(port);
}

static void reuse_check(const char *how, int fd, const char *dir)
{
    /* fd was a marked socket and is now closed by `how`: the next open
     * gets the same number, and writes to it must pass untouched. */
    char path[512];
    snprintf(path, sizeof path, "%s/reuse-%s.dat", dir, how);
    int f = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (f != fd) {
        if (f >= 0 && dup2(f, fd) == fd)
            syscall(SYS_close, f);
        else
            printf("%s_fd=mismatch\n", how);
    }
    printf("%s=%ld\n", how, write_n(fd, 100000));
    close(fd);
}

static int reuse(const char *dir)
{
    int fd = marked_socket();
    ssize_t w = write(fd, "xx", 2);
    ssize_t w2 = write(fd, "xx", 2);
    printf("control_first=%zd\ncontrol_second=%zd\n", w, w2);
    close(fd);
    reuse_check("close", fd, dir);

    fd = marked_socket();
    close_range((unsigned)fd, (unsigned)fd, 0);
    reuse_check("close_range", fd, dir);

    fd = marked_socket();
    closefrom(fd);
    reuse_check("closefrom", fd, dir);

    fd = marked_socket();
    FILE *fp = fdopen(fd, "w");
    fclose(fp);
    reuse_check("fclose", fd, dir);

    /* dup2 over a marked fd: the new fd carries the file's mark (none). */
    fd = marked_socket();
    char path[512];
    snprintf(path, sizeof path, "%s/reuse-dup2.dat", dir);
    int f = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(f, fd);
    printf("dup2=%ld\n", write_n(fd, 100000));
    close(f);
    close(fd);

    /* close_range with CLOSE_RANGE_CLOEXEC closes nothing: still marked. */
    fd = marked_socket();
    close_range((unsigned)fd, (unsigned)fd, CLOSE_RANGE_CLOEXEC);
    w = write(fd, "xx", 2);
    printf("cloexec_still_marked=%d\n", w < 0 && errno == EAGAIN);
    close(fd);

    /* dup and F_DUPFD copy the mark. */
    fd = marked_socket();
    int d = dup(fd);
    int d2 = fcntl(fd, F_DUPFD_CLOEXEC, 100);
    int e1 = write(d, "xx", 2) < 0 && errno == EAGAIN;
    int e2 = write(d2, "xx", 2) < 0 && errno == EAGAIN;
    printf("dup_marked=%d\nfdupfd_marked=%d\n", e1, e2);
    close(d);
    close(d2);
    close(fd);
    return 0;
}

/* fd 1,000,000 when RLIMIT_NOFILE can be raised that far (it needs
 * CAP_SYS_RESOURCE beyond the hard limit), else the highest fd the hard
 * limit allows. */
static int bigfd(const char *dir)
{
    int target = 1000000;
    struct rlimit rl = {1048576, 1048576};
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0) {
        getrlimit(RLIMIT_NOFILE, &rl);
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
        target = (int)rl.rlim_max - 1;
    }
    int s = marked_socket();
    int big = dup2(s, target);
    close(s);
    ssize_t w1 = write(big, "xx", 2);
    ssize_t w2 = write(big, "xx", 2);
    printf("big=%d\nbig_first=%zd\nbig_second=%zd\n", big, w1, w2);
    close(big);
    char path[512];
    snprintf(path, sizeof path, "%s/big.dat", dir);
    int f = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(f, target);
    close(f);
    printf("big_reused=%ld\n", write_n(target, 100000));
    close(target);
    return 0;
}

/* Programs close every fd they did not open; the shim must have none
 * open that a new socket could be confused with. Run with a delaying
 * budget and a log, so the shim logs before and after the close_range. */
static int closerange(void)
{
    int s = tcp_connected(port);
    ssize_t a = send(s, "x", 1, MSG_NOSIGNAL);
    ssize_t b = send(s, "y", 1, MSG_NOSIGNAL); /* delayed: logged */
    close_range(3, ~0u, 0);
    int fd = tcp_connected(port);
    ssize_t c = send(fd, "APPDATA", 7, MSG_NOSIGNAL);
    ssize_t d = send(fd, "MORE", 4, MSG_NOSIGNAL);
    close(fd);
    printf("fd=%d\nsent=%zd\n", fd, a + b + c + d);
    return 0;
}

/* After fork the child's sends and the parent's come out of one budget
 * (send = 3/h): the child sends twice, then the parent twice. */
static int forked(void)
{
    int fd = tcp_connected(port);
    pid_t pid = fork();
    if (pid == 0) {
        int ok = (send(fd, "c", 1, 0) == 1) + (send(fd, "c", 1, 0) == 1);
        _exit(ok);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    int ok = (send(fd, "p", 1, 0) == 1) + (send(fd, "p", 1, 0) == 1);
    close(fd);
    printf("child_ok=%d\nparent_ok=%d\n", WEXITSTATUS(st), ok);
    return 0;
}

/* A sendall loop of a client that does a little work between calls (as a
 * slow or traced client would): counts the calls it needed. */
static int sendall(long total)
{
    int fd = tcp_connected(port);
    static char buf[65536];
    memset(buf, 's', sizeof buf);
    long sent = 0, calls = 0;
    while (sent < total) {
        size_t want = total - sent < (long)sizeof buf ? (size_t)(total - sent)
                                                      : sizeof buf;
        ssize_t r = send(fd, buf, want, MSG_NOSIGNAL);
        calls++;
        if (r < 0)
            break;
        sent += r;
        double until = now() + 20e-6;
        while (now() < until)
            ;
    }
    close(fd);
    printf("sent=%ld\ncalls=%ld\n", sent, calls);
    return 0;
}

/* The kernel takes part of most sends here (a small send buffer, a
 * non-blocking socket): what it did not take must go back to the budget,
 * so exactly the budget gets through in the end. */
static int shortfill(long total)
{
    int fd = tcp_connected(port);
    int small = 4096;
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
    fcntl(fd, F_SETFL, O_NONBLOCK);
    static char buf[10000];
    memset(buf, 'z', sizeof buf);
    long sent = 0;
    int shorts = 0, idle = 0;
    double t0 = now(), end = t0 + 4;
    while (sent < total && now() < end && idle < 50) {
        size_t want = total - sent < (long)sizeof buf ? (size_t)(total - sent)
                                                      : sizeof buf;
        ssize_t r = send(fd, buf, want, MSG_NOSIGNAL);
        if (r > 0) {
            sent += r;
            shorts += (size_t)r < want;
            idle = 0;
            continue;
        }
        if (r < 0 && errno != EAGAIN)
            break;
        /* Kernel full (poll waits) or budget spent (poll returns at
         * once: give up after 50 of those in a row). */
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        poll(&p, 1, 100);
        idle++;
    }
    close(fd);
    printf("sent=%ld\nshorts=%d\nelapsed_ms=%ld\n", sent, shorts,
           (long)((now() - t0) * 1e3));
    return 0;
}

/* syscall(2) itself, made with the instruction (as Go and static binaries
 * do): no libc entry point the shim could see. */
static long inline_syscall(long nr, long a, long b, long c)
{
    long r;
#if defined(__x86_64__)
    __asm__ volatile("syscall"
                     : "=a"(r)
                     : "a"(nr), "D"(a), "S"(b), "d"(c)
                     : "rcx", "r11", "memory");
#elif defined(__aarch64__)
    register long x8 __asm__("x8") = nr;
    register long x0 __asm__("x0") = a;
    register long x1 __asm__("x1") = b;
    register long x2 __asm__("x2") = c;
    __asm__ volatile("svc 0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2)
                     : "memory");
    r = x0;
#else
#error "inline_syscall: unknown architecture"
#endif
    return r;
}

static int rawconnect(void)
{
    int e[2];
    for (int i = 0; i < 2; i++) {
        struct sockaddr_in a = addr4(port);
        int fd = (int)syscall(SYS_socket, AF_INET, SOCK_STREAM, 0);
        long r = syscall(SYS_connect, fd, &a, sizeof a);
        e[i] = r == 0 ? 0 : errno;
        syscall(SYS_close, fd);
    }
    printf("first_errno=%d\nsecond_errno=%d\n", e[0], e[1]);
    return 0;
}

static int rawsend(void)
{
    int fd = tcp_connected(port);
    static char buf[600];
    memset(buf, 'r', sizeof buf);
    long w = syscall(SYS_write, fd, buf, sizeof buf);
    long t = syscall(SYS_sendto, fd, buf, sizeof buf, MSG_NOSIGNAL, NULL, 0);
    struct iovec iov = {buf, sizeof buf};
    long v = syscall(SYS_writev, fd, &iov, 1);
    int ev = errno;
    struct msghdr h = {.msg_iov = &iov, .msg_iovlen = 1};
    long m = syscall(SYS_sendmsg, fd, &h, MSG_NOSIGNAL);
    int em = errno;
    struct mmsghdr mm = {.msg_hdr = h};
    long mmr = syscall(SYS_sendmmsg, fd, &mm, 1, MSG_NOSIGNAL);
    int emm = errno;
    close(fd);
    printf("write=%ld\nsendto=%ld\nwritev=%ld\nwritev_errno=%d\nsendmsg=%ld\n"
           "sendmsg_errno=%d\nsendmmsg=%ld\nsendmmsg_errno=%d\n",
           w, t, v, v < 0 ? ev : 0, m, m < 0 ? em : 0, mmr, mmr < 0 ? emm : 0);
    return 0;
}

/* After fd was closed by `how`, a file gets its number: writes pass. */
static long reused_by_file(int fd, const char *dir, const char *how)
{
    char path[512];
    snprintf(path, sizeof path, "%s/raw-%s.dat", dir, how);
    int f = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (f != fd) {
        printf("%s_fd=mismatch\n", how);
        return -1;
    }
    long n = write_n(f, 100000);
    close(f);
    return n;
}

static int rawclose(const char *dir)
{
    int fd = tcp_connected(port);
    ssize_t c1 = write(fd, "xx", 2);
    ssize_t c2 = write(fd, "xx", 2);
    printf("control_first=%zd\ncontrol_second=%zd\n", c1, c2);
    syscall(SYS_close, fd);
    printf("close=%ld\n", reused_by_file(fd, dir, "close"));
    fd = tcp_connected(port);
    syscall(SYS_close_range, fd, fd, 0);
    printf("close_range=%ld\n", reused_by_file(fd, dir, "close_range"));
    fd = tcp_connected(port);
    int d = (int)syscall(SYS_dup, fd);
    int d3 = (int)syscall(SYS_dup3, fd, 200, 0);
    int e1 = write(d, "xx", 2) < 0 && errno == EAGAIN;
    int e3 = write(d3, "xx", 2) < 0 && errno == EAGAIN;
    printf("dup_marked=%d\ndup3_marked=%d\n", e1, e3);
    close(d);
    close(d3);
    close(fd);
    return 0;
}

static int iouring(void)
{
    struct io_uring_params p;
    memset(&p, 0, sizeof p);
    long fd = syscall(SYS_io_uring_setup, 4, &p);
    int e = fd < 0 ? errno : 0;
    if (fd >= 0)
        close((int)fd);
    printf("iouring_errno=%d\n", e);
    return 0;
}

static int stale(int other)
{
    /* A socket made behind the shim's back (an inline system call, as Go
     * makes them): the kernel is asked what it is, and its connect to the
     * rule's destination is charged (connect = 2/h). */
    struct sockaddr_in a = addr4(port);
    int s0 = (int)inline_syscall(SYS_socket, AF_INET, SOCK_STREAM, 0);
    int e0 = connect_wait(s0, (struct sockaddr *)&a, sizeof a);
    /* The budget: 1 byte. A socket that spent it is closed where the shim
     * cannot see: its mark stays behind. */
    int s1 = tcp_connected(port);
    ssize_t w1 = write(s1, "x", 1);
    ssize_t w2 = write(s1, "x", 1);
    inline_syscall(SYS_close, s1, 0, 0);
    /* socket() gets the number again: a fresh mark, so a connection to
     * a destination outside the rule is free. */
    int s2 = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in b = addr4(other);
    int e2 = connect_wait(s2, (struct sockaddr *)&b, sizeof b);
    long free_bytes = write_n(s2, 100000);
    close(s2);
    /* The raw socket's connect was charged: this third one is denied. */
    int s3 = socket(AF_INET, SOCK_STREAM, 0);
    int e3 = connect_wait(s3, (struct sockaddr *)&a, sizeof a);
    close(s3);
    close(s0);
    printf("raw_connect_errno=%d\nfirst=%zd\nsecond=%zd\nsame_fd=%d\n"
           "other_errno=%d\nfree=%ld\nnext_connect_errno=%d\n",
           e0, w1, w2, s2 == s1, e2, free_bytes, e3);
    return 0;
}

/* A socket that spent the 1-byte budget, closed where the shim cannot see:
 * its number keeps a stale mark. Returns the number. */
static int spent_unseen(void)
{
    int s = tcp_connected(port);
    ssize_t w = write(s, "x", 1); /* the budget, the first time */
    if (write(s, "x", 1) != -1)
        printf("budget_not_spent=%zd\n", w);
    inline_syscall(SYS_close, s, 0, 0);
    return s;
}

static int freshaccept(void)
{
    int ls = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = addr4(0);
    socklen_t l = sizeof a;
    if (bind(ls, (struct sockaddr *)&a, sizeof a) != 0 || listen(ls, 8) != 0 ||
        getsockname(ls, (struct sockaddr *)&a, &l) != 0)
        return 1;
    int c = socket(AF_INET, SOCK_STREAM, 0);
    int stale = spent_unseen();
    connect_wait(c, (struct sockaddr *)&a, sizeof a);
    int acc = accept4(ls, NULL, NULL, 0);
    /* The accepted end writes into the local connection: nothing of the
     * rule's destination, so nothing is charged. */
    long acc_bytes = 0;
    static char buf[65536];
    for (int i = 0; i < 2; i++) {
        ssize_t w = write(acc, buf, 1000);
        if (w <= 0)
            break;
        acc_bytes += w;
        if (read(c, buf, sizeof buf) <= 0)
            break;
    }
    close(acc);
    int stale2 = spent_unseen();
    int sv[2];
    socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
    ssize_t p1 = write(sv[0], "abc", 3);
    ssize_t p2 = write(sv[1], "abc", 3);
    printf("accept_same_fd=%d\naccepted=%ld\npair_same_fd=%d\npair_first=%zd\n"
           "pair_second=%zd\n",
           acc == stale, acc_bytes, sv[0] == stale2 || sv[1] == stale2, p1,
           p2);
    return 0;
}

static int inherit(int other, const char *self)
{
    int a = tcp_connected(port);
    int b = tcp_connected(other);
    char fa[16], fb[16], p[16];
    snprintf(fa, sizeof fa, "%d", a);
    snprintf(fb, sizeof fb, "%d", b);
    snprintf(p, sizeof p, "%d", port);
    execl(self, self, "inherited", p, fa, fb, (char *)NULL);
    perror("exec");
    return 1;
}

static int inherited(int a, int b)
{
    ssize_t w1 = write(a, "0123456789", 10);
    ssize_t w2 = write(a, "0123456789", 10);
    int e2 = errno;
    long other = write_n(b, 100000);
    printf("first=%zd\nsecond=%zd\nsecond_errno=%d\nother=%ld\n", w1, w2,
           w2 < 0 ? e2 : 0, other);
    return 0;
}

static pthread_barrier_t start_line;
static int first_ok, first_denied;

static void *first_call(void *arg)
{
    (void)arg;
    struct sockaddr_in a = addr4(port);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    pthread_barrier_wait(&start_line);
    int e = connect_wait(fd, (struct sockaddr *)&a, sizeof a);
    if (e == 0)
        __atomic_add_fetch(&first_ok, 1, __ATOMIC_RELAXED);
    else if (e == EAGAIN)
        __atomic_add_fetch(&first_denied, 1, __ATOMIC_RELAXED);
    close(fd);
    return NULL;
}

static int firstcalls(int n)
{
    pthread_t t[64];
    if (n > 64)
        n = 64;
    pthread_barrier_init(&start_line, NULL, (unsigned)n);
    for (int i = 0; i < n; i++)
        pthread_create(&t[i], NULL, first_call, NULL);
    for (int i = 0; i < n; i++)
        pthread_join(t[i], NULL);
    printf("ok=%d\ndenied=%d\n", first_ok, first_denied);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: client MODE PORT [ARGS]\n");
        return 2;
    }
    const char *mode = argv[1];
    port = parse_int(argv[2]);
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (strcmp(mode, "connects") == 0 && argc == 4)
        return connects(parse_int(argv[3]));
    if (strcmp(mode, "sends") == 0 && argc == 5)
        return sends(parse_int(argv[3]), parse_int(argv[4]));
    if (strcmp(mode, "udp") == 0 && argc == 5)
        return udp(parse_int(argv[3]), parse_int(argv[4]));
    if (strcmp(mode, "udpmsg") == 0 && argc == 4)
        return udpmsg(parse_int(argv[3]));
    if (strcmp(mode, "udpconnect") == 0)
        return udpconnect();
    if (strcmp(mode, "writev") == 0)
        return do_writev();
    if (strcmp(mode, "sendmmsg") == 0)
        return do_sendmmsg();
    if (strcmp(mode, "sendfile") == 0 && argc == 4)
        return do_sendfile(argv[3]);
    if (strcmp(mode, "v4mapped") == 0)
        return v4mapped();
    if (strcmp(mode, "fastopen") == 0)
        return fastopen();
    if (strcmp(mode, "repeat") == 0)
        return repeat();
    if (strcmp(mode, "untouched") == 0 && argc == 5)
        return untouched(parse_int(argv[3]), argv[4]);
    if (strcmp(mode, "reuse") == 0 && argc == 4)
        return reuse(argv[3]);
    if (strcmp(mode, "closerange") == 0)
        return closerange();
    if (strcmp(mode, "fork") == 0)
        return forked();
    if (strcmp(mode, "sendall") == 0 && argc == 4)
        return sendall(parse_int(argv[3]));
    if (strcmp(mode, "shortfill") == 0 && argc == 4)
        return shortfill(parse_int(argv[3]));
    if (strcmp(mode, "bigfd") == 0 && argc == 4)
        return bigfd(argv[3]);
    if (strcmp(mode, "rawconnect") == 0)
        return rawconnect();
    if (strcmp(mode, "rawsend") == 0)
        return rawsend();
    if (strcmp(mode, "rawclose") == 0 && argc == 4)
        return rawclose(argv[3]);
    if (strcmp(mode, "iouring") == 0)
        return iouring();
    if (strcmp(mode, "stale") == 0 && argc == 4)
        return stale(parse_int(argv[3]));
    if (strcmp(mode, "inherit") == 0 && argc == 4)
        return inherit(parse_int(argv[3]), argv[0]);
    if (strcmp(mode, "inherited") == 0 && argc == 5)
        return inherited(parse_int(argv[3]), parse_int(argv[4]));
    if (strcmp(mode, "freshaccept") == 0)
        return freshaccept();
    if (strcmp(mode, "firstcalls") == 0 && argc == 4)
        return firstcalls(parse_int(argv[3]));
    fprintf(stderr, "unknown mode or arguments: %s\n", mode);
    return 2;
}
