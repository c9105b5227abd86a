/* policy/decide_send.c: a send's whole decision asked once, with no
 * socket: the kernel's answers come from a probe of the test's own, which
 * also counts what the decision asked. Each test runs in its own process
 * (Criterion), so the ready table starts empty; the budgets' rates are
 * slow enough that the real clock moving meanwhile changes no answer. */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "gate_fixture.h"
#include "policy/decide_send.h"
#include "policy/ready.h"
#include "util/clock.h"
#include "ready_look.h"

#define S 1000000000ull
#define FD 7

/* What the kernel says of FD, and how often it was asked. */
static struct {
    bool nonblocking;
    int says;
    uint64_t sndtimeo;
    unsigned asked_nonblocking, asked_says, asked_sndtimeo, asked_peer;
} kernel;

static bool fake_nonblocking(int fd, int flags)
{
    (void)fd;
    (void)flags;
    kernel.asked_nonblocking++;
    return kernel.nonblocking;
}

static int fake_says(int fd)
{
    (void)fd;
    kernel.asked_says++;
    return kernel.says;
}

static uint64_t fake_sndtimeo(int fd)
{
    (void)fd;
    kernel.asked_sndtimeo++;
    return kernel.sndtimeo;
}

static const struct sockaddr *fake_peer(int fd, struct sockaddr_storage *ss,
                                        socklen_t *len)
{
    (void)fd;
    (void)ss;
    *len = 0;
    kernel.asked_peer++;
    return NULL;
}

static const struct rl_send_probe probe = {
    .nonblocking = fake_nonblocking,
    .kernel_says = fake_says,
    .send_timeout = fake_sndtimeo,
    .peer = fake_peer,
};

static void setup(void)
{
    memset(&kernel, 0, sizeof kernel);
    fixture_state_dir("decide_send");
}

static void teardown(void)
{
    fixture_state_dir_remove();
}

TestSuite(decide_send, .init = setup, .fini = teardown);

/* A datagram of `bytes` (all or nothing) on FD, to its peer. */
static void ask(struct rl_send_answer *a, uint64_t bytes)
{
    struct rl_send_question q = {.call = "send",
                                 .fd = FD,
                                 .calls = 1,
                                 .want = bytes,
                                 .min = bytes,
                                 .probe = &probe};
    rl_decide_send(&proc, &q, a);
}

Test(decide_send, a_send_within_budget_goes_whole_asking_the_kernel_nothing)
{
    fixture_gate(&proc, "tester", "[user:tester]\nsend = 10/s\n");
    struct rl_send_answer a;
    ask(&a, 500);
    cr_expect_eq(a.act, RL_GATE_GO);
    cr_expect_eq(a.t.calls, 1);
    cr_expect_eq(a.t.bytes, 500);
    cr_expect_eq(a.t.wait_ns, 0);
    cr_expect_eq(a.view, 0);
    cr_expect_eq(a.connect_due, 0);
    cr_expect_eq(kernel.asked_nonblocking + kernel.asked_says +
                     kernel.asked_sndtimeo + kernel.asked_peer,
                 0, "nothing the decision needed");
}

Test(decide_send, a_denied_nonblocking_send_is_held_then_told_eagain)
{
    fixture_gate(&proc, "tester", "[user:tester]\nsend = 1/h\n");
    kernel.nonblocking = true;
    struct rl_send_answer a;
    ask(&a, 100);
    cr_assert_eq(a.act, RL_GATE_GO);
    ask(&a, 100);
    cr_expect_eq(a.act, RL_GATE_FAIL);
    cr_expect_eq(a.t.err, EAGAIN);
    cr_expect_eq(a.view, RL_DECIDE_HIDE, "hidden from the wait calls");
    cr_expect_eq(ready_hidden(&proc, FD, rl_clock_now_ns()), RL_READY_HOLD);
    /* Held: answered at once, the gate not asked again. */
    unsigned says = kernel.asked_says;
    ask(&a, 100);
    cr_expect_eq(a.act, RL_GATE_FAIL);
    cr_expect_eq(a.t.err, EAGAIN);
    cr_expect_eq(a.view, 0);
    cr_expect_eq(kernel.asked_says, says + 1, "the kernel had its say");
}

Test(decide_send, a_held_socket_the_kernel_refuses_is_the_kernels_to_answer)
{
    fixture_gate(&proc, "tester", "[user:tester]\nsend = 1/h\n");
    kernel.nonblocking = true;
    struct rl_send_answer a;
    ask(&a, 100);
    ask(&a, 100);
    cr_assert_eq(a.view, RL_DECIDE_HIDE);
    kernel.says = ECONNRESET; /* a pending error: the send's answer */
    ask(&a, 100);
    cr_expect_eq(a.act, RL_GATE_FAIL);
    cr_expect_eq(a.t.err, ECONNRESET);
    kernel.says = -1; /* a hang-up: the kernel answers the call itself */
    ask(&a, 100);
    cr_expect_eq(a.act, RL_DECIDE_KERNEL);
}

Test(decide_send, delay_mode_a_nonblocking_send_keeps_its_turn_told_eagain)
{
    fixture_gate(&proc, "tester",
                 "[rlshim]\non_deny = delay\n"
                 "[user:tester]\nsend_bytes = 1000/s\n");
    kernel.nonblocking = true;
    struct rl_send_answer a;
    ask(&a, 1000);
    cr_assert_eq(a.act, RL_GATE_GO);
    cr_expect_eq(a.t.wait_ns, 0);
    ask(&a, 1000);
    cr_expect_eq(a.act, RL_GATE_FAIL);
    cr_expect_eq(a.t.err, EAGAIN);
    cr_expect_eq(a.view, RL_DECIDE_HIDE);
    cr_expect_eq(ready_hidden(&proc, FD, rl_clock_now_ns()),
                 RL_READY_RESERVE);
    /* The same socket, blocking now: its reserved turn is its own, met
     * and slept for (no second turn taken). */
    kernel.nonblocking = false;
    ask(&a, 1000);
    cr_expect_eq(a.act, RL_GATE_GO);
    cr_expect_eq(a.t.bytes, 1000);
    cr_expect(a.t.wait_ns > 0 && a.t.wait_ns <= S);
    cr_expect_eq(a.view, RL_DECIDE_SHOW, "no longer held");
    cr_expect(!rl_ready_any(&proc.ready));
}

Test(decide_send, a_turn_past_so_sndtimeo_is_eagain_at_once_and_given_back)
{
    fixture_gate(&proc, "tester",
                 "[rlshim]\non_deny = delay\n"
                 "[user:tester]\nsend_bytes = 1000/s\n");
    kernel.sndtimeo = S / 1000; /* 1 ms: shorter than the turn */
    struct rl_send_answer a;
    ask(&a, 1000);
    cr_assert_eq(a.act, RL_GATE_GO);
    cr_expect_eq(kernel.asked_sndtimeo, 0, "no turn to wait for");
    ask(&a, 1000);
    cr_expect_eq(a.act, RL_GATE_FAIL);
    cr_expect_eq(a.t.err, EAGAIN);
    cr_expect_eq(kernel.asked_sndtimeo, 1);
    cr_expect(!rl_ready_any(&proc.ready), "a blocking socket holds nothing");
    /* Given back: the next turn is the one that send would have had. */
    kernel.sndtimeo = 0;
    ask(&a, 1000);
    cr_expect_eq(a.act, RL_GATE_GO);
    cr_expect(a.t.wait_ns > 0 && a.t.wait_ns <= S);
}

Test(decide_send, settle_gives_back_what_the_kernel_did_not_take)
{
    fixture_gate(&proc, "tester", "[user:tester]\nsend_bytes = 1000/h\n");
    struct rl_send_answer a;
    ask(&a, 1000);
    cr_assert_eq(a.act, RL_GATE_GO);
    cr_expect(!rl_settle_send_owes(&a, 1, 1000));
    cr_assert(rl_settle_send_owes(&a, 1, 400));
    rl_settle_send(&proc, &a, false, 1, 400);
    cr_expect_eq(a.t.bytes, 400, "what was spent");
    struct rl_send_answer b;
    ask(&b, 600);
    cr_expect_eq(b.act, RL_GATE_GO, "the 600 bytes not sent came back");
    ask(&b, 1);
    cr_expect_eq(b.act, RL_GATE_FAIL, "and no more");
}
