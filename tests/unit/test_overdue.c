/* A non-blocking call's wait past max_delay in delay mode (SPEC §2,
 * policy/overdue.h): which denials are such a wait, the errno they fail
 * with, and the line that says why. */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "policy/config.h"
#include "policy/gate.h"
#include "policy/overdue.h"

#define S 1000000000ull

static struct rl_rule rule;
static struct rl_gate_ticket t;

static void setup(void)
{
    memset(&rule, 0, sizeof rule);
    rule.on_deny = RL_DENY_DELAY;
    rule.max_delay_ns = 2 * S;
    rule.deny_errno = EAGAIN;
    memset(&t, 0, sizeof t);
    t.denier = &rule;
    t.retry_ns = 600 * S;
    t.reason = "retry_after";
}

TestSuite(overdue, .init = setup);

Test(overdue, a_pause_past_max_delay_in_delay_mode_is_etimedout)
{
    int err = 0;
    cr_assert(rl_overdue(&t, &err));
    cr_expect_eq(err, ETIMEDOUT);
}

Test(overdue, the_configured_errno_stands_when_it_is_not_eagain)
{
    int err = 0;
    rule.deny_errno = ECONNREFUSED;
    cr_assert(rl_overdue(&t, &err));
    cr_expect_eq(err, ECONNREFUSED);
}

Test(overdue, fail_mode_a_wait_within_max_delay_and_an_unknown_wait_are_not)
{
    int err = -1;
    rule.on_deny = RL_DENY_FAIL;
    cr_expect_not(rl_overdue(&t, &err));
    rule.on_deny = RL_DENY_DELAY;
    t.retry_ns = 2 * S; /* exactly max_delay: it would have waited */
    cr_expect_not(rl_overdue(&t, &err));
    t.retry_ns = UINT64_MAX; /* never, or not known */
    cr_expect_not(rl_overdue(&t, &err));
    t.retry_ns = 600 * S;
    t.denier = NULL; /* unknown = deny: no section, no max_delay */
    cr_expect_not(rl_overdue(&t, &err));
    cr_expect_eq(err, -1, "err was written for a denial that is not one");
}

Test(overdue, the_line_names_the_pause_the_backoff_or_the_turn)
{
    char buf[256];
    t.retry_ns = 600 * S - 3000000; /* what is left, a moment later */
    rl_overdue_line(&t, "example.com", buf, sizeof buf);
    cr_expect_str_eq(buf, "example.com paused by the server for 600 s "
                          "(Retry-After), over max_delay 2 s");
    t.reason = "backoff";
    t.retry_ns = 8 * S;
    rule.max_delay_ns = 500000000;
    rl_overdue_line(&t, "example.com", buf, sizeof buf);
    cr_expect_str_eq(buf, "example.com paused for 8 s (backoff after a 429 "
                          "or 503), over max_delay 500 ms");
    t.reason = NULL;
    t.retry_ns = 60 * S;
    rl_overdue_line(&t, "10.0.0.1:80", buf, sizeof buf);
    cr_expect_str_eq(buf, "10.0.0.1:80: the next turn is 60 s away, over "
                          "max_delay 500 ms");
}
