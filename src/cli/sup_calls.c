/* sup_calls.c — one decision per notified system call (see sup_calls.h).
 *
 * The arguments in registers (fd, lengths, flags) are the call's own; what
 * they point to (the sockaddr, a msghdr) is read from the target's memory
 * with process_vm_readv, and the notification is re-checked afterwards
 * (or a pidfd of the caller found alive says as much: see grab): a thread
 * that died and whose number was reused must not be read for it.
 * A connect is decided by the socket's own domain, asked of our copy of
 * it, not by the address it names: see on_connect. The sends are answered
 * "continue", so the kernel reads their address again (a program that
 * rewrites it from another thread in between is charged for the address
 * it showed: this is a rate limiter, not a sandbox, SPEC §7). */
#include "cli/sup_calls.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/close_range.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/pidfd.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "cli/sup_open.h"

/* A pidfd of one thread rather than its process (Linux 6.9); older
 * kernels refuse it and we look the process up instead. */
#ifndef PIDFD_THREAD
#define PIDFD_THREAD O_EXCL
#endif

/* PIDFD_GET_INFO (Linux 6.13): a pidfd's thread group, in one ioctl
 * rather than a read of /proc. Only the first fields are asked for; the
 * kernel takes the size from the request. */
struct rl_pidfd_info {
    uint64_t mask;
    uint64_t cgroupid;
    uint32_t pid, tgid, ppid, ruid, rgid, euid, egid, suid, sgid, fsuid, fsgid,
        spare0;
};
#define RL_PIDFD_GET_INFO _IOWR(0xFF, 11, struct rl_pidfd_info)
#define RL_PIDFD_INFO_PID 1u

/* The kernel caps msg_iovlen and sendmmsg's vlen at this. */
#define MAX_IOV 1024u

bool sup_id_valid(int listener, uint64_t id)
{
    return ioctl(listener, SECCOMP_IOCTL_NOTIF_ID_VALID, &id) == 0;
}

/* `len` bytes at `addr` in thread `pid`: 0, or -errno (-EFAULT for a
 * short read: the program passed a bad pointer). */
static int peek(pid_t pid, uint64_t addr, void *buf, size_t len)
{
    if (len == 0)
        return 0;
    struct iovec local = {buf, len};
    struct iovec remote = {(void *)(uintptr_t)addr, len};
    ssize_t n = process_vm_readv(pid, &local, 1, &remote, 1, 0);
    if (n < 0)
        return -errno;
    return (size_t)n == len ? 0 : -EFAULT;
}

/* The thread group of a thread, from /proc (kernels before PIDFD_THREAD). */
static pid_t tgid_of(pid_t tid)
{
    char path[64], line[128];
    snprintf(path, sizeof path, "/proc/%d/status", (int)tid);
    FILE *f = fopen(path, "re");
    pid_t tgid = -1;
    if (f == NULL)
        return -1;
    while (fgets(line, sizeof line, f) != NULL)
        if (strncmp(line, "Tgid:", 5) == 0) {
            tgid = (pid_t)strtol(line + 5, NULL, 10);
            break;
        }
    fclose(f);
    return tgid;
}

/* pidfds of recent target threads, so that a thread's next call costs no
 * pidfd_open. Only thread pidfds (PIDFD_THREAD) are kept: one names that
 * thread for ever, so a thread number reused by another thread finds a
 * pidfd of a dead thread (pidfd_getfd: ESRCH) and is opened again; a
 * process pidfd kept under a thread number could name the wrong process.
 * One cache per receiver (supervise.c), so no lock; each entry says which
 * of the receiver's notifications it was opened for (see grab). */
#define PIDFD_CACHE 64
static __thread struct {
    pid_t tid; /* 0: empty */
    int pfd;
    uint64_t made; /* the `notif` it was opened for */
} cache[PIDFD_CACHE];
static __thread uint64_t notif; /* counts this receiver's notifications */
static atomic_bool no_thread_pidfds;

/* A pidfd of thread `tid`: a thread pidfd kept in the cache (*cached; the
 * caller must not close it), *earlier when it was opened before the
 * notification at hand was received; or a process pidfd to close after
 * use (kernels before PIDFD_THREAD); -1. */
static int open_pidfd(pid_t tid, bool *cached, bool *earlier)
{
    unsigned h = (unsigned)tid % PIDFD_CACHE;
    *cached = *earlier = false;
    if (tid != 0 && cache[h].tid == tid) {
        *cached = true;
        *earlier = cache[h].made != notif;
        return cache[h].pfd;
    }
    if (!atomic_load_explicit(&no_thread_pidfds, memory_order_relaxed)) {
        int pfd = pidfd_open(tid, PIDFD_THREAD);
        if (pfd >= 0) {
            if (cache[h].tid != 0)
                close(cache[h].pfd);
            cache[h].tid = tid;
            cache[h].pfd = pfd;
            cache[h].made = notif;
            *cached = true;
            return pfd;
        }
        if (errno != EINVAL)
            return -1;
        atomic_store(&no_thread_pidfds, true); /* before Linux 6.9 */
    }
    pid_t tgid = tgid_of(tid);
    return tgid > 0 ? pidfd_open(tgid, 0) : -1;
}

void sup_calls_thread_end(void)
{
    for (unsigned h = 0; h < PIDFD_CACHE; h++)
        if (cache[h].tid != 0) {
            close(cache[h].pfd);
            cache[h].tid = 0;
        }
}

static void forget_pidfd(pid_t tid)
{
    unsigned h = (unsigned)tid % PIDFD_CACHE;
    if (tid != 0 && cache[h].tid == tid) {
        close(cache[h].pfd);
        cache[h].tid = 0;
    }
}

/* The process (thread group) of the calling thread, or -1 when it is gone.
 * From the cached thread pidfd where the kernel tells (a live thread's
 * pidfd names it: its number cannot have been reused), else from /proc;
 * the notification is checked after, so the number named the caller,
 * unless the pidfd was opened before the notification came (see grab). */
static atomic_bool no_pidfd_info;

static pid_t target_tgid(int listener, const struct sup_job *j)
{
    pid_t tgid = -1;
    bool proven = false;
    for (int attempt = 0;
         attempt < 2 && !atomic_load_explicit(&no_pidfd_info,
                                              memory_order_relaxed);
         attempt++) {
        bool cached, earlier;
        int pfd = open_pidfd(j->pid, &cached, &earlier);
        if (pfd < 0)
            return -1;
        if (!cached) { /* a process pidfd: kernels before PIDFD_THREAD */
            close(pfd);
            break;
        }
        struct rl_pidfd_info info;
        memset(&info, 0, sizeof info);
        info.mask = RL_PIDFD_INFO_PID;
        if (ioctl(pfd, RL_PIDFD_GET_INFO, &info) == 0) {
            tgid = (pid_t)info.tgid;
            proven = earlier;
            break;
        }
        if (errno == ESRCH)
            forget_pidfd(j->pid); /* a dead thread's: its number reused */
        else
            /* ENOTTY, EINVAL: before Linux 6.13 */
            atomic_store(&no_pidfd_info, true);
    }
    if (tgid <= 0)
        tgid = tgid_of(j->pid);
    return tgid > 0 && (proven || sup_id_valid(listener, j->id)) ? tgid : -1;
}

/* The launcher probed that we may read the program (cmd_run_seccomp.c);
 * a program can still take that away later (an exec of a file it may not
 * read makes it non-dumpable; a root program that changes its uid). Its
 * decided calls then fail with EPERM: said once, not at every call. */
static int denied(int err)
{
    static atomic_bool said;
    if (err == EPERM && !atomic_exchange(&said, true)) {
        fprintf(stderr,
                "rlshim run --seccomp: the supervisor may no longer read "
                "the program's sockets and memory (EPERM: it became "
                "non-dumpable or changed credentials); its connects fail "
                "with EPERM\n");
    }
    return err;
}

/* Our copy of fd `fd` of the calling thread: an fd of ours, or -errno. A
 * pidfd opened now is checked after its opening, by the notification
 * still waiting, to name the caller (the caller lives, so its number was
 * not reused). A thread pidfd this receiver opened before it received the
 * notification needs no check: if pidfd_getfd finds its thread alive,
 * that thread had the caller's number when the notification came, and two
 * live threads never share one, so it is the caller; and it was alive
 * through the reads of the caller's memory before this (by its number).
 * Kept for a thread that died, the pidfd makes pidfd_getfd fail (ESRCH)
 * and is opened again. */
static int grab(int listener, const struct sup_job *j)
{
    for (int attempt = 0; attempt < 2; attempt++) {
        bool cached, earlier;
        int pfd = open_pidfd(j->pid, &cached, &earlier);
        if (pfd < 0)
            return -ESRCH;
        if (!earlier && !sup_id_valid(listener, j->id)) {
            if (!cached)
                close(pfd);
            return -ESRCH;
        }
        int s = pidfd_getfd(pfd, j->fd, 0);
        int err = errno;
        if (!cached)
            close(pfd);
        if (s >= 0)
            return s;
        if (err != ESRCH || !cached)
            return -denied(err);
        forget_pidfd(j->pid); /* a thread that is gone; its number reused */
    }
    return -ESRCH;
}

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
    int r = peek(j->pid, addr, &j->sa, (size_t)len);
    if (r < 0)
        return r;
    j->salen = (socklen_t)len;
    return is_inet(j) ? 1 : 0;
}

/* A connect's decision. With max_open, its places are taken in the name
 * of the calling process (so that its death gives them back, as for a
 * preloaded process), and stay with the job until sup_settle binds them
 * to the program's fd (sup_open.h: the program's close gives them back). */
static int connect_decision(int listener, struct sup_job *j, const char *call)
{
    if (rl_open_on && j->holder.pid == 0) {
        pid_t tgid = target_tgid(listener, j);
        if (tgid <= 0 || sup_open_holder(tgid, &j->holder) < 0) {
            memset(&j->holder, 0, sizeof j->holder);
            j->t.err = ESRCH; /* the caller is gone: nobody reads it */
            return RL_GATE_FAIL;
        }
    }
    if (j->holder.pid != 0)
        rl_open_act_for(&j->holder);
    int act = rl_gate_connect(&j->t, call, j->fd, &j->sa, j->salen);
    rl_open_act_for(NULL);
    return act;
}

void sup_settle(struct sup_job *j, bool holds)
{
    if (j->t.nopen == 0)
        return;
    if (holds)
        sup_open_bind(&j->holder, j->fd, j->t.open, j->t.nopen);
    else
        for (unsigned i = 0; i < j->t.nopen; i++)
            rl_open_release_as(j->t.open[i], &j->holder);
    j->t.nopen = 0;
}

/* What a failed read answers: the kernel's EFAULT for a bad pointer, EPERM
 * when we may not read; for a thread that is gone, anything (nobody reads
 * it). */
static enum sup_act read_failed(struct sup_job *j, int r)
{
    j->err = r == -EFAULT ? EFAULT : r == -EPERM ? denied(EPERM) : ESRCH;
    return SUP_ERROR;
}

static enum sup_act verdict(struct sup_job *j, int act)
{
    /* max_open reached in delay mode: the connect waits for a place (even
     * on a non-blocking socket, as the rate's delay does here), decided
     * again from the timer queue. */
    if (act == RL_GATE_FAIL && j->connect &&
        rl_gate_open_waits(&j->t, &j->open_deadline))
        return SUP_OPEN_WAIT;
    if (act == RL_GATE_FAIL) {
        j->err = j->t.err;
        return SUP_ERROR;
    }
    j->charged = true;
    if (j->t.wait_ns > 0) {
        j->due = j->t.now + j->t.wait_ns;
        return SUP_DUE;
    }
    return j->connect ? SUP_CONNECT : SUP_CONTINUE;
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
 *    before it reads: EFAULT, EINVAL) is continued.
 * What stays open is another thread replacing the fd itself (dup2 of an
 * inet socket over a unix one) between our look and the kernel's: the
 * answer "continue" cannot name a file. */
static enum sup_act on_connect(int listener, const struct seccomp_notif *req,
                               struct sup_job *j)
{
    j->fd = (int)req->data.args[0];
    int r = read_addr(j, req->data.args[1], req->data.args[2]);
    if (r < 0)
        return read_failed(j, r);
    /* grab checks the notification after the read: the memory we read was
     * the caller's. */
    int s = grab(listener, j);
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
        stream = (dom == AF_INET || dom == AF_INET6) &&
                 sock_type(s) == SOCK_STREAM;
    }
    j->sock = s; /* closed once the caller has its answer */
    if (!stream || j->salen == 0)
        return SUP_CONTINUE;
    j->connect = true;
    if (r == 0 || !rl_gate_covers(&j->sa, j->salen) ||
        (state >= 0 && state != TCP_CLOSE))
        return SUP_CONNECT;
    return verdict(j, connect_decision(listener, j, "connect"));
}

bool sup_open_ready(const struct sup_job *j, uint64_t now)
{
    return now >= j->open_deadline || rl_gate_open_freed(&j->t);
}

/* From the main thread: the job's holder was found by its first decision,
 * so the pidfd caches (the receivers') are not touched here. */
enum sup_act sup_redecide(int listener, struct sup_job *j)
{
    if (!sup_id_valid(listener, j->id)) {
        j->err = ESRCH;
        return SUP_ERROR;
    }
    return verdict(j, connect_decision(listener, j, "connect"));
}

/* An addressed send of `calls` datagrams and `bytes` bytes to j->sa (or a
 * MSG_FASTOPEN connect on a stream socket). */
static enum sup_act addressed(int listener, struct sup_job *j, const char *call,
                              uint64_t flags, uint64_t calls, uint64_t bytes)
{
    bool fastopen = (flags & MSG_FASTOPEN) != 0;
    if ((!fastopen && !rl_gate_charges_sends()) ||
        !rl_gate_covers(&j->sa, j->salen) || calls == 0)
        return SUP_CONTINUE;
    int s = grab(listener, j);
    if (s < 0) {
        j->err = -s;
        return SUP_ERROR;
    }
    int type = sock_type(s);
    bool fresh = type == SOCK_STREAM && !in_progress(s);
    enum sup_act act = SUP_CONTINUE;
    if (type == SOCK_DGRAM && rl_gate_charges_sends())
        /* Datagrams go whole or not at all. */
        act = verdict(j, rl_gate_send(&j->t, call, j->fd, &j->sa, j->salen,
                                      calls, calls, bytes, bytes));
    else if (fastopen && fresh)
        act = verdict(j, connect_decision(listener, j, call));
    /* Our copy is closed once the caller has its answer (sup_job.sock),
     * but not kept while the call waits for its turn. */
    if (act == SUP_DUE)
        close(s);
    else
        j->sock = s;
    return act;
}

static enum sup_act on_sendto(int listener, const struct seccomp_notif *req,
                              struct sup_job *j)
{
    j->fd = (int)req->data.args[0];
    int r = read_addr(j, req->data.args[4], req->data.args[5]);
    if (r < 0)
        return read_failed(j, r);
    if (r == 0)
        return SUP_CONTINUE;
    return addressed(listener, j, "sendto", req->data.args[3], 1,
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
        int r =
            peek(pid, (uintptr_t)(m->msg_iov + done), iov, k * sizeof iov[0]);
        if (r < 0)
            return r;
        for (size_t i = 0; i < k; i++)
            *bytes += iov[i].iov_len;
        done += k;
    }
    return 0;
}

static enum sup_act on_sendmsg(int listener, const struct seccomp_notif *req,
                               struct sup_job *j)
{
    struct msghdr m;
    j->fd = (int)req->data.args[0];
    int r = peek(j->pid, req->data.args[1], &m, sizeof m);
    if (r < 0)
        return read_failed(j, r);
    r = read_addr(j, (uintptr_t)m.msg_name, m.msg_namelen);
    if (r < 0)
        return read_failed(j, r);
    if (r == 0)
        return SUP_CONTINUE;
    uint64_t bytes = 0;
    if (rl_gate_charges_sends()) {
        r = msg_bytes(j->pid, &m, &bytes);
        if (r < 0)
            return read_failed(j, r);
    }
    return addressed(listener, j, "sendmsg", req->data.args[2], 1, bytes);
}

/* sendmmsg: every message with a covered inet name is charged (1 call and
 * its bytes each), all of them or none. */
static enum sup_act on_sendmmsg(int listener, const struct seccomp_notif *req,
                                struct sup_job *j)
{
    j->fd = (int)req->data.args[0];
    size_t vlen = req->data.args[2] < MAX_IOV ? req->data.args[2] : MAX_IOV;
    if (vlen == 0 || !rl_gate_charges_sends())
        return SUP_CONTINUE;
    struct mmsghdr *v = calloc(vlen, sizeof *v);
    if (v == NULL)
        return SUP_CONTINUE;
    uint64_t calls = 0, bytes = 0;
    struct sup_job first = *j;
    enum sup_act act = SUP_CONTINUE;
    int r = peek(j->pid, req->data.args[1], v, vlen * sizeof *v);
    if (r < 0) {
        act = read_failed(j, r);
        goto out;
    }
    for (size_t i = 0; i < vlen; i++) {
        struct sup_job one = *j;
        uint64_t b = 0;
        r = read_addr(&one, (uintptr_t)v[i].msg_hdr.msg_name,
                      v[i].msg_hdr.msg_namelen);
        if (r == 0 || (r > 0 && !rl_gate_covers(&one.sa, one.salen)))
            continue;
        if (r > 0)
            r = msg_bytes(j->pid, &v[i].msg_hdr, &b);
        if (r < 0) {
            act = read_failed(j, r);
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
        act = addressed(listener, j, "sendmmsg", 0, calls, bytes);
    }
out:
    free(v);
    return act;
}

/* close, dup2, dup3, close_range (only when a rule has max_open): the
 * program gives up fds; those that held places give them back before the
 * call goes on. The close of a number that no connection holds costs a
 * lock-free look. */
static enum sup_act on_close(int listener, const struct seccomp_notif *req,
                             struct sup_job *j)
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
        pid_t tgid = target_tgid(listener, j);
        if (tgid > 0)
            sup_open_close(tgid, first, last);
        return SUP_CONTINUE;
    }
    int fd = (int)a0, to = (int)a1;
    if (dup ? fd == to || (!sup_open_maybe(fd) && !sup_open_maybe(to))
            : !sup_open_maybe(fd))
        return SUP_CONTINUE;
    pid_t tgid = target_tgid(listener, j);
    if (tgid <= 0)
        return SUP_CONTINUE;
    if (!dup) {
        sup_open_close(tgid, (unsigned)fd, (unsigned)fd);
        return SUP_CONTINUE;
    }
    /* dup2/dup3 of an fd that is not open fails and leaves `to` open:
     * only a copy that can succeed forgets it. */
    j->fd = fd;
    int s = grab(listener, j);
    if (s < 0)
        return SUP_CONTINUE;
    close(s);
    sup_open_dup(tgid, fd, to);
    return SUP_CONTINUE;
}

enum sup_act sup_decide(int listener, const struct seccomp_notif *req,
                        struct sup_job *job)
{
    notif++;
    switch (req->data.nr) {
    case SYS_close:
#ifdef SYS_dup2
    case SYS_dup2:
#endif
    case SYS_dup3:
    case SYS_close_range:
        return on_close(listener, req, job);
    case SYS_connect:
        return on_connect(listener, req, job);
    case SYS_sendto:
        return on_sendto(listener, req, job);
    case SYS_sendmsg:
        return on_sendmsg(listener, req, job);
    case SYS_sendmmsg:
        return on_sendmmsg(listener, req, job);
    default:
        return SUP_CONTINUE;
    }
}

void sup_refund(struct sup_job *job)
{
    sup_settle(job, false);
    if (!job->charged)
        return;
    /* The gate gives back only what the ticket took of each kind. */
    uint64_t units[RL_KIND_COUNT] = {1, job->t.calls, job->t.bytes};
    for (int k = 0; k < RL_KIND_COUNT; k++)
        rl_gate_refund(&job->t, k, units[k]);
    job->charged = false;
}
