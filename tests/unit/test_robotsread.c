/* test_robotsread.c — robots.txt read as a program reads it through a
 * counted connection (policy/respconn.c, robotsread.c, gate_crawl.c; SPEC
 * §14): the Crawl-delay of the request's agent lands in the pace of the
 * destination the request was charged by; a 404, another path, or
 * crawl_delay = ignore leaves it; a robots.txt read again replaces it. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "gate_fixture.h"
#include "limit/adapt.h"
#include "policy/gate_crawl.h"
#include "policy/gate_int.h"
#include "policy/pauses.h"
#include "policy/reqconn.h"
#include "util/clock.h"

static struct rl_reqconn conn;

#define SITE                                                                   \
    "[rlshim]\non_deny = fail\n"                                               \
    "[site:every]\nper = destination\n"                                        \
    "request = 100/min\nrequest_burst = 100\n"

static void open_conn(void)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(80)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    rl_reqconn_init(&conn, &a, sizeof a);
}

static void setup(void)
{
    fixture_state_dir("robotsread");
}

/* The gate under SITE and `more` keys for its section, and a connection
 * to 127.0.0.1:80. */
static void start(const char *more)
{
    char text[512];
    snprintf(text, sizeof text, "%s%s", SITE, more);
    fixture_gate(&proc, "tester", text);
    open_conn();
}

static void teardown(void)
{
    rl_reqconn_free(&conn);
    fixture_state_dir_remove();
}

TestSuite(robotsread, .init = setup, .fini = teardown);

static const struct rl_reqwrite plain = {-1, "send", RL_REQ_PLAIN, false, -1};
static const struct rl_reqread rd = {-1, "recv"};

static void write_(const char *text)
{
    struct iovec iov = {(void *)text, strlen(text)};
    struct rl_reqplan p;
    rl_reqconn_plan(&proc, &conn, &iov, 1, &plain, &p);
    cr_assert_eq(p.act, RL_GATE_GO);
    iov.iov_len = p.allow;
    rl_reqconn_done(&conn, &iov, 1, (long)p.allow, &p);
}

/* Read buf[0..n), `step` bytes a call (0: at once). */
static void read_bytes(const void *buf, size_t n, size_t step)
{
    if (step == 0)
        step = n;
    for (size_t i = 0; i < n; i += step) {
        struct iovec iov = {(char *)buf + i, n - i < step ? n - i : step};
        rl_reqconn_received(&proc, &conn, &iov, 1, iov.iov_len, &rd);
    }
}

static void read_(const char *text, size_t step)
{
    read_bytes(text, strlen(text), step);
}

/* The Crawl-delay in force for `host` (the site's pace), ns. */
static uint64_t crawl_of(const char *host)
{
    const struct rl_config *cfg = rl_proc_gen(&proc)->gate.cfg;
    uint64_t ri = 0;
    for (size_t i = 0; i < cfg->nrules; i++)
        if (cfg->rules[i].site != NULL)
            ri = i + 1;
    cr_assert_neq(ri, 0);
    struct budget *b = rl_gate_budget(&rl_proc_gen(&proc)->gate);
    cr_assert_not_null(b);
    struct rl_pauses pt;
    rl_pauses_of(b->store, &pt);
    struct rl_adapt a;
    rl_pauses_pace(&pt, rl_pauses_key(ri, rl_proc_gen(&proc)->gate.user, host, strlen(host)),
                   &a);
    const struct rl_adapt_conf c = {.max_crawl_delay_ns =
                                        cfg->rules[ri - 1].max_crawl_delay_ns};
    return rl_adapt_crawl_delay_now(&a, &c, rl_clock_now_ns());
}

#define SEC 1000000000ull
#define ROBOTS(host, ua)                                                       \
    "GET /robots.txt HTTP/1.1\r\nHost: " host "\r\nUser-Agent: " ua "\r\n\r\n"
#define TWO_GROUPS                                                             \
    "User-agent: polite-bot\nCrawl-delay: 2\n\n"                               \
    "User-agent: *\nCrawl-delay: 0.5\nDisallow: /private\n"

static void answer_sized(const char *body, size_t step)
{
    char resp[512];
    snprintf(resp, sizeof resp,
             "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n\r\n%s", strlen(body),
             body);
    read_(resp, step);
}

Test(robotsread, the_agent_s_group_sets_its_destination_s_crawl_delay)
{
    start("");
    write_(ROBOTS("a.test", "polite-bot/1.0"));
    answer_sized(TWO_GROUPS, 0);
    cr_expect_eq(crawl_of("a.test"), 2 * SEC);
    cr_expect_eq(crawl_of("b.test"), 0, "another destination keeps none");
    cr_expect_null(conn.robots, "the reader is freed at the body's end");
}

Test(robotsread, another_agent_gets_the_star_group)
{
    start("");
    write_(ROBOTS("a.test", "curl/8.0"));
    answer_sized(TWO_GROUPS, 0);
    cr_expect_eq(crawl_of("a.test"), SEC / 2);
}

Test(robotsread, an_answer_read_a_byte_at_a_time_is_the_same)
{
    start("");
    write_(ROBOTS("a.test", "polite-bot/1.0"));
    answer_sized(TWO_GROUPS, 1);
    cr_expect_eq(crawl_of("a.test"), 2 * SEC);
}

Test(robotsread, a_chunked_gzip_body_is_read)
{
    start("");
    unsigned char gz[256];
    z_stream z = {0};
    cr_assert_eq(deflateInit2(&z, 9, Z_DEFLATED, 31, 8, Z_DEFAULT_STRATEGY),
                 Z_OK);
    z.next_in = (unsigned char *)TWO_GROUPS;
    z.avail_in = sizeof TWO_GROUPS - 1;
    z.next_out = gz;
    z.avail_out = sizeof gz;
    cr_assert_eq(deflate(&z, Z_FINISH), Z_STREAM_END);
    size_t n = sizeof gz - z.avail_out;
    deflateEnd(&z);
    write_(ROBOTS("a.test", "polite-bot/1.0"));
    char msg[1024];
    int h = snprintf(msg, sizeof msg,
                     "HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\n"
                     "Transfer-Encoding: chunked\r\n\r\n%zx\r\n",
                     n - 5);
    memcpy(msg + h, gz, n - 5);
    h += (int)n - 5;
    h += snprintf(msg + h, sizeof msg - (size_t)h, "\r\n5\r\n");
    memcpy(msg + h, gz + n - 5, 5);
    h += 5;
    h += snprintf(msg + h, sizeof msg - (size_t)h, "\r\n0\r\n\r\n");
    read_bytes(msg, (size_t)h, 7);
    cr_expect_eq(crawl_of("a.test"), 2 * SEC);
}

Test(robotsread, a_404_changes_nothing)
{
    start("");
    write_(ROBOTS("a.test", "polite-bot/1.0"));
    answer_sized(TWO_GROUPS, 0);
    write_(ROBOTS("a.test", "polite-bot/1.0"));
    read_("HTTP/1.1 404 Not Found\r\nContent-Length: 13\r\n\r\n"
          "Crawl-delay: 9",
          0);
    cr_expect_eq(crawl_of("a.test"), 2 * SEC);
    cr_expect_null(conn.robots);
}

Test(robotsread, read_again_without_a_delay_it_clears)
{
    start("");
    write_(ROBOTS("a.test", "polite-bot/1.0"));
    answer_sized(TWO_GROUPS, 0);
    write_(ROBOTS("a.test", "polite-bot/1.0"));
    answer_sized("User-agent: *\nDisallow:\n", 0);
    cr_expect_eq(crawl_of("a.test"), 0);
}

Test(robotsread, another_path_is_not_robots_txt)
{
    start("");
    write_("GET /robots.txt?x HTTP/1.1\r\nHost: a.test\r\n\r\n");
    answer_sized(TWO_GROUPS, 0);
    write_("GET /a HTTP/1.1\r\nHost: a.test\r\n\r\n");
    answer_sized(TWO_GROUPS, 0);
    cr_expect_eq(crawl_of("a.test"), 0);
}

Test(robotsread, the_answer_after_it_on_the_connection_is_still_read)
{
    start("");
    write_(ROBOTS("a.test",
                  "polite-bot/1.0") "GET /b HTTP/1.1\r\nHost: b.test\r\n\r\n");
    char resp[512];
    snprintf(resp, sizeof resp,
             "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n\r\n%s"
             "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
             strlen(TWO_GROUPS), TWO_GROUPS);
    read_(resp, 0);
    cr_expect_eq(crawl_of("a.test"), 2 * SEC);
    cr_expect_eq(conn.nsent, 0, "both answered");
}

Test(robotsread, crawl_delay_ignore_writes_nothing)
{
    start("crawl_delay = ignore\n");
    write_(ROBOTS("a.test", "polite-bot/1.0"));
    answer_sized(TWO_GROUPS, 0);
    cr_expect_eq(crawl_of("a.test"), 0);
}

Test(robotsread, a_delay_is_cut_at_max_crawl_delay)
{
    start("max_crawl_delay = 1s\n");
    write_(ROBOTS("a.test", "polite-bot/1.0"));
    answer_sized("User-agent: *\nCrawl-delay: 60\n", 0);
    cr_expect_eq(crawl_of("a.test"), SEC);
}
