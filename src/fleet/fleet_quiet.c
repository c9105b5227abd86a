/* fleet_quiet.c — is Redis away, or only late (SPEC §8)? A node is away
 * when nothing came from it for the away timeout while replies were owed;
 * a reply late behind others that keep coming, or one that no thread of
 * ours was run to read, is waited for (see fleet_pipe.h).
 *
 * What came is judged at the socket where a process's threads may be late
 * to look: a reply read, a byte waiting to be read, and (TCP) the kernel's
 * time since data last arrived, which no scheduling of ours delays. */
#include <stdatomic.h>

#include "fleet/fleet_pipe.h"
#include "util/clock.h"

uint64_t rl_fleet_pipe_quiet_ns(struct rl_fleet_pipe *p, uint64_t cnow)
{
    uint64_t sent = atomic_load_explicit(&p->sent, memory_order_acquire);
    if (atomic_load_explicit(&p->got, memory_order_relaxed) >= sent)
        return 0; /* nothing owed: nothing to hear */
    uint64_t last = atomic_load_explicit(&p->last_reply, memory_order_relaxed);
    uint64_t since = atomic_load_explicit(&p->owed_since, memory_order_relaxed);
    if (last > since)
        since = last;
    return cnow > since ? cnow - since : 0;
}

uint64_t rl_fleet_pipe_heard_ago(struct rl_fleet_pipe *p, uint64_t quiet)
{
    uint64_t cnow = rl_clock_coarse_ns();
    uint64_t ago = rl_fleet_pipe_quiet_ns(p, cnow);
    if (ago < quiet)
        return ago;
    uint64_t k = rl_fleet_conn_heard_ns(&p->c);
    if (k >= ago)
        return ago;
    /* Data came that no thread of ours has read yet: the node was heard
     * then, for every thread that asks (rl_fleet_route_silent too). */
    uint64_t last = atomic_load_explicit(&p->last_reply, memory_order_relaxed);
    while (last < cnow - k && !atomic_compare_exchange_weak_explicit(
                                  &p->last_reply, &last, cnow - k,
                                  memory_order_relaxed, memory_order_relaxed))
        ;
    return k;
}

uint64_t rl_fleet_pipe_wait_on(struct rl_fleet_pipe *p,
                               const struct rl_fleet_wait *w, uint64_t deadline,
                               uint64_t now)
{
    if (now >= w->late || w->quiet == 0)
        return deadline;
    uint64_t ago = rl_fleet_pipe_heard_ago(p, w->quiet);
    if (ago >= w->quiet)
        return deadline;
    /* Looked at again when it would have been quiet that long. */
    uint64_t next = now + (w->quiet - ago);
    return next < w->late ? next : w->late;
}
