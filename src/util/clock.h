/* clock.h — the one seam through which rlshim reads time.
 *
 * CLOCK_MONOTONIC in nanoseconds: the same for every process on the host, so
 * it can be stored in shared memory and compared across processes. The gate
 * reads it once per decision and passes the value down; limiters never read
 * a clock, which is what lets the tests step time by hand. */
#ifndef RL_UTIL_CLOCK_H
#define RL_UTIL_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t rl_clock_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* CLOCK_MONOTONIC_COARSE: the kernel's last tick (1-4 ms old), read from
 * the vDSO without touching the clock source. For "has time moved since I
 * last looked" stamps on hot paths (lease idleness, sweeps), never for a
 * decision. */
static inline uint64_t rl_clock_coarse_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* a + b, or UINT64_MAX when that wraps: a deadline made of a clock reading
 * and a duration ("now + max_delay") is never before now. */
static inline uint64_t rl_add_sat_u64(uint64_t a, uint64_t b)
{
    return b > UINT64_MAX - a ? UINT64_MAX : a + b;
}

#endif
