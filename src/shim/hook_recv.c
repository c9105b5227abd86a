/* hook_recv.c — read, readv, recv, recvfrom, recvmsg: what the program
 * receives on a plaintext connection whose requests are counted (the
 * RL_FD_HTTP mark) goes, after the real call, to the connection's
 * response side (SPEC §12; policy/respconn.c).
 *
 * Every process reads all the time (files, pipes, terminals), so an fd
 * without the mark costs one table load and a tail call into libc, as
 * `write` does (hook_write.c). On a marked fd the hook never changes what
 * the kernel returned: it reads the bytes the call really returned after
 * it returned them. A peek (MSG_PEEK) is read again later and is not
 * taken; urgent data (MSG_OOB) and the error queue are not the stream;
 * TCP's MSG_TRUNC throws the bytes away unseen, and so does a read from a
 * signal handler (which takes no lock): the response side then turns off
 * rather than guess. A TLS connection's socket carries ciphertext: its
 * requests, and so its responses, are the TLS layer's (hook_tls_read.c);
 * the send side drops the socket's mark once the TLS layer has found its
 * session, and until then its reads are not looked at.
 * A read that ends the stream (EOF into room for a byte, or ECONNRESET),
 * and the program's close of a marked fd (hook_close.c), go there too,
 * with no bytes: a request still awaiting its answer then counts as a
 * reset or a timeout (SPEC §14 backoff_on).
 * recvmmsg is not hooked: no client the tests run reads a stream with it
 * (libcurl, wget, libssl, libgnutls, python import read, recv, recvfrom,
 * recvmsg and readv). */
#include <errno.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "policy/decide_request.h"
#include "shim/conntab.h"
#include "shim/fdtab.h"
#include "shim/hooks.h"
#include "shim/madeup.h"
#include "shim/real.h"
#include "shim/self.h"
#include "shim/shim.h"
#include "shim/tlswrite.h"

/* Bytes of fd's stream went by unseen (a handler's read, which may take
 * no lock, or MSG_TRUNC's): said in the mark with one CAS, nothing locked
 * or allocated; the next read turns the response side off. */
static void mark_lost(int fd)
{
    uint32_t m = rl_fdtab_get(fd);
    while ((m & RL_FD_HTTP) && !(m & RL_FD_RESP_LOST))
        if (rl_fdtab_cas(fd, &m, m | RL_FD_RESP_LOST))
            return;
}

/* The bytes one call returned: `got` of them in iov[0..n); or, `end`
 * not RL_READ_BYTES, the end of the stream (policy/reqconn.h). */
static __attribute__((noinline)) void received(int fd, const struct iovec *iov,
                                               size_t n, size_t got,
                                               const char *call, int end)
{
    if (rl_hook_in_handler()) {
        mark_lost(fd);
        return;
    }
    /* A vfork child reads in its parent's memory: not its connection. */
    if (rl_shim_in_vfork_child() || !rl_shim_enter())
        return;
    int saved = errno;
    if (rl_fdtab_get(fd) & RL_FD_HTTP_LATE)
        rl_conntab_late(fd);
    struct rl_reqconn *c = rl_conntab_acquire_read(fd);
    if (c == NULL) {
        rl_shim_leave();
        errno = saved;
        return;
    }
    uint32_t m = rl_fdtab_get(fd);
    bool lost = (m & RL_FD_RESP_LOST) != 0;
    while ((m & RL_FD_RESP_LOST) &&
           !rl_fdtab_cas(fd, &m, m & ~RL_FD_RESP_LOST))
        ;
    const struct rl_reqread r = {fd, call, end};
    if (rl_request_received(rl_shim_proc(), c, RL_CARRY_PLAIN, &r, lost, iov,
                            n, got)) {
        /* Not HTTP after all: from now on its calls cost what any other
         * socket's do. */
        rl_fdtab_set(fd, rl_fdtab_get(fd) & ~(RL_FD_HTTP | RL_FD_RESP_LOST));
        rl_conntab_forget(fd);
    }
    rl_shim_leave();
    rl_conntab_release_read(c);
    errno = saved;
}

/* Did iov[0..n) have room for a byte? */
static bool room(const struct iovec *iov, size_t n)
{
    for (size_t i = 0; iov != NULL && i < n; i++)
        if (iov[i].iov_len > 0)
            return true;
    return false;
}

/* What a receive call with `flags` returned is the stream's next bytes:
 * not a peek, not urgent data, not the error queue. TCP's MSG_TRUNC
 * discards them without copying: they are lost to the reader. */
static void taken(int fd, int flags, const char *call, ssize_t r,
                  const struct iovec *iov, size_t n)
{
    if (flags & (MSG_PEEK | MSG_OOB | MSG_ERRQUEUE))
        return;
    if (r <= 0) {
        /* The server's end of the stream, EOF or a reset (SPEC §14: a
         * request awaiting its answer got none). A read into no room
         * returns 0 too, and is not one. */
        if ((r == 0 && room(iov, n)) || (r < 0 && errno == ECONNRESET))
            received(fd, NULL, 0, 0, call, RL_READ_ENDED);
        return;
    }
    if (flags & MSG_TRUNC)
        mark_lost(fd);
    else
        received(fd, iov, n, (size_t)r, call, RL_READ_BYTES);
}

void rl_recv_closing(int fd)
{
    if (!(rl_fdtab_get(fd) & RL_FD_HTTP_LATE))
        received(fd, NULL, 0, 0, "close", RL_READ_CLOSING);
}

/* A made-up answer queued on fd (RL_FD_MADEUP, SPEC §15): its bytes,
 * when due, are the read's, with no real call (a blocking read returns
 * them at once); 0: none due, read the kernel's. The mark goes when the
 * queue is empty. */
static __attribute__((noinline)) ssize_t madeup(int fd,
                                                const struct iovec *iov,
                                                size_t n, int flags)
{
    /* (Inside a TLS call the read is the library's, of ciphertext: a
     * session's made-up answers are its reads', hook_tls_read.c.) */
    if ((flags & (MSG_OOB | MSG_ERRQUEUE)) || rl_tls_depth > 0 ||
        rl_hook_in_handler() || rl_shim_in_vfork_child() || !rl_shim_enter())
        return 0;
    int saved = errno;
    struct rl_reqconn *c = rl_conntab_acquire_read(fd);
    size_t got = 0;
    bool left = false;
    if (c != NULL) {
        got = rl_request_madeup(
            c, (flags & MSG_PEEK) ? RL_MADEUP_PEEK : RL_MADEUP_TAKE, iov, n,
            &left);
        rl_conntab_release_read(c);
    }
    if (!left)
        rl_madeup_unmark(fd);
    rl_shim_leave();
    errno = saved;
    return (ssize_t)got;
}

static inline bool madeup_queued(int fd)
{
    return __builtin_expect((rl_fdtab_get(fd) & RL_FD_MADEUP) != 0, 0);
}

/* A read of the program under way on fd, for the looks of a write
 * waiting for its turn (readers.h), from before a made-up answer is
 * asked for to after what it read went to the response side; not one in
 * a signal handler. */
static bool reading(int fd)
{
    /* (Inside a TLS call: the library's own read, a look's included.) */
    if (rl_tls_depth > 0 || rl_hook_in_handler())
        return false;
    rl_readers_enter(&rl_shim_self->readers, (uintptr_t)fd);
    return true;
}

static void read_done(int fd, bool counted)
{
    if (counted)
        rl_readers_leave(&rl_shim_self->readers, (uintptr_t)fd);
}

static __attribute__((noinline)) ssize_t read_marked(int fd, void *buf,
                                                     size_t len)
{
    struct iovec one = {buf, len};
    bool counted = reading(fd);
    ssize_t k = madeup_queued(fd) ? madeup(fd, &one, 1, 0) : 0;
    ssize_t r = k > 0 ? k : REAL(read)(fd, buf, len);
    if (k <= 0)
        taken(fd, 0, "read", r, &one, 1);
    read_done(fd, counted);
    return r;
}

RL_EXPORT ssize_t read(int fd, void *buf, size_t len)
{
    if (__builtin_expect(!(rl_fdtab_get(fd) & RL_FD_HTTP), 1))
        return rl_real.read(fd, buf, len); /* never NULL (real.h) */
    return read_marked(fd, buf, len);
}

static __attribute__((noinline)) ssize_t recv_marked(int fd, void *buf,
                                                     size_t len, int flags)
{
    struct iovec one = {buf, len};
    bool counted = reading(fd);
    ssize_t k = madeup_queued(fd) ? madeup(fd, &one, 1, flags) : 0;
    ssize_t r = k > 0 ? k : REAL(recv)(fd, buf, len, flags);
    if (k <= 0)
        taken(fd, flags, "recv", r, &one, 1);
    read_done(fd, counted);
    return r;
}

RL_EXPORT ssize_t recv(int fd, void *buf, size_t len, int flags)
{
    if (__builtin_expect(!(rl_fdtab_get(fd) & RL_FD_HTTP), 1))
        return rl_real.recv(fd, buf, len, flags); /* never NULL (real.h) */
    return recv_marked(fd, buf, len, flags);
}

static __attribute__((noinline)) ssize_t
readv_marked(int fd, const struct iovec *iov, int iovcnt)
{
    bool counted = reading(fd);
    ssize_t k = madeup_queued(fd) && iovcnt > 0
                    ? madeup(fd, iov, (size_t)iovcnt, 0)
                    : 0;
    ssize_t r = k > 0 ? k : REAL(readv)(fd, iov, iovcnt);
    int saved = errno;
    if (k <= 0 && iovcnt > 0)
        taken(fd, 0, "readv", r, iov, (size_t)iovcnt);
    read_done(fd, counted);
    errno = saved;
    return r;
}

RL_EXPORT ssize_t readv(int fd, const struct iovec *iov, int iovcnt)
{
    if (__builtin_expect(!(rl_fdtab_get(fd) & RL_FD_HTTP), 1))
        return REAL(readv)(fd, iov, iovcnt);
    return readv_marked(fd, iov, iovcnt);
}

static __attribute__((noinline)) ssize_t
recvfrom_marked(int fd, void *buf, size_t len, int flags, struct sockaddr *sa,
                socklen_t *salen)
{
    struct iovec one = {buf, len};
    bool counted = reading(fd);
    ssize_t k = madeup_queued(fd) ? madeup(fd, &one, 1, flags) : 0;
    ssize_t r = k > 0 ? k : REAL(recvfrom)(fd, buf, len, flags, sa, salen);
    int saved = errno;
    if (k <= 0)
        taken(fd, flags, "recvfrom", r, &one, 1);
    read_done(fd, counted);
    errno = saved;
    return r;
}

RL_EXPORT ssize_t recvfrom(int fd, void *buf, size_t len, int flags,
                           struct sockaddr *sa, socklen_t *salen)
{
    if (__builtin_expect(!(rl_fdtab_get(fd) & RL_FD_HTTP), 1))
        return REAL(recvfrom)(fd, buf, len, flags, sa, salen);
    return recvfrom_marked(fd, buf, len, flags, sa, salen);
}

static __attribute__((noinline)) ssize_t
recvmsg_marked(int fd, struct msghdr *msg, int flags)
{
    bool counted = reading(fd);
    ssize_t k = madeup_queued(fd) && msg != NULL
                    ? madeup(fd, msg->msg_iov, msg->msg_iovlen, flags)
                    : 0;
    if (k > 0) {
        msg->msg_flags = 0;
        msg->msg_controllen = 0;
    }
    ssize_t r = k > 0 ? k : REAL(recvmsg)(fd, msg, flags);
    int saved = errno;
    if (k <= 0 && msg != NULL)
        taken(fd, flags, "recvmsg", r, msg->msg_iov, msg->msg_iovlen);
    read_done(fd, counted);
    errno = saved;
    return r;
}

RL_EXPORT ssize_t recvmsg(int fd, struct msghdr *msg, int flags)
{
    if (__builtin_expect(!(rl_fdtab_get(fd) & RL_FD_HTTP), 1))
        return REAL(recvmsg)(fd, msg, flags);
    return recvmsg_marked(fd, msg, flags);
}
