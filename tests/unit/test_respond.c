/* test_respond.c — the made-up answers of on_deny = respond (SPEC §15):
 * the response as a client parses it, and the queue that hands each one
 * out only after the server's answers owed before it. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/respond.h"

Test(respond, formats_a_429_a_client_parses_with_its_length_and_wait)
{
    char buf[RL_MADEUP_MAX];
    size_t n = rl_respond_format(buf, sizeof buf, 429, 7, "site:api", "10/s");
    cr_assert_gt(n, 0);
    cr_assert_eq(strlen(buf), n);
    const char *body = "rlshim: request limit of [site:api] (10/s)\n";
    cr_expect(strncmp(buf, "HTTP/1.1 429 Too Many Requests\r\n", 32) == 0,
              "%s", buf);
    cr_expect(strstr(buf, "\r\nRetry-After: 7\r\n") != NULL, "%s", buf);
    cr_expect(strstr(buf, "\r\nConnection: keep-alive\r\n") != NULL);
    char cl[64];
    snprintf(cl, sizeof cl, "\r\nContent-Length: %zu\r\n", strlen(body));
    cr_expect(strstr(buf, cl) != NULL, "%s", buf);
    const char *end = strstr(buf, "\r\n\r\n");
    cr_assert_not_null(end);
    cr_expect_str_eq(end + 4, body, "the body is all that follows the head");
}

Test(respond, formats_a_503_when_asked_and_refuses_a_buffer_too_small)
{
    char buf[RL_MADEUP_MAX];
    cr_assert_gt(rl_respond_format(buf, sizeof buf, 503, 1, "default", "1/s"),
                 0);
    cr_expect(strncmp(buf, "HTTP/1.1 503 Service Unavailable\r\n", 34) == 0);
    cr_expect_eq(rl_respond_format(buf, 40, 429, 1, "default", "1/s"), 0);
}

Test(respond, a_section_named_by_the_longest_cgroup_path_gets_its_answer)
{
    char section[400], buf[RL_MADEUP_MAX];
    memset(section, 'a', sizeof section - 1);
    section[sizeof section - 1] = '\0';
    memcpy(section, "user:cgroup:/", 13);
    size_t n = rl_respond_format(buf, sizeof buf, 429, 1, section,
                                 "100000/min");
    cr_assert_gt(n, 0, "a long section's request failed as under fail");
    cr_expect(strstr(buf, "(100000/min)\n") != NULL, "%s", buf);
}

/* Reads the due answer, to its end, `room` bytes at a time. */
static size_t read_all(struct rl_respond *r, char *out, size_t room)
{
    size_t got = 0, k;
    unsigned queued = r->n;
    do {
        struct iovec v = {out + got, room};
        k = rl_respond_take(r, &v, 1, true);
        got += k;
    } while (k > 0 && r->n == queued);
    out[got] = '\0';
    return got;
}

Test(respond, hands_out_each_answer_whole_in_the_order_queued)
{
    struct rl_respond *r = NULL;
    cr_assert(rl_respond_push(&r, 429, 1, "a", "1/s", 0));
    cr_assert(rl_respond_push(&r, 503, 2, "b", "1/s", 0));
    cr_assert(rl_respond_due(r, true));
    char out[2 * RL_MADEUP_MAX];
    /* A read of 10 bytes at a time ends where the first answer ends. */
    read_all(r, out, 10);
    cr_expect(strstr(out, "429") != NULL && strstr(out, "503") == NULL,
              "%s", out);
    cr_expect(rl_respond_due(r, true), "the second is due next");
    read_all(r, out, sizeof out - 1);
    cr_expect(strstr(out, "503") != NULL, "%s", out);
    cr_expect_not(rl_respond_due(r, true), "the queue is empty");
    rl_respond_free(r);
}

Test(respond, waits_for_the_servers_answers_owed_before_it)
{
    struct rl_respond *r = NULL;
    cr_assert(rl_respond_push(&r, 429, 1, "a", "1/s", 2));
    cr_expect_not(rl_respond_due(r, true), "two answers owed first");
    rl_respond_answered(r);
    cr_expect_not(rl_respond_due(r, true), "one answer owed still");
    rl_respond_answered(r);
    cr_expect_not(rl_respond_due(r, false),
                  "the last answer is only begun: not between two");
    cr_expect(rl_respond_due(r, true));
    rl_respond_free(r);
}

Test(respond, a_peek_leaves_the_bytes_and_a_part_read_answer_goes_on)
{
    struct rl_respond *r = NULL;
    cr_assert(rl_respond_push(&r, 429, 1, "a", "1/s", 0));
    char a[8], b[8];
    struct iovec va = {a, sizeof a}, vb = {b, sizeof b};
    cr_assert_eq(rl_respond_take(r, &va, 1, false), sizeof a);
    cr_assert_eq(rl_respond_take(r, &vb, 1, true), sizeof b);
    cr_expect(memcmp(a, b, sizeof a) == 0, "a peek shows the same bytes");
    /* Begun: it is the stream's next bytes, whatever the server's. */
    cr_expect(rl_respond_due(r, false));
    rl_respond_free(r);
}

Test(respond, refuses_more_than_the_queue_holds)
{
    struct rl_respond *r = NULL;
    for (int i = 0; i < RL_RESPOND_MAX; i++)
        cr_assert(rl_respond_push(&r, 429, 1, "a", "1/s", 0));
    cr_expect_not(rl_respond_push(&r, 429, 1, "a", "1/s", 0));
    rl_respond_free(r);
}
