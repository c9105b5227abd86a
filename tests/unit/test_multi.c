/* test_multi.c — several limits on one budget (`connect = 5/s, 100/min`):
 * all must allow, the others are refunded when one denies. Fake clock. */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "giveback_sim.h"
#include "limit/limit.h"

#define MS 1000000ull
#define SEC 1000000000ull

/* Up to four limits and their state words. */
struct budget {
    struct rl_limit lims[4];
    rl_word *states[4];
    unsigned n;
};

static void add(struct budget *b, uint32_t algo, uint64_t count,
                uint64_t period, uint64_t burst)
{
    struct rl_limit *lim = &b->lims[b->n];

    cr_assert_eq(rl_limit_prepare(lim, algo, count, period, burst), 0);
    b->states[b->n] =
        calloc(rl_algorithm_get(algo)->state_words(lim), sizeof(rl_word));
    cr_assert_not_null(b->states[b->n]);
    b->n++;
}

static void drop(struct budget *b)
{
    unsigned i;

    for (i = 0; i < b->n; i++)
        free(b->states[i]);
}

static uint64_t avail(struct budget *b, unsigned i, uint64_t now)
{
    return rl_algorithm_get(b->lims[i].algo)
        ->available(b->states[i], &b->lims[i], now);
}

static struct rl_verdict take(struct budget *b, uint64_t now, uint64_t want,
                              uint64_t min, uint64_t max_wait,
                              struct rl_verdict *vs)
{
    return rl_multi_take(b->states, b->lims, b->n, now, want, min, max_wait,
                         vs);
}

Test(multi, admits_only_what_every_limit_allows)
{
    struct budget b = {0};
    struct rl_verdict vs[4];
    uint64_t t, got = 0;

    add(&b, RL_ALGO_TOKEN_BUCKET, 5, SEC, 0);
    add(&b, RL_ALGO_TOKEN_BUCKET, 100, 60 * SEC, 0);
    /* Ten minutes of one call every 10 ms: 100/min binds after the first
     * 100, the 5/s at first. */
    for (t = 0; t < 600 * SEC; t += 10 * MS) {
        got += take(&b, SEC + t, 1, 1, 0, vs).granted;
        cr_assert_leq(got, 5 + 5 * t / SEC + 1);
        cr_assert_leq(got, 100 + 100 * t / (60 * SEC) + 1);
    }
    cr_assert_geq(got, 100 + 100 * 9);
    drop(&b);
}

Test(multi, refunds_the_others_when_one_denies)
{
    struct budget b = {0};
    struct rl_verdict vs[4], v;

    add(&b, RL_ALGO_TOKEN_BUCKET, 10, SEC, 0);
    add(&b, RL_ALGO_SLIDING_WINDOW, 2, SEC, 0);
    add(&b, RL_ALGO_TOKEN_BUCKET, 50, SEC, 0);
    cr_assert_eq(take(&b, SEC, 2, 2, 0, vs).granted, 2);
    v = take(&b, SEC, 1, 1, 0, vs);
    cr_assert_eq(v.granted, 0);
    cr_assert_eq(v.wait_ns, SEC, "the denying window's wait");
    cr_assert_eq(avail(&b, 0, SEC), 8, "the first limit got its token back");
    cr_assert_eq(avail(&b, 1, SEC), 0);
    cr_assert_eq(avail(&b, 2, SEC), 48, "the third was never asked");
    drop(&b);
}

Test(multi, grants_the_smallest_part_and_returns_each_its_excess)
{
    struct budget b = {0};
    struct rl_verdict vs[4], v;

    add(&b, RL_ALGO_TOKEN_BUCKET, 1000, SEC, 0);
    add(&b, RL_ALGO_TOKEN_BUCKET, 300, SEC, 0);
    add(&b, RL_ALGO_SLIDING_WINDOW, 500, SEC, 0);
    /* The third asked last: the window gives all it is asked, 300. */
    v = take(&b, SEC, 65536, 1, 0, vs);
    cr_assert_eq(v.granted, 300);
    cr_assert_eq(avail(&b, 0, SEC), 700);
    cr_assert_eq(avail(&b, 1, SEC), 0);
    cr_assert_eq(avail(&b, 2, SEC), 200);
    drop(&b);

    /* A tighter limit after a looser one: the looser gets its excess. */
    b = (struct budget){0};
    add(&b, RL_ALGO_TOKEN_BUCKET, 300, SEC, 0);
    add(&b, RL_ALGO_SLIDING_WINDOW, 100, SEC, 0);
    add(&b, RL_ALGO_TOKEN_BUCKET, 1000, SEC, 0);
    take(&b, SEC, 60, 60, 0, vs);
    v = take(&b, SEC, 500, 1, 0, vs);
    cr_assert_eq(v.granted, 40);
    cr_assert_eq(vs[0].granted, 40, "verdicts are trimmed for a refund");
    cr_assert_eq(avail(&b, 0, SEC), 200);
    cr_assert_eq(avail(&b, 1, SEC), 0);
    cr_assert_eq(avail(&b, 2, SEC), 900);
    drop(&b);
}

Test(multi, waits_for_the_longest_reservation)
{
    struct budget b = {0};
    struct rl_verdict vs[4], v;

    add(&b, RL_ALGO_TOKEN_BUCKET, 5, SEC, 0);
    add(&b, RL_ALGO_TOKEN_BUCKET, 2, SEC, 0);
    take(&b, SEC, 2, 2, 0, vs);
    v = take(&b, SEC, 1, 1, 10 * SEC, vs);
    cr_assert_eq(v.granted, 1);
    cr_assert_eq(vs[0].wait_ns, 500 * MS,
                 "the first counts the unit when it goes, at the turn");
    cr_assert_eq(vs[1].wait_ns, 500 * MS);
    cr_assert_eq(v.wait_ns, 500 * MS);
    uint64_t before = avail(&b, 0, SEC);
    v = take(&b, SEC, 1, 1, 700 * MS, vs);
    cr_assert_eq(v.granted, 0, "the second would wait a second");
    cr_assert_eq(avail(&b, 0, SEC), before, "and the first was refunded");
    drop(&b);
}

Test(multi, refund_gives_back_to_every_limit)
{
    struct budget b = {0};
    struct rl_verdict vs[4], v;

    add(&b, RL_ALGO_TOKEN_BUCKET, 1000, SEC, 0);
    add(&b, RL_ALGO_SLIDING_WINDOW, 10, SEC, 0);
    v = take(&b, SEC, 8, 1, 0, vs);
    cr_assert_eq(v.granted, 8);
    rl_multi_refund(b.states, b.lims, b.n, SEC, vs, 5);
    cr_assert_eq(avail(&b, 0, SEC), 997);
    cr_assert_eq(avail(&b, 1, SEC), 7);
    drop(&b);
}

Test(multi, with_no_limits_allows_everything)
{
    struct rl_verdict v = rl_multi_take(NULL, NULL, 0, SEC, 7, 1, 0, NULL);

    cr_assert_eq(v.granted, 7);
    cr_assert_eq(v.wait_ns, 0);
}

/* `connect = 1/s, 10/min` when the later limit refuses: the earlier one's
 * grant goes back. A reserved turn of the window given back must leave
 * the unit that went before it counted. */
Test(multi, a_later_limit_refusing_gives_back_no_more_than_was_taken)
{
    struct budget b = {0};
    struct rl_verdict vs[4];
    uint64_t t = 10 * SEC;

    add(&b, RL_ALGO_SLIDING_WINDOW, 1, SEC, 0);
    add(&b, RL_ALGO_SLIDING_WINDOW, 2, 60 * SEC, 0);
    cr_assert_eq(take(&b, t, 1, 1, 0, vs).granted, 1);
    cr_assert_eq(take(&b, t + 2 * SEC, 1, 1, 0, vs).granted, 1);
    /* The minute is full: its reservation is past a delay of 5 s, so it
     * refuses, and the 1/s turn reserved for t + 3 s goes back. */
    cr_assert_eq(take(&b, t + 2 * SEC + 500 * MS, 1, 1, 5 * SEC, vs).granted,
                 0);
    cr_assert_eq(avail(&b, 0, t + 2 * SEC + 600 * MS), 0,
                 "the unit at t + 2 s still counts in the 1/s window");
    cr_assert_eq(avail(&b, 0, t + 3 * SEC), 1);
    drop(&b);
}

/* Random interleavings on two and three limits of both kinds: what went
 * obeys every one of them. */
Test(multi, interleaved_give_backs_never_admit_more_than_every_limit)
{
    for (uint64_t seed = 1; seed <= 30; seed++) {
        struct budget b = {0};

        add(&b, RL_ALGO_SLIDING_WINDOW, 1 + seed % 3, SEC, 0);
        add(&b, RL_ALGO_TOKEN_BUCKET, 2 + seed % 2, SEC, 0);
        if (seed % 2)
            add(&b, RL_ALGO_SLIDING_WINDOW, 20, 60 * SEC, 0);
        cr_assert_gt(gb_run(b.states, b.lims, b.n, seed, 2000, 300 * MS, 3), 0);
        drop(&b);
    }
}
