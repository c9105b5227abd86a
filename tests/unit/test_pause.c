/* Politeness that listens (SPEC §12): what a 429 or 503 does to the
 * request budgets its request was charged to, through the gate's API
 * (rl_gate_request_outcome_at: what the receive hooks are to call) and
 * the decisions after it (rl_gate_request_at), on a clock stepped by
 * hand. In fail mode a denied request's t.retry_ns is exactly what is
 * left of the pause, which makes the pause's end visible. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gate_fixture.h"
#include "util/clock.h"
#include "util/declog_read.h"

#define MS 1000000ull
#define S 1000000000ull
#define T0 (1000 * S) /* an arbitrary start on the fake clock */

static struct rl_gate_ticket t;
static struct sockaddr_in addr;

static void setup(void)
{
    fixture_state_dir("pause");
    addr = (struct sockaddr_in){.sin_family = AF_INET,
                                .sin_port = htons(443)};
    inet_pton(AF_INET, "10.0.0.1", &addr.sin_addr);
}

TestSuite(pause, .init = setup, .fini = fixture_state_dir_remove);

static struct rl_gate_req req(const char *name)
{
    return (struct rl_gate_req){.call = "SSL_write", .fd = -1, .sa = &addr,
                                .salen = sizeof addr, .name = name,
                                .port = 443, .method = "GET", .target = "/",
                                .units = 1};
}

static int ask(const char *name, uint64_t now)
{
    struct rl_gate_req q = req(name);
    return rl_gate_request_at(&proc, &t, now, &q);
}

static void answer(const char *name, int status, bool has_ra, uint64_t ra,
                   uint64_t now)
{
    struct rl_gate_req q = req(name);
    rl_gate_request_outcome_at(&proc, &q, status, has_ra, ra, now);
}

/* A request at `now` in fail mode is denied for the rest of a pause:
 * what is left of it, and why. */
static void expect_paused(const char *name, uint64_t now, uint64_t left,
                          const char *why)
{
    cr_assert_eq(ask(name, now), RL_GATE_FAIL, "not paused at %llu",
                 (unsigned long long)now);
    cr_expect_eq(t.retry_ns, left, "left %llu ns, not %llu",
                 (unsigned long long)t.retry_ns, (unsigned long long)left);
    cr_assert_not_null(t.reason);
    cr_expect_str_eq(t.reason, why);
}

#define FAIL_RULE                                                          \
    "[rlshim]\non_deny = fail\n[user:tester]\nrequest = 1/s\n"             \
    "request_burst = 100\n"

Test(pause, a_429_pauses_for_its_retry_after)
{
    fixture_gate(&proc, "tester", FAIL_RULE);
    cr_assert_eq(ask("a.example", T0), RL_GATE_GO);
    answer("a.example", 429, true, 5 * S, T0);
    expect_paused("a.example", T0 + 1 * S, 4 * S, "retry_after");
    cr_expect_eq(t.err, EAGAIN);
    /* At its end, requests go again. */
    cr_expect_eq(ask("a.example", T0 + 5 * S), RL_GATE_GO);
    cr_expect_eq(t.wait_ns, 0);
    cr_expect_null(t.reason);
}

Test(pause, a_503_pauses_too_and_a_later_answer_never_shortens_it)
{
    fixture_gate(&proc, "tester", FAIL_RULE);
    answer("a.example", 503, true, 10 * S, T0);
    answer("a.example", 429, true, 2 * S, T0 + 1 * S); /* ends earlier */
    expect_paused("a.example", T0 + 5 * S, 5 * S, "retry_after");
}

Test(pause, a_retry_after_is_cut_at_max_retry_after)
{
    fixture_gate(&proc, "tester", FAIL_RULE "max_retry_after = 3s\n");
    answer("a.example", 429, true, 3600 * S, T0);
    expect_paused("a.example", T0, 3 * S, "retry_after");
    /* A saturated value (a huge Retry-After) is cut the same way. */
    answer("a.example", 429, true, UINT64_MAX, T0 + 1 * S);
    expect_paused("a.example", T0 + 1 * S, 3 * S, "retry_after");
}

Test(pause, max_retry_after_defaults_to_ten_minutes)
{
    fixture_gate(&proc, "tester", FAIL_RULE);
    answer("a.example", 429, true, 86400 * S, T0);
    expect_paused("a.example", T0, 600 * S, "retry_after");
}

Test(pause, retry_after_zero_pauses_nothing)
{
    fixture_gate(&proc, "tester", FAIL_RULE);
    answer("a.example", 429, true, 0, T0);
    cr_expect_eq(ask("a.example", T0), RL_GATE_GO);
}

/* Without Retry-After: one turn of the budget (1/s: 1 s), doubling with
 * each 429/503 in a row, up to max_retry_after; a success ends it. */
Test(pause, without_retry_after_the_backoff_doubles_and_a_success_ends_it)
{
    fixture_gate(&proc, "tester", FAIL_RULE "max_retry_after = 5s\n");
    answer("a.example", 429, false, 0, T0);
    expect_paused("a.example", T0, 1 * S, "backoff");
    answer("a.example", 503, false, 0, T0 + 1 * S);
    expect_paused("a.example", T0 + 1 * S, 2 * S, "backoff");
    answer("a.example", 429, false, 0, T0 + 3 * S);
    expect_paused("a.example", T0 + 3 * S, 4 * S, "backoff");
    answer("a.example", 429, false, 0, T0 + 7 * S); /* 8 s, cut to 5 s */
    expect_paused("a.example", T0 + 7 * S, 5 * S, "backoff");
    /* A 100 Continue is not the answer; a 200 is: back to one turn. */
    answer("a.example", 100, false, 0, T0 + 12 * S);
    answer("a.example", 200, false, 0, T0 + 12 * S);
    answer("a.example", 429, false, 0, T0 + 13 * S);
    expect_paused("a.example", T0 + 13 * S, 1 * S, "backoff");
}

Test(pause, a_404_ends_the_doubling_a_500_does_not)
{
    fixture_gate(&proc, "tester", FAIL_RULE "max_retry_after = 1h\n");
    answer("a.example", 429, false, 0, T0);
    answer("a.example", 500, false, 0, T0 + 1 * S);
    answer("a.example", 429, false, 0, T0 + 1 * S);
    expect_paused("a.example", T0 + 1 * S, 2 * S, "backoff");
    answer("a.example", 404, false, 0, T0 + 3 * S);
    answer("a.example", 429, false, 0, T0 + 3 * S);
    expect_paused("a.example", T0 + 3 * S, 1 * S, "backoff");
}

Test(pause, the_backoff_turn_is_one_request_of_the_slowest_limit)
{
    fixture_gate(&proc, "tester",
                 "[rlshim]\non_deny = fail\n[user:tester]\n"
                 "request = 10/s, 60/min\n");
    answer("a.example", 429, false, 0, T0);
    expect_paused("a.example", T0, 1 * S, "backoff"); /* 60/min: 1 s */
}

Test(pause, retry_after_ignore_pauses_nothing)
{
    fixture_gate(&proc, "tester", FAIL_RULE "retry_after = ignore\n");
    answer("a.example", 429, true, 5 * S, T0);
    answer("a.example", 429, false, 0, T0);
    cr_expect_eq(ask("a.example", T0 + 1 * MS), RL_GATE_GO);
    cr_expect_null(t.reason);
}

Test(pause, a_pause_of_one_destination_leaves_another_alone)
{
    fixture_gate(&proc, "tester",
                 "[rlshim]\non_deny = fail\n"
                 "[site:every]\nper = destination\n"
                 "request = 1/s\nrequest_burst = 10\n");
    cr_assert_eq(ask("a.example", T0), RL_GATE_GO);
    cr_assert_eq(ask("b.example", T0), RL_GATE_GO);
    answer("a.example", 429, true, 30 * S, T0);
    expect_paused("a.example", T0 + 1 * S, 29 * S, "retry_after");
    cr_expect_eq(ask("b.example", T0 + 1 * S), RL_GATE_GO);
    cr_expect_eq(t.wait_ns, 0);
    /* And a success of b ends no doubling of a. */
    answer("a.example", 429, false, 0, T0 + 40 * S);
    answer("b.example", 200, false, 0, T0 + 40 * S);
    answer("a.example", 429, false, 0, T0 + 40 * S);
    expect_paused("a.example", T0 + 40 * S, 2 * S, "backoff");
}

/* The rule and a site both charge the request: each is paused on its own
 * and the request waits for the later. */
Test(pause, a_site_and_the_rule_each_hold_their_pause)
{
    fixture_gate(&proc, "tester",
                 "[rlshim]\non_deny = fail\n"
                 "[user:tester]\nrequest = 100/s\n"
                 "max_retry_after = 2s\n"
                 "[site:every]\nper = destination\n"
                 "request = 100/s\n");
    answer("a.example", 429, true, 10 * S, T0);
    /* The site's pause of a.example: 10 s; the rule's: cut at 2 s;
     * a.example waits for the later. b.example shares the rule's budget
     * but not its pause (SPEC §12): it goes. */
    expect_paused("a.example", T0, 10 * S, "retry_after");
    cr_expect_eq(ask("b.example", T0), RL_GATE_GO);
    cr_expect_eq(t.wait_ns, 0);
    /* After the site's pause is over the rule's is too. */
    cr_expect_eq(ask("a.example", T0 + 10 * S), RL_GATE_GO);
}

Test(pause, delay_mode_waits_for_the_end_of_the_pause)
{
    fixture_gate(&proc, "tester",
                 "[rlshim]\non_deny = delay\nmax_delay = 10s\n"
                 "[user:tester]\nrequest = 1/s\n");
    cr_assert_eq(ask("a.example", T0), RL_GATE_GO);
    answer("a.example", 429, true, 3 * S, T0);
    cr_assert_eq(ask("a.example", T0 + 500 * MS), RL_GATE_GO);
    cr_expect_eq(t.wait_ns, 2500 * MS);
    cr_assert_not_null(t.reason);
    cr_expect_str_eq(t.reason, "retry_after");
    /* The next one takes the turn after it (1/s), FIFO after the pause. */
    cr_assert_eq(ask("a.example", T0 + 500 * MS), RL_GATE_GO);
    cr_expect_eq(t.wait_ns, 3500 * MS);
}

Test(pause, delay_mode_fails_a_pause_longer_than_max_delay)
{
    fixture_gate(&proc, "tester",
                 "[rlshim]\non_deny = delay\nmax_delay = 10s\n"
                 "[user:tester]\nrequest = 1/s\n");
    answer("a.example", 429, true, 30 * S, T0);
    cr_assert_eq(ask("a.example", T0 + 1 * S), RL_GATE_FAIL);
    cr_expect_eq(t.retry_ns, 29 * S);
    cr_expect_eq(t.err, EAGAIN);
    cr_assert_not_null(t.reason);
    cr_expect_str_eq(t.reason, "retry_after");
}

Test(pause, a_refused_request_takes_nothing_from_the_budget)
{
    fixture_gate(&proc, "tester",
                 "[rlshim]\non_deny = fail\n[user:tester]\n"
                 "request = 1/s\nrequest_burst = 1\n");
    answer("a.example", 429, true, 2 * S, T0);
    cr_assert_eq(ask("a.example", T0), RL_GATE_FAIL);
    /* The one unit of the burst is still there at the end. */
    cr_expect_eq(ask("a.example", T0 + 2 * S), RL_GATE_GO);
    cr_expect_eq(t.wait_ns, 0);
}

/* The pause lives in the segment: a child process sets it, its parent
 * (whose gate is set up after the child is gone) sees it. Real clock:
 * the segment's times are CLOCK_MONOTONIC of this boot. */
Test(pause, another_process_sees_the_pause)
{
    static const char text[] = FAIL_RULE;
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        fixture_gate(&proc, "tester", text);
        /* The clock-reading form, as the receive hooks are to call it. */
        struct rl_gate_req q = req("a.example");
        rl_gate_request_outcome(&proc, &q, 429, true, 60 * S);
        _exit(0);
    }
    int st = 0;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    fixture_gate(&proc, "tester", text);
    cr_assert_eq(ask("a.example", rl_clock_now_ns()), RL_GATE_FAIL);
    cr_expect_gt(t.retry_ns, 50 * S);
    cr_expect_leq(t.retry_ns, 60 * S);
}

Test(pause, another_process_sees_a_destinations_pause)
{
    static const char text[] = "[rlshim]\non_deny = fail\n"
                               "[site:every]\nper = destination\n"
                               "request = 1/s\n";
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        fixture_gate(&proc, "tester", text);
        answer("a.example", 503, true, 60 * S, rl_clock_now_ns());
        _exit(0);
    }
    int st = 0;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    fixture_gate(&proc, "tester", text);
    uint64_t now = rl_clock_now_ns();
    cr_assert_eq(ask("a.example", now), RL_GATE_FAIL);
    cr_expect_gt(t.retry_ns, 50 * S);
    cr_expect_eq(ask("b.example", now), RL_GATE_GO);
}

/* The decision log says why a pause held a request (SPEC §12), and says
 * nothing on a request no pause held; each answer that paused is a line
 * of its own (verdict pause, its status, the pause's length). */
Test(pause, the_decision_log_says_retry_after_or_backoff)
{
    char log[128];
    snprintf(log, sizeof log, "%s/decisions.jsonl", fixture_dir);
    setenv("RLSHIM_DECISION_LOG", log, 1);
    fixture_gate(&proc, "tester",
                 "[rlshim]\non_deny = delay\nmax_delay = 10s\n"
                 "[user:tester]\nrequest = 1/s\n"
                 "request_burst = 10\n");
    cr_assert_eq(ask("a.example", T0), RL_GATE_GO);
    answer("a.example", 429, true, 2 * S, T0);
    cr_assert_eq(ask("a.example", T0), RL_GATE_GO);
    answer("a.example", 200, false, 0, T0 + 3 * S);
    answer("a.example", 503, false, 0, T0 + 3 * S);
    cr_assert_eq(ask("a.example", T0 + 3 * S), RL_GATE_GO);
    FILE *f = fopen(log, "r");
    cr_assert_not_null(f);
    char line[RL_DECLOG_LINE_MAX + 2];
    const char *want[] = {"", "retry_after", "retry_after", "backoff",
                          "backoff"};
    const uint64_t wait[] = {0, 2 * S, 2 * S, 1 * S, 1 * S};
    const int verdict[] = {RL_DECLOG_ALLOW, RL_DECLOG_PAUSE, RL_DECLOG_DELAY,
                           RL_DECLOG_PAUSE, RL_DECLOG_DELAY};
    const uint64_t status[] = {0, 429, 0, 503, 0};
    int n = 0;
    while (fgets(line, sizeof line, f) != NULL) {
        struct rl_declog_entry e;
        cr_assert_eq(rl_declog_parse(line, &e), 0, "%s", line);
        cr_assert_lt(n, 5, "%s", line);
        cr_expect_str_eq(e.reason, want[n], "%s", line);
        cr_expect_eq(e.wait_ns, wait[n], "%s", line);
        cr_expect_eq(e.verdict, verdict[n], "%s", line);
        cr_expect_eq(e.status, status[n], "%s", line);
        cr_expect_str_eq(e.dest, "a.example", "%s", line);
        n++;
    }
    fclose(f);
    cr_expect_eq(n, 5);
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
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p);
    size_t n = fread(out, 1, len - 1, p);
    out[n] = '\0';
    cr_assert_eq(pclose(p), 0, "%s", out);
}

/* `rlshim stat` says "paused until" for a destination while its pause
 * lasts, and nothing for one that is not paused. */
Test(pause, stat_shows_a_destinations_pause)
{
    static const char text[] = "[rlshim]\non_deny = fail\n"
                               "[site:every]\nper = destination\n"
                               "request = 3/h\n";
    fixture_gate(&proc, "tester", text);
    uint64_t now = rl_clock_now_ns();
    cr_assert_eq(ask("a.example", now), RL_GATE_GO);
    cr_assert_eq(ask("b.example", now), RL_GATE_GO);
    answer("a.example", 429, true, 120 * S, now);
    char out[8192];
    stat_of(text, out, sizeof out);
    const char *a = strstr(out, "dest a.example paused until ");
    cr_assert_not_null(a, "%s", out);
    cr_expect(strstr(a, "s more, retry_after)") != NULL, "%s", out);
    const char *b = strstr(out, "dest b.example");
    cr_assert_not_null(b, "%s", out);
    cr_expect(strncmp(b, "dest b.example\n", 15) == 0, "%s", out);
}

Test(pause, stat_shows_a_rules_pause)
{
    static const char text[] = "[rlshim]\non_deny = fail\n"
                               "[user:tester]\nrequest = 1/min\n";
    fixture_gate(&proc, "tester", text);
    char out[8192];
    stat_of(text, out, sizeof out);
    cr_expect_null(strstr(out, "paused"), "%s", out);
    answer("a.example", 503, false, 0, rl_clock_now_ns());
    stat_of(text, out, sizeof out);
    /* The pause is the destination's, not the rule's (SPEC §12). */
    cr_expect(strstr(out, "user:tester        dest a.example paused until ") !=
                  NULL,
              "%s", out);
    cr_expect(strstr(out, "s more, backoff 503 x 1)") != NULL, "%s", out);
}

/* A full budget is re-used for a new name when the table is short of room
 * (policy/dests.h), but a paused one carries what the server said: it
 * keeps its name. 16 live entries, 200 other names once the buckets are
 * full again: every other entry is re-used over and over. */
Test(pause, a_paused_destination_keeps_its_budget_in_a_full_table)
{
    fixture_gate(&proc, "tester",
                 "[rlshim]\non_deny = fail\nmax_destinations = 16\n"
                 "[site:every]\nper = destination\n"
                 "request = 1/s\nrequest_burst = 1\n");
    cr_assert_eq(ask("a.example", T0), RL_GATE_GO);
    answer("a.example", 429, true, 600 * S, T0);
    char name[32];
    for (int i = 0; i < 200; i++) {
        snprintf(name, sizeof name, "n%d.example", i);
        (void)ask(name, T0 + 10 * S + (uint64_t)i * 2 * S);
    }
    uint64_t now = T0 + 10 * S + 400 * S;
    expect_paused("a.example", now, T0 + 600 * S - now, "retry_after");
}

/* A request given a later turn before the 429 came is held by the pause
 * at that turn (SPEC §12): decided again, it takes a turn after the
 * pause; with no pause, it goes at its turn with nothing taken again. */
Test(pause, a_turn_reserved_before_the_answer_is_held_by_the_pause)
{
    fixture_gate(&proc, "tester",
                 "[rlshim]\non_deny = delay\nmax_delay = 10s\n"
                 "[user:tester]\nrequest = 2/s\nrequest_burst = 1\n");
    struct rl_gate_req q = req("a.example");
    cr_assert_eq(ask("a.example", T0), RL_GATE_GO);
    cr_assert_eq(ask("a.example", T0), RL_GATE_GO);
    cr_assert_eq(t.wait_ns, 500 * MS, "the second's turn: T0 + 0.5 s");
    /* Nothing came: at its turn it goes, and takes nothing more. */
    cr_assert_eq(rl_gate_request_again(&proc, &t, T0 + 500 * MS,
                                       T0 + 500 * MS, &q),
                 RL_GATE_GO);
    cr_expect_eq(t.wait_ns, 0);
    cr_expect_eq(t.ncharges, 0);
    cr_assert_eq(ask("a.example", T0 + 500 * MS), RL_GATE_GO);
    cr_assert_eq(t.wait_ns, 500 * MS, "its turn: T0 + 1 s");
    /* The first's answer: 429, Retry-After 3 s, at T0 + 0.1 s. */
    answer("a.example", 429, true, 3 * S, T0 + 100 * MS);
    cr_assert_eq(rl_gate_request_again(&proc, &t, T0 + 1 * S, T0 + 1 * S, &q),
                 RL_GATE_GO);
    cr_expect_eq(t.wait_ns, 2100 * MS, "held to the pause's end, T0 + 3.1 s");
    cr_expect_eq(t.moved_ns, T0 + 1 * S);
    cr_assert_not_null(t.reason);
    cr_expect_str_eq(t.reason, "retry_after");
    /* Another name, sharing the budget, is not held by it. */
    struct rl_gate_req qb = req("b.example");
    cr_assert_eq(rl_gate_request_again(&proc, &t, T0 + 1 * S, T0 + 1 * S,
                                       &qb),
                 RL_GATE_GO);
    cr_expect_eq(t.wait_ns, 0);
}

/* A turn checked late (an event loop that woke after the pause ended, a
 * memory BIO's socket held to its turn): the pause covered the turn, so
 * the turn is given up all the same and the request decided again after
 * it, on a line that says so (moved_ns), never "gone at its turn" inside
 * the pause. */
Test(pause, a_turn_the_pause_covered_is_given_up_when_checked_late)
{
    fixture_gate(&proc, "tester",
                 "[rlshim]\non_deny = delay\nmax_delay = 10s\n"
                 "[user:tester]\nrequest = 2/s\nrequest_burst = 1\n");
    struct rl_gate_req q = req("a.example");
    cr_assert_eq(ask("a.example", T0), RL_GATE_GO);
    cr_assert_eq(ask("a.example", T0), RL_GATE_GO);
    cr_assert_eq(t.wait_ns, 500 * MS, "the second's turn: T0 + 0.5 s");
    /* 429, Retry-After 1 s, at T0 + 0.1 s: paused until T0 + 1.1 s. */
    answer("a.example", 429, true, 1 * S, T0 + 100 * MS);
    /* Its turn, T0 + 0.5 s, is checked only at T0 + 1.2 s. */
    cr_assert_eq(rl_gate_request_again(&proc, &t, T0 + 1200 * MS,
                                       T0 + 500 * MS, &q),
                 RL_GATE_GO);
    cr_expect_eq(t.moved_ns, T0 + 500 * MS, "the turn it gave up");
    cr_assert_not_null(t.reason);
    cr_expect_str_eq(t.reason, "retry_after");
    cr_expect_eq(t.ncharges, 1, "decided again: a turn of its own");
    /* Another name, sharing the budget, is not held by it. */
    struct rl_gate_req qb = req("b.example");
    cr_assert_eq(rl_gate_request_again(&proc, &t, T0 + 1200 * MS,
                                       T0 + 500 * MS, &qb),
                 RL_GATE_GO);
    cr_expect_eq(t.moved_ns, 0);
    cr_expect_eq(t.ncharges, 0);
}

/* In fail mode (or past max_delay) the held request fails at its turn. */
Test(pause, a_reserved_turn_the_pause_outlasts_max_delay_fails)
{
    fixture_gate(&proc, "tester",
                 "[rlshim]\non_deny = delay\nmax_delay = 2s\n"
                 "[user:tester]\nrequest = 2/s\nrequest_burst = 1\n");
    struct rl_gate_req q = req("a.example");
    cr_assert_eq(ask("a.example", T0), RL_GATE_GO);
    cr_assert_eq(ask("a.example", T0), RL_GATE_GO);
    answer("a.example", 429, true, 60 * S, T0 + 100 * MS);
    cr_expect_eq(rl_gate_request_again(&proc, &t, T0 + 500 * MS,
                                       T0 + 500 * MS, &q),
                 RL_GATE_FAIL);
}

/* The pause table is bounded: 1,100 names paused (more than it holds)
 * lose some of their own pauses, the earliest to end first, and never
 * pause a name that got no 429. */
Test(pause, a_full_pause_table_drops_the_pause_that_ends_first)
{
    /* A burst no check below can spend: only pauses refuse. */
    fixture_gate(&proc, "tester",
                 "[rlshim]\non_deny = fail\n[user:tester]\nrequest = 1/s\n"
                 "request_burst = 100000\n");
    char name[32];
    /* good.example's pause ends last of all: it is kept. */
    answer("good.example", 429, true, 500 * S, T0);
    for (int i = 0; i < 1100; i++) {
        snprintf(name, sizeof name, "evil%d.example", i);
        answer(name, 429, true, (uint64_t)(100 + i % 300) * S, T0);
    }
    expect_paused("good.example", T0 + 1 * S, 499 * S, "retry_after");
    unsigned kept = 0;
    for (int i = 0; i < 1100; i++) {
        snprintf(name, sizeof name, "evil%d.example", i);
        kept += ask(name, T0 + 1 * S) == RL_GATE_FAIL;
    }
    cr_expect_leq(kept, 1024, "more pauses kept than the table holds");
    cr_expect_geq(kept, 900, "only %u of 1,100 pauses kept", kept);
    for (int i = 0; i < 200; i++) {
        snprintf(name, sizeof name, "never%d.example", i);
        cr_expect_eq(ask(name, T0 + 1 * S), RL_GATE_GO, "%s paused", name);
    }
}
