/* A call decided from a signal handler (rl_gate_handler) on a fleet
 * budget (SPEC §8): Redis is never asked there, only units this host holds
 * as its lease are spent. A real redis-server each test starts (Criterion
 * runs each test in its own process: the gate and the fleet start fresh). */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "../redis_server.h"
#include "gate_fixture.h"
#include "policy/config.h"
#include "policy/gate.h"
#include "policy/gate_int.h"
#include "policy/proc.h"
#include "util/atomics.h"
#include "util/clock.h"

static struct rl_gate_ticket t;
static struct redis R;

static void setup(void)
{
    fixture_state_dir("hfleet");
}

static void teardown(void)
{
    redis_kill(&R);
    fixture_state_dir_remove();
}

TestSuite(handler_fleet, .init = setup, .fini = teardown, .timeout = 30);

/* Redis up, and the gate of user "crawler" under `fmt` (%d: its port). */
static void gate_with(const char *fmt)
{
    if (!redis_have())
        cr_skip_test("redis-server is not installed (apt-get install "
                     "redis-server)");
    cr_assert(redis_start(&R), "redis-server did not start");
    char text[1024];
    snprintf(text, sizeof text, fmt, R.port);
    struct rl_config *cfg = NULL;
    struct rl_diag d = {0};
    cr_assert_eq(rl_config_load_string(text, "t.ini", &cfg, &d), 0, "%s",
                 d.n ? d.msgs[0] : "");
    struct rl_identity id = {.has_key = true, .uid = (uint32_t)getuid()};
    snprintf(id.key, sizeof id.key, "crawler");
    char why[256] = "";
    cr_assert_eq(rl_gate_init(&proc, cfg, &id, why, sizeof why), 0, "%s", why);
}

static struct sockaddr_in v4(const char *ip)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(80)};
    inet_pton(AF_INET, ip, &a.sin_addr);
    return a;
}

static int h_call(int kind, const char *ip, int *err)
{
    struct sockaddr_in a = v4(ip);
    const struct rl_gate_q q = {kind, &a, sizeof a, 1,
                                kind == RL_KIND_SEND ? 10 : 0,
                                kind == RL_KIND_SEND ? 10 : 0};
    uint64_t g;
    *err = 0;
    return rl_gate_handler(&proc, &q, &g, err);
}

static int send_to(const char *ip)
{
    struct sockaddr_in a = v4(ip);
    return rl_gate_send(&proc, &t, "sendto", 3, &a, sizeof a, 1, 1, 10, 10);
}

/* The host's lease of the rule's budget, filled as Redis leaves it: `n`
 * sends, every word of the pool stamped now. */
static struct budget *lease_of(uint64_t n)
{
    struct budget *b = atomic_load(&rl_proc_gen(&proc)->gate.cur);
    cr_assert(b != NULL && b->fleet.w != NULL, "no pool");
    uint64_t now = rl_clock_coarse_ns();
    for (unsigned i = 0; i < 16; i++)
        rl_store_relaxed_u64(&b->fleet.w[i], now);
    rl_store_relaxed_u64(&b->fleet.w[0], n);
    return b;
}

Test(handler_fleet, spends_the_hosts_lease_and_never_asks_redis)
{
    gate_with("[rlshim]\nfleet = redis://127.0.0.1:%d\nfleet_fallback = deny\n"
              "[user:crawler]\nscope = fleet\nsend = 1000/s\n"
              "send_burst = 4096\nerrno = ECONNREFUSED\n");
    int err;
    cr_expect_eq(h_call(RL_KIND_SEND, "10.0.0.1", &err), RL_GATE_FAIL,
                 "Redis was asked from a handler");
    cr_expect_eq(err, ECONNREFUSED);
    /* A fresh lease of 5 sends, as Redis leaves the host's pool. */
    (void)lease_of(5);
    for (int i = 0; i < 5; i++)
        cr_expect_eq(h_call(RL_KIND_SEND, "10.0.0.1", &err), RL_GATE_GO,
                     "%d", i);
    cr_expect_eq(h_call(RL_KIND_SEND, "10.0.0.1", &err), RL_GATE_FAIL,
                 "more than the lease was spent");
}

Test(handler_fleet, denies_a_connect_of_a_fleet_budget)
{
    gate_with("[rlshim]\nfleet = redis://127.0.0.1:%d\nfleet_fallback = allow\n"
              "[user:crawler]\nscope = fleet\nconnect = 10/s\n");
    int err;
    cr_expect_eq(h_call(RL_KIND_CONNECT, "10.0.0.1", &err), RL_GATE_FAIL);
    struct sockaddr_in a = v4("10.0.0.1");
    cr_expect_eq(rl_gate_connect_at(&proc, &t, rl_clock_now_ns(), "connect",
                                    3, &a, sizeof a),
                 RL_GATE_GO, "Redis's budget was spent");
}

/* A site's fleet budget has no lease of this host's: denied by the site,
 * and the rule's unit it had taken first comes back. */
Test(handler_fleet, denies_a_sites_fleet_budget_and_gives_the_rule_its_unit)
{
    gate_with("[rlshim]\nfleet = redis://127.0.0.1:%d\nfleet_fallback = deny\n"
              "[user:crawler]\nsend = 3/h\n"
              "[site:a]\nto = 10.0.0.1\nscope = fleet\nsend = 100/s\n"
              "errno = ENETUNREACH\n");
    int err;
    cr_assert_eq(send_to("10.0.0.1"), RL_GATE_GO); /* makes the site's */
    cr_expect_eq(h_call(RL_KIND_SEND, "10.0.0.1", &err), RL_GATE_FAIL);
    cr_expect_eq(err, ENETUNREACH);
    cr_expect_eq(h_call(RL_KIND_SEND, "10.0.0.2", &err), RL_GATE_GO);
    cr_expect_eq(h_call(RL_KIND_SEND, "10.0.0.2", &err), RL_GATE_GO,
                 "the site's denial kept the rule's unit");
    cr_expect_eq(h_call(RL_KIND_SEND, "10.0.0.2", &err), RL_GATE_FAIL);
}

/* The rule's lease granted, a site then denies: the lease gets its unit
 * back. */
Test(handler_fleet, gives_the_lease_its_unit_back_when_a_site_denies)
{
    gate_with("[rlshim]\nfleet = redis://127.0.0.1:%d\nfleet_fallback = deny\n"
              "[user:crawler]\nscope = fleet\nsend = 1000/s\n"
              "send_burst = 4096\n"
              "[site:a]\nto = 10.0.0.1\nsend = 1/h\nerrno = ENETUNREACH\n");
    int err;
    cr_assert_eq(send_to("10.0.0.1"), RL_GATE_GO); /* spends the site's */
    (void)lease_of(1);
    cr_expect_eq(h_call(RL_KIND_SEND, "10.0.0.1", &err), RL_GATE_FAIL);
    cr_expect_eq(err, ENETUNREACH);
    cr_expect_eq(h_call(RL_KIND_SEND, "10.0.0.2", &err), RL_GATE_GO,
                 "the site's denial kept the lease's unit");
    cr_expect_eq(h_call(RL_KIND_SEND, "10.0.0.2", &err), RL_GATE_FAIL);
}

/* A lease's units reach the segment's counters at the pool's next fill
 * (fleet_lease.h): a handler's grant does not count them a second time. */
Test(handler_fleet, leaves_a_lease_grant_to_be_counted_at_the_next_fill)
{
    gate_with("[rlshim]\nfleet = redis://127.0.0.1:%d\nfleet_fallback = deny\n"
              "[user:crawler]\nscope = fleet\nsend = 1000/s\n"
              "send_burst = 4096\n");
    struct budget *b = lease_of(5);
    int err;
    cr_assert_eq(h_call(RL_KIND_SEND, "10.0.0.1", &err), RL_GATE_GO);
    cr_assert_eq(h_call(RL_KIND_SEND, "10.0.0.1", &err), RL_GATE_GO);
    unsigned allowed = RL_KIND_SEND * RL_STORE_STATS_PER_KIND + RL_STAT_ALLOWED;
    cr_expect_eq(rl_load_relaxed_u64(&b->slot.counters[allowed]), 0,
                 "counted before the pool's fill");
}

/* The charges are taken in their order, the rule's first: a rule that is
 * spent says no before a site's fleet budget is asked. */
Test(handler_fleet, says_the_rules_denial_before_a_sites_fleet_budget)
{
    gate_with("[rlshim]\nfleet = redis://127.0.0.1:%d\nfleet_fallback = deny\n"
              "[user:crawler]\nsend = 1/h\nerrno = ECONNREFUSED\n"
              "[site:a]\nto = 10.0.0.1\nscope = fleet\nsend = 100/s\n"
              "errno = ENETUNREACH\n");
    int err;
    cr_assert_eq(send_to("10.0.0.1"), RL_GATE_GO); /* spends the rule's */
    cr_expect_eq(h_call(RL_KIND_SEND, "10.0.0.1", &err), RL_GATE_FAIL);
    cr_expect_eq(err, ECONNREFUSED);
}
