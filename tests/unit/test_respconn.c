/* A connection's response side (policy/respconn.c, SPEC §12): requests
 * written on a struct rl_reqconn, answers read back on it, and what the
 * answers did to the budgets the requests were charged to, seen through
 * the next request's decision (fail mode: a paused destination's request
 * is refused). Per-destination budgets, so that an answer paused the
 * right name or the wrong one. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <string.h>
#include <unistd.h>

#include "gate_fixture.h"
#include "policy/decide_request.h"
#include "policy/reqconn.h"

static struct rl_reqconn conn;

static void setup(void)
{
    fixture_state_dir("respconn");
    fixture_gate(&proc, "tester",
                 "[rlshim]\non_deny = fail\n"
                 "[site:every]\nper = destination\n"
                 "request = 100/min\nrequest_burst = 100\n");
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(80)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    rl_reqconn_init(&conn, &a, sizeof a);
}

static void teardown(void)
{
    rl_reqconn_free(&conn);
    fixture_state_dir_remove();
}

TestSuite(respconn, .init = setup, .fini = teardown);

static const struct rl_reqwrite plain = {-1, "send", RL_REQ_PLAIN, false, -1};
static const struct rl_reqread rd = {-1, "recv"};

/* Write `text` whole; returns the plan's act. */
static int write_(const char *text)
{
    struct iovec iov = {(void *)text, strlen(text)};
    struct rl_reqplan p;
    rl_reqconn_plan(&proc, &conn, &iov, 1, &plain, &p);
    if (p.act == RL_GATE_GO) {
        iov.iov_len = p.allow;
        rl_reqconn_done(&conn, &iov, 1, (long)p.allow, &p);
    }
    return p.act;
}

/* Read `text`, `step` bytes a call (0: at once). */
static void read_(const char *text, size_t step)
{
    size_t n = strlen(text);
    if (step == 0)
        step = n;
    for (size_t i = 0; i < n; i += step) {
        struct iovec iov = {(void *)(text + i), n - i < step ? n - i : step};
        rl_reqconn_received(&proc, &conn, &iov, 1, iov.iov_len, &rd);
    }
}

/* Is a request to `host` refused now (its budget paused)? Asked on a
 * connection of its own, so that `conn`'s record is left as it is. */
static bool paused(const char *host)
{
    struct rl_reqconn other;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(80)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    rl_reqconn_init(&other, &a, sizeof a);
    char head[128];
    snprintf(head, sizeof head, "GET / HTTP/1.1\r\nHost: %s\r\n\r\n", host);
    struct iovec iov = {head, strlen(head)};
    struct rl_reqplan p;
    rl_reqconn_plan(&proc, &other, &iov, 1, &plain, &p);
    rl_reqconn_free(&other);
    return p.act == RL_GATE_FAIL;
}

#define GET(path, host) "GET " path " HTTP/1.1\r\nHost: " host "\r\n\r\n"
#define OK "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
#define BUSY                                                                   \
    "HTTP/1.1 429 Too Many Requests\r\nRetry-After: 30\r\n"                    \
    "Content-Length: 4\r\n\r\nbusy"

Test(respconn, pipelined_answers_pause_the_name_of_their_own_request)
{
    cr_assert_eq(write_(GET("/a", "a.test") GET("/b", "b.test")), RL_GATE_GO);
    read_(OK BUSY, 0);
    cr_expect(!paused("a.test"), "a.test's answer was a 200");
    cr_expect(paused("b.test"), "b.test's answer was a 429");
    cr_expect_eq(conn.nsent, 0, "both answered");
}

Test(respconn, an_answer_read_a_byte_at_a_time_is_the_same_answer)
{
    cr_assert_eq(write_(GET("/a", "a.test")), RL_GATE_GO);
    cr_assert_eq(write_(GET("/b", "b.test")), RL_GATE_GO);
    read_(BUSY OK, 1);
    cr_expect(paused("a.test"));
    cr_expect(!paused("b.test"));
}

/* A head split across two writes is charged at its first byte, before
 * its Host is seen: to the previous request's name (SPEC §11). Its answer
 * pauses the budget it was charged to, which is that name's. */
Test(respconn, an_answer_pauses_the_budget_its_request_was_charged_to)
{
    cr_assert_eq(write_(GET("/a", "a.test")), RL_GATE_GO);
    read_(OK, 0);
    cr_assert_eq(write_("GET /b HTTP/1.1\r\n"), RL_GATE_GO);
    cr_assert_eq(write_("Host: b.test\r\n\r\n"), RL_GATE_GO);
    read_(BUSY, 0);
    cr_expect(paused("a.test"), "charged to a.test: a.test's pause");
    cr_expect(!paused("b.test"), "b.test was not charged: not paused");
}

Test(respconn, an_interim_answer_is_not_the_answer)
{
    cr_assert_eq(write_(GET("/a", "a.test")), RL_GATE_GO);
    cr_assert_eq(write_(GET("/b", "b.test")), RL_GATE_GO);
    read_("HTTP/1.1 100 Continue\r\n\r\n" OK BUSY, 0);
    cr_expect(!paused("a.test"), "the 100 and the 200 were a.test's");
    cr_expect(paused("b.test"));
}

Test(respconn, a_head_answer_has_no_body)
{
    cr_assert_eq(write_("HEAD /a HTTP/1.1\r\nHost: a.test\r\n\r\n"),
                 RL_GATE_GO);
    cr_assert_eq(write_(GET("/b", "b.test")), RL_GATE_GO);
    /* The HEAD's Content-Length frames no body: the 429 after it is b's. */
    read_("HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\n" BUSY, 0);
    cr_expect(!paused("a.test"));
    cr_expect(paused("b.test"));
}

Test(respconn, bytes_gone_by_unread_turn_the_response_side_off)
{
    cr_assert_eq(write_(GET("/a", "a.test")), RL_GATE_GO);
    rl_reqconn_lost(&conn);
    read_(BUSY, 0);
    cr_expect(conn.resp_off);
    cr_expect(!paused("a.test"), "an answer after a lost read is not read");
    /* The requests are still counted. */
    cr_expect_eq(write_(GET("/b", "a.test")), RL_GATE_GO);
}

Test(respconn, an_answer_with_no_request_pauses_nothing)
{
    read_(BUSY, 0);
    cr_expect(!paused("a.test"));
    cr_expect(!paused("127.0.0.1"));
}

Test(respconn, a_stream_that_is_not_http_is_read_no_further)
{
    cr_assert_eq(write_(GET("/a", "a.test")), RL_GATE_GO);
    read_("SSH-2.0-OpenSSH_9.2\r\n" BUSY, 0);
    cr_expect(conn.resp_off);
    cr_expect(!paused("a.test"));
}

/* What a write waiting for its turn looked at (RL_READ_AHEAD): the
 * stream from the program's next byte, shown again whole at each look. */
static void look_(const char *text, size_t n)
{
    struct iovec iov = {(void *)text, n};
    const struct rl_reqread ahead = {-1, "recv", RL_READ_AHEAD};
    rl_request_received(&proc, &conn, RL_CARRY_PLAIN, &ahead, false, &iov, 1,
                        n);
}

/* The program's own read of `n` bytes, through the same door. */
static void take_(const char *text, size_t n)
{
    struct iovec iov = {(void *)text, n};
    rl_request_received(&proc, &conn, RL_CARRY_PLAIN, &rd, false, &iov, 1, n);
}

/* An answer looked at before the program read it pauses its name at
 * once; the program's reads of the same bytes, in pieces that cross what
 * the looks saw, are not read again: the answers after them are still
 * paired with their own requests. */
Test(respconn, an_answer_looked_at_ahead_is_read_once)
{
    cr_assert_eq(write_(GET("/a", "a.test") GET("/b", "b.test")), RL_GATE_GO);
    const char seen[] = OK BUSY;
    size_t n = strlen(seen);
    look_(seen, 10); /* part of the 200 */
    cr_expect(!paused("b.test"), "not seen yet");
    look_(seen, n); /* the rest, shown again from the start */
    cr_expect(paused("b.test"), "the 429 looked at paused b.test");
    cr_expect(!paused("a.test"));
    cr_expect_eq(conn.ahead, n);
    for (size_t i = 0; i < n; i += 7)
        take_(seen + i, n - i < 7 ? n - i : 7);
    cr_expect_eq(conn.ahead, 0, "the program read what the looks saw");
    /* In step still: c's 429 is c's, after what was read twice. */
    cr_assert_eq(write_(GET("/c", "c.test")), RL_GATE_GO);
    take_(BUSY, strlen(BUSY));
    cr_expect(paused("c.test"), "c.test's answer paired with c's request");
    cr_expect_eq(conn.nsent, 0, "every request answered once");
}

/* A read that returns more than a look saw takes the look's part as read
 * and the rest as new. */
Test(respconn, a_read_past_what_a_look_saw_reads_the_rest)
{
    cr_assert_eq(write_(GET("/a", "a.test") GET("/b", "b.test")), RL_GATE_GO);
    const char both[] = OK BUSY;
    look_(both, strlen(OK));
    take_(both, strlen(both));
    cr_expect_eq(conn.ahead, 0);
    cr_expect(paused("b.test"), "the part past the look was read");
    cr_expect_eq(conn.nsent, 0);
}
