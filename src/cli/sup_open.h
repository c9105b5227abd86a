/* sup_open.h — max_open under `rlshim run --seccomp` (SPEC §10): which
 * target process holds which connection by which fd, so that its close
 * gives the place back.
 *
 * A granted connect takes its places in the shared open areas
 * (policy/open.h) in the name of the target process (pid and start time,
 * not the supervisor's), and they are bound here to (process, fd). The
 * target's close, dup2/dup3 over the fd and close_range (all notified when
 * a rule has max_open) give them back. A copy made by dup or F_DUPFD is not
 * followed: the connection counts as closed at the close of the fd it was
 * made on (an under-count, never a place held for ever). A target that
 * exits, even by SIGKILL, gives its places back through the areas' holder
 * records: the next decision that finds an area full takes back the places
 * of holders that are gone, as for a preloaded process; its entries here
 * are dropped when another process is first seen.
 *
 * Thread-safe (one lock): the receivers bind and forget, the threads that
 * make blocking connects bind. */
#ifndef RL_CLI_SUP_OPEN_H
#define RL_CLI_SUP_OPEN_H

#include <stdbool.h>
#include <sys/types.h>

#include "policy/open.h"

/* The holder for process `tgid` (its start time read once): 0, or -ESRCH
 * when it is gone. */
int sup_open_holder(pid_t tgid, struct rl_open_holder *h);

/* Might fd number `fd` of some target hold places? Lock-free: a close of
 * any other number is let through at once. */
bool sup_open_maybe(int fd);

/* fd `fd` of `h`'s process now holds the places `areas[0..n)` (taken in
 * `h`'s name). */
void sup_open_bind(const struct rl_open_holder *h, int fd,
                   rl_atomic_u64 *const *areas, unsigned n);

/* Process `tgid` closes its fds first..last: the connections whose last
 * fd that was give their places back. */
void sup_open_close(pid_t tgid, unsigned first, unsigned last);

/* Process `tgid` makes `to` refer to what `from` does (dup2, dup3). */
void sup_open_dup(pid_t tgid, int from, int to);

/* Called (from any thread, no lock held) after places were given back:
 * the supervisor's waiting connects may go. */
void sup_open_on_release(void (*fn)(void));

#endif
