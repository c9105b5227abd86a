/* floor.h — the floor of `rlshim run --seccomp`: the least a seccomp
 * user-notification supervisor can do. Its filter (libseccomp) notifies
 * what rlshim's notifies for connects and sends (connect, and sendto with
 * an address), and its one thread answers each notification CONTINUE at
 * once, deciding nothing; answers wake the caller on its CPU
 * (SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP, Linux 6.6) when the kernel has it,
 * as rlshim's supervisor asks. What a notified call costs under it is the
 * kernel's own round trip. Header-only, for tests/bench/bench_seccomp.c:
 *
 *   sc_floor_run(argv, connects)
 *                        fork, load the filter, exec argv[0] in the child;
 *                        supervise it here; return its exit status.
 *
 * With `connects`, the floor of a supervisor that keeps rlshim's guarantee
 * that the address connected is the one it read (issue 19): it makes each
 * connect itself, on its copy of the caller's socket (pidfd_getfd) with
 * the address read from the caller's memory (process_vm_readv), and
 * answers its result. Still deciding nothing, in its one thread (so a
 * connect that blocks holds up every other call: a floor, not a design). */
#ifndef RL_TESTS_SECCOMP_FLOOR_H
#define RL_TESTS_SECCOMP_FLOOR_H

#include <errno.h>
#include <fcntl.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <seccomp.h>
#include <stdint.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef SECCOMP_IOCTL_NOTIF_SET_FLAGS
#define SECCOMP_IOCTL_NOTIF_SET_FLAGS SECCOMP_IOW(4, __u64)
#endif
#ifndef SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP
#define SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP (1UL << 0)
#endif

/* The child's listener is handed to the parent with SCM_RIGHTS (sendmsg
 * is not notified): one byte of data and one fd of control. */
struct sc_floor_msg {
    char data;
    struct iovec iov;
    union {
        struct cmsghdr h;
        char buf[CMSG_SPACE(sizeof(int))];
    } u;
    struct msghdr m;
};

static inline void sc_floor_msg_init(struct sc_floor_msg *x)
{
    memset(x, 0, sizeof *x);
    x->data = 'L';
    x->iov = (struct iovec){.iov_base = &x->data, .iov_len = 1};
    x->m = (struct msghdr){.msg_iov = &x->iov, .msg_iovlen = 1,
                           .msg_control = x->u.buf,
                           .msg_controllen = sizeof x->u.buf};
}

static inline int sc_floor_pass_fd(int sock, int fd)
{
    struct sc_floor_msg x;
    sc_floor_msg_init(&x);
    struct cmsghdr *c = CMSG_FIRSTHDR(&x.m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &fd, sizeof fd);
    return sendmsg(sock, &x.m, 0) == 1 ? 0 : -1;
}

static inline int sc_floor_take_fd(int sock)
{
    struct sc_floor_msg x;
    int fd = -1;
    sc_floor_msg_init(&x);
    if (recvmsg(sock, &x.m, MSG_CMSG_CLOEXEC) != 1)
        return -1;
    struct cmsghdr *c = CMSG_FIRSTHDR(&x.m);
    if (c != NULL && c->cmsg_type == SCM_RIGHTS)
        memcpy(&fd, CMSG_DATA(c), sizeof fd);
    return fd;
}

/* The connect of `req` made here: 0 or -errno. One pidfd kept, of the
 * last calling thread (PIDFD_THREAD, Linux 6.9; else its process's, which
 * only a single-threaded client's thread has). */
static inline int sc_floor_connect(const struct seccomp_notif *req)
{
    static pid_t tid;
    static int pfd = -1;
    struct sockaddr_storage sa;
    size_t len = (size_t)req->data.args[2];
    if (len > sizeof sa)
        return -EINVAL;
    struct iovec local = {&sa, len};
    struct iovec remote = {(void *)(uintptr_t)req->data.args[1], len};
    if (process_vm_readv((pid_t)req->pid, &local, 1, &remote, 1, 0) !=
        (ssize_t)len)
        return -EFAULT;
    if (pfd < 0 || tid != (pid_t)req->pid) {
        if (pfd >= 0)
            close(pfd);
        tid = (pid_t)req->pid;
        pfd = (int)syscall(SYS_pidfd_open, tid, O_EXCL /* PIDFD_THREAD */);
        if (pfd < 0 && errno == EINVAL)
            pfd = (int)syscall(SYS_pidfd_open, tid, 0);
        if (pfd < 0)
            return -ESRCH;
    }
    int s = (int)syscall(SYS_pidfd_getfd, pfd, (int)req->data.args[0], 0);
    if (s < 0)
        return -errno;
    int r =
        connect(s, (struct sockaddr *)&sa, (socklen_t)len) == 0 ? 0 : -errno;
    close(s);
    return r;
}

struct sc_floor_arg {
    int fd;
    int connects;
};

/* Answer every notification CONTINUE (or, with `connects`, a connect with
 * the result of the one made here); the thread dies with the process. */
static inline void *sc_floor_answer(void *arg)
{
    struct sc_floor_arg a = *(struct sc_floor_arg *)arg;
    struct seccomp_notif *req;
    struct seccomp_notif_resp *resp;
    if (seccomp_notify_alloc(&req, &resp) != 0)
        return NULL;
    for (;;) {
        memset(req, 0, sizeof *req);
        if (seccomp_notify_receive(a.fd, req) != 0)
            continue; /* EINTR, or a caller gone before it was read */
        resp->id = req->id;
        resp->val = 0;
        resp->error = 0;
        resp->flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
        if (a.connects && req->data.nr == SCMP_SYS(connect)) {
            resp->flags = 0;
            resp->error = sc_floor_connect(req);
        }
        (void)seccomp_notify_respond(a.fd, resp);
    }
    return NULL;
}

static inline _Noreturn void sc_floor_child(int sock, char **argv)
{
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
    if (ctx == NULL ||
        seccomp_rule_add(ctx, SCMP_ACT_NOTIFY, SCMP_SYS(connect), 0) != 0 ||
        seccomp_rule_add(ctx, SCMP_ACT_NOTIFY, SCMP_SYS(sendto), 1,
                         SCMP_A4(SCMP_CMP_NE, 0)) != 0 ||
        seccomp_load(ctx) != 0)
        _exit(126);
    int fd = seccomp_notify_fd(ctx);
    if (fd < 0 || sc_floor_pass_fd(sock, fd) != 0)
        _exit(126);
    close(fd);
    close(sock);
    execvp(argv[0], argv);
    _exit(127);
}

static inline int sc_floor_run(char **argv, int connects)
{
    int sv[2], st = 0;
    pthread_t th;
    static struct sc_floor_arg arg;
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
        return 126;
    pid_t pid = fork();
    if (pid < 0)
        return 126;
    if (pid == 0) {
        close(sv[0]);
        sc_floor_child(sv[1], argv);
    }
    close(sv[1]);
    int fd = sc_floor_take_fd(sv[0]);
    close(sv[0]);
    if (fd < 0) {
        waitpid(pid, &st, 0);
        return 126;
    }
    uint64_t flags = SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP;
    (void)ioctl(fd, SECCOMP_IOCTL_NOTIF_SET_FLAGS, flags);
    arg.fd = fd;
    arg.connects = connects;
    if (pthread_create(&th, NULL, sc_floor_answer, &arg) != 0)
        return 126;
    if (waitpid(pid, &st, 0) != pid)
        return 126;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

#endif
