/* policy/ready.c: held sockets, reserved turns and deferred connects, on
 * a gate with a clock stepped by hand (the *_at forms). Criterion runs
 * each test in its own process, so the table starts empty every time. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "policy/config.h"
#include "policy/gate.h"
#include "gate_fixture.h"
#include "policy/ready.h"
#include "ready_look.h"

#define MS 1000000ull
#define S 1000000000ull
#define T0 (1000 * S)


static void setup(void)
{
    fixture_state_dir("ready");
}

static void teardown(void)
{
    fixture_state_dir_remove();
}

TestSuite(ready, .init = setup, .fini = teardown);

static void gate_with(const char *text)
{
    fixture_gate(&proc, "tester", text);
}

static int send_at(struct rl_gate_ticket *t, uint64_t now, uint64_t bytes)
{
    return rl_gate_send_at(&proc, t, now, "send", 7, NULL, 0, 1, 1, bytes,
                           bytes);
}

Test(ready, a_hold_hides_the_socket_until_its_time_then_is_dropped)
{
    cr_expect(!rl_ready_any(&proc.ready));
    cr_expect_eq(rl_ready_hold(&proc, 7, T0 + 100 * MS), 1);
    cr_expect_eq(rl_ready_hold(&proc, 7, T0 + 200 * MS), 0, "already held");
    cr_expect(rl_ready_any(&proc.ready));
    cr_expect_eq(ready_hidden(&proc, 7, T0 + 199 * MS), RL_READY_HOLD);
    cr_expect_eq(ready_hidden(&proc, 8, T0), 0);
    struct rl_ready_view v[4];
    uint64_t next;
    cr_expect_eq(rl_ready_snapshot(&proc, T0, v, 4, &next), 1);
    cr_expect_eq(v[0].fd, 7);
    cr_expect_eq(next, T0 + 200 * MS, "the later time wins");
    /* A send before then is answered EAGAIN; at its time it is decided
     * as usual and the hold is gone. */
    struct rl_gate_ticket t;
    uint64_t until;
    int what = 0;
    cr_expect_eq(
        rl_ready_claim(&proc, 7, T0 + 150 * MS, false, &t, &until, &what),
        -EAGAIN);
    cr_expect_eq(until, T0 + 200 * MS);
    cr_expect_eq(
        rl_ready_claim(&proc, 7, T0 + 200 * MS, false, &t, &until, &what), 0);
    cr_expect_eq(what, RL_READY_HOLD);
    cr_expect(!rl_ready_any(&proc.ready));
}

Test(ready, snapshot_drops_holds_that_are_over)
{
    rl_ready_hold(&proc, 5, T0 + 10 * MS);
    rl_ready_hold(&proc, 6, T0 + 30 * MS);
    struct rl_ready_view v[4];
    uint64_t next;
    cr_expect_eq(rl_ready_snapshot(&proc, T0 + 20 * MS, v, 4, &next), 1);
    cr_expect_eq(v[0].fd, 6);
    cr_expect_eq(next, T0 + 30 * MS);
    cr_expect_eq(atomic_load(&proc.ready.n), 1);
    cr_expect_eq(rl_ready_snapshot(&proc, T0 + 30 * MS, v, 4, &next), 0);
    cr_expect_eq(next, UINT64_MAX);
    cr_expect(!rl_ready_any(&proc.ready));
}

Test(ready, a_reserved_turn_is_spent_by_the_sockets_next_send_at_its_turn)
{
    gate_with("[rlshim]\non_deny = delay\n"
              "[user:tester]\nsend_bytes = 1000/s\n");
    struct rl_gate_ticket t, got;
    cr_expect_eq(send_at(&t, T0, 1000), RL_GATE_GO);
    cr_expect_eq(send_at(&t, T0, 1000), RL_GATE_GO);
    cr_expect_eq(t.wait_ns, 1 * S, "reserved one second ahead");
    cr_expect_eq(rl_ready_reserve(&proc, 7, &t), 1);
    uint64_t until;
    int what;
    cr_expect_eq(
        rl_ready_claim(&proc, 7, T0 + 999 * MS, false, &got, &until, &what),
        -EAGAIN, "not before its turn");
    cr_expect_eq(until, T0 + S);
    cr_expect_eq(ready_hidden(&proc, 7, T0 + 999 * MS), RL_READY_RESERVE);
    cr_expect_eq(ready_hidden(&proc, 7, T0 + S), 0, "writable at its turn");
    cr_expect_eq(rl_ready_claim(&proc, 7, T0 + S, false, &got, &until, &what),
                 1);
    cr_expect_eq(got.bytes, 1000);
    cr_expect(!rl_ready_any(&proc.ready));
    /* The turn was spent: the next one queues behind it. */
    cr_expect_eq(send_at(&t, T0 + S, 1000), RL_GATE_GO);
    cr_expect_eq(t.wait_ns, 1 * S);
}

Test(ready, a_reservation_whose_socket_closes_goes_back_to_the_budget)
{
    gate_with("[rlshim]\non_deny = delay\n"
              "[user:tester]\nsend_bytes = 1000/s\n");
    struct rl_gate_ticket t;
    cr_expect_eq(send_at(&t, T0, 1000), RL_GATE_GO);
    cr_expect_eq(send_at(&t, T0, 1000), RL_GATE_GO);
    cr_expect_eq(t.wait_ns, 1 * S);
    cr_expect_eq(rl_ready_reserve(&proc, 7, &t), 1);
    rl_ready_forget(&proc, 7);
    cr_expect(!rl_ready_any(&proc.ready));
    /* Another socket now gets the turn the closed one had, not the one
     * after it. */
    cr_expect_eq(send_at(&t, T0, 1000), RL_GATE_GO);
    cr_expect_eq(t.wait_ns, 1 * S);
}

Test(ready, a_deferred_connect_stays_hidden_until_taken_and_is_refunded_on_close)
{
    gate_with("[rlshim]\non_deny = delay\n[user:tester]\nconnect = 1/s\n");
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(80)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    struct rl_gate_ticket t, got;
    cr_expect_eq(rl_gate_connect_at(&proc, &t, T0, "connect", 7, &a, sizeof a),
                 RL_GATE_GO);
    cr_expect_eq(rl_gate_connect_at(&proc, &t, T0, "connect", 7, &a, sizeof a),
                 RL_GATE_GO);
    cr_expect_eq(t.wait_ns, 1 * S);
    cr_expect_eq(
        rl_ready_defer_connect(&proc, 7, &t, (struct sockaddr *)&a, sizeof a),
        1);
    cr_expect_eq(ready_hidden(&proc, 7, T0 + 2 * S), RL_READY_CONNECT,
                 "hidden until the shim connects it, even past its turn");
    struct sockaddr_storage sa;
    socklen_t len;
    uint64_t until;
    cr_expect_eq(rl_ready_take_connect(&proc, 7, T0 + 500 * MS, false, &got,
                                       &sa, &len, &until),
                 -EAGAIN);
    cr_expect_eq(
        rl_ready_take_connect(&proc, 7, T0 + S, false, &got, &sa, &len, &until),
        1);
    cr_expect_eq(len, sizeof a);
    cr_expect_eq(memcmp(&sa, &a, sizeof a), 0);
    cr_expect(!rl_ready_any(&proc.ready));
    /* A second deferral, closed before its turn: the turn is given back. */
    cr_expect_eq(
        rl_gate_connect_at(&proc, &t, T0 + S, "connect", 7, &a, sizeof a),
        RL_GATE_GO);
    cr_expect_eq(t.wait_ns, 1 * S);
    rl_ready_defer_connect(&proc, 8, &t, (struct sockaddr *)&a, sizeof a);
    rl_ready_forget_range(&proc, 8, 8);
    cr_expect_eq(
        rl_gate_connect_at(&proc, &t, T0 + S, "connect", 7, &a, sizeof a),
        RL_GATE_GO);
    cr_expect_eq(t.wait_ns, 1 * S);
}

Test(ready, send_eta_says_when_a_send_could_go_and_changes_nothing)
{
    gate_with("[user:tester]\nsend_bytes = 1000/s\n");
    uint64_t eta = rl_gate_send_eta(&proc, 500);
    cr_expect_eq(eta, 0, "the bucket is full");
    struct rl_gate_ticket t;
    cr_expect_eq(rl_gate_send(&proc, &t, "send", 7, NULL, 0, 1, 1, 1000, 1000),
                 RL_GATE_GO);
    eta = rl_gate_send_eta(&proc, 500);
    cr_expect(eta > 490 * MS && eta <= 500 * MS, "eta %llu",
              (unsigned long long)eta);
    uint64_t again = rl_gate_send_eta(&proc, 500);
    cr_expect(again <= eta && again > eta - 10 * MS,
              "asking twice does not move the budget: %llu then %llu",
              (unsigned long long)eta, (unsigned long long)again);
}

/* A memory BIO's request whose bytes went ahead of its turn (SPEC §12):
 * its socket is hidden until the turn, and after it until decided again
 * there; a 429 of its destination that came meanwhile holds it to the
 * pause's end, a pause of another name does not, and a pause past
 * max_delay refuses it: its socket's sends fail from then on. */
static struct rl_reqheld held_for(const char *name, uint64_t turn)
{
    static struct sockaddr_in a;
    a = (struct sockaddr_in){.sin_family = AF_INET, .sin_port = htons(443)};
    inet_pton(AF_INET, "10.0.0.1", &a.sin_addr);
    struct rl_reqheld h = {.turn = turn, .units = 1, .port = 443,
                           .named = true, .fd = -1, .call = "SSL_write",
                           .salen = sizeof a};
    memcpy(&h.sa, &a, sizeof a);
    snprintf(h.name, sizeof h.name, "%s", name);
    return h;
}

static void answer_429(const char *name, uint64_t ra, uint64_t now)
{
    struct rl_reqheld h = held_for(name, 0);
    const struct rl_gate_req q = {.call = "SSL_read", .fd = -1, .sa = &h.sa,
                                  .salen = h.salen, .name = name,
                                  .port = 443, .units = 1};
    rl_gate_request_outcome_at(&proc, &q, 429, true, ra, now);
}

Test(ready, a_held_request_is_decided_again_at_its_turn)
{
    gate_with("[rlshim]\non_deny = delay\nmax_delay = 10s\n"
              "[user:tester]\nrequest = 2/s\nrequest_burst = 1\n");
    struct rl_reqheld h = held_for("a.example", T0 + 500 * MS);
    cr_assert_eq(rl_ready_hold_turn(&proc, 9, &h), 1);
    struct rl_reqheld hb = held_for("b.example", T0 + 500 * MS);
    cr_assert_eq(rl_ready_hold_turn(&proc, 10, &hb), 1);
    uint64_t until = 0;
    cr_expect_eq(rl_ready_turn_due(&proc, 9, T0, &until), -EAGAIN);
    cr_expect_eq(until, T0 + 500 * MS, "not before its turn");
    cr_expect_eq(ready_held_until(&proc, 9, T0), T0 + 500 * MS);
    answer_429("a.example", 3 * S, T0 + 100 * MS);
    /* Past its turn, not yet decided again: still hidden. */
    cr_expect_eq(ready_hidden(&proc, 9, T0 + 600 * MS), RL_READY_TURN);
    struct rl_ready_view v[4];
    uint64_t next;
    cr_expect_eq(rl_ready_snapshot(&proc, T0 + 600 * MS, v, 4, &next), 2);
    cr_expect_leq(next, T0 + 600 * MS, "due now");
    cr_expect_eq(rl_ready_turn_due(&proc, 9, T0 + 600 * MS, &until), -EAGAIN);
    cr_expect_geq(until, T0 + 3100 * MS, "held to the pause's end");
    cr_expect_eq(ready_hidden(&proc, 9, T0 + 3 * S), RL_READY_TURN);
    /* Another name's request is not held by the pause: it goes. */
    cr_expect_eq(rl_ready_turn_due(&proc, 10, T0 + 600 * MS, &until), 0);
    cr_expect_eq(ready_hidden(&proc, 10, T0 + 600 * MS), 0);
    /* At its new turn, nothing paused any more: it goes, shown again. */
    uint64_t at = until;
    cr_expect_eq(rl_ready_turn_due(&proc, 9, at, &until), 0);
    cr_expect_eq(ready_hidden(&proc, 9, at), 0);
    cr_expect(!rl_ready_any(&proc.ready));
}

Test(ready, a_held_request_past_max_delay_fails_its_sockets_sends)
{
    gate_with("[rlshim]\non_deny = delay\nmax_delay = 2s\n"
              "[user:tester]\nrequest = 2/s\nrequest_burst = 1\n");
    struct rl_reqheld h = held_for("a.example", T0 + 500 * MS);
    cr_assert_eq(rl_ready_hold_turn(&proc, 9, &h), 1);
    answer_429("a.example", 60 * S, T0 + 100 * MS);
    uint64_t until = 0;
    cr_expect_eq(rl_ready_turn_due(&proc, 9, T0 + 500 * MS, &until),
                 ETIMEDOUT);
    cr_expect_eq(ready_hidden(&proc, 9, T0 + S), 0, "shown: refused");
    cr_expect_eq(rl_ready_turn_due(&proc, 9, T0 + S, &until), ETIMEDOUT,
                 "every send after it too");
    rl_ready_forget(&proc, 9);
    cr_expect(!rl_ready_any(&proc.ready));
}

/* The shim's two entries into the table: rl_ready_look (one fd as a wait
 * call sees it) and rl_ready_take (what is due on it, one kind at a
 * time). */
Test(ready, look_and_take_answer_for_each_kind_of_entry)
{
    gate_with("[rlshim]\non_deny = delay\n[user:tester]\nconnect = 1/s\n");
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(80)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    struct rl_gate_ticket t;
    cr_expect_eq(rl_gate_connect_at(&proc, &t, T0, "connect", 7, &a, sizeof a),
                 RL_GATE_GO);
    cr_expect_eq(rl_gate_connect_at(&proc, &t, T0, "connect", 7, &a, sizeof a),
                 RL_GATE_GO);
    cr_expect_eq(
        rl_ready_defer_connect(&proc, 7, &t, (struct sockaddr *)&a, sizeof a),
        1);
    struct rl_ready_take tk = {.what = RL_READY_CONNECT};
    cr_expect_eq(rl_ready_take(&proc, 7, T0 + 500 * MS, &tk), -EAGAIN);
    cr_expect_eq(tk.until, T0 + S);
    struct rl_ready_take other = {.what = RL_READY_FAILED};
    cr_expect_eq(rl_ready_take(&proc, 7, T0, &other), 0, "not that kind");
    cr_expect_eq(rl_ready_take(&proc, 7, T0 + S, &tk), 1);
    cr_expect_eq(tk.len, sizeof a);
    cr_expect_eq(memcmp(&tk.sa, &a, sizeof a), 0);
    cr_expect_eq(tk.t.wait_ns, t.wait_ns, "the caller owns the ticket");

    cr_expect_eq(rl_ready_fail(&proc, 5, ECONNREFUSED), 1);
    struct rl_ready_look lk;
    rl_ready_look(&proc, 5, T0, &lk);
    cr_expect_eq(lk.hidden, 0, "a failed connect is shown");
    tk = (struct rl_ready_take){.what = RL_READY_FAILED};
    cr_expect_eq(rl_ready_take(&proc, 5, T0, &tk), 1);
    cr_expect_eq(tk.err, ECONNREFUSED);
    cr_expect_eq(rl_ready_take(&proc, 5, T0, &tk), 0, "told once");

    cr_expect_eq(rl_ready_hold(&proc, 6, T0 + S), 1);
    rl_ready_look(&proc, 6, T0, &lk);
    cr_expect_eq(lk.hidden, RL_READY_HOLD);
    cr_expect_eq(lk.held_until, T0 + S);
    rl_ready_look(&proc, 6, T0 + S, &lk);
    cr_expect_eq(lk.hidden, 0);
    cr_expect_eq(lk.held_until, 0, "over");
}

Test(ready, a_refused_held_request_is_taken_with_its_errno)
{
    gate_with("[rlshim]\non_deny = delay\nmax_delay = 2s\n"
              "[user:tester]\nrequest = 2/s\nrequest_burst = 1\n");
    struct rl_reqheld h = held_for("a.example", T0 + 500 * MS);
    cr_assert_eq(rl_ready_hold_turn(&proc, 9, &h), 1);
    struct rl_ready_take tk = {.what = RL_READY_TURN};
    cr_expect_eq(rl_ready_take(&proc, 9, T0, &tk), -EAGAIN);
    cr_expect_eq(tk.until, T0 + 500 * MS);
    answer_429("a.example", 60 * S, T0 + 100 * MS);
    cr_expect_eq(rl_ready_take(&proc, 9, T0 + 500 * MS, &tk), 1);
    cr_expect_eq(tk.err, ETIMEDOUT);
}
