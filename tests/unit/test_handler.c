/* A call decided from a signal handler (rl_gate_handler), rule by rule as
 * gate.h states them: nothing made, nothing waited for, no lock taken,
 * and the budgets charged as the ordinary decision charges them. Each
 * test runs in its own process (Criterion), so the gate starts fresh; the
 * handler reads the real clock, so every rate here is per hour. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "gate_fixture.h"
#include "policy/budget.h"
#include "policy/gate.h"
#include "state/store.h"
#include "util/clock.h"
#include "util/log.h"

static struct rl_gate_ticket t;

static void setup(void)
{
    fixture_state_dir("handler");
}

static void teardown(void)
{
    fixture_state_dir_remove();
}

TestSuite(handler, .init = setup, .fini = teardown);

static struct sockaddr_in v4(const char *ip)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(80)};
    inet_pton(AF_INET, ip, &a.sin_addr);
    return a;
}

/* From a handler: a send of 1 call and `bytes` (at least `min`) to sa. */
static int h_send(const void *sa, unsigned salen, uint64_t bytes,
                  uint64_t min, uint64_t *granted, int *err)
{
    const struct rl_gate_q q = {RL_KIND_SEND, sa, salen, 1, bytes, min};
    *err = 0;
    return rl_gate_handler(&proc, &q, granted, err);
}

static int h_send_to(const char *ip, int *err)
{
    struct sockaddr_in a = v4(ip);
    uint64_t g;
    return h_send(&a, sizeof a, 1, 1, &g, err);
}

static int h_connect_to(const char *ip, int *err)
{
    struct sockaddr_in a = v4(ip);
    const struct rl_gate_q q = {RL_KIND_CONNECT, &a, sizeof a, 1, 0, 0};
    uint64_t g;
    *err = 0;
    return rl_gate_handler(&proc, &q, &g, err);
}

static int send_to(const char *ip, uint64_t bytes)
{
    struct sockaddr_in a = v4(ip);
    return rl_gate_send_at(&proc, &t, rl_clock_now_ns(), "sendto", 3, &a,
                           sizeof a, 1, 1, bytes, bytes);
}

Test(handler, lets_every_call_go_when_no_section_applies)
{
    fixture_gate(&proc, "tester", "[user:someone-else]\nsend = 1/h\n");
    uint64_t g = 0;
    int err;
    for (int i = 0; i < 3; i++)
        cr_expect_eq(h_send(NULL, 0, 70, 1, &g, &err), RL_GATE_GO);
    cr_expect_eq(g, 70, "the whole send may go");
}

Test(handler, denies_an_unknown_user_with_the_configs_errno)
{
    fixture_gate(&proc, "tester",
                 "[rlshim]\nunknown = deny\nerrno = ETIMEDOUT\n"
                 "[user:someone-else]\nconnect = 1/s\n");
    int err;
    cr_expect_eq(h_connect_to("10.0.0.1", &err), RL_GATE_FAIL);
    cr_expect_eq(err, ETIMEDOUT);
}

Test(handler, charges_a_connect_and_denies_it_once_spent)
{
    fixture_gate(&proc, "tester",
                 "[user:tester]\nconnect = 2/h\nerrno = ECONNREFUSED\n");
    int err;
    cr_expect_eq(h_connect_to("10.0.0.1", &err), RL_GATE_GO);
    cr_expect_eq(h_connect_to("10.0.0.1", &err), RL_GATE_GO);
    cr_expect_eq(h_connect_to("10.0.0.1", &err), RL_GATE_FAIL);
    cr_expect_eq(err, ECONNREFUSED);
}

Test(handler, denies_a_connect_to_a_budget_with_max_open)
{
    fixture_gate(&proc, "tester",
                 "[user:tester]\nconnect = 10/h\nmax_open = 4\n");
    int err;
    cr_expect_eq(h_connect_to("10.0.0.1", &err), RL_GATE_FAIL,
                 "a max_open place was bound from a handler");
    cr_expect_eq(err, EAGAIN);
}

Test(handler, denies_a_sliding_window_budget_and_leaves_it_whole)
{
    fixture_gate(&proc, "tester",
                 "[user:tester]\nalgorithm = sliding_window\nsend = 3/h\n");
    int err;
    cr_expect_eq(h_send_to("10.0.0.1", &err), RL_GATE_FAIL,
                 "a window's mutex was taken from a handler");
    for (int i = 0; i < 3; i++)
        cr_expect_eq(send_to("10.0.0.1", 1), RL_GATE_GO, "%d", i);
    cr_expect_eq(send_to("10.0.0.1", 1), RL_GATE_FAIL);
}

Test(handler, goes_on_a_dry_run_denial)
{
    fixture_gate(&proc, "tester",
                 "[user:tester]\nsend = 1/h\ndry_run = yes\n");
    int err;
    cr_expect_eq(h_send_to("10.0.0.1", &err), RL_GATE_GO);
    cr_expect_eq(h_send_to("10.0.0.1", &err), RL_GATE_GO,
                 "a dry run denied");
}

Test(handler, spends_a_rules_per_destination_budget_it_never_adds)
{
    fixture_gate(&proc, "tester",
                 "[user:tester]\nper = destination\nsend = 2/h\n"
                 "errno = ETIMEDOUT\n");
    int err;
    cr_expect_eq(h_send_to("10.0.0.1", &err), RL_GATE_FAIL,
                 "a destination's budget was added from a handler");
    cr_expect_eq(err, ETIMEDOUT);
    cr_assert_eq(send_to("10.0.0.1", 1), RL_GATE_GO);
    cr_expect_eq(h_send_to("10.0.0.1", &err), RL_GATE_GO);
    cr_expect_eq(h_send_to("10.0.0.1", &err), RL_GATE_FAIL);
}

/* An address that is not inet names no destination: nothing is
 * charged, as in the ordinary decision; a send with no address at all
 * (a stream whose peer is gone) is the rule's own. */
Test(handler, charges_nothing_for_an_address_that_is_not_inet)
{
    fixture_gate(&proc, "tester",
                 "[user:tester]\nsend = 1/h\n"
                 "[site:a]\nto = 10.0.0.1\nsend = 5/h\n");
    struct sockaddr_un u = {.sun_family = AF_UNIX};
    strcpy(u.sun_path, "/nowhere");
    uint64_t g;
    int err;
    cr_expect_eq(h_send(&u, sizeof u, 1, 1, &g, &err), RL_GATE_GO);
    cr_expect_eq(h_send(&u, sizeof u, 1, 1, &g, &err), RL_GATE_GO);
    cr_expect_eq(h_send(NULL, 0, 1, 1, &g, &err), RL_GATE_GO);
    cr_expect_eq(h_send(NULL, 0, 1, 1, &g, &err), RL_GATE_FAIL);
    cr_expect_eq(h_send(&u, sizeof u, 1, 1, &g, &err), RL_GATE_GO);
    cr_expect_eq(rl_gate_send_at(&proc, &t, rl_clock_now_ns(), "sendto", 3,
                                 &u, sizeof u, 1, 1, 1, 1),
                 RL_GATE_GO, "the ordinary decision alike");
}

/* The rule and a site together, all or none: the site's denial gives the
 * rule its unit back, and says the site's errno. */
Test(handler, gives_the_rule_its_unit_back_when_the_site_denies)
{
    fixture_gate(&proc, "tester",
                 "[user:tester]\nsend = 3/h\n"
                 "[site:a]\nto = 10.0.0.1\nsend = 1/h\nerrno = ENETUNREACH\n");
    int err;
    cr_assert_eq(send_to("10.0.0.1", 1), RL_GATE_GO); /* makes the site's */
    cr_expect_eq(h_send_to("10.0.0.1", &err), RL_GATE_FAIL);
    cr_expect_eq(err, ENETUNREACH);
    cr_expect_eq(h_send_to("10.0.0.2", &err), RL_GATE_GO);
    cr_expect_eq(h_send_to("10.0.0.2", &err), RL_GATE_GO,
                 "the site's denial kept the rule's unit");
    cr_expect_eq(h_send_to("10.0.0.2", &err), RL_GATE_FAIL);
}

/* A stream send's bytes: part granted, down to its minimum. */
Test(handler, grants_the_bytes_that_are_free_down_to_the_minimum)
{
    fixture_gate(&proc, "tester",
                 "[user:tester]\nsend_bytes = 100/h\nerrno = ECONNREFUSED\n");
    uint64_t g = 0;
    int err;
    cr_expect_eq(h_send(NULL, 0, 60, 1, &g, &err), RL_GATE_GO);
    cr_expect_eq(g, 60);
    cr_expect_eq(h_send(NULL, 0, 60, 1, &g, &err), RL_GATE_GO);
    cr_expect_eq(g, 40);
    cr_expect_eq(h_send(NULL, 0, 10, 1, &g, &err), RL_GATE_FAIL);
    cr_expect_eq(err, ECONNREFUSED);
}

/* A log line is formatted and written: never from a handler, where an
 * ordinary decision writes one (the shim's log, the decision log). */
static bool has_lines(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && st.st_size > 0;
}

Test(handler, logs_nothing_where_an_ordinary_decision_logs_a_line)
{
    char text[256], path[128], dlog[128];
    snprintf(path, sizeof path, "%s/shim.log", fixture_dir);
    snprintf(dlog, sizeof dlog, "%s/decisions.jsonl", fixture_dir);
    snprintf(text, sizeof text,
             "[rlshim]\ndecision_log = %s\n[user:tester]\nsend = 1/h\n",
             dlog);
    fixture_gate(&proc, "tester", text);
    cr_assert_eq(rl_log_setup(&proc.log, 3, path), 0); /* a file */
    int err;
    cr_assert_eq(h_send_to("10.0.0.1", &err), RL_GATE_GO);
    cr_assert_eq(h_send_to("10.0.0.1", &err), RL_GATE_FAIL);
    cr_expect(!has_lines(path), "a handler's denial was logged");
    cr_expect(!has_lines(dlog), "a handler's decision was logged");
    cr_assert_eq(send_to("10.0.0.1", 1), RL_GATE_FAIL);
    cr_expect(has_lines(path) && has_lines(dlog),
              "the ordinary denial was not logged: the test proves nothing");
}

/* A thread's lease is filled under its holder's lock: never from a
 * handler, so the thread's next ordinary send is decided on its own. */
Test(handler, never_fills_the_threads_lease)
{
    fixture_gate(&proc, "tester",
                 "[user:tester]\nsend_bytes = 64000/h\nsend = 6400/h\n");
    uint64_t g;
    int err;
    cr_assert_eq(h_send(NULL, 0, 100, 100, &g, &err), RL_GATE_GO);
    cr_assert_eq(rl_gate_send(&proc, &t, "send", 3, NULL, 0, 1, 1, 100, 100),
                 RL_GATE_GO);
    cr_expect(!t.leased, "a handler filled the thread's lease");
    cr_assert_eq(rl_gate_send(&proc, &t, "send", 3, NULL, 0, 1, 1, 100, 100),
                 RL_GATE_GO);
    cr_expect(t.leased, "no lease at all: the test proves nothing");
}

/* Re-opening a segment another process replaced allocates: a handler
 * decides in the budget as it was loaded, the next ordinary call moves
 * to the new segment. */
Test(handler, decides_in_the_budget_as_loaded_never_reopening_it)
{
    fixture_gate(&proc, "tester", "[user:tester]\nsend = 2/h\n");
    cr_assert_eq(send_to("10.0.0.1", 1), RL_GATE_GO);
    /* What `rlshim reset` without a config does: renew the segment. */
    struct rl_store *st = NULL;
    uint32_t uid = (uint32_t)getuid();
    cr_assert_eq(rl_store_attach(&st, fixture_dir, uid,
                                 rl_budget_hash(rl_proc_gen(&proc)->gate.cfg), NULL, 0),
                 0);
    cr_assert_eq(rl_store_renew(st, fixture_dir, uid, NULL, 0), 0);
    rl_store_close(st);
    int err;
    cr_expect_eq(h_send_to("10.0.0.1", &err), RL_GATE_GO);
    cr_expect_eq(h_send_to("10.0.0.1", &err), RL_GATE_FAIL,
                 "a handler re-opened the replaced segment");
    cr_expect_eq(send_to("10.0.0.1", 1), RL_GATE_GO, "not replaced");
}
