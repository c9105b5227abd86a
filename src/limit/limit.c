/* limit.c — choosing and preparing a limit; the algorithms live in gcra.c
 * and window.c. */
#include "limit/internal.h"

const struct rl_algorithm *rl_algorithm_get(uint32_t algo)
{
    switch (algo) {
    case RL_ALGO_TOKEN_BUCKET:
        return &rl_token_bucket;
    case RL_ALGO_SLIDING_WINDOW:
        return &rl_sliding_window;
    default:
        return 0;
    }
}

int rl_limit_prepare(struct rl_limit *lim, uint32_t algo, uint64_t count,
                     uint64_t period_ns, uint64_t burst)
{
    *lim = (struct rl_limit){0};
    if (count == 0 || period_ns == 0)
        return RL_LIMIT_EINVAL;
    lim->algo = algo;
    lim->count = count;
    lim->period_ns = period_ns;
    lim->burst = burst ? burst : count;
    switch (algo) {
    case RL_ALGO_TOKEN_BUCKET:
        return rl_gcra_derive(lim);
    case RL_ALGO_SLIDING_WINDOW:
        return rl_window_derive(lim);
    default:
        return RL_LIMIT_EINVAL;
    }
}
