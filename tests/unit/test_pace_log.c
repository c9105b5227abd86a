/* test_pace_log.c — the decision log on a request its destination's pace
 * held (SPEC §9, §14): its `reason` says what held it ("latency",
 * "crawl_delay"), and `interval_ns` the destination's interval then, so
 * `rlshim timeline` can draw the adaptation. Time is stepped by hand. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <string.h>

#include "gate_fixture.h"
#include "policy/gate_crawl.h"
#include "util/declog_read.h"

#define MS 1000000ull
#define S 1000000000ull
#define T0 (1000 * S) /* an arbitrary start on the fake clock */

static struct rl_gate_ticket t;
static struct sockaddr_in addr;
static char log_path[128];

static void setup(void)
{
    fixture_state_dir("pacelog");
    addr = (struct sockaddr_in){.sin_family = AF_INET,
                                .sin_port = htons(80)};
    inet_pton(AF_INET, "10.0.0.1", &addr.sin_addr);
    snprintf(log_path, sizeof log_path, "%s/decisions.jsonl", fixture_dir);
    setenv("RLSHIM_DECISION_LOG", log_path, 1);
}

TestSuite(pace_log, .init = setup, .fini = fixture_state_dir_remove);

static struct rl_gate_req req(void)
{
    return (struct rl_gate_req){.call = "send", .fd = -1, .sa = &addr,
                                .salen = sizeof addr, .name = "a.example",
                                .port = 80, .method = "GET", .target = "/",
                                .units = 1};
}

static int ask(uint64_t now)
{
    struct rl_gate_req q = req();
    return rl_gate_request_at(&proc, &t, now, &q);
}

/* Line n (from 0) of the log into *e. */
static void line_of(int n, struct rl_declog_entry *e)
{
    FILE *f = fopen(log_path, "r");
    cr_assert_not_null(f);
    char line[RL_DECLOG_LINE_MAX + 2];
    for (int i = 0; i <= n; i++)
        cr_assert_not_null(fgets(line, sizeof line, f), "no line %d", n);
    fclose(f);
    cr_assert_eq(rl_declog_parse(line, e), 0, "%s", line);
}

static const char *section = "[rlshim]\non_deny = delay\nmax_delay = 10s\n"
                             "[user:tester]\nrequest = 10/s\n"
                             "request_burst = 10\n";

/* Two requests, 0 and `gap` after T0, the second held `held`: its line
 * says `reason` and `interval`, and the first's says `interval` too. */
static void expect_held(uint64_t gap, uint64_t held, const char *reason,
                        uint64_t interval)
{
    cr_assert_eq(ask(T0), RL_GATE_GO);
    cr_assert_eq(ask(T0 + gap), RL_GATE_GO);
    cr_expect_eq(t.wait_ns, held);
    struct rl_declog_entry e;
    line_of(0, &e);
    cr_expect_str_eq(e.reason, "");
    cr_expect_eq(e.interval_ns, interval);
    line_of(1, &e);
    cr_expect_eq(e.verdict, RL_DECLOG_DELAY);
    cr_expect_eq(e.wait_ns, held);
    cr_expect_str_eq(e.reason, reason);
    cr_expect_eq(e.interval_ns, interval);
}

/* A Crawl-delay of 2 s read from robots.txt holds the next request 2 s
 * after the last: its line says crawl_delay, and the interval. */
Test(pace_log, a_crawl_delay_hold_says_crawl_delay_and_the_interval)
{
    fixture_gate(&proc, "tester", section);
    struct rl_gate_req q = req();
    cr_assert_eq(rl_gate_crawl_delay_at(&proc, &q, 2 * S, T0), 1);
    expect_held(500 * MS, 1500 * MS, "crawl_delay", 2 * S);
}

/* A learned response time of 400 ms (factor 2) spaces requests 800 ms:
 * the held one says latency and the interval. */
Test(pace_log, a_latency_hold_says_latency_and_the_interval)
{
    char text[256];
    snprintf(text, sizeof text, "%sadapt = latency\n", section);
    fixture_gate(&proc, "tester", text);
    struct rl_gate_req q = req();
    rl_gate_request_latency(&proc, &q, 400 * MS, T0);
    expect_held(100 * MS, 700 * MS, "latency", 800 * MS);
}

/* A section that keeps no pace writes no interval. */
Test(pace_log, no_interval_where_nothing_paces)
{
    char text[256];
    snprintf(text, sizeof text, "%scrawl_delay = ignore\n", section);
    fixture_gate(&proc, "tester", text);
    cr_assert_eq(ask(T0), RL_GATE_GO);
    struct rl_declog_entry e;
    line_of(0, &e);
    cr_expect_eq(e.interval_ns, 0);
}
