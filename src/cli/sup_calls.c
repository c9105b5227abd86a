/* sup_calls.c — one decision per notified system call (see sup_calls.h).
 *
 * The arguments in registers (fd, lengths, flags) are the call's own; what
 * they point to (the sockaddr, a msghdr) is read from the target's memory
 * (sup_target.c: a thread that died and whose number was reused must not
 * be read for it).
 * A connect is decided by the socket's own domain, asked of our copy of
 * it, not by the address it names: see on_connect. The sends are answered
 * "continue", so the kernel reads their address again (a program that
 * rewrites it from another thread in between is charged for the address
 * it showed: this is a rate limiter, not a sandbox, SPEC §7). */
#include "cli/sup_calls.h"

#include <errno.h>
#include <linux/close_range.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cli/sup.h"
#include "cli/sup_probe.h"

/* The kernel caps msg_iovlen and sendmmsg's vlen at this. */
#define MAX_IOV 1024u

static int sock_type(int s)
{
    int type = 0;
    socklen_t l = sizeof type;
    return getsockopt(s, SOL_SOCKET, SO_TYPE, &type, &l) == 0 ? type : -1;
}

/* A TCP socket's state (TCP_CLOSE until a connect starts), or -1 for a
 * socket that is not TCP: only TCP answers TCP_INFO (and an AF_SMC
 * socket, for the TCP socket it connects with). */
static int tcp_state(int s)
{
    struct tcp_info ti;
    socklen_t l = sizeof ti;
    memset(&ti, 0, sizeof ti);
    if (getsockopt(s, IPPROTO_TCP, TCP_INFO, &ti, &l) != 0 || l < 1)
        return -1;
    return ti.tcpi_state;
}

/* A stream socket that is connecting or connected: a connect on it only
 * reports progress (EALREADY, EISCONN) and is not a new attempt (SPEC §1).
 * Asked of the kernel, so nothing is remembered per fd. */
static bool in_progress(int s)
{
    int state = tcp_state(s);
    return state >= 0 && state != TCP_CLOSE;
}

/* The socket's address family (SO_DOMAIN), or -1. */
static int sock_domain(int s)
{
    int dom = 0;
    socklen_t l = sizeof dom;
    return getsockopt(s, SOL_SOCKET, SO_DOMAIN, &dom, &l) == 0 ? dom : -1;
}

static bool is_inet(const struct sup_job *j)
{
    sa_family_t fam = ((const struct sockaddr *)&j->sa)->sa_family;
    return fam == AF_INET || fam == AF_INET6;
}

/* Read the sockaddr at `addr` (`len` bytes) into the job. Returns 1 for an
 * inet address, 0 for any other, or -errno. Nothing is read (j->salen stays
 * 0) for an address the kernel refuses by the registers alone. */
static int read_addr(struct sup_job *j, uint64_t addr, uint64_t len)
{
    if (addr == 0 || len < sizeof(sa_family_t) || len > sizeof j->sa)
        return 0; /* the kernel gives its own EINVAL or EFAULT */
    int r = sup_peek(j->pid, addr, &j->sa, (size_t)len);
    if (r < 0)
        return r;
    j->salen = (socklen_t)len;
    return is_inet(j) ? 1 : 0;
}

/* A connect decided without its address: where the registers say it is. */
struct unread {
    struct sup_job *j;
    uint64_t addr, len;
};

/* The address of a connect decided without it, read for the line that
 * names it (decide_connect.h's `address`): an inet one, or NULL. */
static const struct sockaddr *read_again(void *ctx, struct sockaddr_storage *ss,
                                         socklen_t *len)
{
    struct unread *u = ctx;
    (void)ss;
    u->j->unread = false;
    u->j->salen = 0;
    if (read_addr(u->j, u->addr, u->len) <= 0)
        return NULL;
    *len = u->j->salen;
    return (const struct sockaddr *)&u->j->sa;
}

/* A grant carried out: at its turn (the timer queue's), or `now`. */
static enum sup_act granted(struct sup_job *j, const struct rl_gate_ticket *t,
                            enum sup_act now)
{
    j->charged = true;
    if (t->wait_ns == 0)
        return now;
    j->due = t->now + t->wait_ns;
    return SUP_DUE;
}

/* A connect decision carried out: made here, or by the kernel when
 * j->connect is not set. */
static enum sup_act connect_verdict(struct sup_job *j)
{
    const struct rl_connect_answer *a = &j->answer.connect;
    enum sup_act now = j->connect ? SUP_CONNECT : SUP_CONTINUE;
    if (a->act == RL_CONNECT_WAIT)
        /* max_open reached in delay mode: the connect waits for a place
         * (even on a non-blocking socket, as the rate's delay does here),
         * decided again from the timer queue. */
        return SUP_OPEN_WAIT;
    if (a->act == RL_CONNECT_FAIL) {
        j->err = a->t.err;
        return SUP_ERROR;
    }
    return a->act == RL_CONNECT_GO ? granted(j, &a->t, now) : now;
}

/* A connect's decision, asked of policy as `asker` (`u`: where its address
 * is, when it was not read). With max_open, its places are taken in the
 * name of the calling process (so that its death gives them back, as for
 * a preloaded process), and stay with the job until sup_settle binds them
 * to the program's fd (sup_open.h: the program's close gives them back). */
static enum sup_act connect_decision(struct rl_sup *sup, struct sup_pidfds *pf,
                                     struct sup_job *j, const char *call,
                                     int asker, struct unread *u)
{
    if (sup->proc.open.on && j->holder.pid == 0) {
        pid_t tgid = sup_target_tgid(pf, sup->listener, j->pid, j->id);
        if (tgid <= 0 || sup_open_holder(&sup->open, tgid, &j->holder) < 0) {
            memset(&j->holder, 0, sizeof j->holder);
            j->err = ESRCH; /* the caller is gone: nobody reads it */
            return SUP_ERROR;
        }
    }
    const struct rl_connect_probe probe = {
        .nonblocking = sup_probe_waits, .address = read_again, .ctx = u};
    const struct rl_connect_question q = {
        .head = {RL_CALL_CONNECT},
        .call = call,
        .fd = j->fd,
        .sa = j->unread ? NULL : (const struct sockaddr *)&j->sa,
        .salen = j->salen,
        .sock = RL_CONNECT_STREAM,
        .asker = asker,
        .deadline = j->answer.connect.deadline,
        .probe = &probe,
    };
    if (j->holder.pid != 0)
        rl_open_act_for(&j->holder);
    rl_decide(&sup->proc, &q.head,
              (union rl_answer){.connect = &j->answer.connect});
    rl_open_act_for(NULL);
    return connect_verdict(j);
}

void sup_settle(struct sup_open *o, struct sup_job *j, bool holds)
{
    struct rl_gate_ticket *t = &j->answer.connect.t;
    if (j->is_send || t->nopen == 0)
        return;
    if (holds)
        sup_open_bind(o, &j->holder, j->fd, t->open, t->nopen);
    else
        for (unsigned i = 0; i < t->nopen; i++)
            rl_open_release_as(t->open[i], &j->holder);
    t->nopen = 0;
}

/* What a failed read answers: the kernel's EFAULT for a bad pointer, EPERM
 * when we may not read; for a thread that is gone, anything (nobody reads
 * it). */
static enum sup_act read_failed(struct rl_sup *sup, struct sup_job *j, int r)
{
    j->err = r == -EFAULT  ? EFAULT
             : r == -EPERM ? sup_denied(&sup->kernel, EPERM)
                           : ESRCH;
    return SUP_ERROR;
}

/* When every connect is charged alike and no decision log names its
 * destination, the address is not needed to decide: it is read only for
 * a line the decision writes (decide_connect.h's `address`), after it.
 * (The read is the larger part of a connect's decision, as
 * bench_seccomp's Go client shows.) The registers alone still say
 * whether there is an address to charge: none (or a length the
 * kernel refuses before it reads) is continued, as when it is read; a
 * pointer that cannot be read is charged, and its connect then fails
 * (EFAULT) in the kernel, as a connect to an unreachable address is
 * charged and fails. */
static bool addr_unneeded(struct rl_sup *sup, bool alike, uint64_t addr,
                          uint64_t len)
{
    return alike && !rl_declog_enabled(&sup->proc.declog) && addr != 0 &&
           len >= sizeof(sa_family_t) && len <= sizeof(struct sockaddr_storage);
}

/* A connect. What the kernel checks a continued connect against is the
 * socket, and what it connects is the address it reads again then, not the
 * one we read: another thread may have switched it from AF_UNIX to AF_INET
 * in between. So the socket decides, never the address:
 *  - a socket that is not inet (or an inet one that is not a stream:
 *    a datagram connect sends nothing and is never charged) is continued,
 *    whatever its address says: the kernel refuses any address of another
 *    family on it (an AF_UNIX socket cannot reach an inet server), and
 *    the kernel must make it itself (a unix connect names a path from the
 *    program's cwd and root, and the peer's SO_PEERCRED would be ours);
 *  - an inet stream socket's connect (and a TCP one's, as AF_SMC's is) is
 *    always made here, on our copy of
 *    the socket (the program's own file: pidfd_getfd shares it) with the
 *    address we read and decided, charged or not, and we answer its
 *    result: the kernel never reads the address again, so what is
 *    connected is what was charged. Only a connect whose outcome the
 *    registers decide alone (no address, or a length the kernel refuses
 *    before it reads: EFAULT, EINVAL) is continued;
 *  - unless every inet connect is charged alike whatever its address
 *    (rl_gate_connects_alike: no `to`, site, per-destination budget or
 *    max_open): then each new attempt on an inet stream socket is charged,
 *    whatever address we read, and continued. The kernel makes it in the
 *    program's thread (no connect serialised in ours, as bench_seccomp's
 *    Go client without `to` measures), and any address it reads again
 *    was charged alike.
 * What stays open is another thread replacing the fd itself (dup2 of an
 * inet socket over a unix one) between our look and the kernel's: the
 * answer "continue" cannot name a file. */
static enum sup_act on_connect(struct rl_sup *sup, struct sup_pidfds *pf,
                               const struct seccomp_notif *req,
                               struct sup_job *j)
{
    j->fd = (int)req->data.args[0];
    bool alike = rl_gate_connects_alike(&sup->proc);
    j->unread = addr_unneeded(sup, alike, req->data.args[1], req->data.args[2]);
    int r = 1;
    if (j->unread)
        j->salen = (socklen_t)req->data.args[2];
    else
        r = read_addr(j, req->data.args[1], req->data.args[2]);
    if (r < 0)
        return read_failed(sup, j, r);
    /* sup_grab checks after the read that the memory we read was the
     * caller's. */
    int s = sup_grab(pf, sup->listener, j->pid, j->id, j->fd);
    if (s < 0) {
        j->err = -s;
        return SUP_ERROR; /* EBADF as the kernel says it; else gone */
    }
    /* TCP first: one getsockopt says both that it is and whether this is
     * a new attempt. */
    int state = tcp_state(s);
    bool stream = state >= 0;
    if (!stream) {
        int dom = sock_domain(s);
        stream =
            (dom == AF_INET || dom == AF_INET6) && sock_type(s) == SOCK_STREAM;
    }
    j->sock = s; /* closed once the caller has its answer */
    if (!stream || j->salen == 0)
        return SUP_CONTINUE;
    /* When every inet connect is charged alike, whatever address it names,
     * a new attempt is charged whatever we read (even an address another
     * thread is switching from AF_UNIX), and the kernel makes it in the
     * program's own thread: whatever address it reads again, it is an
     * attempt that was charged. */
    j->connect = !alike;
    if (state >= 0 && state != TCP_CLOSE)
        return j->connect ? SUP_CONNECT : SUP_CONTINUE;
    if (j->connect && (r == 0 || !rl_gate_covers(&sup->proc, &j->sa, j->salen)))
        return SUP_CONNECT;
    /* Not read: read for the line that names it, once the decision says
     * there is one. */
    struct unread u = {j, req->data.args[1], req->data.args[2]};
    return connect_decision(sup, pf, j, "connect", RL_CONNECT_SUPERVISOR, &u);
}

bool sup_open_ready(const struct sup_job *j, uint64_t now)
{
    return rl_connect_wait_over(&j->answer.connect, now);
}

/* From the main thread: the job's holder was found by its first decision,
 * so no pidfd is looked up here; `pf` is the loop thread's all the same
 * (a receiver's cache is that receiver's alone). */
enum sup_act sup_redecide(struct rl_sup *sup, struct sup_pidfds *pf,
                          struct sup_job *j)
{
    if (!sup_id_valid(sup->listener, j->id)) {
        j->err = ESRCH;
        return SUP_ERROR;
    }
    /* Its address was read: a connect decided without it (nothing kept
     * per connection) never waits for a place. */
    return connect_decision(sup, pf, j, "connect", RL_CONNECT_SUPERVISOR, NULL);
}

/* A send's decision: all of it or none, its turn kept by the timer
 * queue. */
static enum sup_act send_decision(struct rl_sup *sup, struct sup_job *j,
                                  const char *call, uint64_t flags,
                                  uint64_t calls, uint64_t bytes)
{
    const struct rl_send_question q = {
        .head = {RL_CALL_SEND},
        .call = call,
        .fd = j->fd,
        .flags = (int)flags,
        .sa = (const struct sockaddr *)&j->sa,
        .salen = j->salen,
        .calls = calls,
        .want = bytes,
        .min = bytes,
        .probe = &sup_send_probe,
        .asker = RL_SEND_SUPERVISOR,
    };
    const struct rl_send_answer *a = &j->answer.send;
    j->is_send = true;
    rl_decide(&sup->proc, &q.head, (union rl_answer){.send = &j->answer.send});
    if (a->act == RL_GATE_FAIL) {
        j->err = a->t.err;
        return SUP_ERROR;
    }
    if (a->act != RL_GATE_GO)
        return SUP_CONTINUE; /* the kernel answers it: nothing taken */
    return granted(j, &a->t, SUP_CONTINUE);
}

/* An addressed send of `calls` datagrams and `bytes` bytes to j->sa (or a
 * MSG_FASTOPEN connect on a stream socket). */
static enum sup_act addressed(struct rl_sup *sup, struct sup_pidfds *pf,
                              struct sup_job *j, const char *call,
                              uint64_t flags, uint64_t calls, uint64_t bytes)
{
    bool fastopen = (flags & MSG_FASTOPEN) != 0;
    if ((!fastopen && !rl_gate_charges_sends(&sup->proc)) ||
        !rl_gate_covers(&sup->proc, &j->sa, j->salen) || calls == 0)
        return SUP_CONTINUE;
    int s = sup_grab(pf, sup->listener, j->pid, j->id, j->fd);
    if (s < 0) {
        j->err = -s;
        return SUP_ERROR;
    }
    int type = sock_type(s);
    bool fresh = type == SOCK_STREAM && !in_progress(s);
    enum sup_act act = SUP_CONTINUE;
    if (type == SOCK_DGRAM && rl_gate_charges_sends(&sup->proc))
        /* Datagrams go whole or not at all. */
        act = send_decision(sup, j, call, flags, calls, bytes);
    else if (fastopen && fresh)
        act = connect_decision(sup, pf, j, call, RL_CONNECT_FASTOPEN, NULL);
    /* Our copy is closed once the caller has its answer (sup_job.sock),
     * but not kept while the call waits for its turn. */
    if (act == SUP_DUE)
        close(s);
    else
        j->sock = s;
    return act;
}

static enum sup_act on_sendto(struct rl_sup *sup, struct sup_pidfds *pf,
                              const struct seccomp_notif *req,
                              struct sup_job *j)
{
    j->fd = (int)req->data.args[0];
    int r = read_addr(j, req->data.args[4], req->data.args[5]);
    if (r < 0)
        return read_failed(sup, j, r);
    if (r == 0)
        return SUP_CONTINUE;
    return addressed(sup, pf, j, "sendto", req->data.args[3], 1,
                     req->data.args[2]);
}

/* The bytes a message carries: the sum of its iovec lengths. */
static int msg_bytes(pid_t pid, const struct msghdr *m, uint64_t *bytes)
{
    size_t n = m->msg_iovlen < MAX_IOV ? m->msg_iovlen : MAX_IOV;
    struct iovec iov[64];
    *bytes = 0;
    for (size_t done = 0; done < n;) {
        size_t k = n - done < 64 ? n - done : 64;
        int r = sup_peek(pid, (uintptr_t)(m->msg_iov + done), iov,
                         k * sizeof iov[0]);
        if (r < 0)
            return r;
        for (size_t i = 0; i < k; i++)
            *bytes += iov[i].iov_len;
        done += k;
    }
    return 0;
}

static enum sup_act on_sendmsg(struct rl_sup *sup, struct sup_pidfds *pf,
                               const struct seccomp_notif *req,
                               struct sup_job *j)
{
    struct msghdr m;
    j->fd = (int)req->data.args[0];
    int r = sup_peek(j->pid, req->data.args[1], &m, sizeof m);
    if (r < 0)
        return read_failed(sup, j, r);
    r = read_addr(j, (uintptr_t)m.msg_name, m.msg_namelen);
    if (r < 0)
        return read_failed(sup, j, r);
    if (r == 0)
        return SUP_CONTINUE;
    uint64_t bytes = 0;
    if (rl_gate_charges_sends(&sup->proc)) {
        r = msg_bytes(j->pid, &m, &bytes);
        if (r < 0)
            return read_failed(sup, j, r);
    }
    return addressed(sup, pf, j, "sendmsg", req->data.args[2], 1, bytes);
}

/* sendmmsg: every message with a covered inet name is charged (1 call and
 * its bytes each), all of them or none. */
static enum sup_act on_sendmmsg(struct rl_sup *sup, struct sup_pidfds *pf,
                                const struct seccomp_notif *req,
                                struct sup_job *j)
{
    j->fd = (int)req->data.args[0];
    size_t vlen = req->data.args[2] < MAX_IOV ? req->data.args[2] : MAX_IOV;
    if (vlen == 0 || !rl_gate_charges_sends(&sup->proc))
        return SUP_CONTINUE;
    struct mmsghdr *v = calloc(vlen, sizeof *v);
    if (v == NULL)
        return SUP_CONTINUE;
    uint64_t calls = 0, bytes = 0;
    struct sup_job first = *j;
    enum sup_act act = SUP_CONTINUE;
    int r = sup_peek(j->pid, req->data.args[1], v, vlen * sizeof *v);
    if (r < 0) {
        act = read_failed(sup, j, r);
        goto out;
    }
    for (size_t i = 0; i < vlen; i++) {
        struct sup_job one = *j;
        uint64_t b = 0;
        r = read_addr(&one, (uintptr_t)v[i].msg_hdr.msg_name,
                      v[i].msg_hdr.msg_namelen);
        if (r == 0 ||
            (r > 0 && !rl_gate_covers(&sup->proc, &one.sa, one.salen)))
            continue;
        if (r > 0)
            r = msg_bytes(j->pid, &v[i].msg_hdr, &b);
        if (r < 0) {
            act = read_failed(sup, j, r);
            goto out;
        }
        if (calls++ == 0)
            first = one;
        bytes += b;
    }
    if (calls > 0) {
        /* The log line names the first charged destination. */
        j->sa = first.sa;
        j->salen = first.salen;
        act = addressed(sup, pf, j, "sendmmsg", 0, calls, bytes);
    }
out:
    free(v);
    return act;
}

/* close, dup2, dup3, close_range (only when a rule has max_open): the
 * program gives up fds; those that held places give them back before the
 * call goes on. The close of a number that no connection holds costs a
 * lock-free look. */
static enum sup_act on_close(struct rl_sup *sup, struct sup_pidfds *pf,
                             const struct seccomp_notif *req, struct sup_job *j)
{
    uint64_t a0 = req->data.args[0], a1 = req->data.args[1];
    bool range = req->data.nr == SYS_close_range;
    bool dup = !range && req->data.nr != SYS_close;
    if (range) {
        /* CLOSE_RANGE_CLOEXEC closes nothing now; a bad range nothing at
         * all. */
        unsigned first = (unsigned)a0, last = (unsigned)a1;
        if ((req->data.args[2] & CLOSE_RANGE_CLOEXEC) || first > last)
            return SUP_CONTINUE;
        pid_t tgid = sup_target_tgid(pf, sup->listener, j->pid, j->id);
        if (tgid > 0)
            sup_open_close(&sup->open, tgid, first, last);
        return SUP_CONTINUE;
    }
    int fd = (int)a0, to = (int)a1;
    if (dup ? fd == to || (!sup_open_maybe(&sup->open, fd) &&
                           !sup_open_maybe(&sup->open, to))
            : !sup_open_maybe(&sup->open, fd))
        return SUP_CONTINUE;
    pid_t tgid = sup_target_tgid(pf, sup->listener, j->pid, j->id);
    if (tgid <= 0)
        return SUP_CONTINUE;
    if (!dup) {
        sup_open_close(&sup->open, tgid, (unsigned)fd, (unsigned)fd);
        return SUP_CONTINUE;
    }
    /* dup2/dup3 of an fd that is not open fails and leaves `to` open:
     * only a copy that can succeed forgets it. */
    j->fd = fd;
    int s = sup_grab(pf, sup->listener, j->pid, j->id, j->fd);
    if (s < 0)
        return SUP_CONTINUE;
    close(s);
    sup_open_dup(&sup->open, tgid, fd, to);
    return SUP_CONTINUE;
}

enum sup_act sup_decide(struct rl_sup *sup, struct sup_pidfds *pf,
                        const struct seccomp_notif *req, struct sup_job *job)
{
    sup_target_next(pf);
    switch (req->data.nr) {
    case SYS_close:
#ifdef SYS_dup2
    case SYS_dup2:
#endif
    case SYS_dup3:
    case SYS_close_range:
        return on_close(sup, pf, req, job);
    case SYS_connect:
        return on_connect(sup, pf, req, job);
    case SYS_sendto:
        return on_sendto(sup, pf, req, job);
    case SYS_sendmsg:
        return on_sendmsg(sup, pf, req, job);
    case SYS_sendmmsg:
        return on_sendmmsg(sup, pf, req, job);
    default:
        return SUP_CONTINUE;
    }
}

void sup_refund(struct rl_sup *sup, struct sup_job *job)
{
    sup_settle(&sup->open, job, false);
    if (!job->charged)
        return;
    if (job->is_send)
        rl_settle(&sup->proc,
                  &(const struct rl_outcome){
                      .kind = RL_CALL_SEND,
                      .send = {.a = &job->answer.send, .leased = false}});
    else
        rl_settle_connect_unmade(&sup->proc, &job->answer.connect);
    job->charged = false;
}
