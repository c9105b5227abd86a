/* waittime.h — the wait calls' timeouts in nanoseconds (hook_wait.c):
 * from and to each call's own form (ms, timespec), saturating, never
 * wrapping. */
#ifndef RL_SHIM_WAITTIME_H
#define RL_SHIM_WAITTIME_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#define NEVER UINT64_MAX
/* A timeout too long to count in ns (2^64 ns is 584 years): for ever,
 * practically, yet a timeout (select still tells the time left). Every
 * conversion and sum below saturates here, never wraps. */
#define FOREVER (NEVER - 1)
#define NS 1000000000u

static inline int to_ms(uint64_t ns)
{
    if (ns == NEVER)
        return -1;
    /* Rounded up (never wake early), without the sum that would wrap. */
    uint64_t ms = ns / 1000000u + (ns % 1000000u != 0);
    return ms > INT_MAX ? INT_MAX : (int)ms;
}

static inline struct timespec to_ts(uint64_t ns)
{
    return (struct timespec){(time_t)(ns / NS), (long)(ns % NS)};
}

/* sec s + ns ns (both >= 0) in ns, FOREVER past it. */
static inline uint64_t sat_ns(uint64_t sec, uint64_t ns)
{
    if (sec >= FOREVER / NS)
        return FOREVER;
    uint64_t t = sec * NS;
    return ns >= FOREVER - t ? FOREVER : t + ns;
}

/* A timespec the kernel takes (NULL: none). One it refuses (a negative
 * field, tv_nsec past 999,999,999) goes to the real call as it is, for
 * the kernel's own EINVAL. */
static inline bool ts_ok(const struct timespec *ts)
{
    return ts == NULL || (ts->tv_sec >= 0 && ts->tv_nsec >= 0 &&
                          ts->tv_nsec < (long)NS);
}

static inline uint64_t ts_ns(const struct timespec *ts)
{
    if (ts == NULL)
        return NEVER;
    return sat_ns((uint64_t)ts->tv_sec, (uint64_t)ts->tv_nsec);
}

static inline uint64_t ms_ns(int ms)
{
    return ms < 0 ? NEVER : (uint64_t)ms * 1000000u;
}

static inline uint64_t deadline_of(uint64_t start, uint64_t timeout)
{
    if (timeout == NEVER)
        return NEVER;
    return timeout >= FOREVER - start ? FOREVER : start + timeout;
}

#endif
