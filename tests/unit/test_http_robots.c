/* test_http_robots.c — what the scanners hand over for robots.txt (SPEC
 * §14): the request side marks GET /robots.txt and keeps its User-Agent
 * in the connection; the response side says how that answer's body is
 * framed and coded. Each stream also fed a byte at a time. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "http/reqscan.h"
#include "http/respscan.h"

#define MAXEV 8

static struct rl_httpconn conn;
static struct rl_reqscan rq;
static struct rl_respscan rs;

static void setup(void)
{
    memset(&conn, 0, sizeof conn);
    rl_reqscan_init(&rq, &conn);
    rl_respscan_init(&rs, &conn);
}

static void teardown(void)
{
    rl_reqscan_free(&rq);
    rl_respscan_free(&rs);
}

TestSuite(http_robots, .init = setup, .fini = teardown);

/* Commits `req`, `step` bytes a feed (0: at once). */
static void send_(const char *req, size_t step)
{
    size_t n = strlen(req);
    if (step == 0)
        step = n;
    for (size_t i = 0; i < n; i += step)
        cr_assert_geq(rl_reqscan_commit(&rq, (const uint8_t *)req + i,
                                        n - i < step ? n - i : step, NULL, 0),
                      0);
}

/* Feeds `resp` whole; its first status event into *e (false: none). */
static bool answer_(const char *resp, struct rl_resp_event *e)
{
    struct rl_resp_event ev[MAXEV];
    long k =
        rl_respscan_feed(&rs, (const uint8_t *)resp, strlen(resp), ev, MAXEV);
    cr_assert_geq(k, 0);
    for (long i = 0; i < k && i < MAXEV; i++) {
        if (ev[i].kind == RL_RESP_STATUS) {
            *e = ev[i];
            return true;
        }
    }
    return false;
}

static bool robots_fetch(const char *req, size_t step)
{
    send_(req, step);
    return conn.fifo_len > 0 && conn.fifo[conn.fifo_head].robots;
}

Test(http_robots, get_robots_txt_is_marked_with_its_user_agent)
{
    cr_assert(robots_fetch("GET /robots.txt HTTP/1.1\r\nHost: a.test\r\n"
                           "User-Agent:   polite-bot/1.0 (+http://x)\r\n\r\n",
                           0));
    cr_assert_str_eq(conn.robots_ua, "polite-bot/1.0 (+http://x)");
}

Test(http_robots, a_head_fed_a_byte_at_a_time_is_marked_the_same)
{
    cr_assert(robots_fetch("GET /robots.txt HTTP/1.1\r\nuser-agent: "
                           "Scrapy/2.11\r\nHost: a.test\r\n\r\n",
                           1));
    cr_assert_str_eq(conn.robots_ua, "Scrapy/2.11");
}

Test(http_robots, a_proxy_request_for_robots_txt_is_marked)
{
    cr_assert(robots_fetch("GET http://a.test:8080/robots.txt HTTP/1.1\r\n"
                           "User-Agent: bot\r\n\r\n",
                           0));
    cr_assert_str_eq(conn.robots_ua, "bot");
}

Test(http_robots, other_paths_methods_and_queries_are_not_robots_txt)
{
    cr_assert_not(robots_fetch("GET /robots.txt?x=1 HTTP/1.1\r\n"
                               "User-Agent: a\r\n\r\n",
                               0));
    cr_assert_not(robots_fetch("GET /robots.txt.bak HTTP/1.1\r\n\r\n", 0));
    cr_assert_not(robots_fetch("GET /x/robots.txt HTTP/1.1\r\n\r\n", 0));
    cr_assert_not(robots_fetch("HEAD /robots.txt HTTP/1.1\r\n\r\n", 0));
    cr_assert_not(robots_fetch("GET http://a.test/robots.txt?q HTTP/1.1"
                               "\r\n\r\n",
                               0));
    cr_assert_str_eq(conn.robots_ua, "", "no other request's agent is kept");
}

Test(http_robots, a_long_user_agent_keeps_its_first_bytes)
{
    char req[512];
    char ua[200];
    memset(ua, 'x', sizeof ua - 1);
    ua[sizeof ua - 1] = '\0';
    snprintf(req, sizeof req,
             "GET /robots.txt HTTP/1.1\r\nUser-Agent: %s"
             "\r\n\r\n",
             ua);
    cr_assert(robots_fetch(req, 0));
    cr_assert_eq(strlen(conn.robots_ua), RL_HTTP_UA_MAX);
}

Test(http_robots, the_answer_says_its_framing_and_coding)
{
    struct rl_resp_event e;
    send_("GET /robots.txt HTTP/1.1\r\nUser-Agent: b\r\n\r\n", 0);
    cr_assert(answer_("HTTP/1.1 200 OK\r\nContent-Encoding:  gzip \r\n"
                      "Transfer-Encoding: chunked\r\n\r\n",
                      &e));
    cr_assert(e.robots);
    cr_assert(e.chunked);
    cr_assert_str_eq(e.coding, "gzip");
}

Test(http_robots, a_sized_answer_gives_its_length)
{
    struct rl_resp_event e;
    send_("GET /robots.txt HTTP/1.1\r\n\r\n", 0);
    cr_assert(answer_("HTTP/1.1 200 OK\r\nContent-Length: 42\r\n\r\n", &e));
    cr_assert(e.robots);
    cr_assert_not(e.chunked);
    cr_assert_eq(e.length, 42);
    cr_assert_str_eq(e.coding, "");
}

Test(http_robots, an_answer_until_close_has_no_length)
{
    struct rl_resp_event e;
    send_("GET /robots.txt HTTP/1.1\r\n\r\n", 0);
    cr_assert(answer_("HTTP/1.0 200 OK\r\n\r\n", &e));
    cr_assert(e.robots);
    cr_assert_eq(e.length, -1);
}

Test(http_robots, two_codings_are_a_list)
{
    struct rl_resp_event e;
    send_("GET /robots.txt HTTP/1.1\r\n\r\n", 0);
    cr_assert(answer_("HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\n"
                      "Content-Encoding: gzip\r\nContent-Length: 1\r\n\r\n",
                      &e));
    cr_assert_str_eq(e.coding, RL_RESP_CODINGS);
}

Test(http_robots, another_request_s_answer_is_not_robots)
{
    struct rl_resp_event e;
    send_("GET /robots.txt HTTP/1.1\r\n\r\nGET /a HTTP/1.1\r\n\r\n", 0);
    cr_assert(
        answer_("HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n", &e));
    cr_assert(e.robots, "the first answers robots.txt, whatever its status");
    cr_assert(answer_("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", &e));
    cr_assert_not(e.robots);
}
