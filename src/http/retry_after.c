/* retry_after.c — delay-seconds or an HTTP-date, to nanoseconds. */
#include "http/retry_after.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

#define NS 1000000000ull

static const char *const wkday[7] = {"Mon", "Tue", "Wed", "Thu",
                                     "Fri", "Sat", "Sun"};
static const char *const weekday[7] = {"Monday", "Tuesday", "Wednesday",
                                       "Thursday", "Friday", "Saturday",
                                       "Sunday"};
static const char *const month[12] = {"Jan", "Feb", "Mar", "Apr",
                                      "May", "Jun", "Jul", "Aug",
                                      "Sep", "Oct", "Nov", "Dec"};

int64_t rl_days_from_civil(int64_t y, unsigned m, unsigned d)
{
    /* Years counted from March, so that the leap day ends the year. */
    int64_t era, yoe, doy, doe;

    y -= m <= 2;
    era = (y >= 0 ? y : y - 399) / 400;
    yoe = y - era * 400;
    doy = (153 * (int64_t)(m > 2 ? m - 3 : m + 9) + 2) / 5 + (int64_t)d - 1;
    doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

/* A cursor over the value; every reader returns false on a mismatch. */
struct cur {
    const char *p, *end;
};

static bool lit(struct cur *c, const char *s)
{
    size_t n = strlen(s);

    if ((size_t)(c->end - c->p) < n || memcmp(c->p, s, n) != 0)
        return false;
    c->p += n;
    return true;
}

static bool digits(struct cur *c, unsigned n, unsigned *out)
{
    unsigned v = 0;

    for (unsigned i = 0; i < n; i++) {
        if (c->p >= c->end || *c->p < '0' || *c->p > '9')
            return false;
        v = v * 10 + (unsigned)(*c->p++ - '0');
    }
    *out = v;
    return true;
}

static bool one_of(struct cur *c, const char *const *tab, unsigned n,
                   unsigned *out)
{
    for (unsigned i = 0; i < n; i++) {
        if (lit(c, tab[i])) {
            *out = i;
            return true;
        }
    }
    return false;
}

static bool hms(struct cur *c, unsigned *h, unsigned *mi, unsigned *s)
{
    return digits(c, 2, h) && lit(c, ":") && digits(c, 2, mi) &&
           lit(c, ":") && digits(c, 2, s) && *h < 24 && *mi < 60 && *s < 61;
}

static const unsigned mdays[12] = {31, 29, 31, 30, 31, 30,
                                   31, 31, 30, 31, 30, 31};

/* The date's Unix time, or false. */
static bool http_date(struct cur c, int64_t now_s, int64_t *t)
{
    unsigned wd, d, mo, y, h, mi, s;
    struct cur k = c;

    if (one_of(&k, weekday, 7, &wd) && lit(&k, ", ")) {
        /* RFC 850: Sunday, 06-Nov-94 08:49:37 GMT */
        int64_t now_y = 1970 + now_s / 31556952, yy;

        if (!(digits(&k, 2, &d) && lit(&k, "-") &&
              one_of(&k, month, 12, &mo) && lit(&k, "-") &&
              digits(&k, 2, &y) && lit(&k, " ") && hms(&k, &h, &mi, &s) &&
              lit(&k, " GMT") && k.p == k.end))
            return false;
        /* RFC 9110: a two-digit year more than 50 years ahead is the most
         * recent past year with those digits. */
        yy = now_y - now_y % 100 + y;
        if (yy > now_y + 50)
            yy -= 100;
        y = (unsigned)yy;
    } else if (k = c, one_of(&k, wkday, 7, &wd) && lit(&k, ", ")) {
        /* IMF-fixdate: Sun, 06 Nov 1994 08:49:37 GMT */
        if (!(digits(&k, 2, &d) && lit(&k, " ") &&
              one_of(&k, month, 12, &mo) && lit(&k, " ") &&
              digits(&k, 4, &y) && lit(&k, " ") && hms(&k, &h, &mi, &s) &&
              lit(&k, " GMT") && k.p == k.end))
            return false;
    } else if (k = c, one_of(&k, wkday, 7, &wd) && lit(&k, " ")) {
        /* asctime: Sun Nov  6 08:49:37 1994 */
        if (!(one_of(&k, month, 12, &mo) && lit(&k, " ")))
            return false;
        if (k.p < k.end && *k.p == ' ') {
            k.p++;
            if (!digits(&k, 1, &d))
                return false;
        } else if (!digits(&k, 2, &d)) {
            return false;
        }
        if (!(lit(&k, " ") && hms(&k, &h, &mi, &s) && lit(&k, " ") &&
              digits(&k, 4, &y) && k.p == k.end))
            return false;
    } else {
        return false;
    }
    if (d < 1 || d > mdays[mo])
        return false;
    *t = rl_days_from_civil(y, mo + 1, d) * 86400 + h * 3600 + mi * 60 + s;
    return true;
}

int rl_retry_after_parse(const char *v, size_t n, int64_t now_s,
                         uint64_t *wait_ns)
{
    struct cur c = {v, v + n};
    int64_t t;

    while (c.p < c.end && (*c.p == ' ' || *c.p == '\t'))
        c.p++;
    while (c.end > c.p && (c.end[-1] == ' ' || c.end[-1] == '\t'))
        c.end--;
    if (c.p == c.end)
        return -EINVAL;
    if (*c.p >= '0' && *c.p <= '9') {
        uint64_t secs = 0;
        bool big = false;

        for (const char *p = c.p; p < c.end; p++) {
            if (*p < '0' || *p > '9')
                return -EINVAL;
            if (big)
                continue;
            if (secs > (UINT64_MAX / NS - (uint64_t)(*p - '0')) / 10)
                big = true;
            else
                secs = secs * 10 + (uint64_t)(*p - '0');
        }
        *wait_ns = big ? UINT64_MAX : secs * NS;
        return 0;
    }
    if (!http_date(c, now_s, &t))
        return -EINVAL;
    if (t <= now_s) {
        *wait_ns = 0;
        return 0;
    }
    /* t > now_s, so the difference fits in 64 unsigned bits even where it
     * overflows int64_t; past 2^64 ns (about 584 years) the wait
     * saturates like a huge delay-seconds, never wraps. */
    uint64_t secs = (uint64_t)t - (uint64_t)now_s;
    *wait_ns = secs > UINT64_MAX / NS ? UINT64_MAX : secs * NS;
    return 0;
}
