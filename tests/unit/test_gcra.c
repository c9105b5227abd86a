/* test_gcra.c — the token bucket (GCRA in exact ticks), on a fake clock
 * except where real threads race on the real one. */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "giveback_sim.h"
#include "limit/limit.h"
#include "util/clock.h"

#define MS 1000000ull
#define SEC 1000000000ull
#define HOUR (3600ull * SEC)

__extension__ typedef unsigned __int128 u128;

static struct rl_limit bucket(uint64_t count, uint64_t period, uint64_t burst)
{
    struct rl_limit lim;

    cr_assert_eq(
        rl_limit_prepare(&lim, RL_ALGO_TOKEN_BUCKET, count, period, burst), 0);
    return lim;
}

static uint64_t take(rl_word *st, const struct rl_limit *lim, uint64_t now,
                     uint64_t want, uint64_t min)
{
    return rl_token_bucket.take(st, lim, now, want, min, 0).granted;
}

static uint64_t take1(rl_word *st, const struct rl_limit *lim, uint64_t now)
{
    return take(st, lim, now, 1, 1);
}

Test(gcra, admits_five_of_a_burst_of_seven_and_again_after_a_second)
{
    struct rl_limit lim = bucket(5, SEC, 0);
    rl_word st = 0;
    int allowed = 0, i;
    uint64_t t0 = 1000 * SEC;

    for (i = 0; i < 7; i++)
        allowed += (int)take1(&st, &lim, t0);
    cr_assert_eq(allowed, 5);
    allowed = 0;
    for (i = 0; i < 7; i++)
        allowed += (int)take1(&st, &lim, t0 + SEC);
    cr_assert_eq(allowed, 5);
}

Test(gcra, refills_one_token_at_a_fifth_of_a_second_and_the_next_at_two)
{
    struct rl_limit lim = bucket(5, SEC, 0);
    rl_word st = 0;
    uint64_t t0 = 7 * SEC + 123;

    cr_assert_eq(take(&st, &lim, t0, 5, 5), 5);
    cr_assert_eq(take1(&st, &lim, t0 + 200 * MS - 1), 0);
    cr_assert_eq(take1(&st, &lim, t0 + 200 * MS), 1);
    cr_assert_eq(take1(&st, &lim, t0 + 200 * MS), 0);
    cr_assert_eq(take1(&st, &lim, t0 + 400 * MS - 1), 0);
    cr_assert_eq(take1(&st, &lim, t0 + 400 * MS), 1);
}

Test(gcra, holds_only_the_burst_after_an_hour_idle)
{
    struct rl_limit lim = bucket(5, SEC, 3);
    rl_word st = 0;

    cr_assert_eq(take(&st, &lim, SEC, 3, 3), 3);
    cr_assert_eq(rl_token_bucket.available(&st, &lim, SEC + HOUR), 3);
    cr_assert_eq(take(&st, &lim, SEC + HOUR, 100, 1), 3);
    cr_assert_eq(take1(&st, &lim, SEC + HOUR), 0);
}

Test(gcra, starts_full_from_a_zero_word)
{
    struct rl_limit lim = bucket(10, SEC, 4);
    rl_word st = 0;

    cr_assert_eq(rl_token_bucket.state_words(&lim), 1);
    cr_assert_eq(rl_token_bucket.available(&st, &lim, 0), 4);
    cr_assert_eq(rl_token_bucket.available(&st, &lim, 5 * HOUR), 4);
    cr_assert_eq(take(&st, &lim, 0, 4, 4), 4);
    cr_assert_eq(take1(&st, &lim, 0), 0);
}

Test(gcra, takes_a_cost_above_one_whole_or_not_at_all)
{
    struct rl_limit lim = bucket(1000, SEC, 0); /* bytes, say */
    rl_word st = 0;
    uint64_t t0 = SEC;

    cr_assert_eq(take(&st, &lim, t0, 600, 600), 600);
    cr_assert_eq(take(&st, &lim, t0, 600, 600), 0);
    cr_assert_eq(take(&st, &lim, t0, 400, 400), 400);
    /* 0.3 s later 300 are back: 301 cannot go, 300 can. */
    cr_assert_eq(take(&st, &lim, t0 + 300 * MS, 301, 301), 0);
    cr_assert_eq(take(&st, &lim, t0 + 300 * MS, 300, 300), 300);
}

Test(gcra, grants_part_of_a_cost_when_at_least_min_is_there)
{
    struct rl_limit lim = bucket(1000, SEC, 0);
    rl_word st = 0;
    uint64_t t0 = SEC;

    cr_assert_eq(take(&st, &lim, t0, 65536, 1), 1000);
    cr_assert_eq(take(&st, &lim, t0 + 10 * MS, 65536, 1), 10);
    cr_assert_eq(take(&st, &lim, t0 + 20 * MS, 65536, 11), 0);
    cr_assert_eq(take(&st, &lim, t0 + 20 * MS, 65536, 10), 10);
}

/* At time `now` nothing: the verdict's wait says when `min` can go; one ns
 * earlier they cannot, at that ns they can. */
static void check_wait_is_exact(uint64_t count, uint64_t period, uint64_t burst,
                                uint64_t now, uint64_t min)
{
    struct rl_limit lim = bucket(count, period, burst);
    rl_word st = 0, copy;
    struct rl_verdict v;

    take(&st, &lim, now, burst ? burst : count, 1);
    v = rl_token_bucket.take(&st, &lim, now, min, min, 0);
    cr_assert_eq(v.granted, 0);
    cr_assert(v.wait_ns > 0 && v.wait_ns != UINT64_MAX);
    copy = atomic_load(&st);
    cr_assert_eq(take(&copy, &lim, now + v.wait_ns - 1, min, min), 0,
                 "%lu/%lu at %lu: wait %lu is too short", count, period, now,
                 v.wait_ns);
    copy = atomic_load(&st);
    cr_assert_eq(take(&copy, &lim, now + v.wait_ns, min, min), min,
                 "%lu/%lu at %lu: wait %lu is too long", count, period, now,
                 v.wait_ns);
}

Test(gcra, tells_the_wait_to_the_nanosecond)
{
    struct rl_limit lim = bucket(5, SEC, 0);
    rl_word st = 0;
    struct rl_verdict v;
    uint64_t now = 3 * SEC;
    unsigned i;

    take(&st, &lim, now, 5, 5);
    v = rl_token_bucket.take(&st, &lim, now, 1, 1, 0);
    cr_assert_eq(v.granted, 0);
    cr_assert_eq(v.wait_ns, 200 * MS);
    v = rl_token_bucket.take(&st, &lim, now, 2, 2, 0);
    cr_assert_eq(v.wait_ns, 400 * MS);
    v = rl_token_bucket.take(&st, &lim, now + 1, 1, 1, 0);
    cr_assert_eq(v.wait_ns, 200 * MS - 1);

    srand(42);
    for (i = 0; i < 300; i++) {
        now = ((uint64_t)rand() << 20) ^ (uint64_t)rand();
        check_wait_is_exact(5, SEC, 0, now, 1);
        check_wait_is_exact(3, SEC, 0, now, 2);
        check_wait_is_exact(7, MS, 0, now, 1);
        check_wait_is_exact(7000, SEC, 0, now, 3);
        check_wait_is_exact(1, HOUR, 0, now, 1);
        check_wait_is_exact(1000000, SEC, 0, now, 17);
        check_wait_is_exact(10ull << 30, SEC, 1 << 20, now, 4096);
    }
}

/* The tick count is floor(now * N * S / period) exactly, even where the
 * rounded-up reciprocal it starts from lands one tick high: at 999999999/s
 * (S = 1) that happens at now = 26000000001, a nanosecond before the
 * token is due. */
Test(gcra, counts_ticks_exactly_where_the_reciprocal_rounds_high)
{
    check_wait_is_exact(999999999, SEC, 1, 26000000001ull - 1, 1);
}

Test(gcra, serves_reservations_in_order)
{
    struct rl_limit lim = bucket(5, SEC, 0);
    rl_word st = 0;
    struct rl_verdict v;
    uint64_t now = 10 * SEC;
    unsigned i;

    take(&st, &lim, now, 5, 5);
    for (i = 1; i <= 5; i++) {
        v = rl_token_bucket.take(&st, &lim, now, 1, 1, 10 * SEC);
        cr_assert_eq(v.granted, 1);
        cr_assert_eq(v.wait_ns, i * 200 * MS);
    }
    /* A later caller queues behind them: a cost of 3 goes when the third
     * token after the fifth reservation's has come, at 1.6 s. */
    v = rl_token_bucket.take(&st, &lim, now + 100 * MS, 3, 1, 10 * SEC);
    cr_assert_eq(v.granted, 3);
    cr_assert_eq(v.wait_ns, 1600 * MS - 100 * MS);
    /* Nothing is free until the next token after it, at 1.8 s. */
    cr_assert_eq(take1(&st, &lim, now + 1800 * MS - 1), 0);
    cr_assert_eq(take1(&st, &lim, now + 1800 * MS), 1);
}

Test(gcra, refuses_a_reservation_longer_than_max_wait)
{
    struct rl_limit lim = bucket(5, SEC, 0);
    rl_word st = 0, before;
    struct rl_verdict v;

    take(&st, &lim, SEC, 5, 5);
    before = atomic_load(&st);
    v = rl_token_bucket.take(&st, &lim, SEC, 2, 1, 399 * MS);
    cr_assert_eq(v.granted, 0);
    cr_assert_eq(v.wait_ns, 200 * MS, "denied: the wait for min");
    cr_assert_eq(atomic_load(&st), before, "a denial changes nothing");
    v = rl_token_bucket.take(&st, &lim, SEC, 2, 1, 400 * MS);
    cr_assert_eq(v.granted, 2);
    cr_assert_eq(v.wait_ns, 400 * MS);
}

Test(gcra, never_grants_more_than_the_burst_in_one_call)
{
    struct rl_limit lim = bucket(5, SEC, 4);
    rl_word st = 0;
    struct rl_verdict v;

    v = rl_token_bucket.take(&st, &lim, SEC, 5, 5, HOUR);
    cr_assert_eq(v.granted, 0);
    cr_assert_eq(v.wait_ns, UINT64_MAX);
    v = rl_token_bucket.take(&st, &lim, SEC, 9, 1, HOUR);
    cr_assert_eq(v.granted, 4);
    cr_assert_eq(v.wait_ns, 0);
    v = rl_token_bucket.take(&st, &lim, SEC, 9, 1, HOUR);
    cr_assert_eq(v.granted, 4, "a reservation is capped at the burst");
    cr_assert_eq(v.wait_ns, 800 * MS);
}

Test(gcra, refund_gives_back_what_was_taken_and_no_more)
{
    struct rl_limit lim = bucket(5, SEC, 0);
    rl_word st = 0;
    struct rl_verdict v;

    v = rl_token_bucket.take(&st, &lim, SEC, 3, 3, 0);
    cr_assert_eq(rl_token_bucket.available(&st, &lim, SEC), 2);
    rl_token_bucket.refund(&st, &lim, SEC, &v, 2);
    cr_assert_eq(rl_token_bucket.available(&st, &lim, SEC), 4);
    rl_token_bucket.refund(&st, &lim, SEC, &v, 99);
    cr_assert_eq(rl_token_bucket.available(&st, &lim, SEC), 5,
                 "never more than a full bucket");
    rl_token_bucket.refund(&st, &lim, SEC, &v, 3);
    cr_assert_eq(rl_token_bucket.available(&st, &lim, SEC), 5);
    cr_assert_eq(take(&st, &lim, SEC, 9, 1), 5);
}

/* The case of the report: A takes, B reserves the next turn, A gives
 * back, C asks. Taking A's units off the TAT would hand B's turn to C as
 * well: two at once with a burst of one. */
Test(gcra, a_give_back_after_a_later_reservation_is_lost_not_handed_on)
{
    struct rl_limit lim = bucket(1, SEC, 0);
    rl_word st = 0;
    struct rl_verdict a, b, c;
    uint64_t t = 10 * SEC;

    a = rl_token_bucket.take(&st, &lim, t, 1, 1, HOUR);
    cr_assert_eq(a.granted, 1);
    cr_assert_eq(a.wait_ns, 0);
    b = rl_token_bucket.take(&st, &lim, t, 1, 1, HOUR);
    cr_assert_eq(b.granted, 1);
    cr_assert_eq(b.wait_ns, SEC, "B's turn is a second on");
    rl_token_bucket.refund(&st, &lim, t, &a, 1);
    cr_assert_eq(a.granted, 0, "A no longer holds it");
    c = rl_token_bucket.take(&st, &lim, t, 1, 1, 0);
    cr_assert_eq(c.granted, 0, "C may not go now");
    c = rl_token_bucket.take(&st, &lim, t, 1, 1, HOUR);
    cr_assert_eq(c.granted, 1);
    cr_assert_geq(c.wait_ns, 2 * SEC, "C goes no sooner than B's turn + 1 s");
}

/* A take that found the bucket full was not charged for a grant before
 * it: giving that grant back then would make a token the bucket never
 * held. A at 0 takes the only token; at 1 s the bucket is full again and
 * B takes it; A's give-back must not let C go at 1 s too. */
Test(gcra, a_give_back_after_the_bucket_refilled_and_was_taken_is_lost)
{
    struct rl_limit lim = bucket(1, SEC, 0);
    rl_word st = 0;
    struct rl_verdict a, b;
    uint64_t t = 10 * SEC;

    a = rl_token_bucket.take(&st, &lim, t, 1, 1, 0);
    b = rl_token_bucket.take(&st, &lim, t + SEC, 1, 1, 0);
    cr_assert_eq(a.granted + b.granted, 2);
    rl_token_bucket.refund(&st, &lim, t + SEC, &a, 1);
    cr_assert_eq(take1(&st, &lim, t + SEC), 0, "B has the only token");
    cr_assert_eq(take1(&st, &lim, t + 2 * SEC), 1);
}

/* While it is the newest, a grant goes back exactly, a reservation too,
 * in parts with the same verdict; and a word that came back to a grant's
 * value (the later one given back) is that grant's again. */
Test(gcra, the_newest_grant_goes_back_exactly_in_parts)
{
    struct rl_limit lim = bucket(5, SEC, 0);
    rl_word st = 0, before;
    struct rl_verdict a, b;
    uint64_t t = 10 * SEC;

    a = rl_token_bucket.take(&st, &lim, t, 4, 4, 0);
    before = atomic_load(&st);
    b = rl_token_bucket.take(&st, &lim, t, 5, 5, HOUR);
    cr_assert_eq(b.granted, 5);
    cr_assert_eq(b.wait_ns, 800 * MS);
    rl_token_bucket.refund(&st, &lim, t, &b, 2);
    rl_token_bucket.refund(&st, &lim, t, &b, 3);
    cr_assert_eq(atomic_load(&st), before, "the reservation is undone");
    rl_token_bucket.refund(&st, &lim, t, &a, 4);
    cr_assert_eq(rl_token_bucket.available(&st, &lim, t), 5);
    rl_token_bucket.refund(&st, &lim, t, &a, 4);
    cr_assert_eq(rl_token_bucket.available(&st, &lim, t), 5);
    cr_assert_eq(take(&st, &lim, t, 9, 1), 5, "and no more than full");
}

/* Asking when units would be free takes nothing. */
Test(gcra, eta_says_when_and_changes_nothing)
{
    struct rl_limit lim = bucket(5, SEC, 0);
    rl_word st = 0, was;
    uint64_t t = 10 * SEC;

    cr_assert_eq(rl_token_bucket.eta(&st, &lim, t, 5), 0);
    cr_assert_eq(take(&st, &lim, t, 4, 4), 4);
    was = atomic_load(&st);
    cr_assert_eq(rl_token_bucket.eta(&st, &lim, t, 1), 0);
    cr_assert_eq(rl_token_bucket.eta(&st, &lim, t, 3), 400 * MS);
    cr_assert_eq(rl_token_bucket.eta(&st, &lim, t, 6), UINT64_MAX);
    cr_assert_eq(atomic_load(&st), was);
    cr_assert_eq(rl_token_bucket.take(&st, &lim, t, 3, 3, HOUR).wait_ns,
                 400 * MS, "what a reservation would wait");
}

/* Random interleavings of takes, reservations and give-backs: what went
 * obeys the bucket (burst + rate * span in every interval). */
Test(gcra, interleaved_give_backs_never_admit_more_than_the_bucket)
{
    for (uint64_t seed = 1; seed <= 40; seed++) {
        struct rl_limit lim = bucket(seed % 2 ? 1 : 5, SEC, 0);
        rl_word st = 0, *sts[1] = {&st};

        cr_assert_gt(gb_run(sts, &lim, 1, seed, 2000, 300 * MS, lim.burst), 0);
    }
}

/* Under saturation (take all there is, at irregular steps) over an hour,
 * the count admitted stays within one of an ideal bucket kept beside it in
 * exact rational arithmetic (level in units * period), at every step. When
 * the steps are too short for the bucket ever to fill up, that is also
 * within one of burst + rate * t. */
static void check_hour(uint64_t count, uint64_t period, uint64_t burst)
{
    struct rl_limit lim = bucket(count, period, burst);
    const uint64_t b = burst ? burst : count;
    rl_word st = 0;
    uint64_t t0 = 12345 * SEC + 678, t = t0, prev = t0, got = 0, model = 0;
    uint64_t x = 88172645463325252ull, step_max = HOUR / 40000, g;
    u128 level = (u128)b * period, full = level, ideal;
    /* Steps below (burst - 1) / rate never let the bucket fill up. */
    bool never_full = (u128)(b - 1) * period / count >= step_max;
    unsigned steps = 0;
    while (t - t0 <= HOUR) {
        level += (u128)count * (t - prev);
        if (level > full)
            level = full;
        g = (uint64_t)(level / period);
        level -= (u128)g * period;
        model += g;
        got += take(&st, &lim, t, UINT64_MAX, 1);
        cr_assert(got <= model + 1 && got + 1 >= model,
                  "%lu/%lu at +%lu ns: admitted %lu, ideal %lu", count, period,
                  t - t0, got, model);
        ideal = (u128)b * period + (u128)count * (t - t0);
        cr_assert((u128)got * period <= ideal + period,
                  "%lu/%lu at +%lu ns: admitted %lu", count, period, t - t0,
                  got);
        if (never_full)
            cr_assert((u128)got * period + period >= ideal,
                      "%lu/%lu at +%lu ns: admitted only %lu", count, period,
                      t - t0, got);
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        prev = t;
        t += 1 + x % step_max;
        steps++;
    }
    cr_assert(steps > 1000);
}

Test(gcra, stays_within_one_of_ideal_over_a_simulated_hour)
{
    check_hour(1, 60 * SEC, 0);
    check_hour(1, 60 * SEC, 2);
    check_hour(5, SEC, 0);
    check_hour(3, SEC, 0);
    check_hour(1000, SEC, 0);
    check_hour(7000, SEC, 0);
    check_hour(7, MS, 0);
    check_hour(7, MS, 1000);
    check_hour(1000000, SEC, 0);
    check_hour(1, HOUR, 0);
    check_hour(1, HOUR, 2);
    check_hour(10ull << 30, SEC, 1ull << 30); /* 10 GiB/s of bytes */
}

Test(gcra, refuses_what_it_cannot_count_exactly)
{
    struct rl_limit lim;

    cr_assert_eq(RL_LIMIT_EINVAL, -EINVAL);
    cr_assert_eq(RL_LIMIT_ERANGE, -ERANGE);
    cr_assert_eq(rl_limit_prepare(&lim, RL_ALGO_TOKEN_BUCKET, 0, SEC, 0),
                 -EINVAL);
    cr_assert_eq(rl_limit_prepare(&lim, RL_ALGO_TOKEN_BUCKET, 5, 0, 0),
                 -EINVAL);
    cr_assert_eq(rl_limit_prepare(&lim, 7, 5, SEC, 0), -EINVAL);
    cr_assert_eq(rl_limit_prepare(&lim, RL_ALGO_TOKEN_BUCKET, 17, 1, 0),
                 -ERANGE);
    cr_assert_eq(rl_limit_prepare(&lim, RL_ALGO_TOKEN_BUCKET, 16, 1, 0), 0);
    cr_assert_eq(
        rl_limit_prepare(&lim, RL_ALGO_TOKEN_BUCKET, 5, SEC, (1ull << 60) + 1),
        -ERANGE);
    cr_assert_eq(
        rl_limit_prepare(&lim, RL_ALGO_TOKEN_BUCKET, 1ull << 40, UINT64_MAX, 0),
        0);
    cr_assert_eq(rl_algorithm_get(RL_ALGO_TOKEN_BUCKET), &rl_token_bucket);
    cr_assert_str_eq(rl_token_bucket.name, "token_bucket");
}

/* Many threads, each feeding a `now` that is stale (an old reading) or
 * skewed (ahead or behind the shared fake clock). Whatever they pass, the
 * count admitted never exceeds burst + rate * T, T the latest now used. */
struct skew_run {
    struct rl_limit lim;
    rl_word st;
    _Atomic uint64_t clock;
    _Atomic uint64_t admitted;
    _Atomic uint64_t latest;
};

struct skew_arg {
    struct skew_run *run;
    uint64_t seed;
};

static void *skewed_worker(void *arg)
{
    struct skew_run *r = ((struct skew_arg *)arg)->run;
    uint64_t x = 0x9E3779B97F4A7C15ull * (((struct skew_arg *)arg)->seed + 1);
    uint64_t old[8] = {0}, now, seen, admitted = 0;
    unsigned i;

    for (i = 0; i < 20000; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        now = atomic_fetch_add(&r->clock, x % (3 * MS));
        old[i % 8] = now;
        switch (x >> 61) {
        case 0:
        case 1:
            now = old[(i + 1) % 8]; /* stale: read 7 turns ago */
            break;
        case 2:
            now += x % (50 * MS); /* ahead */
            break;
        case 3:
            now = now > 50 * MS ? now - x % (50 * MS) : 0; /* behind */
            break;
        default:
            break;
        }
        seen = atomic_load(&r->latest);
        while (now > seen &&
               !atomic_compare_exchange_weak(&r->latest, &seen, now))
            ;
        admitted += take(&r->st, &r->lim, now, 1 + x % 3, 1);
    }
    atomic_fetch_add(&r->admitted, admitted);
    return NULL;
}

Test(gcra, never_exceeds_burst_plus_rate_with_stale_and_skewed_clocks)
{
    static struct skew_run run;
    struct skew_arg args[8];
    pthread_t th[8];
    uint64_t admitted, latest;
    unsigned i;

    run.lim = bucket(100, SEC, 20);
    atomic_store(&run.clock, 5 * SEC);
    for (i = 0; i < 8; i++) {
        args[i] = (struct skew_arg){&run, i};
        cr_assert_eq(pthread_create(&th[i], NULL, skewed_worker, &args[i]), 0);
    }
    for (i = 0; i < 8; i++)
        pthread_join(th[i], NULL);
    admitted = atomic_load(&run.admitted);
    latest = atomic_load(&run.latest);
    cr_assert((u128)admitted * SEC <= (u128)20 * SEC + (u128)100 * latest,
              "admitted %lu by %lu ns", admitted, latest);
    /* The limiter was the bottleneck: it admitted close to the bound over
     * the span the threads covered. */
    cr_assert(admitted * SEC > 100 * (latest - 5 * SEC) / 2,
              "admitted only %lu", admitted);
}

/* 100 real threads released together on one fresh bucket, all at one
 * instant (on the real clock, a round slower than 200 ms on a loaded
 * machine would earn a sixth token): exactly 5 go, 200 times over. */
struct herd {
    pthread_barrier_t start, done;
    const struct rl_algorithm *alg;
    struct rl_limit lim;
    rl_word *st;
    _Atomic unsigned admitted;
    unsigned rounds;
};

static void *herd_worker(void *arg)
{
    struct herd *h = arg;
    unsigned r;

    for (r = 0; r < h->rounds; r++) {
        pthread_barrier_wait(&h->start);
        if (h->alg->take(h->st, &h->lim, 100 * SEC, 1, 1, 0).granted)
            atomic_fetch_add(&h->admitted, 1);
        pthread_barrier_wait(&h->done);
    }
    return NULL;
}

Test(gcra, admits_exactly_five_of_a_hundred_threads_two_hundred_times)
{
    static struct herd h;
    static rl_word st;
    pthread_t th[100];
    unsigned i, r;

    h.alg = &rl_token_bucket;
    h.lim = bucket(5, SEC, 0);
    h.st = &st;
    h.rounds = 200;
    pthread_barrier_init(&h.start, NULL, 101);
    pthread_barrier_init(&h.done, NULL, 101);
    for (i = 0; i < 100; i++)
        cr_assert_eq(pthread_create(&th[i], NULL, herd_worker, &h), 0);
    for (r = 0; r < h.rounds; r++) {
        atomic_store(&st, 0);
        atomic_store(&h.admitted, 0);
        pthread_barrier_wait(&h.start);
        pthread_barrier_wait(&h.done);
        cr_assert_eq(atomic_load(&h.admitted), 5, "round %u", r);
    }
    for (i = 0; i < 100; i++)
        pthread_join(th[i], NULL);
}

/* Four threads on one bucket, each reading a shared fake clock and taking:
 * lost updates would admit more than burst + rate * T. */
struct race {
    struct rl_limit lim;
    rl_word st;
    _Atomic uint64_t clock;
    _Atomic uint64_t admitted;
};

static void *racer(void *arg)
{
    struct race *r = arg;
    uint64_t got = 0, now;
    unsigned i;

    for (i = 0; i < 100000; i++) {
        now = atomic_fetch_add(&r->clock, 1000);
        got += take(&r->st, &r->lim, now, 1, 1);
    }
    atomic_fetch_add(&r->admitted, got);
    return NULL;
}

Test(gcra, admits_at_most_burst_plus_rate_under_contention)
{
    static struct race r;
    pthread_t th[4];
    uint64_t admitted, span;
    unsigned i;

    r.lim = bucket(100000, SEC, 10); /* one per 10 us; calls every 1 us */
    atomic_store(&r.clock, SEC);
    for (i = 0; i < 4; i++)
        cr_assert_eq(pthread_create(&th[i], NULL, racer, &r), 0);
    for (i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    admitted = atomic_load(&r.admitted);
    span = atomic_load(&r.clock) - SEC;
    cr_assert_leq(admitted, 10 + span / 10000, "admitted %lu over %lu ns",
                  admitted, span);
    cr_assert_geq(admitted, span / 10000 * 9 / 10);
}
