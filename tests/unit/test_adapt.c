/* test_adapt.c — limit/adapt.c and adapt_show.c (SPEC §14, §12): the
 * latency rule on SPEC's own example, its clamps and its sums at the
 * extremes, the backoff's doubling and its end, Retry-After winning,
 * Crawl-delay's expiry, jitter's bounds, the turn they give together,
 * the text `rlshim stat` shows, and a property test over random
 * sequences. Time is stepped by hand. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

#include "limit/adapt.h"

#define US 1000ull
#define MS 1000000ull
#define SEC 1000000000ull
#define DAY (86400ull * SEC)
#define T0 (1000ull * SEC) /* a clock well past boot, a whole ms */

/* request = 10/s (a 100 ms floor), adapt_factor = 2, max_interval = 60s,
 * max_retry_after = 10min, max_crawl_delay = 30s. */
static struct rl_adapt_conf conf(void)
{
    return (struct rl_adapt_conf){100 * MS, 60 * SEC, 600 * SEC, 30 * SEC,
                                  2000};
}

Test(adapt, state_is_four_words_and_zero_means_nothing_learned)
{
    struct rl_adapt a = {0};
    struct rl_adapt_conf c = conf();
    enum rl_adapt_why why = RL_ADAPT_LATENCY;

    cr_assert_eq(sizeof a, 4 * sizeof(uint64_t));
    cr_assert_eq(rl_adapt_turn(&a, &c, T0, T0 + 7, &why), T0 + 7);
    cr_assert_eq(why, RL_ADAPT_RATE);
    cr_assert_eq(rl_adapt_latency_interval(&a, &c), 0);
    cr_assert_eq(rl_adapt_interval(&a, &c, T0), 100 * MS);
}

/* SPEC §14: a server that slows from 50 ms to 500 ms gets requests about
 * 1 s apart (factor 2) from the next response on, and faster again by
 * halves as it recovers, down to the floor. */
Test(adapt, spec_example_rises_at_once_and_falls_by_halves)
{
    struct rl_adapt a = {0};
    struct rl_adapt_conf c = conf();
    enum rl_adapt_why why;

    /* 50 ms x 2 = 100 ms: the floor, so nothing to write. */
    for (int i = 0; i < 5; i++)
        cr_assert_not(rl_adapt_latency(&a, &c, 50 * MS));
    cr_assert_eq(a.latency, 0);

    cr_assert(rl_adapt_latency(&a, &c, 500 * MS));
    cr_assert_eq(rl_adapt_latency_interval(&a, &c), 1 * SEC);
    cr_assert_eq(rl_adapt_latency_response(&a), 500 * MS);
    /* The next request: a second after the last, though the limit's own
     * turn comes at 100 ms. */
    rl_adapt_went(&a, T0);
    cr_assert_eq(rl_adapt_turn(&a, &c, T0, T0 + 100 * MS, &why), T0 + SEC);
    cr_assert_eq(why, RL_ADAPT_LATENCY);
    /* Still slow: the interval stays, and no write. */
    cr_assert_not(rl_adapt_latency(&a, &c, 500 * MS));

    /* Recovered to 50 ms: halfway to the 100 ms target each response. */
    uint64_t want[] = {550 * MS, 325 * MS, 212500 * US, 156250 * US,
                       128125 * US};
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        cr_assert(rl_adapt_latency(&a, &c, 50 * MS));
        cr_assert_eq(rl_adapt_latency_interval(&a, &c), want[i], "step %zu", i);
    }
    /* Then on down to the floor, where the limit alone paces again. */
    int steps = 0;
    uint64_t prev = rl_adapt_latency_interval(&a, &c);
    while (a.latency != 0 && steps < 64) {
        cr_assert(rl_adapt_latency(&a, &c, 50 * MS));
        uint64_t now_i = rl_adapt_latency_interval(&a, &c);
        cr_assert(now_i < prev || now_i == 0);
        prev = now_i;
        steps++;
    }
    cr_assert_eq(a.latency, 0);
    cr_assert_lt(steps, 30);
    cr_assert_eq(rl_adapt_turn(&a, &c, T0, T0 + 100 * MS, &why), T0 + 100 * MS);
    cr_assert_eq(why, RL_ADAPT_RATE);
}

Test(adapt, a_fractional_factor_scales_the_target)
{
    struct rl_adapt a = {0};
    struct rl_adapt_conf c = conf();
    c.factor_milli = 1500;
    cr_assert(rl_adapt_latency(&a, &c, 200 * MS));
    cr_assert_eq(rl_adapt_latency_interval(&a, &c), 300 * MS);
}

Test(adapt, the_interval_stays_within_floor_and_max_interval)
{
    struct rl_adapt a = {0};
    struct rl_adapt_conf c = conf();

    /* Fast answers never bring it under the floor. */
    cr_assert_not(rl_adapt_latency(&a, &c, 1));
    cr_assert_not(rl_adapt_latency(&a, &c, 0));
    cr_assert_eq(a.latency, 0);
    /* A very slow one stops at max_interval; another is no write. */
    cr_assert(rl_adapt_latency(&a, &c, 3600 * SEC));
    cr_assert_eq(rl_adapt_latency_interval(&a, &c), 60 * SEC);
    cr_assert_not(rl_adapt_latency(&a, &c, 120 * SEC));
    cr_assert_eq(rl_adapt_latency_interval(&a, &c), 60 * SEC);

    /* max_interval below the floor: the floor wins, nothing adapts. */
    struct rl_adapt b = {0};
    c.max_interval_ns = 10 * MS;
    cr_assert_not(rl_adapt_latency(&b, &c, 10 * SEC));
    cr_assert_eq(b.latency, 0);
    /* A word written under a wider config is read within this one. */
    c.max_interval_ns = 2 * SEC;
    cr_assert_eq(rl_adapt_latency_interval(&a, &c), 2 * SEC);
    c.floor_ns = 90 * SEC;
    cr_assert_eq(rl_adapt_latency_interval(&a, &c), 90 * SEC);
}

Test(adapt, sums_at_the_extremes_saturate_and_never_wrap)
{
    struct rl_adapt a = {0};
    struct rl_adapt_conf c = {1, UINT64_MAX, UINT64_MAX, UINT64_MAX,
                              UINT32_MAX};
    enum rl_adapt_why why;

    /* factor x latency far past 2^64: the interval the word can hold. */
    cr_assert(rl_adapt_latency(&a, &c, UINT64_MAX));
    uint64_t top = 0xffffffffull * US;
    cr_assert_eq(rl_adapt_latency_interval(&a, &c), top);
    cr_assert_not(rl_adapt_latency(&a, &c, UINT64_MAX));
    /* (old + target) / 2 with both near the top. */
    cr_assert_not(rl_adapt_latency(&a, &c, UINT64_MAX / 2));
    cr_assert_eq(rl_adapt_latency_interval(&a, &c), top);

    /* 4 x 2^62 is 2^64: a product that wrapped would read as 0. */
    struct rl_adapt e = {0};
    struct rl_adapt_conf c60 = conf();
    c60.factor_milli = 4000;
    cr_assert(rl_adapt_latency(&e, &c60, 1ull << 62));
    cr_assert_eq(rl_adapt_latency_interval(&e, &c60), 60 * SEC);

    /* last + interval past 2^64: the far end, not the past. */
    a.last = UINT64_MAX - 5;
    cr_assert_eq(rl_adapt_turn(&a, &c, T0, T0, &why), UINT64_MAX);
    cr_assert_eq(why, RL_ADAPT_LATENCY);

    /* A Retry-After of forever, and an error's doubling, at a late now. */
    struct rl_adapt b = {0};
    uint64_t late = UINT64_MAX - SEC;
    cr_assert(rl_adapt_retry_after(&b, &c, late, UINT64_MAX));
    cr_assert_geq(rl_adapt_pause_until(&b, 0, &why), T0);
    cr_assert_eq(why, RL_ADAPT_RETRY_AFTER);
    struct rl_adapt d = {0};
    for (int i = 0; i < 300; i++)
        rl_adapt_error(&d, &c, T0, 503);
    cr_assert_gt(rl_adapt_pause_until(&d, T0, &why), T0);
    cr_assert_eq(why, RL_ADAPT_BACKOFF);
    cr_assert_eq(rl_adapt_errors(&d, NULL), 255);
    /* Jitter on the last representable turn stays there. */
    cr_assert_eq(rl_adapt_jitter(UINT64_MAX - 1, UINT64_MAX, 100, UINT64_MAX),
                 UINT64_MAX);
    cr_assert_eq(rl_adapt_jitter(5, UINT64_MAX, UINT32_MAX, UINT64_MAX),
                 UINT64_MAX);
}

/* The pause an error sets, as `now` + wait. */
static uint64_t paused_for(const struct rl_adapt *a, uint64_t now)
{
    return rl_adapt_pause_until(a, now, NULL) - now;
}

Test(adapt, errors_in_a_row_double_the_pause_up_to_the_cap)
{
    struct rl_adapt a = {0};
    struct rl_adapt_conf c = conf();
    c.floor_ns = 1 * SEC;
    c.max_retry_after_ns = 10 * SEC;
    uint64_t want[] = {1, 2, 4, 8, 10, 10, 10};
    uint32_t cause;

    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        cr_assert(rl_adapt_error(&a, &c, T0, 503));
        cr_assert_eq(paused_for(&a, T0), want[i] * SEC, "error %zu", i + 1);
        cr_assert_eq(rl_adapt_errors(&a, &cause), i + 1);
        cr_assert_eq(cause, 503);
    }
    enum rl_adapt_why why;
    cr_assert_eq(rl_adapt_turn(&a, &c, T0, T0 + SEC, &why), T0 + 10 * SEC);
    cr_assert_eq(why, RL_ADAPT_BACKOFF);
    /* Over at its end. */
    cr_assert_eq(rl_adapt_turn(&a, &c, T0 + 10 * SEC, T0 + 10 * SEC, &why),
                 T0 + 10 * SEC);
    cr_assert_eq(why, RL_ADAPT_RATE);
}

Test(adapt, the_first_pause_is_the_destinations_interval_now)
{
    struct rl_adapt a = {0};
    struct rl_adapt_conf c = conf();
    rl_adapt_latency(&a, &c, 1 * SEC); /* interval 2 s */
    rl_adapt_error(&a, &c, T0, RL_ADAPT_CAUSE_RESET);
    cr_assert_eq(paused_for(&a, T0), 2 * SEC);
    rl_adapt_crawl_delay(&a, &c, T0, 5 * SEC);
    rl_adapt_error(&a, &c, T0, RL_ADAPT_CAUSE_TIMEOUT);
    cr_assert_eq(paused_for(&a, T0), 10 * SEC); /* 5 s doubled once */
    uint32_t cause;
    cr_assert_eq(rl_adapt_errors(&a, &cause), 2);
    cr_assert_eq(cause, RL_ADAPT_CAUSE_TIMEOUT);
}

Test(adapt, a_backoff_pause_only_moves_later)
{
    struct rl_adapt a = {0};
    struct rl_adapt_conf c = conf();
    c.floor_ns = 1 * SEC;
    for (int i = 0; i < 4; i++)
        rl_adapt_error(&a, &c, T0, 500); /* 8 s: ends T0 + 8 s */
    /* Another error under a lower cap would end sooner: the running
     * pause is kept, the error counted. */
    c.max_retry_after_ns = 1 * SEC;
    cr_assert(rl_adapt_error(&a, &c, T0 + 1 * SEC, 500));
    cr_assert_eq(rl_adapt_pause_until(&a, T0, NULL), T0 + 8 * SEC);
    cr_assert_eq(rl_adapt_errors(&a, NULL), 5);
}

Test(adapt, a_success_ends_the_backoff)
{
    struct rl_adapt a = {0};
    struct rl_adapt_conf c = conf();
    c.floor_ns = 1 * SEC;
    for (int i = 0; i < 3; i++)
        rl_adapt_error(&a, &c, T0, 429);
    cr_assert_eq(paused_for(&a, T0), 4 * SEC);

    cr_assert(rl_adapt_success(&a));
    cr_assert_eq(rl_adapt_errors(&a, NULL), 0);
    cr_assert_eq(paused_for(&a, T0), 0);
    /* Nothing to end: no write. */
    cr_assert_not(rl_adapt_success(&a));
    /* The doubling starts again from one interval. */
    rl_adapt_error(&a, &c, T0 + SEC, 429);
    cr_assert_eq(paused_for(&a, T0 + SEC), 1 * SEC);
}

Test(adapt, a_retry_after_always_wins)
{
    struct rl_adapt a = {0};
    struct rl_adapt_conf c = conf();
    enum rl_adapt_why why;
    c.floor_ns = 1 * SEC;
    for (int i = 0; i < 4; i++)
        rl_adapt_error(&a, &c, T0, 503); /* backoff: 8 s */

    /* The server's 3 s beats the guessed 8 s, though it is shorter. */
    cr_assert(rl_adapt_retry_after(&a, &c, T0, 3 * SEC));
    cr_assert_eq(rl_adapt_pause_until(&a, T0, &why), T0 + 3 * SEC);
    cr_assert_eq(why, RL_ADAPT_RETRY_AFTER);
    /* An error without one while it runs is counted, the pause left. */
    cr_assert(rl_adapt_error(&a, &c, T0 + SEC, 503));
    cr_assert_eq(rl_adapt_errors(&a, NULL), 5);
    cr_assert_eq(rl_adapt_pause_until(&a, T0, &why), T0 + 3 * SEC);
    cr_assert_eq(why, RL_ADAPT_RETRY_AFTER);
    /* A success leaves the server's pause running. */
    cr_assert(rl_adapt_success(&a));
    cr_assert_eq(rl_adapt_pause_until(&a, T0, &why), T0 + 3 * SEC);
    cr_assert_eq(why, RL_ADAPT_RETRY_AFTER);
    /* A shorter one read later does not cut a running one... */
    cr_assert_not(rl_adapt_retry_after(&a, &c, T0 + SEC, 1 * SEC));
    cr_assert_eq(rl_adapt_pause_until(&a, T0, NULL), T0 + 3 * SEC);
    /* ...a longer one moves it, and the cap cuts it. */
    cr_assert(rl_adapt_retry_after(&a, &c, T0, 3600 * SEC));
    cr_assert_eq(rl_adapt_pause_until(&a, T0, NULL), T0 + 600 * SEC);
    /* Once it is over, errors pause by the backoff again. */
    rl_adapt_error(&a, &c, T0 + 700 * SEC, 503);
    cr_assert_eq(rl_adapt_pause_until(&a, T0 + 700 * SEC, &why),
                 T0 + 701 * SEC);
    cr_assert_eq(why, RL_ADAPT_BACKOFF);
}

Test(adapt, a_retry_after_of_zero_ends_a_backoff_pause)
{
    struct rl_adapt a = {0};
    struct rl_adapt_conf c = conf();
    uint64_t now = T0 + 123; /* not a whole ms */
    rl_adapt_error(&a, &c, now, 503);
    cr_assert_gt(paused_for(&a, now), 0);
    cr_assert(rl_adapt_retry_after(&a, &c, now, 0));
    cr_assert_eq(paused_for(&a, now), 0);
    cr_assert_eq(rl_adapt_errors(&a, NULL), 1); /* not a success */
}

Test(adapt, a_crawl_delay_spaces_requests_for_a_day)
{
    struct rl_adapt a = {0};
    struct rl_adapt_conf c = conf();
    enum rl_adapt_why why;

    cr_assert(rl_adapt_crawl_delay(&a, &c, T0, 5 * SEC));
    cr_assert_eq(rl_adapt_crawl_delay_now(&a, &c, T0), 5 * SEC);
    rl_adapt_went(&a, T0);
    cr_assert_eq(rl_adapt_turn(&a, &c, T0, T0 + 100 * MS, &why), T0 + 5 * SEC);
    cr_assert_eq(why, RL_ADAPT_CRAWL_DELAY);
    cr_assert_eq(rl_adapt_interval(&a, &c, T0), 5 * SEC);

    /* Still there a moment before the day is out; gone after. */
    uint64_t later = T0 + DAY - SEC;
    cr_assert_eq(rl_adapt_crawl_delay_now(&a, &c, later), 5 * SEC);
    cr_assert_eq(rl_adapt_crawl_delay_now(&a, &c, T0 + DAY), 0);
    a.last = T0 + DAY;
    cr_assert_eq(rl_adapt_turn(&a, &c, T0 + DAY, T0 + DAY + 100 * MS, &why),
                 T0 + DAY + 100 * MS);
    cr_assert_eq(why, RL_ADAPT_RATE);
}

Test(adapt, robots_read_again_replaces_the_delay_and_the_cap_cuts_it)
{
    struct rl_adapt a = {0};
    struct rl_adapt_conf c = conf();
    rl_adapt_crawl_delay(&a, &c, T0, 3600 * SEC);
    cr_assert_eq(rl_adapt_crawl_delay_now(&a, &c, T0), 30 * SEC);
    /* Read again an hour on: 2 s, for a day from then. */
    cr_assert(rl_adapt_crawl_delay(&a, &c, T0 + 3600 * SEC, 2 * SEC));
    cr_assert_eq(rl_adapt_crawl_delay_now(&a, &c, T0 + DAY + 60 * SEC),
                 2 * SEC);
    /* Read again without a Crawl-delay: none. */
    cr_assert(rl_adapt_crawl_delay(&a, &c, T0 + 7200 * SEC, 0));
    cr_assert_eq(a.crawl, 0);
    cr_assert_not(rl_adapt_crawl_delay(&a, &c, T0 + 7300 * SEC, 0));
    /* max_crawl_delay = 0 (ignore): nothing is kept. */
    c.max_crawl_delay_ns = 0;
    cr_assert_not(rl_adapt_crawl_delay(&a, &c, T0, 5 * SEC));
    cr_assert_eq(rl_adapt_crawl_delay_now(&a, &c, T0), 0);
}

Test(adapt, the_larger_of_latency_and_crawl_delay_spaces_and_is_named)
{
    struct rl_adapt a = {0};
    struct rl_adapt_conf c = conf();
    enum rl_adapt_why why;
    rl_adapt_latency(&a, &c, 1 * SEC); /* 2 s */
    rl_adapt_crawl_delay(&a, &c, T0, 3 * SEC);
    rl_adapt_went(&a, T0);
    cr_assert_eq(rl_adapt_turn(&a, &c, T0, T0, &why), T0 + 3 * SEC);
    cr_assert_eq(why, RL_ADAPT_CRAWL_DELAY);
    rl_adapt_latency(&a, &c, 4 * SEC); /* 8 s */
    cr_assert_eq(rl_adapt_turn(&a, &c, T0, T0, &why), T0 + 8 * SEC);
    cr_assert_eq(why, RL_ADAPT_LATENCY);
    /* The limit's own turn later still: it decides, no reason. */
    cr_assert_eq(rl_adapt_turn(&a, &c, T0, T0 + 9 * SEC, &why), T0 + 9 * SEC);
    cr_assert_eq(why, RL_ADAPT_RATE);
    /* A pause later than the spacing holds it, and says so. */
    rl_adapt_retry_after(&a, &c, T0, 20 * SEC);
    cr_assert_eq(rl_adapt_turn(&a, &c, T0, T0, &why), T0 + 20 * SEC);
    cr_assert_eq(why, RL_ADAPT_RETRY_AFTER);
    cr_assert_str_eq(rl_adapt_reason(why), "retry_after");
    cr_assert_str_eq(rl_adapt_reason(RL_ADAPT_LATENCY), "latency");
    cr_assert_str_eq(rl_adapt_reason(RL_ADAPT_CRAWL_DELAY), "crawl_delay");
    cr_assert_str_eq(rl_adapt_reason(RL_ADAPT_BACKOFF), "backoff");
    cr_assert_null(rl_adapt_reason(RL_ADAPT_RATE));
}

Test(adapt, the_last_turn_only_moves_later)
{
    struct rl_adapt a = {0};
    cr_assert(rl_adapt_went(&a, T0 + SEC));
    cr_assert_not(rl_adapt_went(&a, T0));
    cr_assert_not(rl_adapt_went(&a, T0 + SEC));
    cr_assert_eq(a.last, T0 + SEC);
}

/* A fixed sequence of 64-bit words (splitmix64). */
static uint64_t seed_state;
static uint64_t next(void)
{
    uint64_t z = (seed_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

Test(adapt, jitter_is_within_its_share_of_the_interval_and_never_earlier)
{
    seed_state = 33;
    uint64_t turn = T0, interval = 1 * SEC, span = 200 * MS;
    uint64_t lo = UINT64_MAX, hi = 0;
    unsigned in_halves[2] = {0, 0};

    for (int i = 0; i < 100000; i++) {
        uint64_t j = rl_adapt_jitter(turn, interval, 20, next());
        cr_assert_geq(j, turn);
        cr_assert_leq(j, turn + span);
        lo = j < lo ? j : lo;
        hi = j > hi ? j : hi;
        in_halves[j - turn >= span / 2]++;
    }
    /* Spread over the whole span, about evenly. */
    cr_assert_lt(lo - turn, span / 100);
    cr_assert_gt(hi - turn, span - span / 100);
    cr_assert_gt(in_halves[0], 48000);
    cr_assert_gt(in_halves[1], 48000);
    /* The ends of the random word are the ends of the span. */
    cr_assert_eq(rl_adapt_jitter(turn, interval, 20, 0), turn);
    cr_assert_eq(rl_adapt_jitter(turn, interval, 20, UINT64_MAX), turn + span);
    /* No jitter, or no interval: the turn as it was. */
    cr_assert_eq(rl_adapt_jitter(turn, interval, 0, UINT64_MAX), turn);
    cr_assert_eq(rl_adapt_jitter(turn, 0, 20, UINT64_MAX), turn);
}

static const char *shown(enum rl_adapt_why why, uint64_t figure,
                         uint32_t factor, uint32_t errors, uint32_t cause)
{
    static char buf[64];
    struct rl_adapt_shown s = {why, 0, figure, factor, errors, cause};
    uint64_t n = rl_adapt_format(&s, buf, sizeof buf);
    cr_assert_eq(n, strlen(buf));
    return buf;
}

Test(adapt, the_text_says_what_set_the_pace)
{
    cr_assert_str_eq(shown(RL_ADAPT_RATE, 0, 0, 0, 0), "rate");
    cr_assert_str_eq(shown(RL_ADAPT_LATENCY, 310 * MS, 2000, 0, 0),
                     "latency 2 x 310 ms");
    cr_assert_str_eq(shown(RL_ADAPT_LATENCY, 1250 * MS, 1500, 0, 0),
                     "latency 1.5 x 1.25 s");
    cr_assert_str_eq(shown(RL_ADAPT_LATENCY, 42 * US, 250, 0, 0),
                     "latency 0.25 x 42 us");
    cr_assert_str_eq(shown(RL_ADAPT_LATENCY, 800, 2050, 0, 0),
                     "latency 2.05 x 800 ns");
    cr_assert_str_eq(shown(RL_ADAPT_CRAWL_DELAY, 5 * SEC, 0, 0, 0),
                     "crawl-delay 5 s");
    cr_assert_str_eq(shown(RL_ADAPT_BACKOFF, SEC, 0, 3, 503),
                     "backoff 503 x 3");
    cr_assert_str_eq(shown(RL_ADAPT_BACKOFF, SEC, 0, 1, RL_ADAPT_CAUSE_RESET),
                     "backoff reset x 1");
    cr_assert_str_eq(shown(RL_ADAPT_BACKOFF, SEC, 0, 2, RL_ADAPT_CAUSE_TIMEOUT),
                     "backoff timeout x 2");
    cr_assert_str_eq(shown(RL_ADAPT_RETRY_AFTER, 30 * SEC, 0, 0, 0),
                     "retry-after 30 s");
    cr_assert_str_eq(shown(RL_ADAPT_CRAWL_DELAY, UINT64_MAX, 0, 0, 0),
                     "crawl-delay 18446744073.709 s");
}

Test(adapt, the_text_is_cut_to_the_buffer_and_its_length_told)
{
    struct rl_adapt_shown s = {RL_ADAPT_LATENCY, 0, 310 * MS, 2000, 0, 0};
    const char *full = "latency 2 x 310 ms";
    char buf[32];

    for (uint64_t cap = 1; cap <= strlen(full) + 2; cap++) {
        memset(buf, '#', sizeof buf);
        cr_assert_eq(rl_adapt_format(&s, buf, cap), strlen(full));
        uint64_t kept = cap - 1 < strlen(full) ? cap - 1 : strlen(full);
        cr_assert_eq(strlen(buf), kept, "cap %llu", (unsigned long long)cap);
        cr_assert_eq(memcmp(buf, full, kept), 0);
        /* Nothing written past the cap. */
        cr_assert_eq(buf[cap], '#', "cap %llu", (unsigned long long)cap);
    }
    /* cap 0: the buffer is not touched (NULL is fine). */
    cr_assert_eq(rl_adapt_format(&s, NULL, 0), strlen(full));
}

Test(adapt, shown_from_the_state_at_now)
{
    struct rl_adapt a = {0};
    struct rl_adapt_conf c = conf();
    struct rl_adapt_shown s;
    char buf[64];

    rl_adapt_show(&a, &c, T0, &s);
    cr_assert_eq(s.why, RL_ADAPT_RATE);
    cr_assert_eq(s.interval_ns, 100 * MS);

    rl_adapt_latency(&a, &c, 310 * MS);
    rl_adapt_show(&a, &c, T0, &s);
    rl_adapt_format(&s, buf, sizeof buf);
    cr_assert_str_eq(buf, "latency 2 x 310 ms");
    cr_assert_eq(s.interval_ns, 620 * MS);

    rl_adapt_crawl_delay(&a, &c, T0, 5 * SEC);
    rl_adapt_show(&a, &c, T0, &s);
    rl_adapt_format(&s, buf, sizeof buf);
    cr_assert_str_eq(buf, "crawl-delay 5 s");
    cr_assert_eq(s.interval_ns, 5 * SEC);

    for (int i = 0; i < 3; i++)
        rl_adapt_error(&a, &c, T0, 503);
    rl_adapt_show(&a, &c, T0, &s);
    rl_adapt_format(&s, buf, sizeof buf);
    cr_assert_str_eq(buf, "backoff 503 x 3");
    cr_assert_eq(s.figure_ns, 20 * SEC); /* 5 s doubled twice */

    rl_adapt_retry_after(&a, &c, T0, 30 * SEC);
    rl_adapt_show(&a, &c, T0 + 10 * SEC, &s);
    rl_adapt_format(&s, buf, sizeof buf);
    cr_assert_str_eq(buf, "retry-after 20 s");
}

/* Random sequences of everything a destination can meet, at random
 * configs including the extremes: a turn given is never before the
 * limit's, nor before a pause in force or the spacing from the last
 * turn; the latency interval is 0 or within [floor, ceiling]; jitter
 * never moves a turn earlier; a pause never runs past its cap. */
static uint64_t pick(void)
{
    static const uint64_t edge[] = {0, 1, 999, MS, SEC, 60 * SEC, UINT64_MAX};
    uint64_t r = next();
    switch (r % 5) {
    case 0:
        return edge[(r >> 8) % (sizeof edge / sizeof *edge)];
    case 1:
        return next() % (10 * SEC);
    case 2:
        return next() % (1000 * MS);
    case 3: /* the top, its half, and 1 */
        return UINT64_MAX - next() % 3 * (UINT64_MAX / 2);
    default:
        return next();
    }
}

Test(adapt, property_turns_never_before_the_limit_and_interval_in_bounds)
{
    unsigned held[RL_ADAPT_RETRY_AFTER + 1] = {0};
    seed_state = 2026;
    for (int round = 0; round < 400; round++) {
        struct rl_adapt a = {0};
        struct rl_adapt_conf c = {
            pick(), pick(), pick(), pick(),
            (uint32_t)(next() % 4 == 0 ? next() : next() % 5000)};
        uint64_t ceil =
            c.max_interval_ns > c.floor_ns ? c.max_interval_ns : c.floor_ns;
        uint64_t now = next() % 4 == 0 ? pick() : T0 + next() % (1000 * SEC);
        for (int op = 0; op < 400; op++) {
            if (next() % 3 == 0 && now < UINT64_MAX - 10 * SEC)
                now += next() % (2 * SEC);
            struct rl_adapt before = a;
            switch (next() % 7) {
            case 0:
            case 1:
                rl_adapt_latency(&a, &c, pick());
                break;
            case 2:
                rl_adapt_error(&a, &c, now, (uint32_t)(next() % 700));
                break;
            case 3:
                rl_adapt_retry_after(&a, &c, now, pick());
                break;
            case 4:
                rl_adapt_success(&a);
                break;
            case 5:
                rl_adapt_crawl_delay(&a, &c, now, pick());
                break;
            default:
                break;
            }
            if (a.pause != before.pause) {
                /* A pause set now ends within its cap (the word's ms). */
                uint64_t end = rl_adapt_pause_until(&a, now, NULL);
                uint64_t old_end = rl_adapt_pause_until(&before, now, NULL);
                if (end > now && end > old_end)
                    cr_assert_leq(end - now,
                                  c.max_retry_after_ns > UINT64_MAX - MS
                                      ? UINT64_MAX
                                      : c.max_retry_after_ns + MS,
                                  "round %d op %d", round, op);
            }
            uint64_t li = rl_adapt_latency_interval(&a, &c);
            cr_assert(li == 0 || (li >= c.floor_ns && li <= ceil),
                      "round %d op %d: %llu", round, op,
                      (unsigned long long)li);
            cr_assert_geq(rl_adapt_interval(&a, &c, now), c.floor_ns);

            uint64_t limit_turn = next() % 2 ? now : now + next() % (5 * SEC);
            if (limit_turn < now)
                limit_turn = now;
            enum rl_adapt_why why;
            uint64_t turn = rl_adapt_turn(&a, &c, now, limit_turn, &why);
            cr_assert_geq(turn, limit_turn, "round %d op %d", round, op);
            cr_assert_geq(turn, rl_adapt_pause_until(&a, now, NULL));
            uint64_t space = li > rl_adapt_crawl_delay_now(&a, &c, now)
                                 ? li
                                 : rl_adapt_crawl_delay_now(&a, &c, now);
            if (a.last != 0 && space > 0)
                cr_assert_geq(turn, a.last > UINT64_MAX - space
                                        ? UINT64_MAX
                                        : a.last + space);
            cr_assert_eq(why == RL_ADAPT_RATE, turn == limit_turn,
                         "round %d op %d", round, op);
            held[why]++;
            uint64_t j = rl_adapt_jitter(turn, rl_adapt_interval(&a, &c, now),
                                         (uint32_t)(next() % 101), next());
            cr_assert_geq(j, turn);
            if (next() % 2)
                rl_adapt_went(&a, j);
        }
    }
    /* Every kind of holding was met, not only the limit's turn. */
    for (int w = RL_ADAPT_LATENCY; w <= RL_ADAPT_RETRY_AFTER; w++)
        cr_assert_gt(held[w], 200, "%s: %u", rl_adapt_reason(w), held[w]);
}
