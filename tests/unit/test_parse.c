/* test_parse.c — the strict parsers accept exactly what the config
 * documents and say which part of anything else is wrong. */
#include <criterion/criterion.h>
#include <errno.h>

#include "util/clock.h"
#include "util/parse.h"

Test(parse_u64, reads_plain_decimal_numbers)
{
    uint64_t v = 1;
    cr_expect_eq(rl_parse_u64("0", &v), 0);
    cr_expect_eq(v, 0);
    cr_expect_eq(rl_parse_u64("4096", &v), 0);
    cr_expect_eq(v, 4096);
    cr_expect_eq(rl_parse_u64("007", &v), 0);
    cr_expect_eq(v, 7);
    cr_expect_eq(rl_parse_u64("18446744073709551615", &v), 0);
    cr_expect_eq(v, UINT64_MAX);
}

Test(parse_u64, rejects_empty_signs_blanks_hex_and_junk)
{
    uint64_t v = 42;
    const char *bad[] = {"",     "-1", "+1",  " 1",    "1 ",
                         "0x10", "1a", "1.0", "1,000", "\t"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        cr_expect_eq(rl_parse_u64(bad[i], &v), -EINVAL, "'%s'", bad[i]);
    cr_expect_eq(v, 42, "a failed parse leaves the output alone");
}

Test(parse_u64, reports_overflow_as_erange)
{
    uint64_t v;
    cr_expect_eq(rl_parse_u64("18446744073709551616", &v), -ERANGE);
    cr_expect_eq(rl_parse_u64("99999999999999999999999", &v), -ERANGE);
}

Test(parse_duration, reads_every_unit)
{
    uint64_t ns;
    struct {
        const char *s;
        uint64_t ns;
    } ok[] = {
        {"0", 0},
        {"0s", 0},
        {"7ns", 7},
        {"3us", 3000},
        {"500ms", 500000000ull},
        {"10s", 10000000000ull},
        {"2min", 120000000000ull},
        {"1h", 3600000000000ull},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        cr_expect_eq(rl_parse_duration(ok[i].s, &ns), 0, "'%s'", ok[i].s);
        cr_expect_eq(ns, ok[i].ns, "'%s'", ok[i].s);
    }
}

Test(parse_duration, requires_a_known_unit)
{
    uint64_t ns;
    cr_expect_eq(rl_parse_duration("10", &ns), -EDOM);
    cr_expect_eq(rl_parse_duration("10sec", &ns), -EDOM);
    cr_expect_eq(rl_parse_duration("10 s", &ns), -EDOM);
    cr_expect_eq(rl_parse_duration("10S", &ns), -EDOM);
    cr_expect_eq(rl_parse_duration("10m", &ns), -EDOM);
}

Test(parse_duration, tells_a_bad_number_from_a_bad_unit)
{
    uint64_t ns;
    cr_expect_eq(rl_parse_duration("", &ns), -EINVAL);
    cr_expect_eq(rl_parse_duration("-1s", &ns), -EINVAL);
    cr_expect_eq(rl_parse_duration("1.5s", &ns), -EINVAL);
    cr_expect_eq(rl_parse_duration("ms", &ns), -EINVAL);
}

Test(parse_duration, reports_overflow_of_the_product)
{
    uint64_t ns;
    /* 5124096 h is more nanoseconds than 64 bits hold. */
    cr_expect_eq(rl_parse_duration("5124096h", &ns), -ERANGE);
    cr_expect_eq(rl_parse_duration("5124095h", &ns), 0);
}

Test(parse_size, reads_decimal_and_binary_units)
{
    uint64_t b;
    cr_expect_eq(rl_parse_size("512", &b), 0);
    cr_expect_eq(b, 512);
    cr_expect_eq(rl_parse_size("512B", &b), 0);
    cr_expect_eq(b, 512);
    cr_expect_eq(rl_parse_size("3KB", &b), 0);
    cr_expect_eq(b, 3000);
    cr_expect_eq(rl_parse_size("2MB", &b), 0);
    cr_expect_eq(b, 2000000);
    cr_expect_eq(rl_parse_size("1GB", &b), 0);
    cr_expect_eq(b, 1000000000);
    cr_expect_eq(rl_parse_size("3KiB", &b), 0);
    cr_expect_eq(b, 3072);
    cr_expect_eq(rl_parse_size("1MiB", &b), 0);
    cr_expect_eq(b, 1048576);
    cr_expect_eq(rl_parse_size("2GiB", &b), 0);
    cr_expect_eq(b, 2147483648ull);
}

Test(parse_size, rejects_unknown_units_and_overflow)
{
    uint64_t b;
    cr_expect_eq(rl_parse_size("1kb", &b), -EDOM);
    cr_expect_eq(rl_parse_size("1K", &b), -EDOM);
    cr_expect_eq(rl_parse_size("1TB", &b), -EDOM);
    cr_expect_eq(rl_parse_size("1 MiB", &b), -EDOM);
    cr_expect_eq(rl_parse_size("MiB", &b), -EINVAL);
    cr_expect_eq(rl_parse_size("17179869184GiB", &b), -ERANGE);
}

Test(parse_rate, reads_count_per_period)
{
    struct rl_rate r;
    cr_expect_eq(rl_parse_rate("5/s", false, &r), 0);
    cr_expect_eq(r.count, 5);
    cr_expect_eq(r.period_ns, RL_NS_PER_S);
    cr_expect_eq(rl_parse_rate("3/ms", false, &r), 0);
    cr_expect_eq(r.period_ns, RL_NS_PER_MS);
    cr_expect_eq(rl_parse_rate("100/min", false, &r), 0);
    cr_expect_eq(r.period_ns, RL_NS_PER_MIN);
    cr_expect_eq(rl_parse_rate("1000/h", false, &r), 0);
    cr_expect_eq(r.count, 1000);
    cr_expect_eq(r.period_ns, RL_NS_PER_H);
}

Test(parse_rate, takes_size_units_only_when_asked)
{
    struct rl_rate r;
    cr_expect_eq(rl_parse_rate("1MiB/s", true, &r), 0);
    cr_expect_eq(r.count, 1048576);
    cr_expect_eq(rl_parse_rate("10KB/ms", true, &r), 0);
    cr_expect_eq(r.count, 10000);
    cr_expect_eq(r.period_ns, RL_NS_PER_MS);
    cr_expect_eq(rl_parse_rate("1MiB/s", false, &r), -EINVAL);
}

Test(parse_rate, lets_the_caller_judge_a_zero_rate)
{
    struct rl_rate r;
    cr_expect_eq(rl_parse_rate("0/s", false, &r), 0);
    cr_expect_eq(r.count, 0);
}

Test(parse_rate, rejects_bad_shapes_numbers_and_units)
{
    struct rl_rate r;
    cr_expect_eq(rl_parse_rate("5", false, &r), -EDOM);
    cr_expect_eq(rl_parse_rate("5/sec", false, &r), -EDOM);
    cr_expect_eq(rl_parse_rate("5/", false, &r), -EDOM);
    cr_expect_eq(rl_parse_rate("5/s/s", false, &r), -EDOM);
    cr_expect_eq(rl_parse_rate("5 /s", false, &r), -EINVAL);
    cr_expect_eq(rl_parse_rate("/s", false, &r), -EINVAL);
    cr_expect_eq(rl_parse_rate("-5/s", false, &r), -EINVAL);
    cr_expect_eq(rl_parse_rate("x/s", false, &r), -EINVAL);
    cr_expect_eq(rl_parse_rate("", false, &r), -EINVAL);
    cr_expect_eq(rl_parse_rate("99999999999999999999/s", false, &r), -ERANGE);
}

Test(parse_rate_list, reads_comma_separated_rates_with_blanks)
{
    struct rl_rate r[4];
    unsigned n = 0, bad;
    cr_assert_eq(
        rl_parse_rate_list("5/s, 100/min ,1000/h", false, r, 4, &n, &bad), 0);
    cr_assert_eq(n, 3);
    cr_expect_eq(r[0].count, 5);
    cr_expect_eq(r[1].period_ns, RL_NS_PER_MIN);
    cr_expect_eq(r[2].count, 1000);
}

Test(parse_rate_list, names_the_element_that_is_wrong)
{
    struct rl_rate r[4];
    unsigned n = 0, bad = 9;
    cr_expect_eq(rl_parse_rate_list("5/s, 7/fortnight", false, r, 4, &n, &bad),
                 -EDOM);
    cr_expect_eq(bad, 1);
    cr_expect_eq(rl_parse_rate_list("5/s,,6/s", false, r, 4, &n, &bad),
                 -EINVAL);
    cr_expect_eq(bad, 1);
    cr_expect_eq(rl_parse_rate_list("5/s,", false, r, 4, &n, &bad), -EINVAL);
    cr_expect_eq(bad, 1);
}

Test(parse_rate_list, refuses_more_rates_than_fit)
{
    struct rl_rate r[2];
    unsigned n, bad;
    cr_expect_eq(rl_parse_rate_list("1/s,2/s,3/s", false, r, 2, &n, &bad),
                 -E2BIG);
    cr_expect_eq(bad, 2);
}

Test(parse_bool, reads_the_usual_words)
{
    bool b = false;
    cr_expect_eq(rl_parse_bool("yes", &b), 0);
    cr_expect(b);
    cr_expect_eq(rl_parse_bool("off", &b), 0);
    cr_expect_not(b);
    cr_expect_eq(rl_parse_bool("1", &b), 0);
    cr_expect(b);
    cr_expect_eq(rl_parse_bool("Yes", &b), -EDOM);
    cr_expect_eq(rl_parse_bool("", &b), -EDOM);
}

/* A deadline of a clock reading and a duration never wraps to the past. */
Test(add_sat, saturates_at_the_top_and_adds_below_it)
{
    cr_expect_eq(rl_add_sat_u64(5, 7), 12);
    cr_expect_eq(rl_add_sat_u64(UINT64_MAX - 7, 7), UINT64_MAX);
    cr_expect_eq(rl_add_sat_u64(UINT64_MAX - 7, 8), UINT64_MAX);
    cr_expect_eq(rl_add_sat_u64(UINT64_MAX, UINT64_MAX), UINT64_MAX);
    cr_expect_eq(rl_add_sat_u64(1000 * RL_NS_PER_S, RL_NS_PER_DAY),
                 1000 * RL_NS_PER_S + 86400 * RL_NS_PER_S);
}
