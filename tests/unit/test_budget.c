/* test_budget.c — how a (rule, user) pair maps onto a store slot. */
#include <criterion/criterion.h>
#include <string.h>

#include "policy/budget.h"
#include "util/hash.h"

/* Until the limiter's sources are in this tree, a stand-in with the word
 * counts limit.h documents (token bucket 1; window 3 + N). Weak: the real
 * rl_algorithm_get wins when it is linked. */
static uint32_t one_word(const struct rl_limit *lim)
{
    (void)lim;
    return 1;
}

static uint32_t ring_words(const struct rl_limit *lim)
{
    return 3 + (uint32_t)lim->count;
}

static const struct rl_algorithm fake_tb = {.state_words = one_word};
static const struct rl_algorithm fake_win = {.state_words = ring_words};

__attribute__((weak)) const struct rl_algorithm *rl_algorithm_get(uint32_t a)
{
    return a == RL_ALGO_TOKEN_BUCKET    ? &fake_tb
           : a == RL_ALGO_SLIDING_WINDOW ? &fake_win
                                         : NULL;
}

static struct rl_rule named(void)
{
    struct rl_rule r;

    memset(&r, 0, sizeof r);
    r.section = "user:scraper";
    r.user = "scraper";
    return r;
}

Test(budget, lays_out_limits_kind_by_kind_and_rate_by_rate)
{
    struct rl_rule r = named();
    struct rl_budget_layout l;

    r.nlimits[RL_KIND_CONNECT] = 2;
    r.limits[RL_KIND_CONNECT][0].algo = RL_ALGO_SLIDING_WINDOW;
    r.limits[RL_KIND_CONNECT][0].count = 5;
    r.limits[RL_KIND_CONNECT][1].algo = RL_ALGO_SLIDING_WINDOW;
    r.limits[RL_KIND_CONNECT][1].count = 100;
    r.nlimits[RL_KIND_SEND_BYTES] = 1;
    r.limits[RL_KIND_SEND_BYTES][0].algo = RL_ALGO_TOKEN_BUCKET;
    rl_budget_layout(&r, &l);
    cr_assert_eq(l.offset[RL_KIND_CONNECT][0], 0);
    cr_assert_eq(l.offset[RL_KIND_CONNECT][1], 8);
    cr_assert_eq(l.offset[RL_KIND_SEND_BYTES][0], 8 + 103);
    cr_assert_eq(l.nwords, 8 + 103 + 1);
}

Test(budget, a_rule_without_limits_needs_no_words)
{
    struct rl_rule r = named();
    struct rl_budget_layout l;

    rl_budget_layout(&r, &l);
    cr_assert_eq(l.nwords, 0);
}

Test(budget, a_named_section_is_one_budget_whoever_calls)
{
    struct rl_rule r = named();

    cr_assert_str_eq(rl_budget_user(&r, "1000"), "scraper");
    cr_assert_str_eq(rl_budget_user(&r, "1001"), "scraper");
}

Test(budget, the_default_section_gives_each_caller_its_own_budget)
{
    struct rl_rule r = named();
    char a[64], b[64];

    r.section = "default";
    r.user = NULL;
    r.is_default = true;
    cr_assert_str_eq(rl_budget_user(&r, "1000"), "1000");
    cr_assert_neq(rl_budget_label(&r, "1000", a, sizeof a),
                  rl_budget_label(&r, "1001", b, sizeof b));
    cr_assert_str_eq(a, "default|1000");
}

Test(budget, labels_section_and_user_and_tags_by_their_hash)
{
    struct rl_rule r = named();
    char buf[64];
    uint64_t tag = rl_budget_label(&r, "scraper", buf, sizeof buf);

    cr_assert_str_eq(buf, "user:scraper|scraper");
    cr_assert_eq(tag, rl_hash_bytes(RL_HASH_INIT, buf, strlen(buf)));
    cr_assert_neq(tag, 0);
}

Test(budget, long_names_cut_in_the_label_keep_distinct_tags)
{
    struct rl_rule r = named();
    char a[16], b[16];
    uint64_t ta = rl_budget_label(&r, "aaaaaaaaaaaaaaaaaaaaaaaa1", a, sizeof a);
    uint64_t tb = rl_budget_label(&r, "aaaaaaaaaaaaaaaaaaaaaaaa2", b, sizeof b);

    cr_assert_str_eq(a, b);
    cr_assert_eq(strlen(a), 15);
    cr_assert_neq(ta, tb);
}

Test(budget, each_rule_has_its_own_overflow_tag_matching_its_label)
{
    struct rl_rule r = named(), q = named();
    const char *lbl = "user:scraper|*";

    q.section = "default";
    cr_assert_eq(rl_budget_overflow_tag(&r),
                 rl_hash_bytes(RL_HASH_INIT, lbl, strlen(lbl)));
    cr_assert_neq(rl_budget_overflow_tag(&r), rl_budget_overflow_tag(&q));
}
