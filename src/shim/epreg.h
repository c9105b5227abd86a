/* epreg.h — the epoll registrations of the program, as it made them, so
 * that the kernel can be shown less while a socket is held (SPEC §2).
 *
 * The kernel reports a writable socket to every wait, and an unconnected
 * TCP socket as EPOLLOUT|EPOLLHUP whatever the mask. So while a socket is
 * held its registrations are changed in the kernel (EPOLLOUT taken out;
 * for a deferred connect, the registration removed) and put back, with the
 * program's events and data, when its turn comes: EPOLL_CTL_MOD re-arms an
 * edge-triggered registration, so the program gets its edge then.
 *
 * They also tell the epoll wait calls which (set, data) to report for a
 * made-up answer (SPEC §15), which the kernel knows nothing of: it has
 * no bytes to show, so the wait reports the registration itself.
 *
 * Up to two (epoll fd, fd) registrations per fd number; more are not
 * recorded (their socket is not hidden from those sets, nor shown a
 * made-up answer there). Only inet
 * sockets' are recorded (hook_wait.c's epoll_ctl), so only their close
 * looks here. Under one mutex; callers hold the shim's re-entry guard. */
#ifndef RL_SHIM_EPREG_H
#define RL_SHIM_EPREG_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/epoll.h>

#define RL_EPREG_SLOTS 2          /* registrations kept per fd */
#define RL_EPREG_PENDING_MAX 1024 /* fds shown less than FULL at once */

/* One registration of an fd in an epoll set. */
struct rl_epreg_reg {
    int epfd; /* -1: free */
    uint32_t events;
    uint64_t data;
    int mode; /* what the kernel has now (enum rl_epreg_mode) */
    /* An edge-triggered or one-shot registration was shown the made-up
     * answer queued now (SPEC §15): not again until a new one is queued
     * or the program modifies it. */
    int madeup_told;
};

/* The registrations (a member of the shim's struct rl_shim, shim/self.h).
 * All zero: none (a zero mutex is PTHREAD_MUTEX_INITIALIZER on glibc). */
struct rl_epreg {
    pthread_mutex_t mu;
    struct rl_epreg_reg (*regs)[RL_EPREG_SLOTS]; /* by fd, grown on demand */
    unsigned cap;
    /* fds with a registration shown less than FULL. */
    int pending[RL_EPREG_PENDING_MAX];
    atomic_uint npending;
    /* registrations recorded: with the ready table's count, whether the
     * close of an inet socket has entries to look for (shim/wait.h). */
    atomic_uint n;
};

enum rl_epreg_mode {
    RL_EPREG_FULL = 0,   /* as the program registered it */
    RL_EPREG_NOOUT = 1,  /* without EPOLLOUT (a held send) */
    RL_EPREG_ABSENT = 2, /* not in the kernel (a deferred connect) */
};

/* Registrations recorded: while 0, even an inet socket's close costs
 * nothing here. */

/* The mode a socket must have now (from policy/ready.h). */
int rl_epreg_mode_now(int fd, uint64_t now);

/* A successful epoll_ctl of the program on a socket shown in full. */
void rl_epreg_record(int epfd, int op, int fd, const struct epoll_event *ev);

/* The program's epoll_ctl on fd held in `mode` (not FULL): its view is
 * recorded and the kernel is given what the mode allows. Returns what
 * epoll_ctl returns (errno set). */
int rl_epreg_ctl(int epfd, int op, int fd, struct epoll_event *ev, int mode);

/* Bring every registration of fd to `mode` in the kernel. */
void rl_epreg_sync(int fd, int mode);

/* fd is held from now on (a denied or reserved send). Its registrations
 * lose EPOLLOUT at the next wait call (settle), not now: a thread already
 * blocked on the set since before the hold (another thread's send was
 * denied: tokio's reactor, for one) waits with a timeout that knows
 * nothing of the turn, and only an event wakes it. So an edge-triggered
 * registration is re-armed as it is (EPOLL_CTL_MOD: a new edge for a
 * writable socket), and a level-triggered one already reports it: that
 * thread sees the socket writable once, its send is denied again (no new
 * hold, no new edge), and its next wait call waits for the turn. The
 * calling thread's own next wait takes EPOLLOUT out before it waits, so
 * the kernel drops the queued edge (it reports events by the mask at
 * that moment). */
void rl_epreg_hold(int fd);

/* For every fd shown less than FULL: bring it to its mode at `now`. */
void rl_epreg_settle(uint64_t now);

/* fds with a registration shown less than FULL (settle has work); read
 * by every wait call, so inline. */

/* The registrations in epfd of the fds with a made-up answer due
 * (SPEC §15, madeup.h) that ask for EPOLLIN: written to ev[0..max) as the
 * kernel would report them (their read bits, the program's data); an
 * edge-triggered or one-shot one once per answer queued. Returns how
 * many. Called outside the re-entry guard (it takes it). */
int rl_epreg_madeup(int epfd, struct epoll_event *ev, int max);

/* The kernel's `got` events at ev[k..k+got) after the k made-up ones:
 * one of a registration already reported (the same data) is folded into
 * it. Returns the events left in ev. */
int rl_epreg_madeup_merge(struct epoll_event *ev, int k, int got);

/* A made-up answer was queued on fd: its edge-triggered registrations
 * report it once more (a new edge). */
void rl_epreg_madeup_new(int fd);

/* Forget the registrations of every fd in [first, last] (closed). */
void rl_epreg_forget(unsigned first, unsigned last);

void rl_epreg_atfork_child(void);

#endif
