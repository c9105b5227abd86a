/* policy/decide_send.c: a send's whole decision asked once, with no
 * socket: the kernel's answers come from a probe of the test's own, which
 * also counts what the decision asked. Each test runs in its own process
 * (Criterion), so the ready table starts empty; the budgets' rates are
 * slow enough that the real clock moving meanwhile changes no answer. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>

#include "gate_fixture.h"
#include "policy/decide_connect.h"
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
    bool has_peer;
    struct sockaddr_in peer;
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
    kernel.asked_peer++;
    *len = 0;
    if (!kernel.has_peer)
        return NULL;
    memcpy(ss, &kernel.peer, sizeof kernel.peer);
    *len = sizeof kernel.peer;
    return (const struct sockaddr *)ss;
}

static struct sockaddr_in v4(const char *ip)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(80)};
    inet_pton(AF_INET, ip, &a.sin_addr);
    return a;
}

static unsigned asked_all(void)
{
    return kernel.asked_nonblocking + kernel.asked_says +
           kernel.asked_sndtimeo + kernel.asked_peer;
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

/* From a signal handler (q->handler): `bytes` on FD, a stream's (cut to
 * the largest grant) or a datagram's (whole), to sa (NULL: its peer). */
static void ask_in_handler(struct rl_send_answer *a, bool stream,
                           uint64_t bytes, const struct sockaddr_in *sa)
{
    struct rl_send_question q = {.call = "send",
                                 .fd = FD,
                                 .sa = (const struct sockaddr *)sa,
                                 .salen = sa != NULL ? sizeof *sa : 0,
                                 .calls = 1,
                                 .want = bytes,
                                 .stream = stream,
                                 .handler = true,
                                 .probe = &probe};
    rl_decide_send(&proc, &q, a);
}

Test(decide_send, in_a_handler_all_or_nothing_at_once_asking_only_the_peer)
{
    fixture_gate(&proc, "tester",
                 "[rlshim]\non_deny = delay\n"
                 "[user:tester]\nsend = 1/h\n");
    kernel.nonblocking = true;
    struct rl_send_answer a;
    ask_in_handler(&a, false, 100, NULL);
    cr_expect_eq(a.act, RL_GATE_GO);
    cr_expect(a.t.handler, "nothing to settle");
    cr_expect_eq(a.t.bytes, 100);
    cr_expect_eq(a.t.wait_ns, 0);
    ask_in_handler(&a, false, 100, NULL);
    cr_expect_eq(a.act, RL_GATE_FAIL, "delay mode fails at once");
    cr_expect_eq(a.t.err, EAGAIN);
    cr_expect_eq(a.view, 0);
    cr_expect(!rl_ready_any(&proc.ready), "nothing held for later");
    cr_expect_eq(kernel.asked_peer, 2, "its peer, once per decision");
    cr_expect_eq(asked_all(), 2, "and nothing else");
}

Test(decide_send, in_a_handler_a_stream_may_go_in_part_a_datagram_whole)
{
    fixture_gate(&proc, "tester", "[user:tester]\nsend_bytes = 1000/h\n");
    struct rl_send_answer a;
    ask_in_handler(&a, false, 400, NULL);
    cr_assert_eq(a.act, RL_GATE_GO);
    ask_in_handler(&a, false, 1000, NULL);
    cr_expect_eq(a.act, RL_GATE_FAIL, "a datagram goes whole or not at all");
    ask_in_handler(&a, true, 5000, NULL);
    cr_expect_eq(a.act, RL_GATE_GO);
    cr_expect_eq(a.t.bytes, 600, "a stream, the part left");
}

/* Its peer is a stream's destination; the address counts only when it
 * has none (a MSG_FASTOPEN connecting now); a datagram's address is its
 * own, the kernel not asked. Per destination: an entry a handler never
 * made denies (it would allocate), so which one was charged shows. */
Test(decide_send, in_a_handler_a_stream_goes_to_its_peer_else_the_address)
{
    fixture_gate(&proc, "tester",
                 "[user:tester]\nper = destination\nsend = 5/h\n");
    struct sockaddr_in made = v4("10.0.0.2"), never = v4("10.0.0.1");
    struct rl_send_answer a;
    struct rl_send_question q = {.call = "sendto",
                                 .fd = FD,
                                 .sa = (const struct sockaddr *)&made,
                                 .salen = sizeof made,
                                 .calls = 1,
                                 .want = 1,
                                 .min = 1,
                                 .probe = &probe};
    rl_decide_send(&proc, &q, &a); /* outside a handler: its entry made */
    cr_assert_eq(a.act, RL_GATE_GO);
    kernel.has_peer = true;
    kernel.peer = made;
    ask_in_handler(&a, true, 1, &never);
    cr_expect_eq(a.act, RL_GATE_GO, "charged to its peer");
    kernel.has_peer = false;
    ask_in_handler(&a, true, 1, &never);
    cr_expect_eq(a.act, RL_GATE_FAIL, "no peer: the address's, never made");
    unsigned asked = kernel.asked_peer;
    ask_in_handler(&a, false, 1, &made);
    cr_expect_eq(a.act, RL_GATE_GO);
    cr_expect_eq(kernel.asked_peer, asked, "a datagram's address is its own");
}

/* 64000 bytes an hour: a bucket that does not refill during a test, deep
 * enough for leases of 1000 bytes (burst / 64). */
#define LEASING "[user:tester]\nsend_bytes = 64000/h\nsend = 6400/h\n"

Test(decide_send, a_send_to_the_fds_own_peer_comes_out_of_the_lease_first)
{
    fixture_gate(&proc, "tester", LEASING);
    struct rl_send_question q = {.call = "send",
                                 .fd = FD,
                                 .calls = 1,
                                 .want = 100,
                                 .stream = true,
                                 .lease = true,
                                 .probe = &probe};
    struct rl_send_answer a;
    rl_decide_send(&proc, &q, &a);
    cr_assert_eq(a.act, RL_GATE_GO);
    cr_expect(!a.leased, "the first is decided, and leases");
    rl_decide_send(&proc, &q, &a);
    cr_expect_eq(a.act, RL_GATE_GO);
    cr_expect(a.leased);
    cr_expect_eq(a.t.calls, 1);
    cr_expect_eq(a.t.bytes, 100);
    cr_expect_eq(a.t.wait_ns, 0);
    cr_expect_eq(a.view, 0);
    cr_expect_eq(asked_all(), 0);
    /* Nothing sent: all of it back to the lease, none to the bucket. */
    rl_settle_send(&proc, &a, a.leased, 0, 0);
    cr_expect_eq(a.t.bytes, 0);
    rl_decide_send(&proc, &q, &a);
    cr_expect(a.leased);
}

/* The carrier's leased way (RL_SEND_LEASE_ONLY): the lease alone, never a
 * decision; no lease yet is a no, and the whole question leases. */
Test(decide_send, a_lease_only_question_is_answered_by_the_lease_alone)
{
    fixture_gate(&proc, "tester", LEASING);
    struct rl_send_question only = {
        .want = 100, .stream = true, .asker = RL_SEND_LEASE_ONLY};
    struct rl_send_answer a;
    rl_decide_send(&proc, &only, &a);
    cr_expect_eq(a.act, RL_DECIDE_NO, "no lease before a decision");
    struct rl_send_question q = {.call = "send",
                                 .fd = FD,
                                 .calls = 1,
                                 .want = 100,
                                 .stream = true,
                                 .lease = true,
                                 .probe = &probe};
    rl_decide_send(&proc, &q, &a);
    cr_assert_eq(a.act, RL_GATE_GO);
    rl_decide_send(&proc, &only, &a);
    cr_expect_eq(a.act, RL_GATE_GO);
    cr_expect(a.leased);
    cr_expect_eq(a.t.bytes, 100);
    cr_expect_null(a.stamp, "the entry's own take stamps its record");
    cr_expect_eq(asked_all(), 0);
}

/* A MSG_FASTOPEN send connects: denied, it leaves nothing behind, its
 * connect's unit given back, whichever way the gate granted the connect:
 * the whole way (two connect limits: a ticket of charges) or at once (a
 * lone limit, rl_gate_connect_now: no ticket of charges). Its
 * fresh socket polls as hung up: denied all the same, not left to the
 * kernel, which would connect and send uncharged. */
static void denied_send_gives_its_fastopen_connect_back(const char *ini)
{
    fixture_gate(&proc, "tester", ini);
    struct sockaddr_in to = v4("10.0.0.1");
    struct rl_send_answer a;
    ask(&a, 1); /* the send spent */
    cr_assert_eq(a.act, RL_GATE_GO);
    const struct rl_connect_question cq = {.call = "sendto",
                                           .fd = FD,
                                           .sa = (const struct sockaddr *)&to,
                                           .salen = sizeof to,
                                           .sock = RL_CONNECT_STREAM,
                                           .asker = RL_CONNECT_FASTOPEN};
    struct rl_connect_answer ca;
    rl_decide_connect(&proc, &cq, &ca);
    cr_assert_eq(ca.act, RL_CONNECT_GO);
    struct rl_send_question q = {.call = "sendto",
                                 .fd = FD,
                                 .sa = (const struct sockaddr *)&to,
                                 .salen = sizeof to,
                                 .calls = 1,
                                 .want = 1,
                                 .stream = true,
                                 .fastopen = &ca.t,
                                 .probe = &probe};
    kernel.says = -1;
    rl_decide_send(&proc, &q, &a);
    cr_expect_eq(a.act, RL_GATE_FAIL);
    rl_decide_connect(&proc, &cq, &ca);
    cr_expect_eq(ca.act, RL_CONNECT_GO, "the connect went back");
}

Test(decide_send, a_denied_send_gives_its_fastopen_connect_back)
{
    denied_send_gives_its_fastopen_connect_back(
        "[user:tester]\nconnect = 1/h, 2/h\nsend = 1/h\n");
}

Test(decide_send, a_denied_send_gives_back_a_fastopen_connect_granted_at_once)
{
    denied_send_gives_its_fastopen_connect_back(
        "[user:tester]\nconnect = 1/h\nsend = 1/h\n");
}

Test(decide_send, charged_only_where_sends_are_and_the_rule_covers)
{
    struct sockaddr_in in = v4("10.0.0.1"), out = v4("10.0.0.2");
    const struct sockaddr *i = (const struct sockaddr *)&in;
    const struct sockaddr *o = (const struct sockaddr *)&out;
    fixture_gate(&proc, "tester", "[user:tester]\nsend = 1/h\nto = 10.0.0.1\n");
    cr_expect(rl_decide_send_charged(&proc, i, sizeof in));
    cr_expect(!rl_decide_send_charged(&proc, o, sizeof out));
    struct rl_proc other;
    fixture_gate(&other, "tester", "[user:tester]\nconnect = 1/h\n");
    cr_expect(!rl_decide_send_charged(&other, i, sizeof in),
              "a connect-only quota charges no send");
}

/* The supervisor's question (RL_SEND_SUPERVISOR): `calls` datagrams of
 * `bytes` in all, to an explicit address. */
static void ask_supervised(struct rl_send_answer *a, uint64_t calls,
                           uint64_t bytes)
{
    static const struct sockaddr_storage to = {.ss_family = AF_INET};
    struct rl_send_question q = {.call = "sendmmsg",
                                 .fd = FD,
                                 .sa = (const struct sockaddr *)&to,
                                 .salen = sizeof(struct sockaddr_in),
                                 .calls = calls,
                                 .want = bytes,
                                 .min = bytes,
                                 .probe = &probe,
                                 .asker = RL_SEND_SUPERVISOR};
    rl_decide_send(&proc, &q, a);
}

Test(decide_send, the_supervisor_sends_all_messages_or_none)
{
    fixture_gate(&proc, "tester", "[user:tester]\nsend = 2/h\n");
    struct rl_send_answer a;
    ask_supervised(&a, 3, 300);
    cr_expect_eq(a.act, RL_GATE_FAIL, "it cannot send a prefix");
    ask_supervised(&a, 2, 200);
    cr_expect_eq(a.act, RL_GATE_GO);
    cr_expect_eq(a.t.calls, 2);
}

Test(decide_send, the_supervisor_is_denied_at_once_holding_nothing)
{
    fixture_gate(&proc, "tester", "[user:tester]\nsend = 1/h\n");
    struct rl_send_answer a;
    ask_supervised(&a, 1, 100);
    cr_assert_eq(a.act, RL_GATE_GO);
    ask_supervised(&a, 1, 100);
    cr_expect_eq(a.act, RL_GATE_FAIL);
    cr_expect_eq(a.t.err, EAGAIN);
    cr_expect_eq(a.view, 0, "it has no wait calls' view to change");
    cr_expect(!rl_ready_any(&proc.ready));
}

Test(decide_send, the_supervisor_keeps_a_later_turn_for_its_timer)
{
    fixture_gate(&proc, "tester",
                 "[rlshim]\non_deny = delay\n"
                 "[user:tester]\nsend_bytes = 1000/s\n");
    struct rl_send_answer a;
    ask_supervised(&a, 1, 1000);
    cr_assert_eq(a.act, RL_GATE_GO);
    ask_supervised(&a, 1, 1000);
    cr_expect_eq(a.act, RL_GATE_GO);
    cr_expect(a.t.wait_ns > 0 && a.t.wait_ns <= S);
    cr_expect(!rl_ready_any(&proc.ready));
    /* Its caller gone before the turn: all of it back. */
    rl_settle_send(&proc, &a, false, 0, 0);
    ask_supervised(&a, 1, 1000);
    cr_expect(a.t.wait_ns > 0 && a.t.wait_ns <= S, "the same turn again");
}
