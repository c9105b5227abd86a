/* ready_look.h — the two halves of rl_ready_look (policy/ready.h), for
 * tests that ask one of them. */
#ifndef RL_TEST_READY_LOOK_H
#define RL_TEST_READY_LOOK_H

#include "policy/ready.h"

/* How fd is hidden at `now` (0: not). */
static inline int ready_hidden(struct rl_proc *p, int fd, uint64_t now)
{
    struct rl_ready_look lk;
    rl_ready_look(p, fd, now, &lk);
    return lk.hidden;
}

/* When fd's hold ends, if after `now`; else 0. */
static inline uint64_t ready_held_until(struct rl_proc *p, int fd,
                                        uint64_t now)
{
    struct rl_ready_look lk;
    rl_ready_look(p, fd, now, &lk);
    return lk.held_until;
}

#endif
