/* retry_after.h — a Retry-After value (RFC 9110 §10.2.3) as a wait.
 *
 * Pure: the wall-clock time is passed in; no I/O, no locale, no tz. The
 * cap (max_retry_after) is the caller's. */
#ifndef RL_RETRY_AFTER_H
#define RL_RETRY_AFTER_H

#include <stddef.h>
#include <stdint.h>

/* Parses v[0..n): delay-seconds (digits only; surrounding spaces and tabs
 * allowed; a huge value saturates to UINT64_MAX) or an HTTP-date in any of
 * its three forms (IMF-fixdate, RFC 850, asctime), now_s being the current
 * Unix time in seconds. On success stores the wait in nanoseconds (a date
 * in the past waits 0; one more than 2^64 ns ahead saturates to
 * UINT64_MAX, as a huge delay-seconds does) and returns 0; a malformed value
 * returns -EINVAL and is to be treated as absent. */
int rl_retry_after_parse(const char *v, size_t n, int64_t now_s,
                         uint64_t *wait_ns);

/* Days since 1970-01-01 of a proleptic Gregorian date (month 1-12). */
int64_t rl_days_from_civil(int64_t y, unsigned m, unsigned d);

#endif
