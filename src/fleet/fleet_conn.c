/* fleet_conn.c — the connection to the fleet's Redis (see fleet_conn.h).
 *
 * A new connection sends, in one write, AUTH (fleet_password), SELECT (the
 * URL's db) and SCRIPT LOAD of both scripts, whose SHA1 the process learns
 * from the replies: two round trips for a process's first decision. */
#include "fleet/fleet_conn.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "fleet/fleet_scripts.h"
#include "util/clock.h"
#include "util/sys.h"

/* ---- whose number is it ------------------------------------------------*/

static bool same_file(int fd, dev_t dev, ino_t ino)
{
    struct stat st;
    return fd >= 0 && fstat(fd, &st) == 0 && st.st_dev == dev &&
           st.st_ino == ino;
}

bool rl_fleet_conn_ours(const struct rl_fleet_conn *c)
{
    return same_file(c->fd, c->dev, c->ino);
}

/* Is fd a stream socket of `fam` that nothing connected or bound to a
 * peer yet: the one socket() just made, not a number the program put
 * there meanwhile? */
static bool fresh_socket(int fd, int fam, struct stat *st)
{
    int v = 0;
    socklen_t l = sizeof v;
    struct sockaddr_storage peer;
    socklen_t pl = sizeof peer;
    if (fstat(fd, st) != 0 || !S_ISSOCK(st->st_mode))
        return false;
    if (rl_sys.getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &v, &l) != 0 || v != fam)
        return false;
    l = sizeof v;
    if (rl_sys.getsockopt(fd, SOL_SOCKET, SO_TYPE, &v, &l) != 0 ||
        v != SOCK_STREAM)
        return false;
    l = sizeof v;
    if (rl_sys.getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &v, &l) != 0 || v)
        return false;
    return rl_sys.getpeername(fd, (struct sockaddr *)&peer, &pl) != 0 &&
           errno == ENOTCONN;
}

/* A new socket of `fam`, above RL_SYS_FD_FLOOR when the process may have
 * that many, and its identity in *st. socket() takes the lowest free
 * number, which a program thread may dup2 over before the socket moves:
 * then the copy is not ours (closed: it is only a copy), the low number
 * is the program's (left alone), and the call fails with -EAGAIN. Out
 * of line: its checks' buffers are off the stack once it returns (a
 * decision's whole call to Redis runs on the program's stack). */
static __attribute__((noinline)) int new_socket(int fam, struct stat *st)
{
    int fd = rl_sys.socket(fam, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    if (!fresh_socket(fd, fam, st))
        return -EAGAIN; /* not ours to close */
    if (fd >= RL_SYS_FD_FLOOR)
        return fd;
    int high = rl_sys.fcntl(fd, F_DUPFD_CLOEXEC, RL_SYS_FD_FLOOR);
    if (high < 0)
        return fd; /* RLIMIT_NOFILE below the floor: keep the low one */
    if (!same_file(high, st->st_dev, st->st_ino)) {
        rl_sys.close(high);
        return -EAGAIN;
    }
    if (same_file(fd, st->st_dev, st->st_ino))
        rl_sys.close(fd);
    return high;
}

static void forget(struct rl_fleet_conn *c, bool free_reader)
{
    int fd = c->fd;
    /* The number is unpublished before it is closed: a child forked in
     * between must not close what may by then be another file. */
    c->fd = -1;
    if (same_file(fd, c->dev, c->ino))
        rl_sys.close(fd);
    if (free_reader && c->rd != NULL)
        redisReaderFree(c->rd);
    c->rd = NULL;
}

void rl_fleet_conn_close(struct rl_fleet_conn *c)
{
    forget(c, true);
}

void rl_fleet_conn_abandon(struct rl_fleet_conn *c)
{
    forget(c, false);
}

void rl_fleet_fd_table_grow(void)
{
    int fd = rl_sys.openat(AT_FDCWD, "/", O_PATH | O_CLOEXEC, 0);
    if (fd < 0)
        return;
    int high = rl_sys.fcntl(fd, F_DUPFD_CLOEXEC, RL_SYS_FD_FLOOR);
    if (high >= 0)
        rl_sys.close(high);
    rl_sys.close(fd);
}

/* ---- bounded I/O --------------------------------------------------------*/

static int wait_fd(int fd, short ev, uint64_t deadline)
{
    for (;;) {
        uint64_t now = rl_clock_now_ns();
        if (now >= deadline)
            return -ETIMEDOUT;
        struct pollfd p = {.fd = fd, .events = ev};
        int ms = (int)((deadline - now + 999999) / 1000000);
        int r = rl_sys.poll(&p, 1, ms);
        if (r > 0 && (p.revents & POLLNVAL))
            return -EBADF; /* closed under us (a close_range sweep) */
        if (r > 0)
            return (p.revents & POLLERR) && !(p.revents & ev) ? -ECONNRESET
                                                               : 0;
        if (r < 0 && errno != EINTR)
            return -errno;
    }
}

int rl_fleet_conn_send_raw(struct rl_fleet_conn *c, const char *buf, size_t n,
                           uint64_t deadline)
{
    while (n > 0) {
        if (!rl_fleet_conn_ours(c))
            return -EBADF;
        ssize_t w = rl_sys.send(c->fd, buf, n, MSG_NOSIGNAL);
        if (w > 0) {
            buf += w;
            n -= (size_t)w;
            continue;
        }
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && errno != EAGAIN)
            return -errno;
        int r = wait_fd(c->fd, POLLOUT, deadline);
        if (r < 0)
            return r;
    }
    return 0;
}

int rl_fleet_conn_send(struct rl_fleet_conn *c, uint64_t deadline)
{
    int r = c->overflow ? -E2BIG
                        : rl_fleet_conn_send_raw(c, c->out, c->len, deadline);
    /* The handshake's AUTH carries the password. */
    explicit_bzero(c->out, c->len);
    c->len = 0;
    return r;
}

int rl_fleet_conn_reply(struct rl_fleet_conn *c, redisReply **out,
                        uint64_t deadline)
{
    for (;;) {
        void *rep = NULL;
        if (redisReaderGetReply(c->rd, &rep) != REDIS_OK)
            return -EPROTO;
        if (rep != NULL) {
            *out = rep;
            return 0;
        }
        if (!rl_fleet_conn_ours(c))
            return -EBADF;
        ssize_t n = rl_sys.recv(c->fd, c->in, sizeof c->in, MSG_DONTWAIT);
        if (n > 0) {
            if (redisReaderFeed(c->rd, c->in, (size_t)n) != REDIS_OK)
                return -EPROTO;
            continue;
        }
        if (n == 0)
            return -ECONNRESET;
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN)
            return -errno;
        int r = wait_fd(c->fd, POLLIN, deadline);
        if (r < 0)
            return r;
    }
}

/* Out of line: the kernel's tcp_info is a few hundred bytes of the
 * caller's stack, needed only by a call already late. */
__attribute__((noinline)) uint64_t
rl_fleet_conn_heard_ns(const struct rl_fleet_conn *c)
{
    int fd = c->fd;
    if (!rl_fleet_conn_ours(c))
        return UINT64_MAX;
    char b;
    /* A byte waiting (or the peer's close: n == 0) is something heard. */
    if (rl_sys.recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) >= 0)
        return 0;
    struct tcp_info ti;
    socklen_t len = sizeof ti;
    if (rl_sys.getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0 ||
        len < offsetof(struct tcp_info, tcpi_last_data_recv) +
                  sizeof ti.tcpi_last_data_recv)
        return UINT64_MAX;
    return (uint64_t)ti.tcpi_last_data_recv * 1000000u;
}

/* ---- commands -----------------------------------------------------------*/

static void cmd_add(struct rl_fleet_conn *c, const char *s, size_t n)
{
    if (c->overflow || c->len + n > sizeof c->out) {
        c->overflow = true;
        return;
    }
    memcpy(c->out + c->len, s, n);
    c->len += n;
}

const char *rl_fleet_dec(char buf[24], uint64_t v)
{
    char *p = buf + 23;
    *p = '\0';
    do {
        *--p = (char)('0' + v % 10);
        v /= 10;
    } while (v != 0);
    return p;
}

/* `prefix`, n in decimal, CRLF: a RESP header. By hand, not printf:
 * glibc's formatting takes kilobytes of the caller's stack. */
static void cmd_head(struct rl_fleet_conn *c, char prefix, uint64_t n)
{
    char d[24];
    const char *s = rl_fleet_dec(d, n);
    cmd_add(c, &prefix, 1);
    cmd_add(c, s, strlen(s));
    cmd_add(c, "\r\n", 2);
}

void rl_fleet_cmd_reset(struct rl_fleet_conn *c)
{
    c->len = 0;
    c->overflow = false;
}

void rl_fleet_cmd_start(struct rl_fleet_conn *c, unsigned nargs)
{
    cmd_head(c, '*', nargs);
}

void rl_fleet_cmd_cat(struct rl_fleet_conn *c, const char *const *parts,
                      unsigned n)
{
    size_t len = 0;
    for (unsigned i = 0; i < n; i++)
        len += strlen(parts[i]);
    cmd_head(c, '$', len);
    for (unsigned i = 0; i < n; i++)
        cmd_add(c, parts[i], strlen(parts[i]));
    cmd_add(c, "\r\n", 2);
}

void rl_fleet_cmd_lua(struct rl_fleet_conn *c, const struct rl_fleet_lua *s)
{
    size_t len = (size_t)(s->end - s->text);
    cmd_head(c, '$', len);
    cmd_add(c, s->text, len);
    cmd_add(c, "\r\n", 2);
}

void rl_fleet_cmd_str(struct rl_fleet_conn *c, const char *s)
{
    rl_fleet_cmd_cat(c, &s, 1);
}

void rl_fleet_cmd_u64(struct rl_fleet_conn *c, uint64_t v)
{
    char d[24];
    rl_fleet_cmd_str(c, rl_fleet_dec(d, v));
}

/* ---- connecting ---------------------------------------------------------*/

void rl_fleet_conn_why(struct rl_fleet_conn *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->why, sizeof c->why, fmt, ap);
    va_end(ap);
}

int rl_fleet_read_file(const char *path, int flags, char *buf, size_t len)
{
    int fd = rl_sys.openat(AT_FDCWD, path, flags | O_RDONLY | O_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    struct stat st;
    int r = fstat(fd, &st) == 0 ? 0 : -errno;
    ssize_t n = 0;
    if (r == 0) {
        n = rl_sys.read(fd, buf, len - 1);
        r = n < 0 ? -errno : 0;
    }
    /* A program thread may have dup2'd over the (low) number meanwhile:
     * then what was read is not the file's, and the number is not ours. */
    if (!same_file(fd, st.st_dev, st.st_ino))
        r = -EBADF;
    else
        rl_sys.close(fd);
    buf[r == 0 ? n : 0] = '\0';
    if (r < 0)
        explicit_bzero(buf, len);
    return r;
}

int rl_fleet_conn_error(struct rl_fleet_conn *c, const redisReply *r,
                        const char *what)
{
    rl_fleet_conn_why(c, "%s: %.*s", what, (int)r->len, r->str);
    if (strncmp(r->str, "LOADING", 7) == 0 ||
        strncmp(r->str, "READONLY", 8) == 0)
        return -EAGAIN;
    if (strncmp(r->str, "NOAUTH", 6) == 0 ||
        strncmp(r->str, "WRONGPASS", 9) == 0)
        return -EACCES;
    return -EPROTO;
}

int rl_fleet_conn_handshake(struct rl_fleet_conn *c,
                            const struct rl_fleet_addr *addr,
                            const char *password_file, char (*sha)[41],
                            uint64_t deadline)
{
    unsigned n = 0;
    rl_fleet_cmd_reset(c);
    if (password_file != NULL) {
        /* Read at each connection, so that a rotated file is picked up;
         * into the receive buffer, unused until the replies. */
        int r = rl_fleet_read_file(password_file, O_NOFOLLOW, c->in,
                                   sizeof c->in);
        if (r < 0) {
            rl_fleet_conn_why(c, "cannot read fleet_password %s: %s",
                              password_file, strerror(-r));
            return r;
        }
        c->in[strcspn(c->in, "\r\n")] = '\0';
        rl_fleet_cmd_start(c, 2);
        rl_fleet_cmd_str(c, "AUTH");
        rl_fleet_cmd_str(c, c->in);
        explicit_bzero(c->in, sizeof c->in);
        n++;
    }
    if (addr->db != 0) {
        rl_fleet_cmd_start(c, 2);
        rl_fleet_cmd_str(c, "SELECT");
        rl_fleet_cmd_u64(c, addr->db);
        n++;
    }
    for (int i = 0; i < 2; i++) {
        rl_fleet_cmd_start(c, 3);
        rl_fleet_cmd_str(c, "SCRIPT");
        rl_fleet_cmd_str(c, "LOAD");
        rl_fleet_cmd_lua(c,
                         i == 0 ? &rl_fleet_lua_bucket : &rl_fleet_lua_window);
        n++;
    }
    int r = rl_fleet_conn_send(c, deadline);
    if (r < 0) {
        rl_fleet_conn_why(c, "%s", strerror(-r));
        return r;
    }
    int first_err = 0;
    for (unsigned i = 0; i < n; i++) {
        redisReply *rep = NULL;
        r = rl_fleet_conn_reply(c, &rep, deadline);
        if (r < 0) {
            rl_fleet_conn_why(c, "%s", strerror(-r));
            return r;
        }
        unsigned script = i - (n - 2);
        if (rep->type == REDIS_REPLY_ERROR && first_err == 0)
            first_err = rl_fleet_conn_error(
                c, rep, password_file != NULL && i == 0 ? "AUTH refused"
                                                        : "error");
        else if (i >= n - 2 && rep->type == REDIS_REPLY_STRING &&
                 rep->len == 40)
            memcpy(sha[script], rep->str, 41);
        freeReplyObject(rep);
    }
    return first_err;
}

/* A new socket, connected to addr within *deadline (moved on by the time
 * the fd table took to grow), and TCP_NODELAY; recorded in c. Out of
 * line: its buffers (a stat, socket options) are off the caller's stack
 * before the handshake waits. */
static __attribute__((noinline)) int
connect_to(struct rl_fleet_conn *c, const struct rl_fleet_addr *addr,
           uint64_t *deadline)
{
    int fam = addr->sa.ss_family;
    struct stat st;
    uint64_t t0 = rl_clock_now_ns();
    int fd = new_socket(fam, &st);
    /* Moving the socket above the floor may grow the process's fd table,
     * and in a process of several threads the kernel then waits for an
     * RCU grace period (milliseconds on a loaded machine): not a wait on
     * Redis, so not spent out of its bound. */
    *deadline += rl_clock_now_ns() - t0;
    if (fd < 0) {
        rl_fleet_conn_why(c, "socket: %s", strerror(-fd));
        return fd;
    }
    c->dev = st.st_dev;
    c->ino = st.st_ino;
    c->fd = fd; /* after dev and ino: see struct rl_fleet_conn */
    c->rd = redisReaderCreate();
    int r = c->rd != NULL ? 0 : -ENOMEM;
    if (r == 0 &&
        rl_sys.connect(fd, (const struct sockaddr *)&addr->sa, addr->salen) !=
            0) {
        r = errno == EINPROGRESS ? wait_fd(fd, POLLOUT, *deadline) : -errno;
        if (r == 0) {
            int e = 0;
            socklen_t el = sizeof e;
            if (rl_sys.getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el) != 0)
                e = errno;
            r = -e;
        }
    }
    if (r < 0) {
        rl_fleet_conn_why(c, "%s", strerror(-r));
        rl_fleet_conn_close(c);
        return r;
    }
    if (fam != AF_UNIX) {
        int one = 1;
        rl_sys.setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    return 0;
}

int rl_fleet_conn_open(struct rl_fleet_conn *c,
                       const struct rl_fleet_addr *addr,
                       const char *password_file, char (*sha)[41],
                       uint64_t deadline)
{
    int r = connect_to(c, addr, &deadline);
    if (r < 0)
        return r;
    r = rl_fleet_conn_handshake(c, addr, password_file, sha, deadline);
    if (r < 0)
        rl_fleet_conn_close(c);
    return r;
}
