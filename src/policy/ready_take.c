/* ready_take.c — rl_ready_take: the one entry through which the shim takes
 * an entry out of the table (see ready.h). */
#include "policy/ready.h"

#include <errno.h>

int rl_ready_take(struct rl_proc *p, int fd, uint64_t now,
                  struct rl_ready_take *tk)
{
    int r;
    switch (tk->what) {
    case RL_READY_LOOK:
        rl_ready_look(p, fd, now, &tk->look);
        return 0;
    case RL_READY_CONNECT:
        return rl_ready_take_connect(p, fd, now, tk->force, &tk->t, &tk->sa,
                                     &tk->len, &tk->until);
    case RL_READY_OPEN:
        return rl_ready_take_open(p, fd, now, tk->force, &tk->sa, &tk->len,
                                  &tk->deadline, &tk->until);
    case RL_READY_FAILED:
        return rl_ready_take_error(p, fd, &tk->err);
    case RL_READY_TURN:
        r = rl_ready_turn_due(p, fd, now, &tk->until);
        if (r > 0) {
            tk->err = r;
            return 1;
        }
        return r;
    default:
        return 0;
    }
}
