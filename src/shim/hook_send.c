/* hook_send.c — the one shape of every charged send (rl_send_begin and
 * rl_send_settle, see hooks.h), and send, sendto, sendmsg, sendmmsg.
 *
 * A send is charged when its fd is marked MATCHED (it connected to a
 * covered destination) or, on a datagram socket, when its explicit
 * destination is covered. An unmarked fd with no address costs one table
 * load. Stream sends may be granted in part (a short write); datagrams
 * are all or nothing; sendmmsg sends the prefix of messages granted. */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include "policy/decide_connect.h"
#include "policy/decide_send.h"
#include "shim/fdtab.h"
#include "shim/hooks.h"
#include "shim/real.h"
#include "shim/self.h"
#include "shim/shim.h"
#include "shim/wait.h"

static bool inet(const struct sockaddr *sa, socklen_t len)
{
    return sa != NULL && len >= sizeof(sa_family_t) &&
           (sa->sa_family == AF_INET || sa->sa_family == AF_INET6);
}

uint32_t rl_hook_send_kind(int fd, uint32_t m, const struct sockaddr *sa,
                           socklen_t len)
{
    if (inet(sa, len) && rl_hook_sock_type(fd, m) == RL_FD_DGRAM)
        return rl_decide_send_charged(rl_shim_proc(), sa, len) ? RL_FD_DGRAM
                                                               : 0;
    /* A stream socket ignores the address (MSG_FASTOPEN aside, which
     * rl_send_begin handles): its mark decides. */
    if (m & RL_FD_INHERITED)
        return rl_hook_inherited_kind(fd, m);
    if (!(m & RL_FD_MATCHED))
        return 0;
    return m & RL_FD_STREAM ? RL_FD_STREAM : RL_FD_DGRAM;
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

/* The connect of a MSG_FASTOPEN send made from a signal handler, to a
 * covered destination (rl_decide_connect's handler mode: all or nothing,
 * nothing held). Returns -1 (errno set) when denied, 0 when not charged,
 * else 1: its marks put, and *kind what its sends are (0: free). */
static int fastopen_in_handler(const struct rl_send *s, uint32_t *kind)
{
    const struct rl_connect_question q = {
        .head = {RL_CALL_CONNECT},
        .call = s->call,
        .fd = s->fd,
        .sa = s->sa,
        .salen = s->salen,
        .sock = RL_CONNECT_STREAM,
        .asker = RL_CONNECT_HANDLER,
        .probe = &rl_wait_connect_probe,
    };
    struct rl_connect_answer a;
    rl_decide(rl_shim_proc(), &q.head, (union rl_answer){.connect = &a});
    if (a.act == RL_CONNECT_FAIL) {
        errno = a.t.err;
        return -1;
    }
    if (!a.charged)
        return 0; /* not covered */
    rl_fdtab_put(s->fd, RL_FD_KNOWN | RL_FD_STREAM |
                            (a.matched ? RL_FD_MATCHED : 0) | RL_FD_CHARGED);
    *kind = a.matched ? RL_FD_STREAM : 0;
    return 1;
}

/* A call from a signal handler: classify it from the mark alone (asking
 * the kernel or the inherited-socket scan is for outside handlers), and
 * ask the whole question in handler mode (rl_decide_send: async-signal-
 * safe, never sleeps, nothing to give back later). A MSG_FASTOPEN that
 * connects is charged as a connect too. */
static int decide_in_handler(struct rl_send *s)
{
    s->how = RL_SEND_FREE;
    /* Not set up yet: the set-up allocates, so the call passes as every
     * call does before the shim is ready. */
    if (!rl_shim_ready())
        return 0;
    uint32_t kind = s->kind;
    bool dgram = (s->mark & (RL_FD_KNOWN | RL_FD_DGRAM)) ==
                 (RL_FD_KNOWN | RL_FD_DGRAM);
    if (kind == 0 && inet(s->sa, s->salen) && dgram)
        kind = rl_decide_send_charged(rl_shim_proc(), s->sa, s->salen)
                   ? RL_FD_DGRAM
                   : 0;
    else if (kind == 0 && (s->mark & RL_FD_MATCHED))
        kind = s->mark & RL_FD_STREAM ? RL_FD_STREAM : RL_FD_DGRAM;
    int fastopen = 0;
    if ((s->flags & MSG_FASTOPEN) && inet(s->sa, s->salen) &&
        (s->mark & RL_FD_STREAM) && !(s->mark & RL_FD_CHARGED)) {
        fastopen = fastopen_in_handler(s, &kind);
        if (fastopen < 0)
            return -1;
    }
    if (kind == 0)
        return 0;
    bool stream = kind == RL_FD_STREAM;
    const struct rl_send_question q = {
        .head = {RL_CALL_SEND},
        .call = s->call,
        .fd = s->fd,
        .flags = s->flags,
        /* A stream's sends go to its peer: its address names only where
         * a MSG_FASTOPEN connects. */
        .sa = stream && !fastopen ? NULL : s->sa,
        .salen = stream && !fastopen ? 0 : s->salen,
        .calls = s->calls,
        .want = s->len,
        .min = s->len_min,
        .stream = stream,
        .handler = true,
        .probe = &rl_wait_probe,
    };
    rl_decide(rl_shim_proc(), &q.head, (union rl_answer){.send = &s->a});
    if (s->a.act == RL_GATE_FAIL) {
        errno = s->a.t.err;
        return -1;
    }
    s->how = RL_SEND_HANDLER;
    s->grant_calls = s->calls;
    if (s->a.t.bytes < s->len)
        s->grant = (size_t)s->a.t.bytes;
    return 0;
}

/* The decision of a send of `kind` (the guard is held): one question to
 * policy (decide_send.h), whose answer is applied here. `fastopen`: the
 * ticket of the connect the send makes, granted (NULL: none). */
static int decide_send(struct rl_send *s, uint32_t kind,
                       struct rl_gate_ticket *fastopen)
{
    struct rl_send_question q = {
        .head = {RL_CALL_SEND},
        .call = s->call,
        .fd = s->fd,
        .flags = s->flags,
        .sa = s->sa,
        .salen = s->salen,
        .calls = s->calls,
        .want = s->len,
        .min = s->len_min,
        .stream = kind == RL_FD_STREAM,
        /* The commonest charged call: one unit to the fd's own peer. */
        .lease = s->sa == NULL && s->calls == 1 && s->kind == 0 &&
                 (s->mark & (RL_FD_MATCHED | RL_FD_INHERITED)) == RL_FD_MATCHED,
        .fastopen = fastopen,
        .probe = &rl_wait_probe,
    };
    rl_decide(rl_shim_proc(), &q.head, (union rl_answer){.send = &s->a});
    if (s->a.view != 0 || s->a.connect_due != 0)
        rl_wait_apply(s->fd, &s->a);
    if (s->a.act == RL_DECIDE_KERNEL)
        return RL_HOOK_PASS; /* the kernel refuses it: nothing charged */
    if (s->a.act == RL_GATE_FAIL)
        return RL_HOOK_FAIL;
    s->how = s->a.leased ? RL_SEND_LEASED : RL_SEND_GATE;
    s->grant_calls = s->a.t.calls;
    if (s->a.t.bytes < s->len)
        s->grant = (size_t)s->a.t.bytes;
    return RL_HOOK_GO;
}

/* What rl_hook_apply reads of a connect's ticket, into the send's. */
static void apply_of(struct rl_gate_ticket *to, const struct rl_gate_ticket *c)
{
    to->now = c->now;
    to->wait_ns = c->wait_ns;
    to->err = c->err;
    to->calls = to->bytes = 0;
}

/* MSG_FASTOPEN with an address on a stream socket connects: its connect
 * is decided first (hook_connect.c), on a ticket of its own that lives
 * only here (out of line: the common send carries one ticket). */
static __attribute__((noinline)) int decide_fastopen(struct rl_send *s)
{
    struct rl_connect_answer ca;
    s->cact = rl_hook_connect_begin(s->fd, s->sa, s->salen, s->call,
                                    RL_CONNECT_FASTOPEN, 0, &ca);
    struct rl_gate_ticket *tc = &ca.t;
    if (s->cact == RL_HOOK_GO)
        /* max_open: held from now until the fd closes (a fastopen that
         * then fails stays counted until then). */
        rl_settle(rl_shim_proc(),
                  &(const struct rl_outcome){
                      .kind = RL_CALL_CONNECT,
                      .connect = {.a = &ca, .fd = s->fd, .r = 0, .err = 0}});
    s->mark = rl_fdtab_get(s->fd);
    if (s->cact == RL_HOOK_FAIL) {
        apply_of(&s->a.t, tc);
        return RL_HOOK_FAIL;
    }
    uint32_t kind = rl_hook_send_kind(s->fd, s->mark, s->sa, s->salen);
    if (kind == 0) {
        /* Only the connect (if any) was charged: sleep as it says. */
        if (s->cact == RL_HOOK_GO)
            apply_of(&s->a.t, tc);
        return s->cact;
    }
    int act = decide_send(s, kind, s->cact == RL_HOOK_GO ? tc : NULL);
    if (act == RL_HOOK_FAIL) {
        /* The denied call leaves nothing behind: its connect went back
         * (rl_decide_send) and the socket is unmarked. */
        if (s->cact == RL_HOOK_GO)
            rl_fdtab_set(s->fd, RL_FD_KNOWN | RL_FD_STREAM);
        return RL_HOOK_FAIL;
    }
    if (s->cact == RL_HOOK_GO &&
        tc->now + tc->wait_ns > s->a.t.now + s->a.t.wait_ns)
        /* One sleep covers both: until the later reservation. */
        s->a.t.wait_ns = tc->now + tc->wait_ns - s->a.t.now;
    return act;
}

/* The gate's decision of a send that needs one (the guard is held). */
static int decide(struct rl_send *s)
{
    if ((s->flags & MSG_FASTOPEN) && s->sa != NULL &&
        rl_hook_sock_type(s->fd, s->mark) == RL_FD_STREAM)
        return decide_fastopen(s);
    uint32_t kind = s->kind != 0
                        ? s->kind
                        : rl_hook_send_kind(s->fd, s->mark, s->sa, s->salen);
    return kind == 0 ? RL_HOOK_PASS : decide_send(s, kind, NULL);
}

int rl_send_begin(struct rl_send *s)
{
    s->how = RL_SEND_FREE;
    s->cact = RL_HOOK_PASS;
    s->grant = s->len;
    s->grant_calls = s->calls;
    if (rl_hook_in_handler() || (rl_shim_ready() && rl_shim_busy))
        return decide_in_handler(s);
    if (s->mark & RL_FD_HTTP) {
        int rb = rl_request_begin(s);
        if (rb != 0)
            return rb; /* failed, or answered by the shim (SPEC §15) */
    }
    if (!(s->mark & (RL_FD_MATCHED | RL_FD_INHERITED)) && s->sa == NULL &&
        s->kind == 0)
        return 0; /* only its requests are counted */
    if (!rl_shim_enter())
        return 0; /* not set up: passes, as every call then */
    int saved = errno;
    int act = decide(s);
    rl_shim_leave();
    if (act == RL_HOOK_PASS)
        s->how = RL_SEND_FREE;
    /* (A send with an address may connect it: not connected yet.) */
    return rl_hook_apply(act, &s->a.t, saved, s->sa == NULL ? s->fd : -1);
}

void rl_send_settle(struct rl_send *s, int r, uint64_t calls, uint64_t bytes)
{
    int err = errno;
    if (s->rc != NULL)
        rl_request_end(s, r < 0 ? -1 : (long)bytes);
    if (s->cact == RL_HOOK_GO)
        rl_hook_connect_end(s->fd, r < 0 ? -1 : 0, err);
    /* What was taken (the ticket, or the lease's grant): the hook may have
     * passed less (a trimmed iovec), and what it did not pass goes back. */
    if (s->how != RL_SEND_LEASED && s->how != RL_SEND_GATE) {
        errno = err;
        return;
    }
    if (rl_settle_send_owes(&s->a, calls, bytes) && rl_shim_enter()) {
        rl_settle(rl_shim_proc(),
                  &(const struct rl_outcome){
                      .kind = RL_CALL_SEND,
                      .send = {.a = &s->a,
                               .leased = s->how == RL_SEND_LEASED,
                               .calls = calls,
                               .bytes = bytes}});
        rl_shim_leave();
    }
    errno = err;
}

void rl_send_fast_settle(size_t grant, ssize_t r, struct rl_lease_holder *h)
{
    int err = errno;
    /* As rl_send_settle: a failed call spent nothing, a short one its
     * bytes. Only the grant and the holder to stamp of the answer are
     * read for a lease's. */
    struct rl_send_answer a;
    a.stamp = h;
    a.t.calls = 1;
    a.t.bytes = grant;
    if (rl_shim_enter()) {
        rl_settle(rl_shim_proc(),
                  &(const struct rl_outcome){
                      .kind = RL_CALL_SEND,
                      .send = {.a = &a,
                               .leased = true,
                               .calls = r < 0 ? 0 : 1,
                               .bytes = r < 0 ? 0 : (uint64_t)r}});
        rl_shim_leave();
    }
    errno = err;
}

typedef ssize_t (*send_fn)(int, const void *, size_t, int);

/* The whole shape, out of line: its struct rl_send and saved registers
 * are no part of the leased way's frame. */
static __attribute__((noinline)) ssize_t send_shaped(int fd, const void *buf,
                                                     size_t len, int flags,
                                                     uint32_t m)
{
    struct rl_send s;
    struct iovec one = {(void *)buf, len};
    rl_send_init(&s, fd, m, "send", len);
    rl_send_bytes(&s, &one, 1);
    s.flags = flags;
    int b = rl_send_begin(&s);
    if (b != 0)
        return b < 0 ? -1 : rl_send_taken(&s);
    ssize_t r = REAL(send)(fd, buf, s.grant, flags);
    rl_send_end(&s, r);
    return r;
}

/* The first call after a scan became due (inherited fds: inherit.c), or
 * one made before the real send was resolved: the scan, then the mark it
 * left, the whole shape for a charged call. Out of line: it calls before
 * the real call. */
static __attribute__((noinline)) ssize_t send_scanned(int fd, const void *buf,
                                                      size_t len, int flags,
                                                      uint32_t m)
{
    m = rl_hook_mark_scanned(fd, m);
    if (!(m & RL_FD_SLOW))
        return REAL(send)(fd, buf, len, flags);
    return send_shaped(fd, buf, len, flags, m);
}

/* A marked fd (or a scan due, or the real send not yet resolved): the
 * leased way, with no call of the shim's before the real one, else the
 * whole shape, each way a tail call. `real` is the real send, or NULL. */
static __attribute__((noinline)) ssize_t send_marked(int fd, const void *buf,
                                                     size_t len, int flags,
                                                     uint32_t m,
                                                     send_fn real)
{
    if (__builtin_expect(real == NULL || rl_shim_scan_due(), 0))
        return send_scanned(fd, buf, len, flags, m);
    if (!(m & RL_FD_SLOW))
        return real(fd, buf, len, flags);
    struct rl_lease_holder *h = NULL;
    size_t g = rl_send_fast_fits(m) ? rl_send_fast(m, len, &h) : 0;
    if (g == 0)
        return send_shaped(fd, buf, len, flags, m);
    ssize_t r = real(fd, buf, g, flags);
    rl_send_fast_end(g, r, h);
    return r;
}

RL_EXPORT ssize_t send(int fd, const void *buf, size_t len, int flags)
{
    uint32_t m = rl_fdtab_get(fd);
    send_fn real = rl_real.send;
    if (__builtin_expect(
            !(m & RL_FD_SLOW) && real != NULL && !rl_shim_scan_due(), 1))
        return real(fd, buf, len, flags);
    return send_marked(fd, buf, len, flags, m, real);
}

RL_EXPORT ssize_t sendto(int fd, const void *buf, size_t len, int flags,
                         const struct sockaddr *sa, socklen_t salen)
{
    uint32_t m = rl_hook_mark_scanned(fd, rl_fdtab_get(fd));
    if (!(m & RL_FD_SLOW) && !inet(sa, salen))
        return REAL(sendto)(fd, buf, len, flags, sa, salen);
    struct rl_send s;
    struct iovec one = {(void *)buf, len};
    rl_send_init(&s, fd, m, "sendto", len);
    rl_send_bytes(&s, &one, 1);
    s.sa = sa;
    s.salen = salen;
    s.flags = flags;
    int b = rl_send_begin(&s);
    if (b != 0)
        return b < 0 ? -1 : rl_send_taken(&s);
    ssize_t r = REAL(sendto)(fd, buf, s.grant, flags, sa, salen);
    rl_send_end(&s, r);
    return r;
}

/* A stream grant shorter than asked: send a trimmed copy of the iovec
 * (bounded, on the stack of this call only, never beside a decision; a
 * longer prefix is cut further and the rest given back by the
 * settlement). *grant becomes what the copy holds. */
static __attribute__((noinline)) ssize_t
sendmsg_trimmed(int fd, const struct msghdr *msg, int flags, size_t *grant)
{
    struct iovec iov[RL_HOOK_IOV_MAX];
    struct msghdr copy = *msg;
    copy.msg_iov = iov;
    copy.msg_iovlen = rl_hook_iov_trim(msg->msg_iov, msg->msg_iovlen, *grant,
                                       iov, RL_HOOK_IOV_MAX, grant);
    return REAL(sendmsg)(fd, &copy, flags);
}

RL_EXPORT ssize_t sendmsg(int fd, const struct msghdr *msg, int flags)
{
    uint32_t m = rl_hook_mark_scanned(fd, rl_fdtab_get(fd));
    if (msg == NULL ||
        (!(m & RL_FD_SLOW) &&
         !inet(msg->msg_name, msg->msg_name != NULL ? msg->msg_namelen : 0)))
        return REAL(sendmsg)(fd, msg, flags);
    struct rl_send s;
    size_t total = rl_hook_iov_len(msg->msg_iov, msg->msg_iovlen);
    rl_send_init(&s, fd, m, "sendmsg", total);
    rl_send_bytes(&s, msg->msg_iov, msg->msg_iovlen);
    s.sa = msg->msg_name;
    s.salen = msg->msg_name != NULL ? msg->msg_namelen : 0;
    s.flags = flags;
    int b = rl_send_begin(&s);
    if (b != 0)
        return b < 0 ? -1 : rl_send_taken(&s);
    ssize_t r = s.grant < total ? sendmsg_trimmed(fd, msg, flags, &s.grant)
                                : REAL(sendmsg)(fd, msg, flags);
    rl_send_end(&s, r);
    return r;
}

#define MMSG_MAX 1024 /* UIO_MAXIOV: the kernel sends no more per call */

static uint64_t msg_len(const struct mmsghdr *v)
{
    return rl_hook_iov_len(v->msg_hdr.msg_iov, v->msg_hdr.msg_iovlen);
}

/* sendmmsg classifies each message (a batch may mix covered and other
 * destinations): only the covered ones are charged, and the call sends
 * the longest prefix whose charged messages the grant covers whole. */
RL_EXPORT int sendmmsg(int fd, struct mmsghdr *vec, unsigned int vlen,
                       int flags)
{
    uint32_t m = rl_hook_mark_scanned(fd, rl_fdtab_get(fd));
    if (vec == NULL || vlen == 0)
        return REAL(sendmmsg)(fd, vec, vlen, flags);
    unsigned n = vlen < MMSG_MAX ? vlen : MMSG_MAX;
    bool named = false;
    for (unsigned i = 0; i < n && !named && !(m & RL_FD_MATCHED); i++)
        named = inet(vec[i].msg_hdr.msg_name, vec[i].msg_hdr.msg_namelen);
    if (!named && !(m & RL_FD_MATCHED))
        return REAL(sendmmsg)(fd, vec, vlen, flags);
    /* Which messages are charged, and what they carry. Classifying may
     * need the rule: decided under the guard, like everything else. */
    uint64_t charged[MMSG_MAX / 64] = {0}; /* a bit per message */
    uint64_t calls = 0, bytes = 0, first = 0;
    bool ready = rl_shim_enter();
    for (unsigned i = 0; i < n; i++) {
        const struct msghdr *h = &vec[i].msg_hdr;
        if (ready && rl_hook_send_kind(fd, rl_fdtab_get(fd), h->msg_name,
                                       h->msg_namelen) == 0)
            continue;
        charged[i / 64] |= 1ull << (i % 64);
        uint64_t sz = msg_len(&vec[i]);
        if (calls++ == 0)
            first = sz;
        bytes = bytes + sz < bytes ? UINT64_MAX : bytes + sz;
    }
    if (ready)
        rl_shim_leave();
    if (calls == 0)
        return REAL(sendmmsg)(fd, vec, vlen, flags);
    struct rl_send s;
    rl_send_init(&s, fd, rl_fdtab_get(fd), "sendmmsg", (size_t)bytes);
    s.calls = calls;
    s.flags = flags;
    s.len_min = ready ? (size_t)first : (size_t)bytes; /* handler: whole */
    s.kind = RL_FD_DGRAM;
    int b = rl_send_begin(&s);
    if (b < 0)
        return -1;
    if (b > 0) {
        /* The first message's bytes taken (SPEC §15): it went. */
        vec[0].msg_len = (unsigned)rl_send_taken(&s);
        return 1;
    }
    unsigned send_n = vlen;
    if (s.how == RL_SEND_GATE) {
        /* The longest prefix of whole messages the grant covers. */
        uint64_t c = 0, b = 0;
        unsigned i;
        for (i = 0; i < n; i++) {
            if (!(charged[i / 64] >> (i % 64) & 1))
                continue;
            uint64_t sz = msg_len(&vec[i]);
            if (c + 1 > s.a.t.calls || b + sz > s.a.t.bytes)
                break;
            c++;
            b += sz;
        }
        if (i < n)
            send_n = i;
        s.grant_calls = c;
        s.grant = (size_t)b;
        rl_send_settle(&s, 0, c, b); /* what the prefix leaves out */
    }
    int r = REAL(sendmmsg)(fd, vec, send_n, flags);
    if (s.how == RL_SEND_GATE) {
        uint64_t c = 0, b = 0;
        for (int i = 0; i < r && (unsigned)i < n; i++)
            if (charged[i / 64] >> (i % 64) & 1) {
                c++;
                b += vec[i].msg_len;
            }
        rl_send_settle(&s, r, c, b);
    }
    return r;
}
