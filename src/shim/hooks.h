/* hooks.h — what the hook files share: the connect decision (also used by
 * MSG_FASTOPEN sends), the one shape of a charged send (struct rl_send:
 * rl_send_begin, then the real call, then rl_send_settle), the marks of new
 * and inherited sockets.
 *
 * rl_hook_connect_begin runs with the re-entry guard held and returns what
 * the hook does next; the hook releases the guard, sleeps if told, makes
 * the real call, and hands the result to rl_hook_connect_end and
 * rl_settle_connect. rl_send_begin
 * and rl_send_settle take and release the guard themselves. No quota logic
 * here: only what a call carries and what to trim. */
#ifndef RL_SHIM_HOOKS_H
#define RL_SHIM_HOOKS_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "policy/decide_connect.h"
#include "policy/decide_send.h"
#include "policy/gate.h"
#include "policy/gate_leased.h"
#include "policy/decide_request.h"
#include "shim/fdtab.h"
#include "shim/shim.h"
#include "util/clock.h"

#define RL_EXPORT __attribute__((visibility("default")))

/* How many program signal handlers are running on this thread, raised by
 * the trampoline that wraps each (hook_signal.c), and the frames of the
 * innermost RL_SIG_FRAMES of them. initial-exec: no allocation on first
 * access, which may be in a handler. */
#define RL_SIG_FRAMES 8
extern __thread unsigned rl_sig_depth __attribute__((tls_model("initial-exec")));

bool rl_hook_in_handler_slow(void);

/* Is this call made from a signal handler of the program (or one that
 * interrupted the shim itself, the re-entry guard held)? Such a call is
 * asked in the decide entries' handler mode, with async-signal-safe steps
 * only. One TLS load when not. */
static inline bool rl_hook_in_handler(void)
{
    if (__builtin_expect(rl_sig_depth == 0, 1))
        return false;
    return rl_hook_in_handler_slow();
}

enum rl_hook_act {
    RL_HOOK_PASS = 0, /* not charged: call the real function as is */
    RL_HOOK_GO = 1,   /* charged: sleep until t.now + t.wait_ns, then call */
    RL_HOOK_FAIL = 2, /* denied: errno = t.err, return -1 */
};

/* Bits RL_FD_STREAM / RL_FD_DGRAM for fd, from its mark when KNOWN, else
 * from the kernel once (rl_hook_sock_type_asked: the answer is kept in
 * the mark). 0 for anything else. */
uint32_t rl_hook_sock_type_asked(int fd, uint32_t mark);
static inline uint32_t rl_hook_sock_type(int fd, uint32_t mark)
{
    if (__builtin_expect(mark & RL_FD_KNOWN, 1))
        return mark & (RL_FD_STREAM | RL_FD_DGRAM);
    return rl_hook_sock_type_asked(fd, mark);
}

/* The mark of a socket just made with (domain, type): KNOWN, and STREAM or
 * DGRAM for an inet one. */
uint32_t rl_hook_new_socket_mark(int domain, int type);

/* At start-up: give the connected inet sockets the process inherited a
 * provisional mark (inherit.c). */
void rl_hook_inherited_scan(void);

/* No rule applies after all: forget the provisional marks. */
void rl_hook_inherited_drop(void);

/* The first send on an inherited socket (mark m has INHERITED; the shim
 * is ready): ask the rule about its peer, settle its mark, and return
 * what rl_hook_send_kind would (0: not charged). */
uint32_t rl_hook_inherited_kind(int fd, uint32_t m);

/* The connect decision for a stream or datagram socket: classify it, ask
 * rl_decide_connect once as `asker` (policy/decide_connect.h; `deadline`
 * from the answer before a wait for a place, else 0), mark the fd as
 * answered. Returns RL_HOOK_GO when the attempt was charged (a->charged),
 * RL_HOOK_PASS when not decided, else RL_HOOK_FAIL; a->act says the
 * rest. */
int rl_hook_connect_begin(int fd, const struct sockaddr *sa, socklen_t len,
                          const char *call, int asker, uint64_t deadline,
                          struct rl_connect_answer *a);

/* After the real connect of a charged attempt returned r (errno err).
 * Inline: a connect made or in progress, nearly every one, changes
 * nothing; only an attempt that failed outright calls out. */
void rl_hook_connect_failed(int fd);
static inline void rl_hook_connect_end(int fd, int r, int err)
{
    if (r == 0 || err == EINPROGRESS || err == EALREADY || err == EISCONN ||
        err == EINTR)
        return;
    rl_hook_connect_failed(fd);
}

/* The mark of fd for a send-like call: m, or, when the look at inherited
 * sockets is still due, what fd carries after it ran. */
static inline uint32_t rl_hook_mark_scanned(int fd, uint32_t m)
{
    /* The scan allocates: a handler takes the mark as it is. */
    if (!rl_shim_scan_due() || rl_hook_in_handler())
        return m;
    rl_shim_scan_now();
    return rl_fdtab_get(fd);
}

/* Is a send on fd (mark m) to sa (NULL: its peer) charged? 0 when not,
 * else RL_FD_STREAM or RL_FD_DGRAM. */
uint32_t rl_hook_send_kind(int fd, uint32_t m, const struct sockaddr *sa,
                           socklen_t len);

/* Apply the verdict before the real call: sleep if told, on `sock` when
 * it is a connected socket (rl_shim_sleep_on: a hang-up ends the sleep,
 * and the call goes to the kernel), else -1. Returns -1 with errno set
 * when denied, else 0 with errno restored to `saved`. */
static inline int rl_hook_apply(int act, const struct rl_gate_ticket *t,
                                int saved, int sock)
{
    if (act == RL_HOOK_FAIL) {
        errno = t->err;
        return -1;
    }
    if (act == RL_HOOK_GO && t->wait_ns > 0)
        (void)rl_shim_sleep_on(sock, rl_add_sat_u64(t->now, t->wait_ns));
    errno = saved;
    return 0;
}

/* Sum of an iovec (saturating). */
size_t rl_hook_iov_len(const struct iovec *iov, size_t n);

/* Copy the prefix of `iov` that holds `want` bytes into `out` (at most
 * `cap` entries, the last one cut short). Returns the entry count and sets
 * *got to the bytes in it (less than want when cap was reached). */
size_t rl_hook_iov_trim(const struct iovec *iov, size_t n, size_t want,
                        struct iovec *out, size_t cap, size_t *got);

#define RL_HOOK_IOV_MAX 64

/* One charged send, whatever its name (send, sendto, sendmsg, sendmmsg,
 * write, writev, sendfile*): every hook has the same shape,
 *
 *     struct rl_send s;
 *     rl_send_init(&s, fd, m, "writev", len);
 *     if (rl_send_begin(&s) < 0)       classify, ask the gate, apply the
 *         return -1;                   verdict (sleep, or fail)
 *     r = real(..., s.grant bytes);    the hook trims its own buffers
 *     rl_send_end(&s, r);              give back what the kernel did not
 *                                      take
 *
 * and rl_send_begin alone knows the three ways a call is decided, each
 * one question to policy (rl_decide_send): from the thread's lease (no
 * clock, no atomic), by the gate, or, when it is made from a signal
 * handler (rl_hook_in_handler, or the re-entry guard held), in handler
 * mode, with async-signal-safe steps only. The hook fills what the call
 * carries; rl_send_begin fills the rest. */
struct rl_send {
    /* What the call carries. */
    int fd;
    uint32_t mark;
    const char *call;          /* its name in log lines */
    const struct sockaddr *sa; /* explicit destination, or NULL */
    socklen_t salen;
    int flags;      /* the call's (write*, sendfile*: 0); MSG_FASTOPEN
                       with sa connects first */
    size_t len;     /* bytes */
    uint64_t calls; /* `send` units: 1, or sendmmsg's messages */
    size_t len_min; /* bytes the grant must hold at least (0:
                       1 for a stream, all for a datagram) */
    uint32_t kind;  /* preset by sendmmsg (it classifies each
                       message); 0: rl_send_begin classifies */
    /* What was decided. */
    int how;                  /* RL_SEND_* */
    size_t grant;             /* bytes to pass to the real call */
    uint64_t grant_calls;     /* units granted (sendmmsg's prefix) */
    int cact;                 /* the MSG_FASTOPEN connect's act */
    /* The bytes, when the call's requests are counted (RL_FD_HTTP; NULL:
     * not seen, as sendfile's: the connection is counted no further). */
    const struct iovec *iov;
    size_t niov;
    struct rl_reqconn *rc;    /* held from rl_request_begin to _end */
    struct rl_request_answer ra; /* its requests (rl_request_begin) */
    struct rl_send_answer a;  /* the send's decision, its ticket a.t (a
                                 MSG_FASTOPEN's connect has its own only
                                 while decided: hook_send.c) */
};

enum {
    RL_SEND_FREE = 0,    /* not charged: pass as is */
    RL_SEND_LEASED = 1,  /* from the thread's lease */
    RL_SEND_GATE = 2,    /* decided by the gate: settle the ticket */
    RL_SEND_HANDLER = 3, /* decided in a signal handler: nothing to give
                            back */
};

/* What the call carries, and nothing else: the ticket is written by the
 * decision that reads it, so it is not zero-filled (a compound literal
 * would clear all of it, every call). */
static inline void rl_send_init(struct rl_send *s, int fd, uint32_t mark,
                                const char *call, size_t len)
{
    s->fd = fd;
    s->mark = mark;
    s->call = call;
    s->sa = NULL;
    s->salen = 0;
    s->flags = 0;
    s->len = len;
    s->calls = 1;
    s->len_min = 0;
    s->kind = 0;
    s->how = RL_SEND_FREE;
    s->grant = len;
    s->grant_calls = 1;
    s->cact = 0;
    s->iov = NULL;
    s->niov = 0;
    s->rc = NULL;
}

/* The bytes the call carries, for counting its requests. */
static inline void rl_send_bytes(struct rl_send *s, const struct iovec *iov,
                                 size_t n)
{
    s->iov = iov;
    s->niov = n;
}

/* The program closes fd, a connection whose requests are counted
 * (hook_recv.c): a request on it still awaiting its answer past its
 * response_timeout counts (SPEC §14 backoff_on = timeout). */
void rl_recv_closing(int fd);

/* The requests of the call (hook_request.c): plan them, sleep if told,
 * trim s->len and s->grant to what may go, or fail (-1, errno set); 1:
 * answered by the shim (SPEC §15), s->grant bytes taken and not sent. */
int rl_request_begin(struct rl_send *s);

/* After the real call sent `sent` bytes (-1: failed): the scanner moves
 * on and the connection is let go. */
void rl_request_end(struct rl_send *s, long sent);

/* Decide the call and apply the verdict. Returns 0 (s->grant bytes,
 * s->grant_calls units may go; errno as the caller left it), -1 with
 * errno set (denied: nothing happened), or 1: a refused request the shim
 * answers (on_deny = respond): make no real call, return s->grant as
 * the call's result (rl_send_taken). */
int rl_send_begin(struct rl_send *s);

/* The result of a call rl_send_begin answered with 1: its bytes were
 * taken (settled as sent) and nothing went. */
static inline ssize_t rl_send_taken(struct rl_send *s);

/* After the real call: it took `calls` units and `bytes` bytes (a failed
 * call: 0, 0); what was granted beyond that goes back (and a MSG_FASTOPEN
 * connect is settled). Preserves errno. */
void rl_send_settle(struct rl_send *s, int r, uint64_t calls, uint64_t bytes);

/* The leased way alone, for the commonest charged call: a send of `len`
 * bytes to the socket's own peer (its mark MATCHED, neither HTTP nor
 * INHERITED), outside a handler and the shim, once READY. It asks the
 * thread's lease and nothing else (no struct rl_send, no errno saved: a
 * lease's take sets none), inline and calling nothing
 * (policy/gate_leased.h), so the hook saves registers only for the real
 * call; 0 means take the whole shape above, which asks the lease again
 * (and a fleet budget's) and then the gate. A handler's depth (even one a
 * siglongjmp left, rl_hook_in_handler_slow) takes the whole shape too.
 * After the real call of `grant` bytes, rl_send_fast_end stamps the lease
 * when its stamp is due and gives back what the kernel did not take (both
 * through rl_settle_send, out of line: most calls owe neither). */
static inline bool rl_send_fast_fits(uint32_t mark)
{
    return (mark & (RL_FD_MATCHED | RL_FD_HTTP | RL_FD_INHERITED)) ==
           RL_FD_MATCHED;
}
static inline __attribute__((always_inline)) size_t
rl_send_fast(uint32_t mark, size_t len, struct rl_lease_holder **h)
{
    *h = NULL;
    if (rl_sig_depth != 0 || rl_shim_busy || !rl_shim_ready())
        return 0;
    rl_shim_busy = 1;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    size_t g = (size_t)rl_gate_send_leased_take(
        rl_shim_proc(), len, (mark & RL_FD_STREAM) != 0, h);
    rl_shim_leave();
    return g;
}
void rl_send_fast_settle(size_t grant, ssize_t r, struct rl_lease_holder *h);
static inline void rl_send_fast_end(size_t grant, ssize_t r,
                                    struct rl_lease_holder *h)
{
    if (h != NULL && __builtin_expect(rl_lease_stamp_due(h), 0))
        rl_send_fast_settle(grant, r, h);
    else if (__builtin_expect(r < 0 || (size_t)r < grant, 0))
        rl_send_fast_settle(grant, r, NULL);
}

static inline void rl_send_end(struct rl_send *s, ssize_t r)
{
    if (s->how != RL_SEND_FREE || s->cact != 0 || s->rc != NULL)
        rl_send_settle(s, r < 0 ? -1 : 0, r < 0 ? 0 : 1,
                       r < 0 ? 0 : (uint64_t)r);
}

static inline ssize_t rl_send_taken(struct rl_send *s)
{
    ssize_t r = (ssize_t)s->grant;
    rl_send_end(s, r);
    return r;
}

#endif
