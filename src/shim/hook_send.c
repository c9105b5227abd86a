/* hook_send.c — send, sendto, sendmsg, sendmmsg, and the send halves that
 * hook_write.c shares.
 *
 * A send is charged when its fd is marked MATCHED (it connected to a
 * covered destination) or, on a datagram socket, when its explicit
 * destination is covered. An unmarked fd with no address costs one table
 * load. Stream sends may be granted in part (a short write); datagrams
 * are all or nothing; sendmmsg sends the prefix of messages granted. */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include "policy/config.h"
#include "policy/gate.h"
#include "shim/fdtab.h"
#include "shim/hooks.h"
#include "shim/real.h"
#include "shim/shim.h"

uint32_t rl_hook_send_kind(int fd, uint32_t m, const struct sockaddr *sa,
                           socklen_t len)
{
    bool inet = sa != NULL && len >= sizeof(sa_family_t) &&
                (sa->sa_family == AF_INET || sa->sa_family == AF_INET6);
    if (inet) {
        uint32_t type = rl_hook_sock_type(fd, m);
        if (type == RL_FD_DGRAM) {
            if (m == 0)
                /* Remember the type: the next sendto asks no kernel. */
                rl_fdtab_set(fd, RL_FD_DGRAM);
            return rl_gate_charges_sends() && rl_gate_covers(sa, len)
                       ? RL_FD_DGRAM
                       : 0;
        }
        /* A stream socket ignores the address (MSG_FASTOPEN aside, which
         * the caller handled): its mark decides. */
    }
    if (!(m & RL_FD_MATCHED))
        return 0;
    return m & RL_FD_STREAM ? RL_FD_STREAM : RL_FD_DGRAM;
}

int rl_hook_send_begin(int fd, uint32_t kind, const char *call,
                       const struct sockaddr *sa, socklen_t salen, size_t len,
                       struct rl_gate_ticket *t, size_t *grant)
{
    uint64_t want = len, min = len;
    if (kind == RL_FD_STREAM) {
        uint64_t cap = rl_gate_max_bytes();
        if (want > cap)
            want = cap;
        min = 1;
    }
    int act = rl_gate_send(t, call, fd, sa, salen, 1, 1, want, min);
    if (act == RL_GATE_FAIL)
        return RL_HOOK_FAIL;
    *grant = (size_t)t->bytes;
    if (*grant > len)
        *grant = len;
    return RL_HOOK_GO;
}

void rl_hook_send_end(struct rl_gate_ticket *t, ssize_t r)
{
    if (r >= 0 && (uint64_t)r >= t->bytes)
        return;
    int saved = errno;
    if (rl_shim_enter()) {
        if (r < 0) {
            rl_gate_refund(t, RL_KIND_SEND, t->calls);
            rl_gate_refund(t, RL_KIND_SEND_BYTES, t->bytes);
        } else {
            rl_gate_refund(t, RL_KIND_SEND_BYTES, t->bytes - (uint64_t)r);
        }
        rl_shim_leave();
    }
    errno = saved;
}

int rl_hook_reentered(uint32_t m, uint64_t calls, size_t len, bool whole,
                      size_t *grant)
{
    *grant = len;
    /* Not ready: rl_shim_enter() failed for that, not for the guard. */
    if (!(m & RL_FD_MATCHED) ||
        !__atomic_load_n(&rl_shim_ready, __ATOMIC_ACQUIRE) || !rl_shim_busy)
        return RL_HOOK_PASS;
    uint64_t want = len, min = len;
    if ((m & RL_FD_STREAM) && !whole) {
        uint64_t cap = rl_gate_max_bytes();
        if (want > cap)
            want = cap;
        min = 1;
    }
    uint64_t g = 0;
    int err = 0;
    if (rl_gate_send_reentered(calls, want, min, &g, &err) == RL_GATE_FAIL) {
        errno = err;
        return RL_HOOK_FAIL;
    }
    if (g < len)
        *grant = (size_t)g;
    return RL_HOOK_GO;
}

size_t rl_hook_iov_len(const struct iovec *iov, size_t n)
{
    size_t sum = 0;
    for (size_t i = 0; i < n; i++) {
        if (iov[i].iov_len > SIZE_MAX - sum)
            return SIZE_MAX;
        sum += iov[i].iov_len;
    }
    return sum;
}

size_t rl_hook_iov_trim(const struct iovec *iov, size_t n, size_t want,
                        struct iovec *out, size_t cap, size_t *got)
{
    size_t k = 0, sum = 0;
    for (size_t i = 0; i < n && k < cap && sum < want; i++) {
        out[k] = iov[i];
        if (out[k].iov_len > want - sum)
            out[k].iov_len = want - sum;
        sum += out[k].iov_len;
        k++;
    }
    *got = sum;
    return k;
}

/* The charged half of send and write (write passes a `real` that drops the
 * flags): spend the thread's lease when it covers the call, else ask the
 * gate. Out of line, so an unmarked fd costs the exported name a load, a
 * test and a tail call. */
__attribute__((noinline)) ssize_t rl_hook_plain_send(int fd, const void *buf,
                                                     size_t len, int flags,
                                                     uint32_t m,
                                                     const char *call,
                                                     rl_plain_send_fn real)
{
    if (!(m & RL_FD_MATCHED))
        return real(fd, buf, len, flags);
    if (!rl_shim_enter()) {
        size_t rg;
        if (rl_hook_reentered(m, 1, len, false, &rg) == RL_HOOK_FAIL)
            return -1;
        return real(fd, buf, rg, flags);
    }
    size_t g = rl_hook_leased(m, len);
    if (g > 0) {
        rl_shim_leave();
        ssize_t r = real(fd, buf, g, flags);
        if (r < 0 || (size_t)r < g) {
            int e = errno;
            if (rl_shim_enter()) {
                rl_hook_leased_end(g, r);
                rl_shim_leave();
            }
            errno = e;
        }
        return r;
    }
    int saved = errno;
    struct rl_gate_ticket t;
    size_t grant = len;
    uint32_t kind = rl_hook_send_kind(fd, m, NULL, 0);
    int act =
        kind ? rl_hook_send_begin(fd, kind, call, NULL, 0, len, &t, &grant)
             : RL_HOOK_PASS;
    rl_shim_leave();
    if (rl_hook_apply(act, &t, saved) < 0)
        return -1;
    ssize_t r = real(fd, buf, grant, flags);
    if (act == RL_HOOK_GO)
        rl_hook_send_end(&t, r);
    return r;
}

static ssize_t real_send(int fd, const void *buf, size_t len, int flags)
{
    return REAL(send)(fd, buf, len, flags);
}

RL_EXPORT ssize_t send(int fd, const void *buf, size_t len, int flags)
{
    uint32_t m = rl_fdtab_get(fd);
    ssize_t (*real)(int, const void *, size_t, int) = rl_real.send;
    if (__builtin_expect(!(m & RL_FD_MATCHED) && real != NULL, 1))
        return real(fd, buf, len, flags);
    return rl_hook_plain_send(fd, buf, len, flags, m, "send", real_send);
}

/* A MSG_FASTOPEN send with an address on a stream socket connects: charge
 * the connect first. Returns the connect's act; on FAIL the call fails. */
static int fastopen_begin(int fd, int flags, const struct sockaddr *sa,
                          socklen_t len, const char *call,
                          struct rl_gate_ticket *tc)
{
    if (!(flags & MSG_FASTOPEN) || sa == NULL)
        return RL_HOOK_PASS;
    if (rl_hook_sock_type(fd, rl_fdtab_get(fd)) != RL_FD_STREAM)
        return RL_HOOK_PASS;
    int act = rl_hook_connect_begin(fd, sa, len, call, tc);
    if (act == RL_HOOK_GO)
        /* max_open: held from now until the fd closes (a fastopen that
         * then fails stays counted until then). */
        rl_gate_connected(tc, fd, true);
    return act;
}

/* The sends of sendto/sendmsg after an optional fastopen connect charge:
 * when the send is denied, the connect is given back and unmarked, so the
 * denied call leaves nothing behind. */
static int send_after_connect(int fd, int cact, struct rl_gate_ticket *tc,
                              const char *call, const struct sockaddr *sa,
                              socklen_t salen, size_t len,
                              struct rl_gate_ticket *t, size_t *grant)
{
    uint32_t m = rl_fdtab_get(fd);
    uint32_t kind = rl_hook_send_kind(fd, m, sa, salen);
    if (kind == 0) {
        /* Only the connect (if any) was charged: sleep as it says. */
        *t = *tc;
        t->calls = t->bytes = 0;
        return cact;
    }
    int act = rl_hook_send_begin(fd, kind, call, sa, salen, len, t, grant);
    if (act == RL_HOOK_FAIL && cact == RL_HOOK_GO) {
        rl_gate_refund(tc, RL_KIND_CONNECT, 1);
        rl_fdtab_set(fd, RL_FD_STREAM);
    }
    if (act == RL_HOOK_GO && cact == RL_HOOK_GO &&
        tc->now + tc->wait_ns > t->now + t->wait_ns)
        /* One sleep covers both: until the later reservation. */
        t->wait_ns = tc->now + tc->wait_ns - t->now;
    return act;
}

/* The two decisions of a send that may carry an address and MSG_FASTOPEN
 * (sendto, sendmsg): the connect it makes first (*cact, ticket tc), then
 * the send. Returns the act to apply with *t. */
static int addressed_send_begin(int fd, int flags, const struct sockaddr *sa,
                                socklen_t salen, const char *call, size_t len,
                                struct rl_gate_ticket *t,
                                struct rl_gate_ticket *tc, int *cact,
                                size_t *grant)
{
    memset(tc, 0, sizeof *tc);
    *cact = fastopen_begin(fd, flags, sa, salen, call, tc);
    if (*cact == RL_HOOK_FAIL) {
        *t = *tc;
        return RL_HOOK_FAIL;
    }
    return send_after_connect(fd, *cact, tc, call, sa, salen, len, t, grant);
}

/* After the real call returned r: settle the connect and the send.
 * Preserves errno. */
static void addressed_send_end(int fd, int cact, int act,
                               struct rl_gate_ticket *t, ssize_t r)
{
    int err = errno;
    if (cact == RL_HOOK_GO)
        rl_hook_connect_end(fd, r < 0 ? -1 : 0, err);
    if (act == RL_HOOK_GO)
        rl_hook_send_end(t, r);
    errno = err;
}

RL_EXPORT ssize_t sendto(int fd, const void *buf, size_t len, int flags,
                         const struct sockaddr *sa, socklen_t salen)
{
    uint32_t m = rl_fdtab_get(fd);
    if (sa == NULL && !(m & RL_FD_MATCHED))
        return REAL(sendto)(fd, buf, len, flags, sa, salen);
    if (!rl_shim_enter()) {
        size_t rg;
        if (rl_hook_reentered(m, 1, len, false, &rg) == RL_HOOK_FAIL)
            return -1;
        return REAL(sendto)(fd, buf, rg, flags, sa, salen);
    }
    int saved = errno;
    struct rl_gate_ticket t, tc;
    size_t grant = len;
    int cact;
    int act = addressed_send_begin(fd, flags, sa, salen, "sendto", len, &t,
                                   &tc, &cact, &grant);
    rl_shim_leave();
    if (rl_hook_apply(act, &t, saved) < 0)
        return -1;
    ssize_t r = REAL(sendto)(fd, buf, grant, flags, sa, salen);
    addressed_send_end(fd, cact, act, &t, r);
    return r;
}

/* sendmsg from a handler that interrupted the shim (rl_hook_reentered),
 * a shorter grant sending a trimmed copy of the iovec. */
static ssize_t reentered_sendmsg(int fd, const struct msghdr *msg, int flags,
                                 uint32_t m)
{
    size_t len = rl_hook_iov_len(msg->msg_iov, msg->msg_iovlen), grant;
    int act = rl_hook_reentered(m, 1, len, false, &grant);
    if (act == RL_HOOK_FAIL)
        return -1;
    if (grant >= len)
        return REAL(sendmsg)(fd, msg, flags);
    struct msghdr copy = *msg;
    struct iovec iov[RL_HOOK_IOV_MAX];
    copy.msg_iov = iov;
    copy.msg_iovlen = rl_hook_iov_trim(msg->msg_iov, msg->msg_iovlen, grant,
                                       iov, RL_HOOK_IOV_MAX, &grant);
    return REAL(sendmsg)(fd, &copy, flags);
}

RL_EXPORT ssize_t sendmsg(int fd, const struct msghdr *msg, int flags)
{
    uint32_t m = rl_fdtab_get(fd);
    const struct sockaddr *sa = msg != NULL ? msg->msg_name : NULL;
    socklen_t salen = msg != NULL ? msg->msg_namelen : 0;
    if ((sa == NULL && !(m & RL_FD_MATCHED)) || msg == NULL)
        return REAL(sendmsg)(fd, msg, flags);
    if (!rl_shim_enter())
        return reentered_sendmsg(fd, msg, flags, m);
    int saved = errno;
    struct rl_gate_ticket t, tc;
    size_t len = rl_hook_iov_len(msg->msg_iov, msg->msg_iovlen);
    size_t grant = len;
    int cact;
    int act = addressed_send_begin(fd, flags, sa, salen, "sendmsg", len, &t,
                                   &tc, &cact, &grant);
    /* A stream grant shorter than asked: send a trimmed copy of the
     * iovec (bounded, on the stack; a longer prefix is cut further and
     * the rest given back at the end). */
    struct msghdr copy;
    struct iovec iov[RL_HOOK_IOV_MAX];
    const struct msghdr *use = msg;
    if (act == RL_HOOK_GO && grant < len) {
        copy = *msg;
        copy.msg_iov = iov;
        copy.msg_iovlen = rl_hook_iov_trim(msg->msg_iov, msg->msg_iovlen, grant,
                                           iov, RL_HOOK_IOV_MAX, &grant);
        use = &copy;
    }
    rl_shim_leave();
    if (rl_hook_apply(act, &t, saved) < 0)
        return -1;
    ssize_t r = REAL(sendmsg)(fd, use, flags);
    addressed_send_end(fd, cact, act, &t, r);
    return r;
}

/* Give back what a ticket granted beyond (calls, bytes); the guard must
 * be held. Leaves the ticket saying what is kept. */
static void keep_only(struct rl_gate_ticket *t, uint64_t calls, uint64_t bytes)
{
    if (t->calls > calls)
        rl_gate_refund(t, RL_KIND_SEND, t->calls - calls);
    if (t->bytes > bytes)
        rl_gate_refund(t, RL_KIND_SEND_BYTES, t->bytes - bytes);
    t->calls = calls;
    t->bytes = bytes;
}

#define MMSG_MAX 1024 /* UIO_MAXIOV: the kernel sends no more per call */

RL_EXPORT int sendmmsg(int fd, struct mmsghdr *vec, unsigned int vlen,
                       int flags)
{
    uint32_t m = rl_fdtab_get(fd);
    if (vec == NULL || vlen == 0)
        return REAL(sendmmsg)(fd, vec, vlen, flags);
    bool named = false;
    unsigned n = vlen < MMSG_MAX ? vlen : MMSG_MAX;
    if (!(m & RL_FD_MATCHED))
        for (unsigned i = 0; i < n && !named; i++)
            named = vec[i].msg_hdr.msg_name != NULL;
    if (!named && !(m & RL_FD_MATCHED))
        return REAL(sendmmsg)(fd, vec, vlen, flags);
    if (!rl_shim_enter()) {
        /* From a handler inside the shim: the whole batch, or nothing. */
        uint64_t all = 0;
        for (unsigned i = 0; i < n; i++) {
            size_t sz = rl_hook_iov_len(vec[i].msg_hdr.msg_iov,
                                        vec[i].msg_hdr.msg_iovlen);
            all = all + sz < all ? UINT64_MAX : all + sz;
        }
        size_t rg;
        int ract = rl_hook_reentered(m, n, (size_t)all, true, &rg);
        if (ract == RL_HOOK_FAIL)
            return -1;
        return REAL(sendmmsg)(fd, vec, ract == RL_HOOK_GO ? n : vlen, flags);
    }
    int saved = errno;
    /* Which messages are charged, and what they carry. */
    unsigned char charged[MMSG_MAX];
    uint64_t calls = 0, bytes = 0, first = 0;
    for (unsigned i = 0; i < n; i++) {
        const struct msghdr *h = &vec[i].msg_hdr;
        uint32_t k = rl_hook_send_kind(fd, rl_fdtab_get(fd), h->msg_name,
                                       h->msg_namelen);
        charged[i] = k != 0;
        if (!charged[i])
            continue;
        uint64_t sz = rl_hook_iov_len(h->msg_iov, h->msg_iovlen);
        if (calls++ == 0)
            first = sz;
        bytes += sz;
    }
    struct rl_gate_ticket t;
    int act = RL_HOOK_PASS;
    unsigned send_n = vlen;
    if (calls > 0) {
        act = rl_gate_send(&t, "sendmmsg", fd, NULL, 0, calls, 1, bytes,
                           first) == RL_GATE_FAIL
                  ? RL_HOOK_FAIL
                  : RL_HOOK_GO;
    }
    if (act == RL_HOOK_GO) {
        /* The longest prefix of whole messages the grant covers. */
        uint64_t c = 0, b = 0;
        unsigned i;
        for (i = 0; i < n; i++) {
            if (!charged[i])
                continue;
            const struct msghdr *h = &vec[i].msg_hdr;
            uint64_t sz = rl_hook_iov_len(h->msg_iov, h->msg_iovlen);
            if (c + 1 > t.calls || b + sz > t.bytes)
                break;
            c++;
            b += sz;
        }
        if (i < n)
            send_n = i;
        keep_only(&t, c, b);
    }
    rl_shim_leave();
    if (rl_hook_apply(act, &t, saved) < 0)
        return -1;
    int r = REAL(sendmmsg)(fd, vec, send_n, flags);
    if (act == RL_HOOK_GO) {
        int err = errno;
        uint64_t c = 0, b = 0;
        for (int i = 0; i < r && (unsigned)i < n; i++)
            if (charged[i]) {
                c++;
                b += vec[i].msg_len;
            }
        if ((c < t.calls || b < t.bytes) && rl_shim_enter()) {
            keep_only(&t, c, b);
            rl_shim_leave();
        }
        errno = err;
    }
    return r;
}
