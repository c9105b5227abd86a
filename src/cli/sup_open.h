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
 * make blocking connects bind. A member of the supervisor's struct rl_sup
 * (cli/sup.h), never closed: a receiver may use it until the process
 * exits. */
#ifndef RL_CLI_SUP_OPEN_H
#define RL_CLI_SUP_OPEN_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "policy/open.h"

/* Entries are counted by fd number modulo this (sup_open_maybe). */
#define SUP_OPEN_HITS 1024u

struct sup_open_ent;

/* The targets' fds that hold places. `lock` guards the tables; `hits` is
 * read without it (the count of entries per fd number modulo
 * SUP_OPEN_HITS, written under the lock with release, read with acquire);
 * `released` and its argument are set before the receivers start and
 * never change after. */
struct sup_open {
    pthread_mutex_t lock;
    struct sup_open_ent *ents; /* (process, fd) → its connection */
    size_t nents, capents;
    struct rl_open_holder *procs; /* processes seen holding places */
    size_t nprocs, capprocs;
    _Atomic unsigned hits[SUP_OPEN_HITS];
    void (*released)(void *);
    void *released_arg;
};

/* Empty tables, their lock made. */
void sup_open_init(struct sup_open *o);

/* The holder for process `tgid` (its start time read once): 0, or -ESRCH
 * when it is gone. */
int sup_open_holder(struct sup_open *o, pid_t tgid, struct rl_open_holder *h);

/* Might fd number `fd` of some target hold places? Lock-free: a close of
 * any other number is let through at once. */
bool sup_open_maybe(struct sup_open *o, int fd);

/* fd `fd` of `h`'s process now holds the places `areas[0..n)` (taken in
 * `h`'s name). */
void sup_open_bind(struct sup_open *o, const struct rl_open_holder *h, int fd,
                   rl_atomic_u64 *const *areas, unsigned n);

/* Process `tgid` closes its fds first..last: the connections whose last
 * fd that was give their places back. */
void sup_open_close(struct sup_open *o, pid_t tgid, unsigned first,
                    unsigned last);

/* Process `tgid` makes `to` refer to what `from` does (dup2, dup3). */
void sup_open_dup(struct sup_open *o, pid_t tgid, int from, int to);

/* `fn(arg)` is called (from any thread, no lock held) after places were
 * given back: the supervisor's waiting connects may go. Set before the
 * receivers start. */
void sup_open_on_release(struct sup_open *o, void (*fn)(void *), void *arg);

#endif
