/* madeup.h — the fds on which a made-up answer waits (SPEC §15,
 * on_deny = respond): marked RL_FD_MADEUP, counted in struct rl_shim's
 * `madeup` so that the wait calls look for them only while there are
 * any, and reported readable while their answer is due (madeup.c). */
#ifndef RL_SHIM_MADEUP_H
#define RL_SHIM_MADEUP_H

#include <poll.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/select.h>

#include "shim/fdtab.h"
#include "shim/self.h"

/* Are made-up answers queued on any fd? One relaxed load. */
static inline bool rl_madeup_any(void)
{
    return __atomic_load_n(&rl_shim_self->madeup, __ATOMIC_RELAXED) != 0;
}

/* fd got a made-up answer queued / its queue emptied or it closed (m: its
 * mark before). */
void rl_madeup_mark(int fd);
void rl_madeup_unmark(int fd);
void rl_madeup_fewer(void);
/* Inline: every close of a marked fd asks, and almost none has one. */
static inline void rl_madeup_closed(uint32_t m)
{
    if (__builtin_expect(m & RL_FD_MADEUP, 0))
        rl_madeup_fewer();
}

/* Is a made-up answer due on fd (its next read returns it at once)? */
bool rl_madeup_due(int fd);

/* The fds of f[0..n) asking POLLIN with an answer due: counted, and,
 * `apply`, POLLIN added to their revents. Returns how many of them had
 * no revents before (what poll's result grows by). */
int rl_madeup_poll(struct pollfd *f, nfds_t n, bool apply);

/* The fds below nfds in `want` (the caller's read set) with an answer
 * due: counted, and, `out` not NULL, set in *out. Returns the bits set
 * in *out that were not (select's result grows by that). */
int rl_madeup_select(int nfds, const fd_set *want, fd_set *out);

#endif
