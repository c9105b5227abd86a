/* internal.h — what the files of limit/ share and nobody else uses. */
#ifndef RL_LIMIT_INTERNAL_H
#define RL_LIMIT_INTERNAL_H

#include "limit/limit.h"

/* Fill lim->derived for each algorithm; count, period_ns and burst are set
 * and non-zero. Return 0 or RL_LIMIT_E*. */
int rl_gcra_derive(struct rl_limit *lim);
int rl_window_derive(struct rl_limit *lim);

#endif
