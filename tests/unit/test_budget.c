/* test_budget.c — how a (rule, user) pair maps onto a store slot. */
#include <criterion/criterion.h>
#include <string.h>

#include "policy/budget.h"
#include "util/hash.h"

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
    cr_assert_eq(l.offset[RL_KIND_CONNECT][1], RL_WINDOW_STATE_WORDS + 5);
    cr_assert_eq(l.offset[RL_KIND_SEND_BYTES][0],
                 2 * RL_WINDOW_STATE_WORDS + 105);
    cr_assert_eq(l.nwords, 2 * RL_WINDOW_STATE_WORDS + 105 + 1);
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

Test(budget, finds_the_rule_and_user_back_from_a_label)
{
    struct rl_rule rules[3];
    struct rl_config cfg;
    const char *user;

    memset(&cfg, 0, sizeof cfg);
    rules[0] = named();
    rules[1] = named();
    rules[1].section = "user:a|b"; /* a '|' in a name is allowed */
    rules[2] = named();
    rules[2].section = "default";
    cfg.rules = rules;
    cfg.nrules = 3;
    cr_assert_eq(rl_budget_parse_label(&cfg, "default|1000", &user), &rules[2]);
    cr_assert_str_eq(user, "1000");
    cr_assert_eq(rl_budget_parse_label(&cfg, "user:a|b|x|y", &user), &rules[1]);
    cr_assert_str_eq(user, "x|y");
    cr_assert_eq(rl_budget_parse_label(&cfg, "user:scraper|*", &user),
                 &rules[0]);
    cr_assert_str_eq(user, "*");
    cr_assert_null(rl_budget_parse_label(&cfg, "user:gone|gone", &user));
    cr_assert_str_eq(user, "gone");
}

Test(budget, a_leasable_rule_gets_a_lease_area_after_its_limits)
{
    struct rl_rule r = named();
    struct rl_budget_layout l;

    r.nlimits[RL_KIND_CONNECT] = 1;
    r.limits[RL_KIND_CONNECT][0].algo = RL_ALGO_TOKEN_BUCKET;
    r.nlimits[RL_KIND_SEND_BYTES] = 1;
    r.limits[RL_KIND_SEND_BYTES][0].algo = RL_ALGO_TOKEN_BUCKET;
    r.limits[RL_KIND_SEND_BYTES][0].burst = 128;
    cr_assert(rl_budget_leasable(&r));
    rl_budget_layout(&r, &l);
    cr_assert_eq(l.lease, 2);
    cr_assert_eq(l.nwords, 2 + RL_LEASE_AREA_WORDS);
    /* Too shallow to share out, a window, or two rates: no leases. */
    r.limits[RL_KIND_SEND_BYTES][0].burst = 127;
    cr_assert(!rl_budget_leasable(&r));
    rl_budget_layout(&r, &l);
    cr_assert_eq(l.lease, 0);
    cr_assert_eq(l.nwords, 2);
    r.limits[RL_KIND_SEND_BYTES][0].burst = 1000;
    r.nlimits[RL_KIND_SEND] = 1;
    r.limits[RL_KIND_SEND][0].algo = RL_ALGO_SLIDING_WINDOW;
    r.limits[RL_KIND_SEND][0].count = 1000;
    cr_assert(!rl_budget_leasable(&r));
}

Test(budget, the_lease_area_fits_its_words_and_each_record_owns_a_line)
{
    struct rl_budget_layout l = {.lease = 3};
    _Alignas(64) rl_atomic_u64 words[3 + RL_LEASE_AREA_WORDS + 8];

    for (unsigned shift = 0; shift < 8; shift++) {
        rl_atomic_u64 *base = words + shift;
        rl_atomic_u64 *area = rl_budget_lease_bitmap(&l, base);
        cr_assert_eq((uintptr_t)area % 64, 0);
        cr_assert_geq(area, base + 3);
        rl_atomic_u64 *last =
            area + RL_LEASE_WORDS * RL_LEASE_RECORDS + RL_LEASE_WORDS;
        cr_assert_leq(last, base + 3 + RL_LEASE_AREA_WORDS);
    }
}

Test(budget, a_record_packs_units_left_and_spent_without_carries)
{
    struct rl_lease_units u = {{0}, {0}}, v;

    u.left[RL_KIND_SEND] = RL_LEASE_MAX_CALLS;
    u.spent[RL_KIND_SEND] = RL_LEASE_MAX_CALLS;
    u.left[RL_KIND_SEND_BYTES] = RL_LEASE_MAX_BYTES;
    u.spent[RL_KIND_SEND_BYTES] = RL_LEASE_MAX_BYTES;
    uint64_t w = rl_lease_pack(RL_LEASE_GEN_MASK, &u);
    rl_lease_unpack(w, &v);
    cr_assert_eq(memcmp(&u, &v, sizeof u), 0);
    cr_assert_eq(w >> RL_LEASE_GEN_SHIFT, RL_LEASE_GEN_MASK);
}

Test(budget, a_lease_is_idle_after_8_ms_of_the_coarse_clock)
{
    cr_assert(!rl_lease_idle(1000000000, 1000000000 + RL_LEASE_IDLE_NS - 1));
    cr_assert(rl_lease_idle(1000000000, 1000000000 + RL_LEASE_IDLE_NS));
    /* A stamp ahead of the reader's clock is not idle. */
    cr_assert(!rl_lease_idle(2000000000, 1000000000));
}

Test(budget, segments_of_another_budget_format_do_not_match)
{
    struct rl_config c;

    memset(&c, 0, sizeof c);
    c.hash = 42;
    cr_assert_neq(rl_budget_hash(&c), 42);
    uint64_t h = rl_budget_hash(&c);
    c.hash = 43;
    cr_assert_neq(rl_budget_hash(&c), h);
}
