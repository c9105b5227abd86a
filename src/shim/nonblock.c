/* nonblock.c — sends and connects that must not sleep in the shim
 * (SPEC §2 "Non-blocking sockets: never block, never spin"; wait.h).
 *
 * The decision is policy's (a send's: policy/decide_send.h); this file
 * answers what it asks of the kernel about the socket (rl_wait_probe) and
 * applies what it says: a non-blocking socket gets EAGAIN (or EINPROGRESS
 * for a deferred connect, or one that waits for a max_open place) and is
 * held in policy/ready.h until its budget allows it, and its epoll
 * registrations are shown less meanwhile (epreg.h); the wait calls
 * (hook_wait.c) wake at that moment. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "policy/decide_connect.h"
#include "policy/decide_send.h"
#include "policy/ready.h"
#include "shim/epreg.h"
#include "shim/hooks.h"
#include "shim/real.h"
#include "shim/self.h"
#include "shim/shim.h"
#include "shim/wait.h"
#include "shim/wreal.h"
#include "util/clock.h"

bool rl_wait_nonblocking(int fd, int flags)
{
    if (flags & MSG_DONTWAIT)
        return true;
    int saved = errno;
    /* Not libc's syscall(): inside the shim that name is our own hook. */
    long fl = rl_raw_syscall(SYS_fcntl, fd, F_GETFL, 0, 0, 0, 0);
    errno = saved;
    return fl >= 0 && (fl & O_NONBLOCK);
}

int rl_wait_kernel_says(int fd)
{
    int saved = errno;
    /* No events asked: POLLERR and POLLHUP are reported whatever the
     * mask. POLLRDHUP alone (a FIN) is not a hang-up: the kernel would
     * still send, and a half-closed server read the request uncharged. */
    struct pollfd p = {fd, 0, 0};
    int out = 0;
    if (WREAL(poll)(&p, 1, 0) == 1) {
        if (p.revents & POLLHUP) {
            out = -1;
        } else if (p.revents & POLLERR) {
            /* An error, or only the error queue (timestamps, zero-copy
             * completions), which a send does not hear: SO_ERROR tells
             * them apart, and the error it takes is the one the kernel's
             * send would have taken and answered. */
            int e = 0;
            socklen_t l = sizeof e;
            if (REAL(getsockopt)(fd, SOL_SOCKET, SO_ERROR, &e, &l) == 0)
                out = e;
        }
    }
    errno = saved;
    return out;
}

/* SO_SNDTIMEO of fd in ns, 0 when none. */
static uint64_t send_timeout(int fd)
{
    struct timeval tv = {0, 0};
    socklen_t l = sizeof tv;
    int saved = errno;
    if (getsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, &l) != 0)
        tv = (struct timeval){0, 0};
    errno = saved;
    return (uint64_t)tv.tv_sec * 1000000000u + (uint64_t)tv.tv_usec * 1000u;
}

/* The peer of fd into *ss (NULL when it has none). May change errno: the
 * send's hook sets it after the decision (rl_hook_apply). */
const struct sockaddr *rl_wait_peer(int fd, struct sockaddr_storage *ss,
                                    socklen_t *len)
{
    *len = sizeof *ss;
    /* getpeername is not hooked: this is libc's. */
    if (getpeername(fd, (struct sockaddr *)ss, len) != 0)
        return NULL;
    return (const struct sockaddr *)ss;
}

/* Make the connect of fd now: its turn has come, or a place freed. */
static void make_connect(int fd, struct rl_connect_answer *a,
                         const struct sockaddr_storage *sa, socklen_t len,
                         int *err)
{
    int c = REAL(connect)(fd, (const struct sockaddr *)sa, len);
    *err = c == 0 ? 0 : errno;
    if (a->charged) {
        rl_hook_connect_end(fd, c, *err);
        /* Its max_open places, taken when it was decided, now held by
         * fd. */
        rl_settle(rl_shim_proc(),
                  &(const struct rl_outcome){
                      .kind = RL_CALL_CONNECT,
                      .connect = {.a = a, .fd = fd, .r = c, .err = *err}});
    }
    /* From now on the kernel's own progress is reported. */
    rl_epreg_sync(fd, RL_EPREG_FULL);
}

/* A deferred connect whose turn has come, made now by whoever notices
 * first (a wait call, or the program's next call on the fd). */
static int connect_due(int fd, uint64_t now, bool force, int *err)
{
    struct rl_ready_take tk = {.what = RL_READY_CONNECT, .force = force};
    int r = rl_ready_take(rl_shim_proc(), fd, now, &tk);
    if (r != 1)
        return r;
    struct rl_connect_answer a = {.act = RL_CONNECT_GO, .charged = true};
    a.t = tk.t;
    make_connect(fd, &a, &tk.sa, tk.len, err);
    return 1;
}

/* A connect waiting for a max_open place (ready.h RL_READY_OPEN) whose
 * moment has come: decided again (rl_decide_connect, RL_CONNECT_DUE). A
 * place: connected now; a turn later (a connect rate): deferred to it;
 * still full: waits on; past max_delay, or denied otherwise: fails as in
 * fail mode, told by SO_ERROR (and connect), the socket shown again.
 * Returns as connect_due. */
static int open_due(int fd, uint64_t now, bool force, int *err)
{
    struct rl_ready_take tk = {.what = RL_READY_OPEN, .force = force};
    int r = rl_ready_take(rl_shim_proc(), fd, now, &tk);
    if (r != 1)
        return r;
    struct rl_connect_answer a;
    memset(&a.t, 0, sizeof a.t);
    rl_hook_connect_begin(fd, (const struct sockaddr *)&tk.sa, tk.len,
                          "connect", RL_CONNECT_DUE, tk.deadline, &a);
    if (a.act == RL_CONNECT_DEFERRED)
        return -EAGAIN; /* replaces the entry: still hidden */
    if (a.act != RL_CONNECT_FAIL) {
        make_connect(fd, &a, &tk.sa, tk.len, err);
        return 1;
    }
    rl_epreg_sync(fd, RL_EPREG_FULL);
    *err = a.t.err;
    return 1;
}

int rl_wait_paced(int fd, int flags, uint64_t *sleep_until)
{
    *sleep_until = 0;
    if (!rl_ready_any(&rl_shim_proc()->ready))
        return 0;
    uint64_t now = rl_clock_now_ns(), until = 0;
    /* A held request at its turn is decided again first: a pause of its
     * destination that came meanwhile holds its socket still (SPEC §12);
     * one refused fails the socket's sends. */
    struct rl_ready_take tk = {.what = RL_READY_TURN};
    int r = rl_ready_take(rl_shim_proc(), fd, now, &tk);
    if (r == 1) {
        errno = tk.err;
        return -1;
    }
    if (r == -EAGAIN) {
        until = tk.until;
    } else {
        struct rl_ready_take lk = {.what = RL_READY_LOOK};
        (void)rl_ready_take(rl_shim_proc(), fd, now, &lk);
        until = lk.look.held_until;
    }
    if (until == 0)
        return 0;
    if (rl_wait_nonblocking(fd, flags)) {
        int k = rl_wait_kernel_says(fd);
        if (k < 0)
            return 0; /* hung up: the kernel answers */
        errno = k > 0 ? k : EAGAIN;
        return -1;
    }
    *sleep_until = until;
    return 0;
}

const struct rl_send_probe rl_wait_probe = {
    .nonblocking = rl_wait_nonblocking,
    .kernel_says = rl_wait_kernel_says,
    .send_timeout = send_timeout,
    .peer = rl_wait_peer,
};

void rl_wait_apply(int fd, const struct rl_send_answer *a)
{
    int err;
    if (a->connect_due == RL_READY_CONNECT)
        connect_due(fd, a->connect_now, false, &err);
    else if (a->connect_due == RL_READY_OPEN)
        open_due(fd, a->connect_now, false, &err);
    if (a->view & RL_DECIDE_SHOW)
        rl_epreg_sync(fd, RL_EPREG_FULL); /* no longer held */
    if (a->view & RL_DECIDE_HIDE)
        rl_epreg_hold(fd);
}

void rl_wait_connect_due(uint64_t now, const struct rl_ready_view *v,
                         unsigned n)
{
    for (unsigned i = 0; i < n; i++) {
        int err;
        if (v[i].what == RL_READY_CONNECT && v[i].until <= now) {
            connect_due(v[i].fd, now, false, &err);
        } else if (v[i].what == RL_READY_OPEN) {
            open_due(v[i].fd, now, false, &err);
        } else if (v[i].what == RL_READY_TURN && v[i].until <= now) {
            struct rl_ready_take tk = {.what = RL_READY_TURN};
            (void)rl_ready_take(rl_shim_proc(), v[i].fd, now, &tk);
        }
    }
}

/* The errno of fd's failed deferred connect, told once: 1 (*err set) or
 * 0. */
static int take_error(int fd, int *err)
{
    struct rl_ready_take tk = {.what = RL_READY_FAILED};
    int r = rl_ready_take(rl_shim_proc(), fd, 0, &tk);
    if (r == 1)
        *err = tk.err;
    return r;
}

int rl_wait_connect_again(int fd, int *ret)
{
    if (!rl_ready_any(&rl_shim_proc()->ready))
        return 0;
    uint64_t now = rl_clock_now_ns();
    int err = 0;
    int r = connect_due(fd, now, false, &err);
    if (r == 0)
        r = open_due(fd, now, false, &err);
    if (r == 0 && take_error(fd, &err))
        r = 1; /* a deferred connect that failed, told once */
    if (r == 0)
        return 0;
    if (r == -EAGAIN) {
        *ret = -1;
        errno = EALREADY;
        return 1;
    }
    int told;
    if (err != 0)
        take_error(fd, &told); /* failed just now: told here */
    *ret = err == 0 ? 0 : -1;
    errno = err;
    return 1;
}

static int connect_nonblocking(int fd)
{
    int saved = errno;
    /* Not libc's syscall(): inside the shim that name is our own hook. */
    long fl = rl_raw_syscall(SYS_fcntl, fd, F_GETFL, 0, 0, 0, 0);
    errno = saved;
    return fl < 0 ? -1 : (fl & O_NONBLOCK) != 0;
}

const struct rl_connect_probe rl_wait_connect_probe = {
    .nonblocking = connect_nonblocking,
};

void rl_wait_connect_deferred(int fd)
{
    rl_epreg_sync(fd, RL_EPREG_ABSENT);
}

int rl_wait_connect_error(int fd, int *err)
{
    return rl_ready_any(&rl_shim_proc()->ready)
               ? take_error(fd, err)
               : 0;
}

void rl_wait_forget_slow(int what, unsigned first, unsigned last, bool live)
{
    /* From a handler that interrupted the shim: the wait entries stay (a
     * stale entry at worst, gone at the number's next close); the
     * connections, lock-free, are forgotten all the same. A vfork child
     * closes its own fds, in its parent's memory: the parent's entries
     * stay. */
    if (rl_shim_in_vfork_child())
        return;
    bool guarded = live && rl_shim_enter();
    int saved = errno;
    struct rl_fd_event ev = {
        .what = what, .first = first, .last = last, .may_lock = guarded};
    rl_policy_fd_event(rl_shim_proc(), &ev);
    if (guarded) {
        if (what == RL_FDLIFE_DUPED)
            first = last; /* only `to` lost what it was */
        rl_epreg_forget(first, last);
    }
    errno = saved;
    if (guarded)
        rl_shim_leave();
}
