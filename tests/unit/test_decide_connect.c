/* policy/decide_connect.c: a connect's whole decision asked once, with no
 * socket: whether the socket is non-blocking comes from a probe of the
 * test's own, which also counts how often it was asked. Each test runs in
 * its own process (Criterion), so the ready table and the open areas
 * start empty; the budgets' rates are slow enough that the real clock
 * moving meanwhile changes no answer. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>

#include "gate_fixture.h"
#include "policy/decide_connect.h"
#include "policy/open.h"
#include "policy/ready.h"
#include "util/clock.h"
#include "ready_look.h"

#define S 1000000000ull

/* What the kernel says of every fd, and how often it was asked. */
static struct {
    int nonblocking;
    unsigned asked;
} kernel;

static int fake_nonblocking(int fd)
{
    (void)fd;
    kernel.asked++;
    return kernel.nonblocking;
}

static const struct rl_connect_probe probe = {.nonblocking = fake_nonblocking};

static struct sockaddr_in dest;

static void setup(void)
{
    memset(&kernel, 0, sizeof kernel);
    dest = (struct sockaddr_in){.sin_family = AF_INET, .sin_port = htons(80)};
    inet_pton(AF_INET, "10.0.0.1", &dest.sin_addr);
    fixture_state_dir("decide_connect");
}

static void teardown(void)
{
    fixture_state_dir_remove();
}

TestSuite(decide_connect, .init = setup, .fini = teardown);

/* A connect of fd, a socket of `sock`, asked by `asker`. */
static void ask_as(struct rl_connect_answer *a, int fd, int sock, int asker,
                   uint64_t deadline)
{
    const struct rl_connect_question q = {
        .call = "connect",
        .fd = fd,
        .sa = (const struct sockaddr *)&dest,
        .salen = sizeof dest,
        .sock = sock,
        .asker = asker,
        .deadline = deadline,
        .probe = &probe,
    };
    rl_decide_connect(&proc, &q, a);
}

static void ask(struct rl_connect_answer *a, int fd)
{
    ask_as(a, fd, RL_CONNECT_STREAM, RL_CONNECT_CALL, 0);
}

Test(decide_connect, a_connect_within_budget_goes_asking_the_kernel_nothing)
{
    fixture_gate(&proc, "tester", "[user:tester]\nconnect = 10/s\n");
    struct rl_connect_answer a;
    ask(&a, 7);
    cr_expect_eq(a.act, RL_CONNECT_GO);
    cr_expect(a.charged);
    cr_expect_eq(a.t.wait_ns, 0);
    cr_expect(!a.matched, "sends are not charged at all");
    cr_expect(!a.counts_requests);
    cr_expect_eq(kernel.asked, 0, "nothing the decision needed");
}

Test(decide_connect, a_datagram_is_marked_not_charged_nor_a_charged_attempt)
{
    fixture_gate(&proc, "tester",
                 "[user:tester]\nconnect = 1/h\nsend = 10/s\n");
    struct rl_connect_answer a;
    ask_as(&a, 7, RL_CONNECT_DGRAM, RL_CONNECT_CALL, 0);
    cr_expect_eq(a.act, RL_CONNECT_PASS);
    cr_expect(!a.charged);
    cr_expect(a.matched, "its datagrams are charged");
    const struct rl_connect_question again = {
        .call = "connect",
        .fd = 8,
        .sa = (const struct sockaddr *)&dest,
        .salen = sizeof dest,
        .sock = RL_CONNECT_STREAM,
        .charged = true, /* EINPROGRESS reported, asked again */
        .probe = &probe,
    };
    rl_decide_connect(&proc, &again, &a);
    cr_expect_eq(a.act, RL_CONNECT_PASS);
    ask(&a, 9);
    cr_expect_eq(a.act, RL_CONNECT_GO, "the one unit was still there");
    ask(&a, 10);
    cr_expect_eq(a.act, RL_CONNECT_FAIL);
    cr_expect_eq(a.t.err, EAGAIN);
    cr_expect_eq(kernel.asked, 0, "fail mode waits for nothing");
}

Test(decide_connect, delay_mode_a_nonblocking_connect_is_deferred_to_its_turn)
{
    fixture_gate(&proc, "tester",
                 "[rlshim]\non_deny = delay\n"
                 "[user:tester]\nconnect = 1/s\n");
    struct rl_connect_answer a;
    ask(&a, 7);
    cr_assert_eq(a.act, RL_CONNECT_GO);
    cr_expect_eq(kernel.asked, 0);
    kernel.nonblocking = 1;
    ask(&a, 8);
    cr_expect_eq(a.act, RL_CONNECT_DEFERRED);
    cr_expect(a.charged, "its turn is taken");
    cr_expect_eq(kernel.asked, 1);
    cr_expect_eq(ready_hidden(&proc, 8, rl_clock_now_ns()),
                 RL_READY_CONNECT);
    /* A blocking socket sleeps for its own turn: nothing recorded. */
    kernel.nonblocking = 0;
    ask(&a, 9);
    cr_expect_eq(a.act, RL_CONNECT_GO);
    cr_expect(a.t.wait_ns > S / 2 && a.t.wait_ns <= 2 * S);
    cr_expect_eq(ready_hidden(&proc, 9, rl_clock_now_ns()), 0);
    cr_expect_eq(kernel.asked, 2);
}

Test(decide_connect, a_full_max_open_defers_or_waits_by_the_socket)
{
    fixture_gate(&proc, "tester",
                 "[rlshim]\non_deny = delay\n"
                 "[user:tester]\nmax_open = 1\n");
    struct rl_connect_answer a;
    ask(&a, 200);
    cr_assert_eq(a.act, RL_CONNECT_GO);
    rl_settle_connect(&proc, &a, 200, -1, EINPROGRESS); /* holds it */
    kernel.nonblocking = 1;
    ask(&a, 201);
    cr_expect_eq(a.act, RL_CONNECT_DEFERRED);
    cr_expect(!a.charged, "nothing taken while it waits");
    cr_expect_eq(ready_hidden(&proc, 201, rl_clock_now_ns()), RL_READY_OPEN);
    kernel.nonblocking = 0;
    ask(&a, 202);
    cr_expect_eq(a.act, RL_CONNECT_WAIT);
    cr_expect(a.deadline > rl_clock_now_ns(), "until max_delay");
    /* Asked again after the wait: a blocking socket waits on, never
     * deferred, and keeps its deadline. */
    uint64_t deadline = a.deadline;
    kernel.nonblocking = 1;
    ask_as(&a, 202, RL_CONNECT_STREAM, RL_CONNECT_WAITED, deadline);
    cr_expect_eq(a.act, RL_CONNECT_FAIL);
    kernel.nonblocking = 0;
    ask_as(&a, 202, RL_CONNECT_STREAM, RL_CONNECT_WAITED, deadline);
    cr_expect_eq(a.act, RL_CONNECT_WAIT);
    cr_expect_eq(a.deadline, deadline);
    cr_expect_eq(kernel.asked, 4, "once per decision");
}

Test(decide_connect, a_waiting_connect_taken_up_by_a_wait_call_goes_once_freed)
{
    fixture_gate(&proc, "tester",
                 "[rlshim]\non_deny = delay\n"
                 "[user:tester]\nmax_open = 1\n");
    struct rl_connect_answer a;
    ask(&a, 200);
    rl_settle_connect(&proc, &a, 200, 0, 0);
    kernel.nonblocking = 1;
    ask(&a, 201);
    cr_assert_eq(a.act, RL_CONNECT_DEFERRED);
    uint64_t deadline = a.deadline;
    unsigned asked = kernel.asked;
    /* Still full: waits on, the kernel not asked. */
    ask_as(&a, 201, RL_CONNECT_STREAM, RL_CONNECT_DUE, deadline);
    cr_expect_eq(a.act, RL_CONNECT_DEFERRED);
    rl_open_forget(&proc.open, 200); /* its close */
    ask_as(&a, 201, RL_CONNECT_STREAM, RL_CONNECT_DUE, deadline);
    cr_expect_eq(a.act, RL_CONNECT_GO);
    cr_expect(a.charged);
    cr_expect(!rl_ready_any(&proc.ready), "its entry is gone");
    cr_expect_eq(kernel.asked, asked);
}

Test(decide_connect, a_waiting_connect_past_its_deadline_fails_told_once)
{
    fixture_gate(&proc, "tester",
                 "[rlshim]\non_deny = delay\n"
                 "[user:tester]\nmax_open = 1\n");
    struct rl_connect_answer a;
    ask(&a, 200);
    rl_settle_connect(&proc, &a, 200, 0, 0);
    kernel.nonblocking = 1;
    ask(&a, 201);
    cr_assert_eq(a.act, RL_CONNECT_DEFERRED);
    /* A deadline already passed. */
    ask_as(&a, 201, RL_CONNECT_STREAM, RL_CONNECT_DUE, 1);
    cr_expect_eq(a.act, RL_CONNECT_FAIL);
    int err = 0;
    cr_expect_eq(rl_ready_take_error(&proc, 201, &err), 1);
    cr_expect_eq(err, a.t.err);
    cr_expect_eq(rl_ready_take_error(&proc, 201, &err), 0, "told once");
}

Test(decide_connect, settle_gives_a_refused_connects_place_back)
{
    fixture_gate(&proc, "tester", "[user:tester]\nmax_open = 1\n");
    struct rl_connect_answer a;
    ask(&a, 200);
    cr_assert_eq(a.act, RL_CONNECT_GO);
    rl_settle_connect(&proc, &a, 200, -1, ECONNREFUSED);
    ask(&a, 201);
    cr_expect_eq(a.act, RL_CONNECT_GO, "the refused one held nothing");
    rl_settle_connect(&proc, &a, 201, -1, EINTR); /* still connecting */
    ask(&a, 202);
    cr_expect_eq(a.act, RL_CONNECT_FAIL);
    cr_expect_eq(a.t.err, EAGAIN);
}

Test(decide_connect, in_a_handler_all_or_nothing_at_once)
{
    fixture_gate(&proc, "tester",
                 "[rlshim]\non_deny = delay\n"
                 "[user:tester]\nconnect = 1/h\n");
    kernel.nonblocking = 1;
    struct rl_connect_answer a;
    ask_as(&a, 7, RL_CONNECT_STREAM, RL_CONNECT_HANDLER, 0);
    cr_expect_eq(a.act, RL_CONNECT_GO);
    cr_expect(a.charged);
    cr_expect_eq(a.t.wait_ns, 0);
    rl_settle_connect(&proc, &a, 7, 0, 0); /* nothing to settle */
    ask_as(&a, 8, RL_CONNECT_STREAM, RL_CONNECT_HANDLER, 0);
    cr_expect_eq(a.act, RL_CONNECT_FAIL, "delay mode fails at once");
    cr_expect_eq(a.t.err, EAGAIN);
    cr_expect_eq(kernel.asked, 0);
}

/* A handler's connect binds no max_open place (the map allocates): the
 * budget denies, at once, the kernel not asked; an address the rule does
 * not cover passes, nothing charged. */
Test(decide_connect, in_a_handler_max_open_denies_and_the_uncovered_pass)
{
    fixture_gate(&proc, "tester",
                 "[rlshim]\non_deny = delay\n"
                 "[user:tester]\nmax_open = 4\nto = 10.0.0.1\n");
    struct rl_connect_answer a;
    ask_as(&a, 7, RL_CONNECT_STREAM, RL_CONNECT_HANDLER, 0);
    cr_expect_eq(a.act, RL_CONNECT_FAIL);
    cr_expect_eq(a.t.err, EAGAIN);
    cr_expect(!a.charged);
    cr_expect(!rl_ready_any(&proc.ready), "nothing deferred");
    inet_pton(AF_INET, "10.0.0.2", &dest.sin_addr);
    ask_as(&a, 7, RL_CONNECT_STREAM, RL_CONNECT_HANDLER, 0);
    cr_expect_eq(a.act, RL_CONNECT_PASS);
    cr_expect(!a.charged);
    cr_expect_eq(kernel.asked, 0);
}

static uint64_t ms_since(uint64_t t0)
{
    return (rl_clock_now_ns() - t0) / 1000000u;
}

/* RL_CONNECT_WAIT is settled by its wait: until a place frees, or the
 * deadline; then asked again. */
Test(decide_connect, a_blocking_connect_waits_for_its_place_in_settle)
{
    fixture_gate(&proc, "tester",
                 "[rlshim]\non_deny = delay\n"
                 "[user:tester]\nmax_open = 1\n");
    struct rl_connect_answer a;
    ask(&a, 200);
    rl_settle_connect(&proc, &a, 200, 0, 0); /* holds the place */
    ask(&a, 201);
    cr_assert_eq(a.act, RL_CONNECT_WAIT);
    uint64_t deadline = a.deadline;
    a.deadline = rl_clock_now_ns() + 30 * 1000000u; /* a short wait */
    uint64_t t0 = rl_clock_now_ns();
    rl_settle_connect(&proc, &a, 201, -1, 0);
    cr_expect_geq(ms_since(t0), 25, "no place: slept till the deadline");
    rl_open_forget(&proc.open, 200); /* its close */
    ask_as(&a, 201, RL_CONNECT_STREAM, RL_CONNECT_WAITED, deadline);
    cr_expect_eq(a.act, RL_CONNECT_GO);
    cr_expect(a.charged);
}

/* The supervisor's address reader (decide_connect.h `address`): counts
 * its reads and reads `dest`. */
static unsigned reads;

static const struct sockaddr *read_dest(void *ctx, struct sockaddr_storage *ss,
                                        socklen_t *len)
{
    cr_expect_eq(ctx, &reads, "the carrier's own context");
    reads++;
    memcpy(ss, &dest, sizeof dest);
    *len = sizeof dest;
    return (const struct sockaddr *)ss;
}

/* The supervisor's question: a new attempt on a stream socket, to `sa`
 * (NULL: not read). */
static void ask_supervised(struct rl_connect_answer *a, int fd,
                           const struct sockaddr *sa, socklen_t salen,
                           uint64_t deadline)
{
    const struct rl_connect_probe sup_probe = {
        .nonblocking = fake_nonblocking, .address = read_dest, .ctx = &reads};
    const struct rl_connect_question q = {
        .call = "connect",
        .fd = fd,
        .sa = sa,
        .salen = salen,
        .sock = RL_CONNECT_STREAM,
        .asker = RL_CONNECT_SUPERVISOR,
        .deadline = deadline,
        .probe = &sup_probe,
    };
    rl_decide_connect(&proc, &q, a);
}

Test(decide_connect, the_supervisor_charges_alike_whatever_the_address)
{
    fixture_gate(&proc, "tester", "[user:tester]\nconnect = 2/h\n");
    const struct sockaddr_storage unix_sa = {.ss_family = AF_UNIX};
    struct rl_connect_answer a;
    ask_as(&a, 7, RL_CONNECT_STREAM, RL_CONNECT_CALL, 0);
    cr_assert_eq(a.act, RL_CONNECT_GO);
    /* Another family (the kernel reads the address again), or none
     * read: the same charge as any inet connect's. */
    ask_supervised(&a, 8, (const struct sockaddr *)&unix_sa,
                   sizeof(sa_family_t), 0);
    cr_expect_eq(a.act, RL_CONNECT_GO);
    cr_expect(a.charged);
    ask_supervised(&a, 9, NULL, sizeof dest, 0);
    cr_expect_eq(a.act, RL_CONNECT_FAIL, "the budget is spent");
    cr_expect(reads <= 1, "read at most once, for its log line");
    rl_settle_connect_unmade(&proc, &a); /* nothing: it was denied */
    cr_expect_eq(kernel.asked, 0);
}

Test(decide_connect, the_supervisor_keeps_a_later_turn_and_waits_for_a_place)
{
    fixture_gate(&proc, "tester",
                 "[rlshim]\non_deny = delay\n"
                 "[user:tester]\nconnect = 1/s\nmax_open = 1\n");
    kernel.nonblocking = 0; /* every notified call waits for its answer */
    const struct sockaddr *sa = (const struct sockaddr *)&dest;
    struct rl_connect_answer a;
    ask_supervised(&a, 200, sa, sizeof dest, 0);
    cr_assert_eq(a.act, RL_CONNECT_GO);
    rl_settle_connect(&proc, &a, 200, 0, 0); /* holds the place */
    ask_supervised(&a, 201, sa, sizeof dest, 0);
    cr_expect_eq(a.act, RL_CONNECT_WAIT, "not deferred: it has no wait view");
    uint64_t deadline = a.deadline;
    cr_expect(deadline > rl_clock_now_ns());
    cr_expect(!rl_connect_wait_over(&a, rl_clock_now_ns()));
    cr_expect(!rl_ready_any(&proc.ready));
    rl_open_forget(&proc.open, 200); /* its close */
    cr_expect(rl_connect_wait_over(&a, rl_clock_now_ns()));
    ask_supervised(&a, 201, sa, sizeof dest, deadline);
    cr_expect_eq(a.act, RL_CONNECT_GO);
    cr_expect(a.t.wait_ns > 0, "at its turn, answered by the timer");
    cr_expect(!rl_ready_any(&proc.ready));
    /* Its caller gone before the turn: the unit and the place back. */
    rl_settle_connect_unmade(&proc, &a);
    ask_supervised(&a, 202, sa, sizeof dest, 0);
    cr_expect_eq(a.act, RL_CONNECT_GO);
    cr_expect(a.t.wait_ns > 0, "the turn given back, taken again");
}

/* A lone connect limit grants at once, without a ticket of charges
 * (rl_gate_connect_now): its unit goes back all the same. */
Test(decide_connect, the_supervisor_gives_back_a_connect_granted_at_once)
{
    fixture_gate(&proc, "tester", "[user:tester]\nconnect = 1/h\n");
    const struct sockaddr *sa = (const struct sockaddr *)&dest;
    struct rl_connect_answer a;
    ask_supervised(&a, 7, sa, sizeof dest, 0);
    cr_assert_eq(a.act, RL_CONNECT_GO);
    rl_settle_connect_unmade(&proc, &a);
    ask_supervised(&a, 8, sa, sizeof dest, 0);
    cr_expect_eq(a.act, RL_CONNECT_GO, "its unit went back");
}
