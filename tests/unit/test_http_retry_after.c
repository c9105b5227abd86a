/* test_http_retry_after.c — Retry-After values (RFC 9110 §10.2.3). */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "http/retry_after.h"

#define SEC 1000000000ull
/* Sun, 06 Nov 1994 08:49:37 GMT, RFC 9110's example date. */
#define T94 784111777ll
/* 2026-01-01T00:00:00Z */
#define T26 1767225600ll

static int ra(const char *v, int64_t now, uint64_t *ns)
{
    *ns = 12345;
    return rl_retry_after_parse(v, strlen(v), now, ns);
}

Test(http_retry_after, delay_seconds_with_whitespace_and_zero)
{
    uint64_t ns;

    cr_assert_eq(ra("120", T26, &ns), 0);
    cr_assert_eq(ns, 120 * SEC);
    cr_assert_eq(ra(" \t7 \t", T26, &ns), 0);
    cr_assert_eq(ns, 7 * SEC);
    cr_assert_eq(ra("0", T26, &ns), 0);
    cr_assert_eq(ns, 0);
    cr_assert_eq(ra("007", T26, &ns), 0);
    cr_assert_eq(ns, 7 * SEC);
}

Test(http_retry_after, huge_delays_saturate)
{
    uint64_t ns;

    cr_assert_eq(ra("18446744074", T26, &ns), 0);
    cr_assert_eq(ns, UINT64_MAX);
    cr_assert_eq(ra("99999999999999999999999999999", T26, &ns), 0);
    cr_assert_eq(ns, UINT64_MAX);
    cr_assert_eq(ra("18446744073", T26, &ns), 0);
    cr_assert_eq(ns, 18446744073ull * SEC);
}

Test(http_retry_after, malformed_values_are_absent)
{
    static const char *const bad[] = {
        "", "   ", "-5", "+5", "1.5", "5s", "5 5", "0x10", "soon",
        "Sun, 06 Nov 1994 08:49:37 UTC", "Sun, 6 Nov 1994 08:49:37 GMT",
        "Sun, 31 Feb 1994 08:49:37 GMT", "Sun, 06 Nov 1994 24:00:00 GMT",
        "Sun, 06 Foo 1994 08:49:37 GMT", "Sun, 06 Nov 1994 08:49:37 GMT x",
        "Sunday, 06-Nov-1994 08:49:37 GMT", "Sun Nov 6 08:49:37 1994",
        "sun, 06 Nov 1994 08:49:37 GMT", "Sun,06 Nov 1994 08:49:37 GMT",
    };
    uint64_t ns;

    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cr_assert_eq(ra(bad[i], T94, &ns), -EINVAL, "'%s'", bad[i]);
        cr_assert_eq(ns, 12345, "'%s' stored a wait", bad[i]);
    }
}

Test(http_retry_after, the_three_date_forms_name_the_same_instant)
{
    static const char *const forms[] = {
        "Sun, 06 Nov 1994 08:49:37 GMT",
        "Sunday, 06-Nov-94 08:49:37 GMT",
        "Sun Nov  6 08:49:37 1994",
    };
    uint64_t ns;

    for (size_t i = 0; i < 3; i++) {
        cr_assert_eq(ra(forms[i], T94 - 90, &ns), 0, "'%s'", forms[i]);
        cr_assert_eq(ns, 90 * SEC, "'%s': %llu", forms[i],
                     (unsigned long long)ns);
    }
    cr_assert_eq(ra("Thu, 01 Jan 2026 00:10:00 GMT", T26, &ns), 0);
    cr_assert_eq(ns, 600 * SEC);
    cr_assert_eq(ra("Thu Jan  1 00:00:01 2026", T26, &ns), 0);
    cr_assert_eq(ns, 1 * SEC);
    cr_assert_eq(ra("Sat, 29 Feb 2028 00:00:00 GMT", T26, &ns), 0);
    cr_assert_eq(ns, (uint64_t)(rl_days_from_civil(2028, 2, 29) * 86400 -
                                T26) * SEC);
}

Test(http_retry_after, a_date_in_the_past_waits_nothing)
{
    uint64_t ns;

    cr_assert_eq(ra("Sun, 06 Nov 1994 08:49:37 GMT", T26, &ns), 0);
    cr_assert_eq(ns, 0);
    cr_assert_eq(ra("Sun, 06 Nov 1994 08:49:37 GMT", T94, &ns), 0);
    cr_assert_eq(ns, 0);
    /* Before 1970: a negative Unix time, still in the past. */
    cr_assert_eq(ra("Fri, 01 Jan 1960 00:00:00 GMT", T26, &ns), 0);
    cr_assert_eq(ns, 0);
    cr_assert_eq(ra("Fri, 01 Jan 1960 00:00:10 GMT",
                    rl_days_from_civil(1960, 1, 1) * 86400, &ns), 0);
    cr_assert_eq(ns, 10 * SEC);
}

Test(http_retry_after, rfc850_years_are_at_most_fifty_years_ahead)
{
    uint64_t ns;

    /* From 2026, "30" is 2030 and "99" is 1999 (in the past). */
    cr_assert_eq(ra("Tuesday, 01-Jan-30 00:00:00 GMT", T26, &ns), 0);
    cr_assert_eq(ns, (uint64_t)(rl_days_from_civil(2030, 1, 1) * 86400 -
                                T26) * SEC);
    cr_assert_eq(ra("Friday, 01-Jan-99 00:00:00 GMT", T26, &ns), 0);
    cr_assert_eq(ns, 0);
}

Test(http_retry_after, civil_days_match_known_dates)
{
    cr_assert_eq(rl_days_from_civil(1970, 1, 1), 0);
    cr_assert_eq(rl_days_from_civil(2000, 3, 1), 11017);
    cr_assert_eq(rl_days_from_civil(1994, 11, 6) * 86400 + 8 * 3600 +
                     49 * 60 + 37,
                 T94);
    cr_assert_eq(rl_days_from_civil(2026, 1, 1) * 86400, T26);
    cr_assert_eq(rl_days_from_civil(1969, 12, 31), -1);
}

/* A date more than 2^64 ns (about 584 years) ahead saturates, as a huge
 * delay-seconds does: the caller's cut to max_retry_after then applies.
 * Never a wrapped, short wait. */
Test(http_retry_after, far_future_dates_saturate)
{
    static const char *const far[] = {
        "Wed, 26 Jun 2611 00:00:00 GMT", "Fri, 31 Dec 9999 23:59:60 GMT",
        "Fri Dec 31 23:59:59 9999",      "Mon, 01 Jan 3000 00:00:00 GMT",
        "Mon, 01 Jan 2611 00:00:00 GMT",
    };
    uint64_t ns;

    for (size_t i = 0; i < sizeof far / sizeof far[0]; i++) {
        cr_assert_eq(ra(far[i], T26, &ns), 0, "'%s'", far[i]);
        cr_assert_eq(ns, UINT64_MAX, "'%s': %llu ns", far[i],
                     (unsigned long long)ns);
    }
    /* Just inside the range: 2^64 ns is 18446744073.7 s; one second less
     * than the most that fits is exact. */
    cr_assert_eq(ra("Wed, 26 Jun 2611 00:00:00 GMT",
                    rl_days_from_civil(2611, 6, 26) * 86400 - 18446744073ll,
                    &ns),
                 0);
    cr_assert_eq(ns, 18446744073ull * SEC);
    cr_assert_eq(ra("Wed, 26 Jun 2611 00:00:00 GMT",
                    rl_days_from_civil(2611, 6, 26) * 86400 - 18446744074ll,
                    &ns),
                 0);
    cr_assert_eq(ns, UINT64_MAX);
    /* A clock far in the past (before year 1) against year 9999: the
     * difference does not fit an int64_t's half either. */
    cr_assert_eq(ra("Fri, 31 Dec 9999 23:59:59 GMT", INT64_MIN, &ns), 0);
    cr_assert_eq(ns, UINT64_MAX);
}

Test(http_retry_after, huge_delay_seconds_of_every_length_saturate)
{
    char v[64];
    uint64_t ns, secs = 1;

    /* 10^k seconds for k up to 40: exact while its nanoseconds fit in 64
     * bits (k <= 10), saturated after. */
    for (int k = 0; k <= 40; k++) {
        v[0] = '1';
        memset(v + 1, '0', (size_t)k);
        v[k + 1] = '\0';
        cr_assert_eq(ra(v, T26, &ns), 0, "'%s'", v);
        if (k <= 10)
            cr_assert_eq(ns, secs * SEC, "'%s': %llu", v,
                         (unsigned long long)ns);
        else
            cr_assert_eq(ns, UINT64_MAX, "'%s': %llu", v,
                         (unsigned long long)ns);
        secs *= 10;
    }
    /* The largest that fits, and one more. */
    cr_assert_eq(ra("18446744073", T26, &ns), 0);
    cr_assert_eq(ns, 18446744073ull * SEC);
    cr_assert_eq(ra("18446744074", T26, &ns), 0);
    cr_assert_eq(ns, UINT64_MAX);
    cr_assert_eq(
        ra("  000000000000000000000000000000000000018446744074  ", T26, &ns),
        0);
    cr_assert_eq(ns, UINT64_MAX);
    cr_assert_eq(
        ra("0000000000000000000000000000000000000000000000000001", T26, &ns),
        0);
    cr_assert_eq(ns, SEC);
}
