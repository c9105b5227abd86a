/* test_conform.c — limit/conform.c, the check behind `rlshim verify`:
 * hand-made sequences one over, exactly at and one under a limit, and a
 * property test against a brute-force check of every interval. Sequences
 * the project's own limiters admit must conform. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "limit/conform.h"
#include "limit/limit.h"

#define MS 1000000ull
#define SEC 1000000000ull

__extension__ typedef __int128 i128;

static struct rl_conform_result bucket(const struct rl_conform_ev *ev, size_t n,
                                       uint64_t count, uint64_t period,
                                       uint64_t burst)
{
    struct rl_conform_result r;
    rl_conform_bucket(ev, n, count, period, burst, 0, &r);
    return r;
}

/* 2/s, burst 1: one every 500 ms. */
Test(conform, bucket_exactly_at_the_limit_is_ok)
{
    struct rl_conform_ev ev[] = {{0, 1}, {500 * MS, 1}, {1000 * MS, 1},
                                 {1500 * MS, 1}};
    struct rl_conform_result r = bucket(ev, 4, 2, SEC, 1);
    cr_assert(r.ok);
    cr_assert_leq(r.units, r.allowed);
}

Test(conform, bucket_one_ns_early_is_over)
{
    struct rl_conform_ev ev[] = {{0, 1}, {500 * MS, 1}, {1000 * MS - 1, 1},
                                 {1500 * MS, 1}};
    struct rl_conform_result r = bucket(ev, 4, 2, SEC, 1);
    cr_assert_not(r.ok);
    /* The worst interval is the pair 500 ms -> 1000 ms - 1. */
    cr_assert_eq(r.first, 1);
    cr_assert_eq(r.last, 2);
    cr_assert_eq(r.units, 2);
    cr_assert_eq(r.allowed, 1);
    /* A tick of slack forgives a limiter that reads time in ticks. */
    rl_conform_bucket(ev, 4, 2, SEC, 1, 1, &r);
    cr_assert(r.ok);
}

Test(conform, bucket_one_under_is_ok_and_one_over_is_not)
{
    /* Burst 3 at t=0, then 2/s: 3 at 0 is at, 4 at 0 is one over. */
    struct rl_conform_ev at[] = {{0, 3}, {500 * MS, 1}, {1000 * MS, 1}};
    struct rl_conform_ev under[] = {{0, 2}, {500 * MS, 1}, {1000 * MS, 1}};
    struct rl_conform_ev over[] = {{0, 4}, {500 * MS, 1}, {1000 * MS, 1}};
    cr_assert(bucket(at, 3, 2, SEC, 3).ok);
    cr_assert(bucket(under, 3, 2, SEC, 3).ok);
    struct rl_conform_result r = bucket(over, 3, 2, SEC, 3);
    cr_assert_not(r.ok);
    cr_assert_eq(r.first, 0);
    cr_assert_eq(r.units, r.allowed + 1);
}

Test(conform, window_at_under_and_over)
{
    /* 3 per 1 s window; units 1 s apart exactly are in different windows. */
    struct rl_conform_ev at[] = {{0, 1}, {10, 1}, {20, 1}, {SEC, 1}};
    struct rl_conform_ev over[] = {{0, 1}, {10, 1}, {20, 1}, {SEC - 1, 1}};
    struct rl_conform_result r;
    rl_conform_window(at, 4, 3, SEC, 0, &r);
    cr_assert(r.ok);
    cr_assert_eq(r.units, 3);
    rl_conform_window(over, 4, 3, SEC, 0, &r);
    cr_assert_not(r.ok);
    cr_assert_eq(r.units, 4);
    cr_assert_eq(r.first, 0);
    cr_assert_eq(r.last, 3);
}

Test(conform, empty_is_ok)
{
    struct rl_conform_result r;
    rl_conform_bucket(NULL, 0, 1, SEC, 1, 0, &r);
    cr_assert(r.ok);
    rl_conform_window(NULL, 0, 1, SEC, 0, &r);
    cr_assert(r.ok);
}

/* ---- property: agrees with checking every interval -------------------- */

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static bool brute_bucket(const struct rl_conform_ev *ev, size_t n,
                         uint64_t count, uint64_t period, uint64_t burst)
{
    for (size_t i = 0; i < n; i++) {
        i128 sum = 0;
        for (size_t j = i; j < n; j++) {
            sum += ev[j].units;
            if (sum * period >
                (i128)burst * period + (i128)count * (ev[j].t - ev[i].t))
                return false;
        }
    }
    return true;
}

static bool brute_window(const struct rl_conform_ev *ev, size_t n,
                         uint64_t count, uint64_t period)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t sum = 0;
        for (size_t j = i; j < n && ev[j].t - ev[i].t < period; j++)
            sum += ev[j].units;
        /* Also windows that start between events: the sum over [t_i,
         * t_i + period) is the largest for windows ending at an event's
         * right, so starting at events is enough. */
        if (sum > count)
            return false;
    }
    return true;
}

static size_t random_sequence(struct rl_conform_ev *ev, size_t max,
                              uint64_t period)
{
    size_t n = 1 + next() % max;
    uint64_t t = next() % period;
    for (size_t i = 0; i < n; i++) {
        /* Gaps from 0 (ties) to two periods; mostly small. */
        uint64_t g = next() % 4 == 0 ? next() % (2 * period)
                                     : next() % (period / 4 + 1);
        t += next() % 5 == 0 ? 0 : g;
        ev[i] = (struct rl_conform_ev){t, 1 + next() % 3};
    }
    return n;
}

Test(conform, property_bucket_agrees_with_brute_force)
{
    struct rl_conform_ev ev[64];
    unsigned oks = 0, fails = 0;
    for (int round = 0; round < 4000; round++) {
        uint64_t count = 1 + next() % 10, period = (1 + next() % 10) * 100 * MS;
        uint64_t burst = 1 + next() % 12;
        size_t n = random_sequence(ev, 1 + round % 64, period);
        struct rl_conform_result r;
        rl_conform_bucket(ev, n, count, period, burst, 0, &r);
        bool want = brute_bucket(ev, n, count, period, burst);
        cr_assert_eq(r.ok, want, "round %d: n %zu, %llu per %llu burst %llu",
                     round, n, (unsigned long long)count,
                     (unsigned long long)period, (unsigned long long)burst);
        /* The interval it names holds what it says. */
        uint64_t sum = 0;
        for (size_t i = r.first; i <= r.last; i++)
            sum += ev[i].units;
        cr_assert_eq(sum, r.units);
        cr_assert_eq(r.ok, r.units <= r.allowed);
        want ? oks++ : fails++;
    }
    /* Both answers were exercised. */
    cr_assert_gt(oks, 200);
    cr_assert_gt(fails, 200);
}

Test(conform, property_window_agrees_with_brute_force)
{
    struct rl_conform_ev ev[64];
    unsigned oks = 0, fails = 0;
    for (int round = 0; round < 4000; round++) {
        uint64_t count = 1 + next() % 12, period = (1 + next() % 10) * 100 * MS;
        size_t n = random_sequence(ev, 1 + round % 64, period);
        struct rl_conform_result r;
        rl_conform_window(ev, n, count, period, 0, &r);
        bool want = brute_window(ev, n, count, period);
        cr_assert_eq(r.ok, want, "round %d", round);
        uint64_t sum = 0;
        for (size_t i = r.first; i <= r.last; i++)
            sum += ev[i].units;
        cr_assert_eq(sum, r.units);
        want ? oks++ : fails++;
    }
    cr_assert_gt(oks, 200);
    cr_assert_gt(fails, 200);
}

/* What the project's token bucket admits from random arrivals conforms
 * (within a nanosecond: it reads time in ticks), and adding one unit at
 * the worst interval's end makes it fail. */
Test(conform, the_token_bucket_admits_only_conforming_sequences)
{
    struct rl_conform_ev ev[256];
    for (int round = 0; round < 300; round++) {
        uint64_t count = 1 + next() % 20, period = (1 + next() % 5) * SEC;
        uint64_t burst = 1 + next() % 8;
        struct rl_limit lim;
        cr_assert_eq(rl_limit_prepare(&lim, RL_ALGO_TOKEN_BUCKET, count,
                                      period, burst),
                     0);
        rl_word *st = calloc(rl_token_bucket.state_words(&lim), sizeof *st);
        cr_assert_not_null(st);
        uint64_t now = SEC + next() % SEC;
        size_t n = 0;
        for (int k = 0; k < 1000 && n < 256; k++) {
            now += next() % (2 * period / count + 1);
            uint64_t want = 1 + next() % 2;
            struct rl_verdict v =
                rl_token_bucket.take(st, &lim, now, want, want, 0);
            if (v.granted > 0)
                ev[n++] = (struct rl_conform_ev){now, v.granted};
        }
        free(st);
        struct rl_conform_result r;
        rl_conform_bucket(ev, n, count, period, burst, 1, &r);
        cr_assert(r.ok, "round %d: %llu units where %llu allowed", round,
                  (unsigned long long)r.units,
                  (unsigned long long)r.allowed);
        /* A unit more where the bucket was emptiest is over the limit
         * when that interval was full already. */
        if (r.units == r.allowed && n > 0) {
            ev[r.last].units++;
            rl_conform_bucket(ev, n, count, period, burst, 1, &r);
            cr_assert_not(r.ok, "round %d", round);
        }
    }
}
