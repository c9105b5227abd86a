/* hook_connect.c — connect, and the connect decision MSG_FASTOPEN shares.
 *
 * Stream connects to a covered AF_INET/AF_INET6 destination are charged
 * once per attempt: the fd is marked CHARGED before the real call, so the
 * progress reports (EINPROGRESS, EALREADY, EISCONN) and hiredis's
 * confirming second connect pass uncharged; an attempt that fails outright
 * clears the mark, so a retry on the same socket is a new attempt. A
 * denied connect touches nothing. A datagram connect is not charged: it
 * marks the fd so its datagrams are. getsockopt(SO_ERROR) tells the
 * failure of a connect the shim deferred. */
#include <errno.h>
#include <sys/socket.h>

#include "policy/decide_connect.h"
#include "shim/conntab.h"
#include "shim/fdtab.h"
#include "shim/hooks.h"
#include "shim/real.h"
#include "shim/self.h"
#include "shim/shim.h"
#include "shim/wait.h"
#include "util/clock.h"

uint32_t rl_hook_sock_type_asked(int fd, uint32_t mark)
{
    /* Made where the shim did not see it (inherited, a raw system call):
     * ask the kernel, once. */
    int type = 0;
    socklen_t l = sizeof type;
    int saved = errno;
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &l) != 0) {
        errno = saved;
        return 0;
    }
    uint32_t t = type == SOCK_STREAM  ? RL_FD_STREAM
                 : type == SOCK_DGRAM ? RL_FD_DGRAM
                                      : 0;
    uint32_t expect = mark;
    if (mark != 0)
        rl_fdtab_cas(fd, &expect, mark | RL_FD_KNOWN | t);
    else if (rl_shim_may_act())
        rl_fdtab_set(fd, RL_FD_KNOWN | t);
    errno = saved;
    return t;
}

int rl_hook_connect_begin(int fd, const struct sockaddr *sa, socklen_t len,
                          const char *call, int asker, uint64_t deadline,
                          struct rl_connect_answer *a)
{
    a->act = RL_CONNECT_PASS;
    if (sa == NULL || len < sizeof(sa_family_t))
        return RL_HOOK_PASS;
    uint32_t m = rl_fdtab_get(fd);
    bool handler = asker == RL_CONNECT_HANDLER;
    if (sa->sa_family == AF_UNSPEC) {
        /* Dissolves a datagram association: its sends are free again. */
        if ((m & RL_FD_DGRAM) && handler)
            rl_fdtab_put(fd, RL_FD_KNOWN | RL_FD_DGRAM);
        else if (m & RL_FD_DGRAM)
            rl_fdtab_set(fd, RL_FD_KNOWN | RL_FD_DGRAM);
        return RL_HOOK_PASS;
    }
    if (sa->sa_family != AF_INET && sa->sa_family != AF_INET6)
        return RL_HOOK_PASS;
    /* The mark says what the socket is: socket() gave it a fresh one, so
     * a number whose close the shim never saw carries nothing stale. */
    uint32_t type = rl_hook_sock_type(fd, m);
    const struct rl_connect_question q = {
        .head = {RL_CALL_CONNECT},
        .call = call,
        .fd = fd,
        .sa = sa,
        .salen = len,
        .sock = type == RL_FD_STREAM  ? RL_CONNECT_STREAM
                : type == RL_FD_DGRAM ? RL_CONNECT_DGRAM
                                      : RL_CONNECT_OTHER,
        .asker = asker,
        .charged = (m & RL_FD_CHARGED) != 0,
        .deadline = deadline,
        .probe = &rl_wait_connect_probe,
    };
    rl_decide(rl_shim_proc(), &q.head, (union rl_answer){.connect = a});
    /* Its requests are counted by the names they carry, whatever the
     * address (SPEC §11): a connection for every TCP connect. One made
     * in a handler is made later, outside it: making it allocates, and
     * the interrupted thread may be inside malloc. */
    uint32_t http = m & (handler ? RL_FD_HTTP | RL_FD_HTTP_LATE : RL_FD_HTTP);
    if (type == RL_FD_STREAM && http == 0 && a->counts_requests &&
        (handler || rl_conntab_open(fd, sa, len))) {
        http = handler ? RL_FD_HTTP | RL_FD_HTTP_LATE : RL_FD_HTTP;
        rl_fdtab_set(fd, rl_fdtab_get(fd) | http);
    }
    /* MATCHED only when sends are charged at all. */
    uint32_t matched = a->matched ? RL_FD_MATCHED : 0;
    if (type == RL_FD_DGRAM) {
        if (handler)
            rl_fdtab_put(fd, RL_FD_KNOWN | RL_FD_DGRAM | matched);
        else
            rl_fdtab_set(fd, RL_FD_KNOWN | RL_FD_DGRAM | matched);
    }
    if (!a->charged)
        return a->act == RL_CONNECT_PASS ? RL_HOOK_PASS : RL_HOOK_FAIL;
    rl_fdtab_put(fd,
                 RL_FD_KNOWN | RL_FD_STREAM | matched | RL_FD_CHARGED | http);
    return RL_HOOK_GO;
}

void rl_hook_connect_failed(int fd)
{
    /* Refused, unreachable, ...: this attempt is over (and was charged);
     * a connect on the same socket again is a new attempt. */
    rl_fdtab_set(fd, RL_FD_KNOWN | RL_FD_STREAM |
                         (rl_fdtab_get(fd) & (RL_FD_HTTP | RL_FD_HTTP_LATE)));
}

/* Only inet destinations (and AF_UNSPEC, which ends a datagram
 * association) concern the shim: an AF_UNIX connect (nscd, dbus, X) goes
 * straight through, without even setting the shim up. */
static bool concerns(const struct sockaddr *sa, socklen_t len)
{
    if (sa == NULL || len < sizeof(sa_family_t))
        return false;
    sa_family_t f = sa->sa_family;
    return f == AF_INET || f == AF_INET6 || f == AF_UNSPEC;
}

/* A connect from a signal handler: the same question, asked as
 * RL_CONNECT_HANDLER (rl_decide_connect's async-signal-safe mode: a
 * budget with max_open denies, as its place would be bound in a map that
 * allocates; nothing waits), and the same marks. */
static int connect_in_handler(int fd, const struct sockaddr *sa, socklen_t len)
{
    if (!rl_shim_ready()) {
        uint32_t m = rl_fdtab_get(fd);
        if (sa->sa_family == AF_UNSPEC && (m & RL_FD_DGRAM))
            rl_fdtab_put(fd, RL_FD_KNOWN | RL_FD_DGRAM);
        return REAL(connect)(fd, sa, len);
    }
    struct rl_connect_answer a;
    int act = rl_hook_connect_begin(fd, sa, len, "connect", RL_CONNECT_HANDLER,
                                    0, &a);
    if (act == RL_HOOK_FAIL) {
        errno = a.t.err;
        return -1;
    }
    int r = REAL(connect)(fd, sa, len);
    if (act == RL_HOOK_GO) {
        int err = errno;
        rl_hook_connect_end(fd, r, err);
        errno = err;
    }
    return r;
}

/* The answers that neither go nor fail: a wait for a max_open place
 * (sleep, holding nothing, until a connection closes, then decide again),
 * or a connect deferred (made at its turn, or when a place frees:
 * shim/wait.h). false: the call is answered, *act its result; true: go
 * on with *act (the guard held). */
static bool wait_or_defer(int fd, const struct sockaddr *sa, socklen_t len,
                          struct rl_connect_answer *a, int *act)
{
    while (a->act == RL_CONNECT_WAIT) {
        rl_shim_leave();
        rl_settle(rl_shim_proc(), /* the wait */
                  &(const struct rl_outcome){
                      .kind = RL_CALL_CONNECT,
                      .connect = {.a = a, .fd = fd, .r = -1, .err = 0}});
        if (!rl_shim_enter()) {
            *act = REAL(connect)(fd, sa, len);
            return false;
        }
        *act = rl_hook_connect_begin(fd, sa, len, "connect", RL_CONNECT_WAITED,
                                     a->deadline, a);
    }
    if (a->act != RL_CONNECT_DEFERRED)
        return true;
    rl_wait_connect_deferred(fd);
    rl_shim_leave();
    errno = EINPROGRESS;
    *act = -1;
    return false;
}

RL_EXPORT int connect(int fd, const struct sockaddr *sa, socklen_t len)
{
    /* Only a handler the trampoline ran (hook_signal.c): with the guard
     * held and no handler, the connect is the shim's own (its Redis
     * connection), which passes as it always did. */
    if (concerns(sa, len) && rl_hook_in_handler())
        return connect_in_handler(fd, sa, len);
    if (!concerns(sa, len) || !rl_shim_enter())
        return REAL(connect)(fd, sa, len);
    int saved = errno, ret;
    if (rl_wait_connect_again(fd, &ret)) {
        /* A connect the shim deferred (shim/wait.h). */
        rl_shim_leave();
        return ret;
    }
    struct rl_connect_answer a;
    int act =
        rl_hook_connect_begin(fd, sa, len, "connect", RL_CONNECT_CALL, 0, &a);
    if (a.act > RL_CONNECT_FAIL && !wait_or_defer(fd, sa, len, &a, &act))
        return act; /* deferred (-1, errno set), or the guard was lost */
    rl_shim_leave();
    if (rl_hook_apply(act, &a.t, saved, -1) < 0)
        return -1;
    int r = REAL(connect)(fd, sa, len);
    if (act == RL_HOOK_GO) {
        int err = errno;
        rl_hook_connect_end(fd, r, err);
        if (rl_settle_connect_owes(&a))
            rl_settle(rl_shim_proc(),
                      &(const struct rl_outcome){
                          .kind = RL_CALL_CONNECT,
                          .connect = {.a = &a, .fd = fd, .r = r, .err = err}});
        errno = err;
    }
    return r;
}

/* SO_ERROR of a connect the shim deferred and then failed (max_delay
 * passed waiting for a max_open place): the errno of fail mode, once, as
 * the kernel tells a failed non-blocking connect. Anything else (and
 * everything while no socket is held) is the kernel's. */
RL_EXPORT int getsockopt(int fd, int level, int name, void *val, socklen_t *len)
{
    if (level != SOL_SOCKET || name != SO_ERROR ||
        !rl_ready_any(&rl_shim_proc()->ready) || val == NULL || len == NULL ||
        *len < (socklen_t)sizeof(int) || !rl_shim_enter())
        return REAL(getsockopt)(fd, level, name, val, len);
    int err = 0;
    int told = rl_wait_connect_error(fd, &err);
    rl_shim_leave();
    if (!told)
        return REAL(getsockopt)(fd, level, name, val, len);
    *(int *)val = err;
    *len = sizeof(int);
    return 0;
}
