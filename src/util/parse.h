/* parse.h — strict parsers for the numbers a config holds.
 *
 * One parser each for unsigned integers, durations, sizes and rates. They
 * reject what strtoul would quietly accept: empty input, leading or trailing
 * blanks, signs, "0x", trailing junk and overflow. No allocation, no
 * locale, no errno: each returns 0 or a negative code that says which part
 * was wrong, so the config can tell a bad number from a bad unit:
 *
 *   -EINVAL  the number part is not a decimal whole number (or is empty)
 *   -EDOM    the unit is missing, unknown, or the text has the wrong shape
 *   -ERANGE  the value does not fit in 64 bits (nanoseconds, bytes, count)
 *
 * Units are case-sensitive and written without spaces: "500ms", "1MiB/s". */
#ifndef RL_UTIL_PARSE_H
#define RL_UTIL_PARSE_H

#include <stdbool.h>
#include <stdint.h>

#define RL_NS_PER_US 1000ull
#define RL_NS_PER_MS 1000000ull
#define RL_NS_PER_S 1000000000ull
#define RL_NS_PER_MIN (60ull * RL_NS_PER_S)
#define RL_NS_PER_H (3600ull * RL_NS_PER_S)
#define RL_NS_PER_DAY (24ull * RL_NS_PER_H)

/* N units per period_ns, as written ("5/s": count 5, period 1e9). */
struct rl_rate {
    uint64_t count;
    uint64_t period_ns;
};

/* Decimal digits only ("0" allowed, leading zeros allowed). */
int rl_parse_u64(const char *s, uint64_t *out);

/* The same, for the first n bytes of s (no NUL needed). */
int rl_parse_u64_n(const char *s, unsigned n, uint64_t *out);

/* A duration: digits then ns, us, ms, s, min or h ("500ms", "10s",
 * "2min", "1h"). A bare "0" is allowed; any other bare number is -EDOM
 * (a unit is required, so "10" cannot mean 10 ns by surprise). */
int rl_parse_duration(const char *s, uint64_t *ns);

/* A size in bytes: digits then nothing or B (bytes), KB, MB, GB (powers of
 * 1000) or KiB, MiB, GiB (powers of 1024). */
int rl_parse_size(const char *s, uint64_t *bytes);

/* "N/PERIOD" with N a whole number ("5/s"). With `sizes`, N may carry a
 * size unit ("1MiB/s"). N = 0 parses (the caller decides whether a zero
 * rate is an error). */
int rl_parse_rate(const char *s, bool sizes, struct rl_rate *out);

/* A comma-separated list of rates, blanks allowed around each comma
 * ("5/s, 100/min"). Fills at most `max` entries and sets *n; more than
 * `max` is -E2BIG, an empty element -EINVAL. On error *bad_index tells
 * which element (0-based) was wrong. */
int rl_parse_rate_list(const char *s, bool sizes, struct rl_rate *out,
                       unsigned max, unsigned *n, unsigned *bad_index);

/* yes/no, true/false, on/off, 1/0. -EDOM otherwise. */
int rl_parse_bool(const char *s, bool *out);

#endif
