/* fdtab.h — which fds carry a throttled destination, and how.
 *
 * One 32-bit mark per fd number, in a two-level table that grows lazily
 * (pages mapped on first mark, published with CAS, never freed) up to
 * RL_FDTAB_MAX fds. Reading a mark is lock-free and costs one or two
 * loads, so a `write` on an unmarked fd (a file, a pipe) pays nothing else.
 * Any thread may set or clear any mark: each mark is one atomic word, and
 * the fd's own life cycle (connect before send, close after) orders them.
 * Uses mmap for pages, never malloc, so it is safe before init and in a
 * hook called from anywhere. */
#ifndef RL_SHIM_FDTAB_H
#define RL_SHIM_FDTAB_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Bits of a mark. 0 = nothing known: pass everything through. */
#define RL_FD_MATCHED 0x1u /* sends without an address are charged */
#define RL_FD_STREAM 0x2u  /* SOCK_STREAM (type known) */
#define RL_FD_DGRAM 0x4u   /* SOCK_DGRAM or SOCK_SEQPACKET... datagram */
#define RL_FD_CHARGED 0x8u /* a connect attempt was charged already */
#define RL_FD_KNOWN                                                            \
    0x10u /* the shim knows what this fd is: it saw it                         \
             made (socket, socketpair, accept*) or asked                       \
             the kernel once; STREAM/DGRAM are then exact                      \
             (neither: not an inet stream or datagram) */
#define RL_FD_INHERITED                                                        \
    0x20u /* a connected inet socket found at start-up                         \
             (inherited across exec): MATCHED until the                        \
             first send asks the rule about its peer */

#define RL_FD_HTTP                                                             \
    0x40u /* its requests are counted: a connection in                         \
             shim/conntab.h */

#define RL_FD_RESP_LOST                                                        \
    0x80u /* HTTP: a signal handler read its bytes unseen (a handler         \
             takes no lock): the next read turns its response side off */

#define RL_FD_HTTP_LATE                                                        \
    0x100u /* HTTP, connected from a signal handler (which may not          \
              allocate nor lock): its connection is made at its first send  \
              or read outside one (rl_conntab_late), replacing whatever a   \
              handler's close left at the number */

#define RL_FD_MADEUP                                                           \
    0x200u /* HTTP: a made-up answer is queued for its reads (SPEC §15,     \
              on_deny = respond): reads and wait calls ask policy first */

/* A send-like call on fd needs more than the real function: its sends
 * are charged, or its requests counted. */
#define RL_FD_SLOW (RL_FD_MATCHED | RL_FD_HTTP)

/* The bits of an inet socket (or what may be one: a provisional mark).
 * Only such an fd is ever held or has its epoll registrations recorded
 * (shim/wait.h), so the close of anything else (a file, a pipe, an
 * AF_UNIX socket) skips those tables. */
#define RL_FD_INET (RL_FD_STREAM | RL_FD_DGRAM | RL_FD_INHERITED)

/* 2^18 fds a page (1 MiB mapped, touched only where fds are marked), so
 * that the directory is 32 KiB of the library's bss: what a process maps
 * at load, marked or not. */
#define RL_FDTAB_PAGE_BITS 18
#define RL_FDTAB_MAX (1u << 30) /* fd numbers the table can hold */

/* The table (a member of the shim's struct rl_shim, shim/self.h): one
 * page pointer per 2^RL_FDTAB_PAGE_BITS fds (see fdtab.c). All zero:
 * nothing marked. */
struct rl_fdtab {
    _Atomic(_Atomic uint32_t *) dir[RL_FDTAB_MAX >> RL_FDTAB_PAGE_BITS];
};

/* Where the mark of `fd` is kept in t, NULL when its page was never made
 * (or fd is out of range): nothing marked there. */
static inline _Atomic uint32_t *rl_fdtab_slot(const struct rl_fdtab *t, int fd)
{
    if ((unsigned)fd >= RL_FDTAB_MAX)
        return NULL;
    /* Pairs with the release CAS that publishes a page (fdtab.c). */
    _Atomic uint32_t *p = atomic_load_explicit(
        &t->dir[(unsigned)fd >> RL_FDTAB_PAGE_BITS], memory_order_acquire);
    if (p == NULL)
        return NULL;
    return &p[(unsigned)fd & ((1u << RL_FDTAB_PAGE_BITS) - 1)];
}

/* The mark of `fd` in t, 0 when none (or fd out of range). The hooks ask
 * the process's table: rl_fdtab_get(fd) (shim/self.h). */
static inline uint32_t rl_fdtab_mark(const struct rl_fdtab *t, int fd)
{
    _Atomic uint32_t *m = rl_fdtab_slot(t, fd);
    return m != NULL ? atomic_load_explicit(m, memory_order_relaxed) : 0;
}

/* Replace the mark of `fd`. Returns 0, -EBADF for an fd out of range, or
 * -ENOMEM when a page cannot be mapped (the fd then stays unmarked).
 * errno is kept either way. */
int rl_fdtab_set(int fd, uint32_t mark);

/* rl_fdtab_set in t, inline when the fd's page exists (the common case: a
 * process's fds are mostly below 16384): one load and one store, for the
 * socket and connect hooks (rl_fdtab_put(fd, mark), shim/self.h). */
static inline int rl_fdtab_store(struct rl_fdtab *t, int fd, uint32_t mark)
{
    if ((unsigned)fd < RL_FDTAB_MAX && mark != 0) {
        /* Pairs with the release CAS that publishes a page (fdtab.c). */
        _Atomic uint32_t *p = atomic_load_explicit(
            &t->dir[(unsigned)fd >> RL_FDTAB_PAGE_BITS], memory_order_acquire);
        if (p != NULL) {
            atomic_store_explicit(
                &p[(unsigned)fd & ((1u << RL_FDTAB_PAGE_BITS) - 1)], mark,
                memory_order_relaxed);
            return 0;
        }
    }
    return rl_fdtab_set(fd, mark);
}

/* Forget `fd` in t: one load and one store when its page exists, nothing
 * when it has none (no page was ever marked there). */
static inline void rl_fdtab_unstore(struct rl_fdtab *t, int fd)
{
    _Atomic uint32_t *m = rl_fdtab_slot(t, fd);
    if (m != NULL)
        atomic_store_explicit(m, 0, memory_order_relaxed);
}

/* Forget every fd in [first, last] (inclusive; last may be ~0U). Only
 * pages that exist are visited. */
void rl_fdtab_clear_range(unsigned first, unsigned last);

/* dup: `to` gets `from`'s mark (or none). */
void rl_fdtab_copy(int from, int to);

/* Replace fd's mark by `mark` only while it is still *expect (else
 * *expect is what it is now). For marks that exist (their page does). */
bool rl_fdtab_cas(int fd, uint32_t *expect, uint32_t mark);

/* Forget the marks that carry `bit` among fds [0, last]: the provisional
 * marks of inherited sockets, when no rule applies after all. */
void rl_fdtab_drop_with(unsigned last, uint32_t bit);

/* rl_fdtab_get, rl_fdtab_put and rl_fdtab_clear: on the process's table. */
#include "shim/self.h"

#endif
