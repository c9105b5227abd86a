/* Site sections through the gate: a config from a string, a segment in a
 * temp dir, a clock stepped by hand. Each test runs in its own process
 * (Criterion), so the gate and the sites start fresh. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gate_fixture.h"
#include "limit/conform.h"
#include "policy/config.h"
#include "policy/gate.h"
#include "policy/names.h"
#include "util/clock.h"

#define MS 1000000ull
#define S 1000000000ull
#define T0 (1000 * S)

static struct rl_gate_ticket t;

static void setup(void)
{
    fixture_state_dir("sites");
}

static void teardown(void)
{
    fixture_state_dir_remove();
}

TestSuite(site_gate, .init = setup, .fini = teardown);

static void gate_as(const char *key, const char *text)
{
    fixture_gate(&proc, key, text);
}

static struct sockaddr_in v4(const char *ip, int port)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    inet_pton(AF_INET, ip, &a.sin_addr);
    return a;
}

static int conn_to(const char *ip, uint64_t now)
{
    struct sockaddr_in a = v4(ip, 80);
    return rl_gate_connect_at(&proc, &t, now, "connect", 3, &a, sizeof a);
}

static int send_to(const char *ip, uint64_t now, uint64_t bytes, uint64_t min)
{
    struct sockaddr_in a = v4(ip, 80);
    return rl_gate_send_at(&proc, &t, now, "sendto", 3, &a, sizeof a, 1, 1,
                           bytes, min);
}

Test(site_gate, config_knows_sites_and_finds_the_first_that_covers)
{
    struct rl_config *cfg = NULL;
    struct rl_diag diag = {0};
    cr_assert_eq(
        rl_config_load_string("[site:a]\nto = 10.0.0.1\nconnect = 1/s\n"
                              "[site:all]\nconnect = 2/s\n"
                              "[site:never]\nto = 10.0.0.1\n"
                              "connect = 3/s\n",
                              "t.ini", &cfg, &diag),
        0);
    struct sockaddr_in a = v4("10.0.0.1", 80), b = v4("10.0.0.2", 80);
    cr_assert(rl_config_has_sites(cfg));
    cr_assert_str_eq(rl_config_find_site(NULL, cfg, &a, sizeof a)->site, "a");
    cr_assert_str_eq(rl_config_find_site(NULL, cfg, &b, sizeof b)->site, "all");
    cr_assert_null(rl_config_find_rule(cfg, "a", 0, NULL),
                   "a site is never a user's rule");
    rl_config_free(cfg);
}

Test(site_gate, a_site_limits_users_without_a_section)
{
    gate_as("nobody", "[site:s]\nto = 10.0.0.1\nconnect = 2/s\n");
    cr_assert(rl_gate_active(&proc));
    struct sockaddr_in a = v4("10.0.0.1", 80), b = v4("10.0.0.2", 80);
    cr_assert(rl_gate_covers(&proc, &a, sizeof a));
    cr_assert_not(rl_gate_covers(&proc, &b, sizeof b));
    cr_expect_eq(conn_to("10.0.0.1", T0), RL_GATE_GO);
    cr_expect_eq(conn_to("10.0.0.1", T0), RL_GATE_GO);
    cr_expect_eq(conn_to("10.0.0.1", T0), RL_GATE_FAIL);
    cr_expect_eq(t.err, EAGAIN);
    cr_expect_eq(conn_to("10.0.0.1", T0 + 500 * MS), RL_GATE_GO);
}

Test(site_gate, a_site_limits_sends_and_bytes_and_takes_back_what_was_not_sent)
{
    gate_as("nobody", "[rlshim]\nerrno = ECONNREFUSED\n"
                      "[site:s]\nsend = 10/s\nsend_bytes = 1000/s\n");
    cr_assert(rl_gate_charges_sends(&proc));
    cr_assert_eq(rl_proc_gen(&proc)->gate.max_bytes, 1000);
    cr_expect_eq(send_to("10.0.0.1", T0, 1500, 1), RL_GATE_GO);
    cr_expect_eq(t.bytes, 1000);
    rl_gate_refund(&proc, &t, RL_KIND_SEND_BYTES, 400);
    cr_expect_eq(send_to("10.0.0.1", T0, 1000, 1), RL_GATE_GO);
    cr_expect_eq(t.bytes, 400);
    cr_expect_eq(send_to("10.0.0.1", T0, 10, 10), RL_GATE_FAIL);
    cr_expect_eq(t.err, ECONNREFUSED);
}

Test(site_gate, the_rule_keeps_only_what_the_site_granted)
{
    gate_as("tester", "[user:tester]\nsend_bytes = 2000/s\n"
                      "[site:s]\nto = 10.0.0.1\nsend_bytes = 1000/s\n");
    cr_expect_eq(send_to("10.0.0.1", T0, 1500, 1), RL_GATE_GO);
    cr_expect_eq(t.bytes, 1000);
    /* The rule gave back the 500 the site did not grant: 1000 are left. */
    cr_expect_eq(send_to("10.0.0.2", T0, 1000, 1000), RL_GATE_GO);
    cr_expect_eq(send_to("10.0.0.2", T0, 1, 1), RL_GATE_FAIL);
}

Test(site_gate, a_denial_by_either_gives_the_other_its_unit_back)
{
    gate_as("tester", "[user:tester]\nconnect = 3/s\n"
                      "[site:slow]\nto = 10.0.0.1\nconnect = 1/s\n");
    cr_expect_eq(conn_to("10.0.0.1", T0), RL_GATE_GO);
    for (int i = 0; i < 5; i++)
        cr_expect_eq(conn_to("10.0.0.1", T0), RL_GATE_FAIL);
    /* The site's denials took nothing of the rule: 2 left for others. */
    cr_expect_eq(conn_to("10.0.0.2", T0), RL_GATE_GO);
    cr_expect_eq(conn_to("10.0.0.2", T0), RL_GATE_GO);
    cr_expect_eq(conn_to("10.0.0.2", T0), RL_GATE_FAIL);
}

Test(site_gate, a_site_named_by_host_name)
{
    gate_as("nobody", "[site:wiki]\nto = *.wikipedia.org\nconnect = 1/s\n");
    uint8_t a[4];
    inet_pton(AF_INET, "10.9.0.1", a);
    rl_names_note(&proc.names, AF_INET, a, "en.wikipedia.org", 16);
    struct sockaddr_in w = v4("10.9.0.1", 443), o = v4("10.9.0.2", 443);
    cr_assert(rl_gate_covers(&proc, &w, sizeof w));
    cr_assert_not(rl_gate_covers(&proc, &o, sizeof o));
    cr_expect_eq(conn_to("10.9.0.1", T0), RL_GATE_GO);
    cr_expect_eq(conn_to("10.9.0.1", T0), RL_GATE_FAIL);
}

/* The turn a granted connect goes at, noted for a budget's record. */
static void went(struct rl_conform_ev *ev, uint64_t *n, uint64_t now)
{
    ev[*n] = (struct rl_conform_ev){now + t.wait_ns, 1};
    (*n)++;
}

static void by_turn(struct rl_conform_ev *ev, uint64_t n)
{
    for (uint64_t i = 1; i < n; i++)
        for (uint64_t j = i; j > 0 && ev[j - 1].t > ev[j].t; j--) {
            struct rl_conform_ev x = ev[j];
            ev[j] = ev[j - 1];
            ev[j - 1] = x;
        }
}

/* Both budgets delay: the site reserves a later turn for a connect the
 * rule could grant at once. The rule must count it at the turn it goes,
 * not now: counted now, the rule refills over it and lets 3 go at once
 * at T0 + 1 s (2/s allows 2 at an instant). Each budget's admitted turns
 * checked against its own limit. */
Test(site_gate, every_budget_counts_a_delayed_connect_at_its_turn)
{
    gate_as("tester", "[user:tester]\nconnect = 2/s\non_deny = delay\n"
                      "[site:slow]\nto = 10.0.0.1\nconnect = 1/s\n"
                      "on_deny = delay\n");
    struct rl_conform_ev rule[8], site[8];
    uint64_t nr = 0, ns = 0;
    cr_assert_eq(conn_to("10.0.0.1", T0), RL_GATE_GO);
    went(rule, &nr, T0);
    went(site, &ns, T0);
    cr_assert_eq(conn_to("10.0.0.1", T0), RL_GATE_GO);
    cr_expect_eq(t.wait_ns, S, "the site's turn: %llu",
                 (unsigned long long)t.wait_ns);
    went(rule, &nr, T0);
    went(site, &ns, T0);
    /* Only the rule: at T0 + 1 s. */
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(conn_to("10.0.0.2", T0 + S), RL_GATE_GO);
        went(rule, &nr, T0 + S);
    }
    struct rl_conform_result r;
    by_turn(rule, nr); /* the delayed one went at T0 + 1 s */
    rl_conform_bucket(rule, nr, 2, S, 2, 1, &r);
    cr_expect(r.ok, "the rule let %llu go in [%llu, %llu] ns, allows %llu",
              (unsigned long long)r.units,
              (unsigned long long)(rule[r.first].t - T0),
              (unsigned long long)(rule[r.last].t - T0),
              (unsigned long long)r.allowed);
    rl_conform_bucket(site, ns, 1, S, 1, 1, &r);
    cr_expect(r.ok, "the site let %llu go, allows %llu",
              (unsigned long long)r.units, (unsigned long long)r.allowed);
}

/* The reverse: the rule (one address) delays, the site (a sliding window
 * over the /24) granted at once. Counted now, the site's stamps expire a
 * second before the delayed connect goes, and it lets 3 go at T0 + 1 s
 * where 2 per second are allowed. */
Test(site_gate, a_site_window_counts_a_connect_the_rule_delays_at_its_turn)
{
    gate_as("tester", "[user:tester]\nto = 10.0.0.1\nconnect = 1/s\n"
                      "on_deny = delay\n"
                      "[site:net]\nto = 10.0.0.0/24\nconnect = 2/s\n"
                      "algorithm = sliding_window\non_deny = delay\n");
    struct rl_conform_ev site[8];
    uint64_t ns = 0;
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(conn_to("10.0.0.1", T0), RL_GATE_GO);
        went(site, &ns, T0);
    }
    cr_expect_eq(t.wait_ns, S, "the rule's turn: %llu",
                 (unsigned long long)t.wait_ns);
    /* Only the site: at T0 + 1 s. */
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(conn_to("10.0.0.2", T0 + S), RL_GATE_GO);
        went(site, &ns, T0 + S);
    }
    by_turn(site, ns);
    struct rl_conform_result r;
    rl_conform_window(site, ns, 2, S, 1, &r);
    cr_expect(r.ok, "the site let %llu go in [%llu, %llu] ns, allows %llu",
              (unsigned long long)r.units,
              (unsigned long long)(site[r.first].t - T0),
              (unsigned long long)(site[r.last].t - T0),
              (unsigned long long)r.allowed);
}

/* A send from a signal handler (rl_gate_handler) to ip: 1 call of 1 byte. */
static int handler_send_to(const char *ip, int *err)
{
    struct sockaddr_in a = v4(ip, 80);
    const struct rl_gate_q q = {RL_KIND_SEND, &a, sizeof a, 1, 1, 1};
    uint64_t g = 0;
    return rl_gate_handler(&proc, &q, &g, err);
}

/* From a handler a site's budget is charged beside the rule's, and one
 * never made before cannot be made there (it allocates): denied. */
Test(site_gate, a_handler_send_is_charged_to_its_site_which_it_never_makes)
{
    gate_as(NULL, "[default]\nsend = 100/h\n"
                  "[site:a]\nto = 10.0.0.1\nsend = 3/h\nerrno = ENETUNREACH\n");
    int err = 0;
    cr_expect_eq(handler_send_to("10.0.0.1", &err), RL_GATE_FAIL,
                 "the site's budget was made from a handler");
    cr_expect_eq(err, ENETUNREACH);
    /* Made by an ordinary decision (1 of its 3), then charged from the
     * handler too: 2 more, then the site says no. */
    cr_assert_eq(send_to("10.0.0.1", rl_clock_now_ns(), 1, 1), RL_GATE_GO);
    cr_expect_eq(handler_send_to("10.0.0.1", &err), RL_GATE_GO);
    cr_expect_eq(handler_send_to("10.0.0.1", &err), RL_GATE_GO);
    cr_expect_eq(handler_send_to("10.0.0.1", &err), RL_GATE_FAIL);
    cr_expect_eq(err, ENETUNREACH);
    /* Another destination: the rule's budget only. */
    cr_expect_eq(handler_send_to("10.0.0.2", &err), RL_GATE_GO);
}

/* A per-destination budget: found in the table, never added from a
 * handler. */
Test(site_gate, a_handler_send_spends_a_per_destination_budget_it_never_adds)
{
    gate_as(NULL, "[default]\nsend = 100/h\n"
                  "[site:each]\nper = destination\nsend = 2/h\n");
    int err = 0;
    cr_assert_eq(send_to("10.0.0.1", rl_clock_now_ns(), 1, 1), RL_GATE_GO);
    cr_expect_eq(handler_send_to("10.0.0.1", &err), RL_GATE_GO);
    cr_expect_eq(handler_send_to("10.0.0.1", &err), RL_GATE_FAIL,
                 "10.0.0.1's budget of 2 let a third go");
    cr_expect_eq(handler_send_to("10.0.0.9", &err), RL_GATE_FAIL,
                 "a destination's budget was added from a handler");
}
