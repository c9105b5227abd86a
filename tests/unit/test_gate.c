/* The gate: one decision per call, on a config loaded from a string, a
 * state segment in a temp dir and a clock stepped by hand (the *_at
 * forms). Criterion runs each test in its own process, so the gate's
 * process-wide state starts fresh every time. */
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
#include "state/store.h"
#include "util/clock.h"
#include "util/ownerlock.h"
#include <sched.h>

#define MS 1000000ull
#define S 1000000000ull
#define T0 (1000 * S) /* an arbitrary start on the fake clock */

static char dir[64];
static struct rl_gate_ticket t;

static void setup(void)
{
    snprintf(dir, sizeof dir, "/tmp/rlshim-gate-XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
    setenv("RLSHIM_STATE_DIR", dir, 1);
}

static void teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
}

TestSuite(gate, .init = setup, .fini = teardown);

/* Load `text` and set the gate up for user key "tester". */
static void gate_with(const char *text)
{
    struct rl_config *cfg = NULL;
    struct rl_diag diag = {0};
    int r = rl_config_load_string(text, "test.ini", &cfg, &diag);
    cr_assert_eq(r, 0, "config: %s", diag.n ? diag.msgs[0] : "?");
    rl_diag_free(&diag);
    struct rl_identity id = {.has_key = true, .uid = (uint32_t)getuid()};
    snprintf(id.key, sizeof id.key, "tester");
    char why[256] = "";
    cr_assert_eq(rl_gate_init(cfg, &id, why, sizeof why), 0, "%s", why);
    cr_assert_str_empty(why);
}

static struct sockaddr_in v4(const char *ip, int port)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    inet_pton(AF_INET, ip, &a.sin_addr);
    return a;
}

static int conn(uint64_t now)
{
    struct sockaddr_in a = v4("127.0.0.1", 80);
    return rl_gate_connect_at(&t, now, "connect", 3, &a, sizeof a);
}

static int send_(uint64_t now, uint64_t bytes, uint64_t min)
{
    return rl_gate_send_at(&t, now, "send", 3, NULL, 0, 1, 1, bytes, min);
}

struct counter_arg {
    int idx;
    int found;
    uint64_t v;
};

static int read_counter(const struct rl_slot_info *info, struct rl_slot *slot,
                        void *arg)
{
    (void)slot;
    struct counter_arg *a = arg;
    a->v = info->counters[a->idx];
    a->found++;
    return 0;
}

/* The slot's counter for (kind, stat), read back through the segment. */
static uint64_t counter(int kind, int stat)
{
    struct rl_store *s = NULL;
    cr_assert_eq(rl_store_attach(&s, dir, (uint32_t)getuid(), NULL, 0), 0);
    struct counter_arg a = {kind * RL_STORE_STATS_PER_KIND + stat, 0, 0};
    rl_store_each(s, read_counter, &a);
    rl_store_close(s);
    cr_assert_eq(a.found, 1, "%d slots", a.found);
    return a.v;
}

Test(gate, denies_a_connect_beyond_the_limit_and_refills_at_the_rate)
{
    gate_with("[user:tester]\nconnect = 2/s\n");
    cr_expect_eq(conn(T0), RL_GATE_GO);
    cr_expect_eq(t.wait_ns, 0);
    cr_expect_eq(conn(T0), RL_GATE_GO);
    cr_expect_eq(conn(T0), RL_GATE_FAIL);
    cr_expect_eq(t.err, EAGAIN);
    cr_expect_eq(conn(T0 + 499 * MS), RL_GATE_FAIL);
    cr_expect_eq(conn(T0 + 500 * MS), RL_GATE_GO);
    cr_expect_eq(counter(RL_KIND_CONNECT, RL_STAT_ALLOWED), 3);
    cr_expect_eq(counter(RL_KIND_CONNECT, RL_STAT_DENIED), 2);
}

Test(gate, fails_with_the_configured_errno)
{
    gate_with("[rlshim]\nerrno = ECONNREFUSED\n"
              "[user:tester]\nconnect = 1/s\n");
    conn(T0);
    cr_expect_eq(conn(T0), RL_GATE_FAIL);
    cr_expect_eq(t.err, ECONNREFUSED);
}

Test(gate, reserves_the_next_turn_and_says_how_long_to_sleep_in_delay_mode)
{
    gate_with("[user:tester]\nconnect = 1/s\non_deny = delay\n");
    cr_expect_eq(conn(T0), RL_GATE_GO);
    cr_expect_eq(conn(T0), RL_GATE_GO);
    cr_expect_eq(t.wait_ns, 1 * S);
    cr_expect_eq(conn(T0), RL_GATE_GO);
    cr_expect_eq(t.wait_ns, 2 * S);
    cr_expect_eq(counter(RL_KIND_CONNECT, RL_STAT_DELAYED), 2);
    cr_expect_eq(counter(RL_KIND_CONNECT, RL_STAT_DELAYED_NS), 3 * S);
}

Test(gate, fails_at_once_when_the_wait_would_exceed_max_delay)
{
    gate_with("[user:tester]\nconnect = 1/s\non_deny = delay\n"
              "max_delay = 1500ms\n");
    cr_expect_eq(conn(T0), RL_GATE_GO);
    cr_expect_eq(conn(T0), RL_GATE_GO);
    cr_expect_eq(t.wait_ns, 1 * S);
    cr_expect_eq(conn(T0), RL_GATE_FAIL);
    cr_expect_eq(t.err, EAGAIN);
}

Test(gate, grants_part_of_a_stream_send_but_a_datagram_whole_or_not_at_all)
{
    gate_with("[user:tester]\nsend_bytes = 1000/s\n");
    cr_expect_eq(send_(T0, 1500, 1), RL_GATE_GO);
    cr_expect_eq(t.bytes, 1000);
    cr_expect_eq(send_(T0 + 300 * MS, 500, 500), RL_GATE_FAIL);
    cr_expect_eq(send_(T0 + 500 * MS, 500, 500), RL_GATE_GO);
    cr_expect_eq(t.bytes, 500);
}

Test(gate, takes_back_what_the_kernel_did_not_send)
{
    gate_with("[user:tester]\nsend_bytes = 1000/s\nsend = 10/s\n");
    cr_expect_eq(send_(T0, 1000, 1), RL_GATE_GO);
    rl_gate_refund(&t, RL_KIND_SEND_BYTES, 400);
    cr_expect_eq(send_(T0, 1000, 1), RL_GATE_GO);
    cr_expect_eq(t.bytes, 400);
    cr_expect_eq(counter(RL_KIND_SEND_BYTES, RL_STAT_ALLOWED), 1000);
}

Test(gate, counts_one_send_per_message_and_grants_a_prefix)
{
    gate_with("[user:tester]\nsend = 3/s\n");
    cr_expect_eq(
        rl_gate_send_at(&t, T0, "sendmmsg", 3, NULL, 0, 5, 1, 500, 100),
        RL_GATE_GO);
    cr_expect_eq(t.calls, 3);
    cr_expect_eq(send_(T0, 10, 10), RL_GATE_FAIL);
}

Test(gate, goes_and_counts_but_never_denies_in_dry_run)
{
    gate_with("[rlshim]\ndry_run = yes\n[user:tester]\nconnect = 1/s\n");
    cr_expect_eq(conn(T0), RL_GATE_GO);
    cr_expect_eq(conn(T0), RL_GATE_GO);
    cr_expect_eq(t.wait_ns, 0);
    cr_expect_eq(counter(RL_KIND_CONNECT, RL_STAT_DENIED), 1);
}

Test(gate, covers_only_the_to_list_and_ipv4_mapped_as_ipv4)
{
    gate_with("[user:tester]\nconnect = 1/s\nto = 127.0.0.1:80\n");
    struct sockaddr_in a = v4("127.0.0.1", 80), b = v4("127.0.0.1", 81);
    cr_expect(rl_gate_covers(&a, sizeof a));
    cr_expect_not(rl_gate_covers(&b, sizeof b));
    struct sockaddr_in6 m = {.sin6_family = AF_INET6, .sin6_port = htons(80)};
    inet_pton(AF_INET6, "::ffff:127.0.0.1", &m.sin6_addr);
    cr_expect(rl_gate_covers(&m, sizeof m));
}

Test(gate, leaves_a_user_without_a_rule_alone)
{
    gate_with("[user:someone-else]\nconnect = 1/s\n");
    cr_expect_not(rl_gate_active());
}

Test(gate, denies_an_unknown_user_every_inet_connect_when_unknown_is_deny)
{
    gate_with("[rlshim]\nunknown = deny\n"
              "[user:someone-else]\nconnect = 1/s\n");
    cr_expect(rl_gate_active());
    struct sockaddr_in a = v4("10.1.2.3", 443);
    cr_expect(rl_gate_covers(&a, sizeof a));
    cr_expect_eq(conn(T0), RL_GATE_FAIL);
}

Test(gate, caps_a_stream_send_at_the_smallest_byte_burst)
{
    gate_with("[user:tester]\nsend_bytes = 1000/s, 5000/min\n"
              "send_bytes_burst = 800\n");
    cr_expect_leq(rl_gate_max_bytes(), 800);
}

/* What another process with another config does: replace the segment. */
static void replace_segment(void)
{
    struct rl_store_opts o = {
        .shared = true,
        .dir = dir,
        .uid = (uint32_t)getuid(),
        .config_hash = 12345,
        .nslots = 8,
        .arena_words = 64,
    };
    struct rl_store *s = NULL;
    cr_assert_eq(rl_store_open(&s, &o, NULL, 0), 0);
    rl_store_close(s);
}

Test(gate, follows_a_replaced_segment_but_stops_ping_ponging)
{
    gate_with("[user:tester]\nconnect = 1/s\n");
    cr_expect_eq(conn(T0), RL_GATE_GO);
    cr_expect_eq(conn(T0), RL_GATE_FAIL);
    /* Each replacement is followed: a fresh segment, a full budget. */
    for (int i = 0; i < 4; i++) {
        replace_segment();
        cr_expect_eq(conn(T0), RL_GATE_GO, "re-open %d", i);
        cr_expect_eq(conn(T0), RL_GATE_FAIL);
    }
    /* Then the process keeps what it has. */
    replace_segment();
    cr_expect_eq(conn(T0), RL_GATE_FAIL);
}

Test(gate, charges_no_sends_for_a_connect_only_quota)
{
    gate_with("[user:tester]\nconnect = 5/s\n");
    cr_expect_not(rl_gate_charges_sends());
}

Test(gate, charges_sends_when_a_send_limit_exists)
{
    gate_with("[user:tester]\nconnect = 5/s\nsend_bytes = 1MiB/s\n");
    cr_expect(rl_gate_charges_sends());
}

/* A send from a signal handler that interrupted its thread inside the
 * shim: charged straight to the shared limiters, on the real clock. */
static int reentered(uint64_t calls, uint64_t bytes, uint64_t min,
                     uint64_t *granted, int *err)
{
    return rl_gate_send_reentered(calls, bytes, min, granted, err);
}

Test(gate, charges_a_reentered_send_and_denies_it_without_waiting_in_delay_mode)
{
    /* Per minute: on the real clock the 4 calls never see a refill. */
    gate_with("[user:tester]\nsend = 3/min\non_deny = delay\n"
              "max_delay = 30s\nerrno = ECONNREFUSED\n");
    uint64_t g = 0;
    int err = 0;
    for (int i = 0; i < 3; i++)
        cr_expect_eq(reentered(1, 64, 64, &g, &err), RL_GATE_GO);
    /* Spent: no reservation and no sleep from a handler, a denial. */
    cr_expect_eq(reentered(1, 64, 64, &g, &err), RL_GATE_FAIL);
    cr_expect_eq(err, ECONNREFUSED);
    cr_expect_eq(counter(RL_KIND_SEND, RL_STAT_ALLOWED), 3);
    cr_expect_eq(counter(RL_KIND_SEND, RL_STAT_DENIED), 1);
    /* And the ordinary path sees the same bucket spent: it reserves. */
    cr_expect_eq(rl_gate_send(&t, "send", 3, NULL, 0, 1, 1, 64, 64),
                 RL_GATE_GO);
    cr_expect_gt(t.wait_ns, 0);
}

Test(gate, grants_part_of_a_reentered_stream_send_and_gives_back_the_call)
{
    gate_with("[user:tester]\nsend = 10/h\nsend_bytes = 100/h\n");
    uint64_t g = 0;
    int err = 0;
    cr_expect_eq(reentered(1, 150, 1, &g, &err), RL_GATE_GO);
    cr_expect_eq(g, 100);
    /* Bytes denied: the call it took is given back. */
    cr_expect_eq(reentered(1, 50, 50, &g, &err), RL_GATE_FAIL);
    cr_expect_eq(err, EAGAIN);
    cr_expect_eq(counter(RL_KIND_SEND, RL_STAT_ALLOWED), 1);
    cr_expect_eq(counter(RL_KIND_SEND_BYTES, RL_STAT_DENIED), 50);
    for (int i = 0; i < 9; i++)
        cr_expect_eq(reentered(1, 0, 0, &g, &err), RL_GATE_GO, "%d", i);
    cr_expect_eq(reentered(1, 0, 0, &g, &err), RL_GATE_FAIL);
}

/* The "handler": lands in the middle of a window update of its own
 * thread, with the lock held, and decides a send there. */
static int inner_act = -1;
static void land_inside(rl_word *st)
{
    (void)st;
    uint64_t g = 0;
    int err = 0;
    if (inner_act < 0)
        inner_act = rl_gate_send_reentered(1, 0, 0, &g, &err);
}

static void yield_cpu(void)
{
    sched_yield();
}

static const struct rl_lock_ops landing_ops = {
    .self = rl_ownerlock_self,
    .alive = rl_ownerlock_alive,
    .yield = yield_cpu,
    .in_critical = land_inside,
};

Test(gate, denies_a_reentered_send_whose_thread_holds_the_window_lock,
     .timeout = 10)
{
    gate_with("[user:tester]\nalgorithm = sliding_window\nsend = 5/s\n");
    /* One instant for every call: on the real clock a loaded machine could
     * let the first stamp age out of the window before the last. */
    uint64_t now = rl_clock_now_ns();
    rl_window_set_lock_ops(&landing_ops);
    int act = rl_gate_send_at(&t, now, "send", 3, NULL, 0, 1, 1, 0, 0);
    rl_window_set_lock_ops(NULL);
    cr_expect_eq(act, RL_GATE_GO);
    /* Denied, not waited for (that would never end), and the update it
     * interrupted was left whole: exactly 4 more fit in the window. */
    cr_expect_eq(inner_act, RL_GATE_FAIL);
    for (int i = 0; i < 4; i++)
        cr_expect_eq(rl_gate_send_at(&t, now, "send", 3, NULL, 0, 1, 1, 0, 0),
                     RL_GATE_GO, "%d", i);
    cr_expect_eq(rl_gate_send_at(&t, now, "send", 3, NULL, 0, 1, 1, 0, 0),
                 RL_GATE_FAIL);
}
