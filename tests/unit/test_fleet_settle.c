/* test_fleet_settle.c — a late reply settled against what the process did
 * without it (fleet_settle.h): each unit charged at Redis once. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "fleet/fleet_settle.h"

static struct rl_fleet_budgets t;

static void reset(void)
{
    memset(&t, 0, sizeof t);
}

TestSuite(fleet_settle, .init = reset);

/* A reply of a script: {granted, wait, hosts, leased}. */
static struct rl_fleet_result reply(int64_t g, int64_t leased)
{
    struct rl_fleet_result r = {.type = RL_FLEET_REPLY_INTS, .n = 4};
    r.v[0] = g;
    r.v[1] = 0;
    r.v[2] = 3;
    r.v[3] = leased;
    return r;
}

/* A call that carried debt d timed out: d stays with it; the fallback
 * granted f (owed as debt); then its reply comes, or is lost. */
static void timed_out(struct rl_fleet_budget *b, int kind, bool bucket,
                      uint64_t f, uint64_t d, uint64_t lease,
                      struct rl_fleet_late *late)
{
    rl_add_relaxed_u64(&b->debt[kind], f);
    struct rl_fleet_owed o = {b, kind, bucket, f, d, lease};
    rl_fleet_owed_pack(&t, &o, late);
}

static uint64_t debt(struct rl_fleet_budget *b, int kind)
{
    return rl_load_relaxed_u64(&b->debt[kind]);
}

static uint64_t refund(struct rl_fleet_budget *b, int kind)
{
    return rl_load_relaxed_u64(&b->refund[kind]);
}

Test(fleet_settle, a_late_grant_pays_the_fallbacks_units)
{
    struct rl_fleet_budget *b = rl_fleet_budget_of(&t, NULL);
    struct rl_fleet_late late;
    timed_out(b, RL_KIND_CONNECT, true, 3, 2, 0, &late);
    cr_assert_eq(debt(b, RL_KIND_CONNECT), 3);
    struct rl_fleet_result r = reply(3, 0);
    rl_fleet_settle(&t, &r, &late);
    cr_expect_eq(debt(b, RL_KIND_CONNECT), 0, "charged twice: %llu owed",
                 (unsigned long long)debt(b, RL_KIND_CONNECT));
    cr_expect_eq(refund(b, RL_KIND_CONNECT), 0);
    cr_expect_eq(rl_load_relaxed_u64(&t.settled.late), 1);
    cr_expect_eq(rl_load_relaxed_u64(&t.settled.debt_paid), 3);
}

/* fleet_fallback = deny granted nothing; Redis granted 4, and a lease of
 * 6 that never reached the pool: nobody spent them, they go back. */
Test(fleet_settle, what_redis_granted_and_nobody_spent_goes_back)
{
    struct rl_fleet_budget *b = rl_fleet_budget_of(&t, "site:s|u");
    struct rl_fleet_late late;
    timed_out(b, RL_KIND_SEND, true, 0, 0, 6, &late);
    struct rl_fleet_result r = reply(4, 6);
    rl_fleet_settle(&t, &r, &late);
    cr_expect_eq(refund(b, RL_KIND_SEND), 4 + 6, "grant and lease back");
    cr_expect_eq(debt(b, RL_KIND_SEND), 0);
}

/* The fallback granted more than Redis did: the rest stays owed. */
Test(fleet_settle, the_fallbacks_units_beyond_the_grant_stay_owed)
{
    struct rl_fleet_budget *b = rl_fleet_budget_of(&t, NULL);
    struct rl_fleet_late late;
    timed_out(b, RL_KIND_CONNECT, true, 5, 0, 0, &late);
    struct rl_fleet_result r = reply(2, 0);
    rl_fleet_settle(&t, &r, &late);
    cr_expect_eq(debt(b, RL_KIND_CONNECT), 3);
    cr_expect_eq(refund(b, RL_KIND_CONNECT), 0);
}

/* The fallback's units were sent as debt with another call before the
 * late reply came (that call charges them, as far as the budget holds
 * them): nothing is given back for them. Given back, a debt the budget
 * did not hold (charged down to one burst below empty) would be a burst
 * on return; kept, the fleet admits less at worst. */
Test(fleet_settle, units_sent_again_meanwhile_are_never_given_back)
{
    struct rl_fleet_budget *b = rl_fleet_budget_of(&t, NULL);
    struct rl_fleet_late late;
    timed_out(b, RL_KIND_CONNECT, true, 4, 9, 0, &late);
    (void)rl_fleet_take_up_to(&b->debt[RL_KIND_CONNECT], 4); /* sent */
    struct rl_fleet_result r = reply(4, 0);
    rl_fleet_settle(&t, &r, &late);
    cr_expect_eq(refund(b, RL_KIND_CONNECT), 0);
    cr_expect_eq(debt(b, RL_KIND_CONNECT), 0);
}

/* A sliding window takes nothing back: the fleet admits less, never
 * more. The fallback's units are settled all the same. */
Test(fleet_settle, a_window_settles_the_fallback_and_gives_nothing_back)
{
    struct rl_fleet_budget *b = rl_fleet_budget_of(&t, NULL);
    struct rl_fleet_late late;
    timed_out(b, RL_KIND_CONNECT, false, 1, 2, 0, &late);
    struct rl_fleet_result r = reply(3, 0);
    rl_fleet_settle(&t, &r, &late);
    cr_expect_eq(debt(b, RL_KIND_CONNECT), 0);
    cr_expect_eq(refund(b, RL_KIND_CONNECT), 0);
}

/* Lost with its connection: its script most likely never ran, so the
 * debt it carried is owed again; nothing is given back. */
Test(fleet_settle, a_lost_reply_owes_its_debt_again_and_is_counted)
{
    struct rl_fleet_budget *b = rl_fleet_budget_of(&t, NULL);
    struct rl_fleet_late late;
    timed_out(b, RL_KIND_CONNECT, true, 2, 7, 0, &late);
    struct rl_fleet_result r = {.err = -104};
    rl_fleet_settle(&t, &r, &late);
    cr_expect_eq(debt(b, RL_KIND_CONNECT), 2 + 7);
    cr_expect_eq(refund(b, RL_KIND_CONNECT), 0);
    cr_expect_eq(rl_load_relaxed_u64(&t.settled.lost), 1);
    /* A call with nothing to settle (a map look-up) is not counted. */
    struct rl_fleet_late none = {{0}};
    rl_fleet_settle(&t, &r, &none);
    cr_expect_eq(rl_load_relaxed_u64(&t.settled.lost), 1);
}

Test(fleet_settle, budgets_are_found_again_by_label_until_the_table_is_full)
{
    struct rl_fleet_budget *a = rl_fleet_budget_of(&t, "site:a|u");
    cr_expect_eq(rl_fleet_budget_of(&t, "site:a|u"), a);
    cr_expect_neq(rl_fleet_budget_of(&t, "site:b|u"), a);
    cr_expect_eq(rl_fleet_budget_of(&t, NULL), &t.b[0]);
    int got = 2;
    for (int i = 0; i < 2 * RL_FLEET_BUDGETS; i++) {
        char l[32];
        snprintf(l, sizeof l, "site:%d|u", i);
        got += rl_fleet_budget_of(&t, l) != NULL;
    }
    cr_expect_leq(got, RL_FLEET_BUDGETS);
    cr_expect_null(rl_fleet_budget_of(&t, "site:one-more|u"));
}
