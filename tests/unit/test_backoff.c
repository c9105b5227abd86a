/* Politeness that adapts, its errors (SPEC §14 backoff_on): which
 * answers and which failures double a destination's pause, through the
 * gate's API (rl_gate_request_outcome_at, rl_gate_request_failed_at) and
 * a connection's response side (policy/respconn.c: the server's end of
 * the stream, a request left unanswered), on a clock stepped by hand. In
 * fail mode a denied request's t.retry_ns is exactly what is left of the
 * pause. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gate_fixture.h"
#include "limit/adapt.h"
#include "policy/gate_int.h"
#include "policy/gate_pause.h"
#include "policy/pauses.h"
#include "policy/reqconn.h"
#include "util/clock.h"

#define S 1000000000ull
#define T0 (1000 * S) /* an arbitrary start on the fake clock */

static struct rl_gate_ticket t;
static struct sockaddr_in addr;

static void setup(void)
{
    fixture_state_dir("backoff");
    addr = (struct sockaddr_in){.sin_family = AF_INET,
                                .sin_port = htons(80)};
    inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
}

TestSuite(backoff, .init = setup, .fini = fixture_state_dir_remove);

static struct rl_gate_req req(const char *name)
{
    return (struct rl_gate_req){.call = "send", .fd = -1, .sa = &addr,
                                .salen = sizeof addr, .name = name,
                                .port = 80, .method = "GET", .target = "/",
                                .units = 1};
}

static void answer(int status, bool has_ra, uint64_t ra, uint64_t now)
{
    struct rl_gate_req q = req("a.example");
    rl_gate_request_outcome_at(&proc, &q, status, has_ra, ra, now);
}

static void failed(unsigned cause, uint64_t waited, uint64_t now)
{
    struct rl_gate_req q = req("a.example");
    rl_gate_request_failed_at(&proc, &q, cause, waited, now);
}

/* What is left at `now` of a.example's pause (0: none), and why. */
static uint64_t left(uint64_t now, const char **why)
{
    struct rl_gate_req q = req("a.example");
    *why = NULL;
    if (rl_gate_request_at(&proc, &t, now, &q) != RL_GATE_FAIL)
        return 0;
    *why = t.reason;
    return t.retry_ns;
}

static void expect_backoff(uint64_t now, uint64_t want)
{
    const char *why;
    uint64_t l = left(now, &why);
    cr_assert_eq(l, want, "left %llu ns at +%llu s, not %llu",
                 (unsigned long long)l,
                 (unsigned long long)((now - T0) / S),
                 (unsigned long long)want);
    if (want != 0) {
        cr_assert_not_null(why);
        cr_expect_str_eq(why, "backoff");
    }
}

#define RULE(on)                                                           \
    "[rlshim]\non_deny = fail\n[user:tester]\nrequest = 1/s\n"             \
    "request_burst = 100\nmax_retry_after = 1h\nbackoff_on = " on "\n"

Test(backoff, the_listed_causes_are_what_backoff_on_says)
{
    fixture_gate(&proc, "tester", RULE("5xx, reset"));
    const struct rl_rule *r = &rl_proc_gen(&proc)->gate.cfg->rules[0];
    cr_expect(rl_pause_backoff_on(r, 500));
    cr_expect(rl_pause_backoff_on(r, 503), "5xx takes in 503");
    cr_expect(rl_pause_backoff_on(r, 599));
    cr_expect_not(rl_pause_backoff_on(r, 429));
    cr_expect_not(rl_pause_backoff_on(r, 600));
    cr_expect_not(rl_pause_backoff_on(r, 404));
    cr_expect(rl_pause_backoff_on(r, RL_ADAPT_CAUSE_RESET));
    cr_expect_not(rl_pause_backoff_on(r, RL_ADAPT_CAUSE_TIMEOUT));
    /* The server's Retry-After: always on 429 and 503, on another 5xx
     * only where it is listed. */
    cr_expect(rl_pause_retry_after_obeyed(r, 429));
    cr_expect(rl_pause_retry_after_obeyed(r, 500));
    fixture_gate(&proc, "tester", RULE("429"));
    r = &rl_proc_gen(&proc)->gate.cfg->rules[0];
    cr_expect(rl_pause_retry_after_obeyed(r, 503));
    cr_expect_not(rl_pause_retry_after_obeyed(r, 500));
}

Test(backoff, under_5xx_500s_in_a_row_double_and_a_success_ends_them)
{
    fixture_gate(&proc, "tester", RULE("5xx"));
    answer(500, false, 0, T0);
    expect_backoff(T0, 1 * S);
    answer(502, false, 0, T0 + 1 * S);
    expect_backoff(T0 + 1 * S, 2 * S);
    answer(599, false, 0, T0 + 3 * S);
    expect_backoff(T0 + 3 * S, 4 * S);
    answer(200, false, 0, T0 + 7 * S);
    answer(500, false, 0, T0 + 7 * S);
    expect_backoff(T0 + 7 * S, 1 * S);
}

Test(backoff, a_500_not_listed_changes_nothing)
{
    fixture_gate(&proc, "tester", RULE("429, 503"));
    answer(500, false, 0, T0);
    expect_backoff(T0, 0);
    /* Nor does it end a run: a 503 after it is the second in a row. */
    answer(503, false, 0, T0 + 1 * S);
    answer(500, false, 0, T0 + 2 * S);
    answer(503, false, 0, T0 + 2 * S);
    expect_backoff(T0 + 2 * S, 2 * S);
}

Test(backoff, a_429_not_listed_is_an_answer_but_its_retry_after_wins)
{
    fixture_gate(&proc, "tester", RULE("503"));
    answer(503, false, 0, T0);
    answer(429, false, 0, T0 + 1 * S); /* not listed: ends the run */
    expect_backoff(T0 + 1 * S, 0);
    answer(503, false, 0, T0 + 1 * S);
    expect_backoff(T0 + 1 * S, 1 * S);
    answer(429, true, 30 * S, T0 + 2 * S);
    const char *why;
    cr_expect_eq(left(T0 + 2 * S, &why), 30 * S);
    cr_expect_str_eq(why, "retry_after");
}

Test(backoff, a_retry_after_on_a_listed_5xx_wins_over_the_doubling)
{
    fixture_gate(&proc, "tester", RULE("5xx"));
    answer(500, true, 7 * S, T0);
    const char *why;
    cr_expect_eq(left(T0, &why), 7 * S);
    cr_expect_str_eq(why, "retry_after");
}

Test(backoff, a_reset_counts_only_where_listed)
{
    fixture_gate(&proc, "tester", RULE("429, 503"));
    failed(RL_ADAPT_CAUSE_RESET, 0, T0);
    expect_backoff(T0, 0);
    fixture_gate(&proc, "tester", RULE("reset"));
    failed(RL_ADAPT_CAUSE_RESET, 0, T0 + 10 * S);
    expect_backoff(T0 + 10 * S, 1 * S);
    failed(RL_ADAPT_CAUSE_RESET, 0, T0 + 11 * S);
    expect_backoff(T0 + 11 * S, 2 * S);
}

Test(backoff, a_timeout_counts_once_its_response_timeout_has_passed)
{
    fixture_gate(&proc, "tester", RULE("timeout") "response_timeout = 5s\n");
    cr_expect_eq(rl_gate_response_timeout(&proc), 5 * S);
    failed(RL_ADAPT_CAUSE_TIMEOUT, 4 * S, T0);
    expect_backoff(T0, 0);
    failed(RL_ADAPT_CAUSE_TIMEOUT, 5 * S, T0);
    expect_backoff(T0, 1 * S);
    fixture_gate(&proc, "tester", RULE("5xx"));
    cr_expect_eq(rl_gate_response_timeout(&proc), 0, "none lists timeout");
}

/* a.example's backoff word in the pause table (policy/pauses.h). */
static uint64_t backoff_word(void)
{
    struct budget *bu = rl_gate_budget(&rl_proc_gen(&proc)->gate);
    cr_assert_not_null(bu);
    struct rl_pauses pt;
    rl_pauses_of(bu->store, &pt);
    uint64_t b = 0;
    rl_pauses_get(&pt, rl_pauses_key(1, "tester", "a.example", 9), &b);
    return b;
}

/* The response side: a connection's requests, and how it ends. */

static struct rl_reqconn conn;
static const struct rl_reqwrite plain = {-1, "send", RL_REQ_PLAIN, false, -1};

static void conn_open(const char *rule)
{
    fixture_gate(&proc, "tester", rule);
    rl_reqconn_init(&conn, &addr, sizeof addr);
}

static void write_(const char *text)
{
    struct iovec iov = {(void *)text, strlen(text)};
    struct rl_reqplan p;
    rl_reqconn_plan(&proc, &conn, &iov, 1, &plain, &p);
    cr_assert_eq(p.act, RL_GATE_GO);
    rl_reqconn_done(&conn, &iov, 1, (long)p.allow, &p);
}

static void read_(const char *text)
{
    static const struct rl_reqread rd = {-1, "recv", RL_READ_BYTES};
    struct iovec iov = {(void *)text, strlen(text)};
    rl_reqconn_received(&proc, &conn, &iov, 1, iov.iov_len, &rd);
}

static void end_(int end)
{
    const struct rl_reqread rd = {-1, "recv", end};
    rl_reqconn_received(&proc, &conn, NULL, 0, 0, &rd);
}

/* Is a.example paused now (its pause measured on the real clock)? */
static bool paused_now(void)
{
    const char *why;
    return left(rl_clock_now_ns(), &why) > 0;
}

#define GET "GET / HTTP/1.1\r\nHost: a.example\r\n\r\n"
#define OK "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
#define SLOW_RULE(on)                                                      \
    "[rlshim]\non_deny = fail\n[user:tester]\nrequest = 1/min\n"           \
    "request_burst = 100\nbackoff_on = " on "\n"

Test(backoff, the_server_ending_the_stream_before_the_answer_is_a_reset)
{
    conn_open(SLOW_RULE("reset"));
    write_(GET);
    end_(RL_READ_ENDED);
    cr_expect(paused_now());
    cr_expect(conn.resp_off, "nothing more to read");
    rl_reqconn_free(&conn);
}

Test(backoff, an_end_after_the_answer_or_inside_it_is_no_reset)
{
    conn_open(SLOW_RULE("reset"));
    write_(GET);
    read_(OK);
    end_(RL_READ_ENDED); /* an idle keep-alive connection closed */
    cr_expect_not(paused_now());
    rl_reqconn_free(&conn);
    conn_open(SLOW_RULE("reset"));
    write_(GET);
    read_("HTTP/1.1 2"); /* the answer began */
    end_(RL_READ_ENDED);
    cr_expect_not(paused_now());
    rl_reqconn_free(&conn);
}

Test(backoff, a_reset_not_listed_pauses_nothing)
{
    conn_open(SLOW_RULE("429, 503"));
    write_(GET);
    end_(RL_READ_ENDED);
    cr_expect_not(paused_now());
    rl_reqconn_free(&conn);
}

Test(backoff, a_request_unanswered_past_response_timeout_counts_once)
{
    conn_open(SLOW_RULE("timeout") "response_timeout = 2s\n");
    write_(GET);
    cr_assert_eq(conn.nsent, 1);
    uint64_t sent = conn.sent[0].sent_ns;
    cr_assert_neq(sent, 0, "the request's time is kept");
    const struct rl_reqread rd = {-1, "send", RL_READ_BYTES};
    rl_reqconn_overdue(&proc, &conn, &rd, sent + 1 * S);
    cr_expect_not(paused_now(), "not late yet");
    rl_reqconn_overdue(&proc, &conn, &rd, sent + 2 * S);
    cr_expect(paused_now(), "late");
    cr_expect(conn.sent[0].late);
    /* Looked at again, or closed: counted once. */
    rl_reqconn_overdue(&proc, &conn, &rd, sent + 3 * S);
    end_(RL_READ_CLOSING);
    uint64_t b = backoff_word();
    cr_expect_eq(rl_pauses_backoff_count(b), 1);
    cr_expect_eq(rl_pauses_backoff_cause(b), RL_ADAPT_CAUSE_TIMEOUT);
    rl_reqconn_free(&conn);
}

Test(backoff, the_entry_keeps_the_last_cause_and_the_count)
{
    fixture_gate(&proc, "tester", RULE("429, 503, 5xx"));
    answer(500, false, 0, T0);
    answer(503, false, 0, T0 + 1 * S);
    answer(503, false, 0, T0 + 3 * S);
    uint64_t b = backoff_word();
    cr_expect_eq(rl_pauses_backoff_count(b), 3);
    cr_expect_eq(rl_pauses_backoff_cause(b), 503);
    answer(200, false, 0, T0 + 7 * S);
    cr_expect_eq(backoff_word(), 0, "a success ends the run, its cause with it");
}

Test(backoff, a_request_whose_bytes_never_went_is_neither_reset_nor_late)
{
    conn_open(SLOW_RULE("reset, timeout") "response_timeout = 1s\n");
    /* Charged and recorded, but its write never returned (EAGAIN, or a
     * turn reserved): the server owes it nothing yet. */
    struct iovec iov = {GET, strlen(GET)};
    struct rl_reqplan p;
    rl_reqconn_plan(&proc, &conn, &iov, 1, &plain, &p);
    cr_assert_eq(conn.nsent, 1);
    const struct rl_reqread rd = {-1, "send", RL_READ_BYTES};
    rl_reqconn_overdue(&proc, &conn, &rd, rl_clock_now_ns() + 5 * S);
    end_(RL_READ_ENDED);
    cr_expect_not(paused_now());
    rl_reqconn_free(&conn);
}

/* Run `rlshim stat -c` on `text` (written into the state dir) into out. */
static void stat_of(const char *text, char *out, size_t len)
{
    char ini[128];
    snprintf(ini, sizeof ini, "%s/cfg.ini", fixture_dir);
    FILE *f = fopen(ini, "w");
    cr_assert_not_null(f);
    fputs(text, f);
    fclose(f);
    char cmd[512];
    const char *b = getenv("RLSHIM_BUILD");
    snprintf(cmd, sizeof cmd, "%s/rlshim stat -c %s 2>&1", b ? b : "build",
             ini);
    FILE *pp = popen(cmd, "r");
    cr_assert_not_null(pp);
    size_t n = fread(out, 1, len - 1, pp);
    out[n] = '\0';
    cr_assert_eq(pclose(pp), 0, "%s", out);
}

Test(backoff, stat_says_what_the_backoff_is_from_and_how_many)
{
    static const char text[] = "[rlshim]\non_deny = fail\n"
                               "[user:tester]\nrequest = 1/min\n"
                               "backoff_on = 503, reset\n";
    fixture_gate(&proc, "tester", text);
    uint64_t now = rl_clock_now_ns();
    answer(503, false, 0, now);
    answer(503, false, 0, now);
    answer(503, false, 0, now);
    char out[8192];
    stat_of(text, out, sizeof out);
    cr_expect(strstr(out, "s more, backoff 503 x 3)") != NULL, "%s", out);
    failed(RL_ADAPT_CAUSE_RESET, 0, now);
    stat_of(text, out, sizeof out);
    cr_expect(strstr(out, "s more, backoff reset x 4)") != NULL, "%s", out);
}
