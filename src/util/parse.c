/* parse.c — strict number, duration, size and rate parsers (see parse.h).
 *
 * Everything works on (pointer, length) spans internally so that a list
 * element can be parsed in place, without copying or writing into it. */
#include "util/parse.h"

#include <errno.h>
#include <string.h>

struct unit {
    const char *name;
    uint64_t mul;
};

static const struct unit periods[] = {
    {"ms", RL_NS_PER_MS},
    {"s", RL_NS_PER_S},
    {"min", RL_NS_PER_MIN},
    {"h", RL_NS_PER_H},
};

static const struct unit durations[] = {
    {"ns", 1},          {"us", RL_NS_PER_US},   {"ms", RL_NS_PER_MS},
    {"s", RL_NS_PER_S}, {"min", RL_NS_PER_MIN}, {"h", RL_NS_PER_H},
};

static const struct unit sizes[] = {
    {"", 1},
    {"B", 1},
    {"KB", 1000ull},
    {"MB", 1000000ull},
    {"GB", 1000000000ull},
    {"KiB", 1024ull},
    {"MiB", 1024ull * 1024},
    {"GiB", 1024ull * 1024 * 1024},
};

#define NUNITS(a) (sizeof(a) / sizeof((a)[0]))

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static bool is_blank(char c)
{
    return c == ' ' || c == '\t';
}

int rl_parse_u64_n(const char *s, unsigned n, uint64_t *out)
{
    uint64_t v = 0;

    if (n == 0)
        return -EINVAL;
    for (unsigned i = 0; i < n; i++) {
        if (!is_digit(s[i]))
            return -EINVAL;
        unsigned d = (unsigned)(s[i] - '0');
        if (v > (UINT64_MAX - d) / 10)
            return -ERANGE;
        v = v * 10 + d;
    }
    *out = v;
    return 0;
}

int rl_parse_u64(const char *s, uint64_t *out)
{
    size_t n = strlen(s);

    if (n > 4096) /* longer than any number; also keeps n in an unsigned */
        return -ERANGE;
    return rl_parse_u64_n(s, (unsigned)n, out);
}

/* The multiplier of the unit spelled by s[0..n), or 0. */
static uint64_t find_unit(const struct unit *u, size_t nu, const char *s,
                          size_t n)
{
    for (size_t i = 0; i < nu; i++)
        if (strlen(u[i].name) == n && memcmp(u[i].name, s, n) == 0)
            return u[i].mul;
    return 0;
}

/* Leading digits, then a unit from the table; value = number * unit. */
static int number_unit(const char *s, size_t n, const struct unit *u, size_t nu,
                       uint64_t *out)
{
    size_t d = 0;
    uint64_t v, mul;
    int rc;

    while (d < n && is_digit(s[d]))
        d++;
    if (d == 0) /* nothing numeric first: "", "-5", "x", "ms" */
        return -EINVAL;
    if (d > 4096)
        return -ERANGE;
    rc = rl_parse_u64_n(s, (unsigned)d, &v);
    if (rc < 0)
        return rc;
    mul = find_unit(u, nu, s + d, n - d);
    if (mul == 0) {
        /* "5.5s" or "5,s" is a bad number, not a bad unit. */
        if (d < n && (s[d] == '.' || s[d] == ','))
            return -EINVAL;
        return -EDOM;
    }
    if (v != 0 && mul > UINT64_MAX / v)
        return -ERANGE;
    *out = v * mul;
    return 0;
}

int rl_parse_duration(const char *s, uint64_t *ns)
{
    size_t n = strlen(s);

    if (n == 1 && s[0] == '0') {
        *ns = 0;
        return 0;
    }
    return number_unit(s, n, durations, NUNITS(durations), ns);
}

int rl_parse_size(const char *s, uint64_t *bytes)
{
    return number_unit(s, strlen(s), sizes, NUNITS(sizes), bytes);
}

static int rate_span(const char *s, size_t n, bool with_sizes,
                     struct rl_rate *out)
{
    const char *slash = memchr(s, '/', n);
    uint64_t count, period;
    size_t cn;
    int rc;

    if (slash == NULL) {
        /* "5" or "5s": the number may be fine, the shape is not. */
        size_t d = 0;
        while (d < n && is_digit(s[d]))
            d++;
        return d == 0 ? -EINVAL : -EDOM;
    }
    cn = (size_t)(slash - s);
    if (with_sizes)
        rc = number_unit(s, cn, sizes, NUNITS(sizes), &count);
    else if (cn > 4096)
        rc = -ERANGE;
    else
        rc = rl_parse_u64_n(s, (unsigned)cn, &count);
    if (rc < 0)
        return rc;
    period = find_unit(periods, NUNITS(periods), slash + 1, n - cn - 1);
    if (period == 0)
        return -EDOM;
    out->count = count;
    out->period_ns = period;
    return 0;
}

int rl_parse_rate(const char *s, bool with_sizes, struct rl_rate *out)
{
    return rate_span(s, strlen(s), with_sizes, out);
}

int rl_parse_rate_list(const char *s, bool with_sizes, struct rl_rate *out,
                       unsigned max, unsigned *n, unsigned *bad_index)
{
    unsigned k = 0;
    const char *p = s;

    *bad_index = 0;
    for (;;) {
        const char *end = strchr(p, ',');
        const char *a = p, *b = end ? end : p + strlen(p);
        int rc;

        while (a < b && is_blank(*a))
            a++;
        while (b > a && is_blank(b[-1]))
            b--;
        *bad_index = k;
        if (a == b)
            return -EINVAL;
        if (k == max)
            return -E2BIG;
        rc = rate_span(a, (size_t)(b - a), with_sizes, &out[k]);
        if (rc < 0)
            return rc;
        k++;
        if (end == NULL)
            break;
        p = end + 1;
    }
    *n = k;
    return 0;
}

int rl_parse_bool(const char *s, bool *out)
{
    static const char *const yes[] = {"yes", "true", "on", "1"};
    static const char *const no[] = {"no", "false", "off", "0"};

    for (size_t i = 0; i < NUNITS(yes); i++) {
        if (strcmp(s, yes[i]) == 0) {
            *out = true;
            return 0;
        }
        if (strcmp(s, no[i]) == 0) {
            *out = false;
            return 0;
        }
    }
    return -EDOM;
}
