/* hooks.h — what the hook files share: the connect decision (also used by
 * MSG_FASTOPEN sends), and the begin/end halves of a charged send.
 *
 * A *_begin runs with the re-entry guard held and returns what the hook
 * does next; the hook releases the guard, sleeps if told, makes the real
 * call, and hands the result to *_end (which takes the guard again for
 * the refund). No quota logic here: only what a call carries and what to
 * trim. */
#ifndef RL_SHIM_HOOKS_H
#define RL_SHIM_HOOKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "policy/gate.h"
#include "shim/fdtab.h"

#define RL_EXPORT __attribute__((visibility("default")))

enum rl_hook_act {
    RL_HOOK_PASS = 0, /* not charged: call the real function as is */
    RL_HOOK_GO = 1,   /* charged: sleep until t.now + t.wait_ns, then call */
    RL_HOOK_FAIL = 2, /* denied: errno = t.err, return -1 */
};

/* Bits RL_FD_STREAM / RL_FD_DGRAM for fd, from its mark or (once) from the
 * kernel. 0 for anything else. */
uint32_t rl_hook_sock_type(int fd, uint32_t mark);

/* The connect decision for a stream or datagram socket (marks the fd). */
int rl_hook_connect_begin(int fd, const struct sockaddr *sa, socklen_t len,
                          const char *call, struct rl_gate_ticket *t);

/* After the real connect of a charged attempt returned r (errno err). */
void rl_hook_connect_end(int fd, int r, int err);

/* Is a send on fd (mark m) to sa (NULL: its peer) charged? 0 when not,
 * else RL_FD_STREAM or RL_FD_DGRAM. */
uint32_t rl_hook_send_kind(int fd, uint32_t m, const struct sockaddr *sa,
                           socklen_t len);

/* Decide a send of `len` bytes of that kind; on GO *grant is the length to
 * pass to the real call (stream sends may be cut short). `flags` are the
 * call's (MSG_DONTWAIT: never sleep; shim/wait.h). */
int rl_hook_send_begin(int fd, int flags, uint32_t kind, const char *call,
                       const struct sockaddr *sa, socklen_t salen, size_t len,
                       struct rl_gate_ticket *t, size_t *grant);

/* After the real call returned r: give back the granted bytes (t->bytes)
 * the kernel did not take (all of them, and the call, when r < 0).
 * Preserves errno. */
void rl_hook_send_end(struct rl_gate_ticket *t, ssize_t r);

/* Apply the verdict before the real call: sleep if told. Returns -1 with
 * errno set when denied, else 0 with errno restored to `saved`. */
int rl_hook_apply(int act, const struct rl_gate_ticket *t, int saved);

/* Sum of an iovec (saturating). */
size_t rl_hook_iov_len(const struct iovec *iov, size_t n);

/* Copy the prefix of `iov` that holds `want` bytes into `out` (at most
 * `cap` entries, the last one cut short). Returns the entry count and sets
 * *got to the bytes in it (less than want when cap was reached). */
size_t rl_hook_iov_trim(const struct iovec *iov, size_t n, size_t want,
                        struct iovec *out, size_t cap, size_t *got);

#define RL_HOOK_IOV_MAX 64

/* send(2) or a write(2) that ignores the flags. */
typedef ssize_t (*rl_plain_send_fn)(int fd, const void *buf, size_t len,
                                    int flags);

/* The charged half of send and write on an fd with mark m (see
 * hook_send.c); `call` names it in log lines. */
ssize_t rl_hook_plain_send(int fd, const void *buf, size_t len, int flags,
                           uint32_t m, const char *call, rl_plain_send_fn real);

/* A send-like call on an fd with mark m, made while this thread is inside
 * the shim (rl_shim_enter() failed): a signal handler interrupted it. When
 * the fd is MATCHED and the shim is ready, the call is charged anyway,
 * straight from the shared limiters (rl_gate_send_reentered), touching
 * nothing the interrupted frame may be updating. RL_HOOK_PASS: not
 * charged, *grant = len; RL_HOOK_GO: pass *grant bytes; RL_HOOK_FAIL:
 * errno is set, return -1. `whole`: all or nothing even on a stream.
 * Async-signal-safe; never sleeps. */
int rl_hook_reentered(uint32_t m, uint64_t calls, size_t len, bool whole,
                      size_t *grant);

/* The leased fast path of a send-like call on a MATCHED fd with no
 * address, run with the guard held: how many bytes to pass to the real
 * call, 0 when the call must be decided in full. */
static inline size_t rl_hook_leased(uint32_t m, size_t len)
{
    return (size_t)rl_gate_send_leased(len, (m & RL_FD_STREAM) != 0);
}

/* After the real call of a leased grant of `grant` bytes returned r: give
 * back what was not sent (errno kept). */
static inline void rl_hook_leased_end(size_t grant, ssize_t r)
{
    if (r >= 0 && (size_t)r >= grant)
        return;
    rl_gate_lease_refund(r < 0 ? 1 : 0, r < 0 ? grant : grant - (size_t)r);
}

#endif
