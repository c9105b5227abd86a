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

/* A reply of a script: {granted, wait, hosts, leased, debt_charged}. */
static struct rl_fleet_result reply(int64_t g, int64_t leased, int64_t dc)
{
    struct rl_fleet_result r = {.type = RL_FLEET_REPLY_INTS, .n = 5};
    r.v[0] = g;
    r.v[1] = 0;
    r.v[2] = 3;
    r.v[3] = leased;
    r.v[4] = dc;
    return r;
}

/* A call that timed out: the fallback granted f (owed as debt), the debt
 * d it carried put back; then its reply comes. */
static void timed_out(struct rl_fleet_budget *b, int kind, bool bucket,
                      uint64_t f, uint64_t d, uint64_t lease,
                      struct rl_fleet_late *late)
{
    rl_add_relaxed_u64(&b->debt[kind], f + d);
    struct rl_fleet_owed o = {b, kind, bucket, f, d, lease};
    rl_fleet_owed_pack(&t, &o, late);
}

Test(fleet_settle, a_late_grant_pays_the_fallbacks_units_and_the_debt)
{
    struct rl_fleet_budget *b = rl_fleet_budget_of(&t, NULL);
    struct rl_fleet_late late;
    timed_out(b, RL_KIND_CONNECT, true, 3, 2, 0, &late);
    cr_assert_eq(rl_load_relaxed_u64(&b->debt[RL_KIND_CONNECT]), 5);
    struct rl_fleet_result r = reply(3, 0, 2);
    rl_fleet_settle(&t, &r, &late);
    cr_expect_eq(rl_load_relaxed_u64(&b->debt[RL_KIND_CONNECT]), 0,
                 "charged twice: %llu still owed",
                 (unsigned long long)rl_load_relaxed_u64(
                     &b->debt[RL_KIND_CONNECT]));
    cr_expect_eq(rl_load_relaxed_u64(&b->refund[RL_KIND_CONNECT]), 0);
    cr_expect_eq(rl_load_relaxed_u64(&t.settled.late), 1);
    cr_expect_eq(rl_load_relaxed_u64(&t.settled.debt_paid), 5);
}

/* fleet_fallback = deny granted nothing; Redis granted 4 that nobody
 * spent: given back to the bucket. */
Test(fleet_settle, what_redis_granted_and_nobody_spent_goes_back)
{
    struct rl_fleet_budget *b = rl_fleet_budget_of(&t, "site:s|u");
    struct rl_fleet_late late;
    timed_out(b, RL_KIND_SEND, true, 0, 0, 6, &late);
    struct rl_fleet_result r = reply(4, 6, 0);
    rl_fleet_settle(&t, &r, &late);
    cr_expect_eq(rl_load_relaxed_u64(&b->refund[RL_KIND_SEND]), 4 + 6,
                 "grant and lease back");
    cr_expect_eq(rl_load_relaxed_u64(&b->debt[RL_KIND_SEND]), 0);
}

/* The fallback granted more than Redis did: the rest stays owed. */
Test(fleet_settle, the_fallbacks_units_beyond_the_grant_stay_owed)
{
    struct rl_fleet_budget *b = rl_fleet_budget_of(&t, NULL);
    struct rl_fleet_late late;
    timed_out(b, RL_KIND_CONNECT, true, 5, 0, 0, &late);
    struct rl_fleet_result r = reply(2, 0, 0);
    rl_fleet_settle(&t, &r, &late);
    cr_expect_eq(rl_load_relaxed_u64(&b->debt[RL_KIND_CONNECT]), 3);
    cr_expect_eq(rl_load_relaxed_u64(&b->refund[RL_KIND_CONNECT]), 0);
}

/* The debt was sent again with another call before the late reply came:
 * charged twice, so the twice-charged units go back. */
Test(fleet_settle, a_debt_sent_again_meanwhile_is_given_back)
{
    struct rl_fleet_budget *b = rl_fleet_budget_of(&t, NULL);
    struct rl_fleet_late late;
    timed_out(b, RL_KIND_CONNECT, true, 1, 4, 0, &late);
    (void)rl_fleet_take_up_to(&b->debt[RL_KIND_CONNECT], 5); /* sent */
    struct rl_fleet_result r = reply(1, 0, 4);
    rl_fleet_settle(&t, &r, &late);
    cr_expect_eq(rl_load_relaxed_u64(&b->refund[RL_KIND_CONNECT]), 5);
}

/* A sliding window takes nothing back: the fleet admits less, never
 * more. The debt is settled all the same. */
Test(fleet_settle, a_window_settles_its_debt_and_gives_nothing_back)
{
    struct rl_fleet_budget *b = rl_fleet_budget_of(&t, NULL);
    struct rl_fleet_late late;
    timed_out(b, RL_KIND_CONNECT, false, 1, 2, 0, &late);
    struct rl_fleet_result r = reply(3, 0, 2);
    rl_fleet_settle(&t, &r, &late);
    cr_expect_eq(rl_load_relaxed_u64(&b->debt[RL_KIND_CONNECT]), 0);
    cr_expect_eq(rl_load_relaxed_u64(&b->refund[RL_KIND_CONNECT]), 0);
}

Test(fleet_settle, a_lost_reply_changes_nothing_and_is_counted)
{
    struct rl_fleet_budget *b = rl_fleet_budget_of(&t, NULL);
    struct rl_fleet_late late;
    timed_out(b, RL_KIND_CONNECT, true, 2, 1, 0, &late);
    struct rl_fleet_result r = {.err = -104};
    rl_fleet_settle(&t, &r, &late);
    cr_expect_eq(rl_load_relaxed_u64(&b->debt[RL_KIND_CONNECT]), 3);
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
