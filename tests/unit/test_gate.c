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

#include "policy/budget.h"
#include "policy/config.h"
#include "policy/gate.h"
#include "policy/proc.h"
#include "state/store.h"
#include "util/clock.h"
#include "util/ownerlock.h"
#include <sched.h>

#define MS 1000000ull
#define S 1000000000ull
#define T0 (1000 * S) /* an arbitrary start on the fake clock */

/* The process state this file decides through. */
static struct rl_proc proc;

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
static uint64_t gate_hash; /* the config's, names its segment */

static void gate_with(const char *text)
{
    struct rl_config *cfg = NULL;
    struct rl_diag diag = {0};
    int r = rl_config_load_string(text, "test.ini", &cfg, &diag);
    cr_assert_eq(r, 0, "config: %s", diag.n ? diag.msgs[0] : "?");
    rl_diag_free(&diag);
    gate_hash = rl_budget_hash(cfg);
    struct rl_identity id = {.has_key = true, .uid = (uint32_t)getuid()};
    snprintf(id.key, sizeof id.key, "tester");
    char why[256] = "";
    cr_assert_eq(rl_gate_init(&proc, cfg, &id, why, sizeof why), 0, "%s", why);
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
    return rl_gate_connect_at(&proc, &t, now, "connect", 3, &a, sizeof a);
}

/* A send on fd 3 as policy/decide_send.c makes it: a log line the
 * gate leaves for the fd's peer is written with the peer looked up then. */
static int send_(uint64_t now, uint64_t bytes, uint64_t min)
{
    int r =
        rl_gate_send_at(&proc, &t, now, "send", 3, NULL, 0, 1, 1, bytes, min);
    if (t.say_due) {
        struct sockaddr_storage ss;
        socklen_t l = sizeof ss;
        bool ok = getpeername(3, (struct sockaddr *)&ss, &l) == 0;
        rl_gate_say_peer(&proc, &t, "send", 3, ok ? &ss : NULL, l);
    }
    return r;
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
    cr_assert_eq(
        rl_store_attach(&s, dir, (uint32_t)getuid(), gate_hash, NULL, 0), 0);
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
    rl_gate_refund(&proc, &t, RL_KIND_SEND_BYTES, 400);
    cr_expect_eq(send_(T0, 1000, 1), RL_GATE_GO);
    cr_expect_eq(t.bytes, 400);
    cr_expect_eq(counter(RL_KIND_SEND_BYTES, RL_STAT_ALLOWED), 1000);
}

Test(gate, counts_one_send_per_message_and_grants_a_prefix)
{
    gate_with("[user:tester]\nsend = 3/s\n");
    cr_expect_eq(
        rl_gate_send_at(&proc, &t, T0, "sendmmsg", 3, NULL, 0, 5, 1, 500, 100),
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
    cr_expect(rl_gate_covers(&proc, &a, sizeof a));
    cr_expect_not(rl_gate_covers(&proc, &b, sizeof b));
    struct sockaddr_in6 m = {.sin6_family = AF_INET6, .sin6_port = htons(80)};
    inet_pton(AF_INET6, "::ffff:127.0.0.1", &m.sin6_addr);
    cr_expect(rl_gate_covers(&proc, &m, sizeof m));
}

Test(gate, leaves_a_user_without_a_rule_alone)
{
    gate_with("[user:someone-else]\nconnect = 1/s\n");
    cr_expect_not(rl_gate_active(&proc));
}

Test(gate, denies_an_unknown_user_every_inet_connect_when_unknown_is_deny)
{
    gate_with("[rlshim]\nunknown = deny\n"
              "[user:someone-else]\nconnect = 1/s\n");
    cr_expect(rl_gate_active(&proc));
    struct sockaddr_in a = v4("10.1.2.3", 443);
    cr_expect(rl_gate_covers(&proc, &a, sizeof a));
    cr_expect_eq(conn(T0), RL_GATE_FAIL);
}

Test(gate, caps_a_stream_send_at_the_smallest_byte_burst)
{
    gate_with("[user:tester]\nsend_bytes = 1000/s, 5000/min\n"
              "send_bytes_burst = 800\n");
    cr_expect_leq(rl_proc_gen(&proc)->gate.max_bytes, 800);
}

/* What `rlshim reset` without a config does: renew the segment. */
static void replace_segment(void)
{
    struct rl_store *s = NULL;
    cr_assert_eq(
        rl_store_attach(&s, dir, (uint32_t)getuid(), gate_hash, NULL, 0), 0);
    cr_assert_eq(rl_store_renew(s, dir, (uint32_t)getuid(), NULL, 0), 0);
    rl_store_close(s);
}

/* What a process with another config does: open its own segment. */
static void open_other_config(void)
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

Test(gate, follows_every_replaced_segment_and_ignores_other_configs)
{
    gate_with("[user:tester]\nconnect = 1/s\n");
    cr_expect_eq(conn(T0), RL_GATE_GO);
    cr_expect_eq(conn(T0), RL_GATE_FAIL);
    /* Another config's segment is another file: this budget is kept. */
    for (int i = 0; i < 3; i++) {
        open_other_config();
        cr_expect_eq(conn(T0), RL_GATE_FAIL, "other config %d", i);
    }
    /* Each replacement is followed, however many: a fresh segment, a full
     * budget (nothing ping-pongs any more, so there is no cap). */
    for (int i = 0; i < 8; i++) {
        replace_segment();
        cr_expect_eq(conn(T0), RL_GATE_GO, "re-open %d", i);
        cr_expect_eq(conn(T0), RL_GATE_FAIL);
    }
}

Test(gate, charges_no_sends_for_a_connect_only_quota)
{
    gate_with("[user:tester]\nconnect = 5/s\n");
    cr_expect_not(rl_gate_charges_sends(&proc));
}

Test(gate, charges_sends_when_a_send_limit_exists)
{
    gate_with("[user:tester]\nconnect = 5/s\nsend_bytes = 1MiB/s\n");
    cr_expect(rl_gate_charges_sends(&proc));
}

/* A send from a signal handler (rl_gate_handler): charged straight to
 * the shared limiters, on the real clock. */
static int reentered(uint64_t calls, uint64_t bytes, uint64_t min,
                     uint64_t *granted, int *err)
{
    const struct rl_gate_q q = {RL_KIND_SEND, NULL, 0, calls, bytes, min};
    return rl_gate_handler(&proc, &q, granted, err);
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
    cr_expect_eq(rl_gate_send(&proc, &t, "send", 3, NULL, 0, 1, 1, 64, 64),
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
        inner_act = reentered(1, 0, 0, &g, &err);
}

static const struct rl_lock_ops landing_ops = {
    .lock = rl_ownerlock_lock,
    .unlock = rl_ownerlock_unlock,
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
    int act = rl_gate_send_at(&proc, &t, now, "send", 3, NULL, 0, 1, 1, 0, 0);
    rl_window_set_lock_ops(NULL);
    cr_expect_eq(act, RL_GATE_GO);
    /* Denied, not waited for (that would never end), and the update it
     * interrupted was left whole: exactly 4 more fit in the window. */
    cr_expect_eq(inner_act, RL_GATE_FAIL);
    for (int i = 0; i < 4; i++)
        cr_expect_eq(
            rl_gate_send_at(&proc, &t, now, "send", 3, NULL, 0, 1, 1, 0, 0),
            RL_GATE_GO, "%d", i);
    cr_expect_eq(
        rl_gate_send_at(&proc, &t, now, "send", 3, NULL, 0, 1, 1, 0, 0),
        RL_GATE_FAIL);
}

/* --- leases: counted when spent, never leaked, never resurrected --- */

#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>

#include "policy/budget.h"
#include "policy/gate_leased.h"

/* A send of `bytes` as the shim makes it on the real clock (leased when a
 * lease covers it). */
static int live_send(uint64_t bytes)
{
    return rl_gate_send(&proc, &t, "send", 3, NULL, 0, 1, 1, bytes, bytes);
}

/* A datagram of `bytes` decided on its own, all or nothing, now. */
static int whole(uint64_t bytes)
{
    struct rl_gate_ticket d;
    return rl_gate_send_at(&proc, &d, rl_clock_now_ns(), "sendto", 3, NULL, 0,
                           1, 1, bytes, bytes);
}

static void sleep_ms(unsigned ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

/* 64000 bytes an hour: a bucket that does not refill during a test, deep
 * enough for leases of 1000 bytes (burst / 64). */
#define LEASING "[user:tester]\nsend_bytes = 64000/h\nsend = 6400/h\n"

Test(gate, counts_leased_units_when_spent_not_when_taken)
{
    gate_with(LEASING);
    cr_assert_eq(live_send(100), RL_GATE_GO);
    cr_expect(!t.leased, "the first send is decided on its own");
    cr_assert_eq(live_send(100), RL_GATE_GO);
    cr_expect(t.leased, "the second comes out of the lease");
    /* Counted in the record, not yet in the counters; never the lease. */
    cr_expect_eq(counter(RL_KIND_SEND_BYTES, RL_STAT_ALLOWED), 100);
    cr_expect_eq(counter(RL_KIND_SEND, RL_STAT_ALLOWED), 1);
    rl_gate_finish(&proc);
    cr_expect_eq(counter(RL_KIND_SEND_BYTES, RL_STAT_ALLOWED), 200);
    cr_expect_eq(counter(RL_KIND_SEND, RL_STAT_ALLOWED), 2);
    /* Given back: the whole rest of the bucket is there. */
    cr_expect_eq(whole(64000 - 200), RL_GATE_GO);
}

/* The hook's take (policy/gate_leased.h): spends out of the lease with no
 * call, and its stamp after the real call leaves alone a record that was
 * taken back meanwhile (a send that blocked long enough to go idle). */
Test(gate, the_hooks_take_spends_the_lease_and_stamps_only_a_record_still_its)
{
    gate_with(LEASING);
    cr_assert_eq(live_send(100), RL_GATE_GO);
    cr_assert(!t.leased, "the first send is decided on its own");
    struct rl_lease_holder *h = NULL;
    cr_assert_eq(rl_gate_send_leased_take(&proc, 100, true, &h), 100);
    cr_assert_not_null(h);
    /* Spent, not yet stamped: the stamp is the real call's end. */
    uint64_t word = h->word, stamp = rl_load_relaxed_u64(&h->rec[1]);
    sleep_ms(20); /* the coarse clock moves on */
    rl_gate_send_leased_done(h);
    uint64_t fresh = rl_load_relaxed_u64(&h->rec[1]);
    cr_expect_gt(fresh, stamp, "a record still its own is stamped");
    /* Taken back by another process, as rl_lease_reclaim does. */
    uint64_t w = word;
    cr_assert(atomic_compare_exchange_strong(&h->rec[0], &w, 0));
    cr_expect_eq(rl_gate_send_leased_take(&proc, 100, true, &h), 0,
                 "a record taken back covers nothing");
    cr_expect_null(h, "and the hook has nothing to stamp");
    h = rl_lease_me;
    sleep_ms(20);
    rl_gate_send_leased_done(h);
    cr_expect_eq(rl_load_relaxed_u64(&h->rec[1]), fresh,
                 "a record taken back is not stamped");
    /* The whole way finds out and decides the send on its own. */
    cr_expect_eq(live_send(100), RL_GATE_GO);
    cr_expect(!t.leased);
}

static int hold_pipe[2], go_pipe[2];

/* Sleeps until 10 ms after `last` (CLOCK_MONOTONIC ns, read after the
 * holder's last call returned, so no earlier than the record's stamp). */
static void ten_ms_after(uint64_t last)
{
    uint64_t since = rl_clock_now_ns() - last;
    if (since < 10 * MS)
        sleep_ms((unsigned)((10 * MS - since + MS - 1) / MS));
}

/* Checks that a lease is still out right after its holder's last call
 * (`last`): a denial changes nothing. Meaningful only while the record
 * cannot be idle yet (under 4 ms; idle is 8 ms); a slower machine skips
 * it, saying so. A late call may find the record idle and take the whole
 * `rest`: then true, the lease came back already (the caller must not ask
 * for `rest` again, the bucket is spent). */
static bool still_out(uint64_t rest, uint64_t last)
{
    int act = whole(rest);
    uint64_t took = rl_clock_now_ns() - last;
    if (took < 4 * MS)
        cr_expect_eq(act, RL_GATE_FAIL, "the lease is out of the bucket");
    else /* Said on stderr: Criterion exits 1 after a cr_log_warn. */
        fprintf(stderr,
                "%.1f ms after the holder's last call: too late to see the "
                "lease out of the bucket%s\n",
                (double)took / MS,
                act == RL_GATE_GO ? " (it came back already)" : "");
    return act == RL_GATE_GO;
}

/* Takes a lease, says so, then blocks in read() holding it. */
static void *holder_thread(void *arg)
{
    (void)arg;
    cr_assert_eq(live_send(10), RL_GATE_GO);
    cr_assert_eq(live_send(10), RL_GATE_GO);
    cr_assert(t.leased);
    uint64_t last = rl_clock_now_ns();
    cr_assert_eq(write(hold_pipe[1], &last, sizeof last), sizeof last);
    char c;
    cr_assert_eq(read(go_pipe[0], &c, 1), 1);
    return NULL;
}

/* In a child: all but what was spent, at once (1 when granted). */
static int child_takes_all(uint64_t bytes)
{
    pid_t pid = fork();
    cr_assert_neq(pid, -1);
    if (pid == 0) {
        rl_gate_atfork_child(&proc);
        _exit(whole(bytes) == RL_GATE_GO ? 1 : 0);
    }
    int st = 0;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    cr_assert(WIFEXITED(st));
    return WEXITSTATUS(st);
}

Test(gate, a_lease_held_by_a_blocked_thread_comes_back_within_10_ms)
{
    gate_with(LEASING);
    cr_assert_eq(pipe(hold_pipe), 0);
    cr_assert_eq(pipe(go_pipe), 0);
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, holder_thread, NULL), 0);
    uint64_t last = 0;
    cr_assert_eq(read(hold_pipe[0], &last, sizeof last), sizeof last);
    uint64_t rest = 64000 - 20;
    /* Asked here, at once: a fork may take longer than the lease lives. */
    bool back = still_out(rest, last);
    ten_ms_after(last);
    if (!back)
        cr_expect_eq(child_takes_all(rest), 1,
                     "another process gets the whole budget back after 10 ms");
    char c = 1;
    cr_assert_eq(write(go_pipe[1], &c, 1), 1);
    pthread_join(th, NULL);
    cr_expect_eq(counter(RL_KIND_SEND_BYTES, RL_STAT_ALLOWED), 20 + rest);
}

Test(gate, a_lease_held_by_a_killed_process_comes_back_within_10_ms)
{
    gate_with(LEASING);
    cr_assert_eq(pipe(hold_pipe), 0);
    pid_t pid = fork();
    cr_assert_neq(pid, -1);
    if (pid == 0) {
        rl_gate_atfork_child(&proc);
        int ok = live_send(10) == RL_GATE_GO && live_send(10) == RL_GATE_GO &&
                 t.leased;
        uint64_t last = ok ? rl_clock_now_ns() : 0;
        if (write(hold_pipe[1], &last, sizeof last) != sizeof last)
            _exit(2);
        for (;;)
            pause();
    }
    uint64_t last = 0;
    cr_assert_eq(read(hold_pipe[0], &last, sizeof last), sizeof last);
    cr_assert_neq(last, 0, "the child could not take a lease");
    uint64_t rest = 64000 - 20;
    bool back = still_out(rest, last);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    ten_ms_after(last);
    if (!back)
        cr_expect_eq(whole(rest), RL_GATE_GO,
                     "the whole budget is back 10 ms after the holder died");
    /* What the dead process spent is counted by whoever took it back. */
    cr_expect_eq(counter(RL_KIND_SEND_BYTES, RL_STAT_ALLOWED), 20 + rest);
}

static int reset_slot(const struct rl_slot_info *info, struct rl_slot *slot,
                      void *arg)
{
    (void)slot;
    rl_store_reset_slot(arg, info->index);
    return 0;
}

/* What `rlshim reset` does without a config: every word and counter of
 * the slot to zero. */
static void reset_all(void)
{
    struct rl_store *s = NULL;
    cr_assert_eq(rl_store_attach(&s, dir, (uint32_t)getuid(), gate_hash,
                                 NULL, 0), 0);
    rl_store_each(s, reset_slot, s);
    rl_store_close(s);
}

Test(gate, a_reset_while_a_lease_is_held_neither_over_admits_nor_wraps)
{
    gate_with(LEASING);
    cr_assert_eq(live_send(100), RL_GATE_GO);
    cr_assert_eq(live_send(100), RL_GATE_GO);
    cr_assert(t.leased);
    /* A send decided on its own, to be refunded after the reset. */
    struct rl_gate_ticket own;
    cr_assert_eq(rl_gate_send_at(&proc, &own, rl_clock_now_ns(), "sendmmsg", 3,
                                 NULL, 0, 2, 2, 300, 300),
                 RL_GATE_GO);
    reset_all();
    /* The old lease is gone with the old bucket: a full burst and no
     * more, whatever the thread held. */
    cr_expect_eq(rl_gate_send_leased(&proc, 100, true), 0);
    rl_gate_refund(&proc, &own, RL_KIND_SEND_BYTES, 300);
    rl_gate_refund(&proc, &own, RL_KIND_SEND, 2);
    rl_gate_finish(&proc);
    cr_expect_eq(counter(RL_KIND_SEND_BYTES, RL_STAT_ALLOWED), 0);
    cr_expect_eq(counter(RL_KIND_SEND, RL_STAT_ALLOWED), 0);
    cr_expect_eq(whole(64000), RL_GATE_GO);
    cr_expect_eq(whole(1), RL_GATE_FAIL);
}

Test(gate, never_waits_and_never_denies_in_dry_run_with_delay)
{
    gate_with("[user:tester]\nsend = 1/s\non_deny = delay\ndry_run = yes\n");
    for (int i = 0; i < 3; i++) {
        cr_expect_eq(send_(T0, 10, 10), RL_GATE_GO);
        cr_expect_eq(t.wait_ns, 0, "send %d would sleep %llu ns", i,
                     (unsigned long long)t.wait_ns);
    }
    cr_expect_eq(counter(RL_KIND_SEND, RL_STAT_ALLOWED), 3);
    cr_expect_eq(counter(RL_KIND_SEND, RL_STAT_DELAYED), 2);
}

/* --- the denial path pays no system call for log lines never written --- */

#include <dlfcn.h>

#include "util/log.h"

/* Every getpeername of this test binary (the gate's describe() among
 * them) is counted, then done. */
static unsigned peer_calls;

int getpeername(int fd, struct sockaddr *restrict sa, socklen_t *restrict len)
{
    static int (*real)(int, struct sockaddr *, socklen_t *);
    __atomic_add_fetch(&peer_calls, 1, __ATOMIC_RELAXED);
    if (real == NULL)
        *(void **)&real = dlsym(RTLD_NEXT, "getpeername");
    return real(fd, sa, len);
}

Test(gate, asks_no_peer_name_for_denials_the_log_does_not_write)
{
    gate_with("[user:tester]\nsend = 1/h\n");
    char path[128];
    snprintf(path, sizeof path, "%s/log", dir);
    cr_assert_eq(rl_log_setup(&proc.log, 3, path), 0);
    cr_assert_eq(send_(T0, 1, 1), RL_GATE_GO);
    peer_calls = 0;
    for (int i = 0; i < 1000; i++)
        cr_assert_eq(send_(T0 + (uint64_t)i * 1000, 1, 1), RL_GATE_FAIL);
    cr_expect_eq(peer_calls, RL_LOG_LINES_PER_S,
                 "%u getpeername calls for %d lines written", peer_calls,
                 RL_LOG_LINES_PER_S);
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f);
    int lines = 0, c;
    while ((c = fgetc(f)) != EOF)
        lines += c == '\n';
    fclose(f);
    cr_expect_eq(lines, RL_LOG_LINES_PER_S);
}

Test(gate, the_log_admits_lines_at_its_rate_and_counts_the_rest)
{
    char path[128];
    snprintf(path, sizeof path, "%s/log", dir);
    cr_assert(!rl_log_admit(&proc.log, T0), "logging is off");
    cr_assert_eq(rl_log_setup(&proc.log, 3, path), 0);
    for (int i = 0; i < RL_LOG_LINES_PER_S; i++)
        cr_expect(rl_log_admit(&proc.log, T0 + (uint64_t)i));
    cr_expect(!rl_log_admit(&proc.log, T0 + 999 * MS));
    cr_expect(!rl_log_admit(&proc.log, T0 + 999 * MS));
    cr_assert(rl_log_admit(&proc.log, T0 + S));
    rl_log_admitted(&proc.log, "next second");
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f);
    char line[256] = "";
    cr_assert_not_null(fgets(line, sizeof line, f));
    fclose(f);
    cr_expect_str_eq(line, "rlshim: 2 lines suppressed (at most 10/s)\n");
}

Test(gate, never_waits_in_dry_run_when_a_second_limit_would_deny)
{
    /* send reserves a turn (1 s), then send_bytes would deny: the call
     * goes, at once. */
    gate_with("[user:tester]\nsend = 1/s\nsend_bytes = 100/s\n"
              "on_deny = delay\ndry_run = yes\n");
    cr_expect_eq(send_(T0, 10, 10), RL_GATE_GO);
    cr_expect_eq(send_(T0, 500, 500), RL_GATE_GO);
    cr_expect_eq(t.wait_ns, 0, "would sleep %llu ns",
                 (unsigned long long)t.wait_ns);
    cr_expect_eq(counter(RL_KIND_SEND_BYTES, RL_STAT_DENIED), 500);
}

/* --- requests over TLS the shim cannot see (SPEC §11) --- */

#include <fcntl.h>

#include "policy/gate_int.h"
#include "policy/report.h"

/* What rl_report_write says on stderr (fd 2, as the shim writes it). */
static void report_text(char *out, size_t len)
{
    char path[] = "/tmp/rlshim-report-XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    unlink(path);
    int saved = dup(2);
    dup2(fd, 2);
    rl_report_write(&proc);
    dup2(saved, 2);
    close(saved);
    ssize_t n = pread(fd, out, len - 1, 0);
    out[n > 0 ? n : 0] = '\0';
    close(fd);
}

Test(gate, counts_tls_it_cannot_see_for_the_report_and_the_slot)
{
    gate_with("[user:tester]\nconnect = 5/s\nrequest = 2/s\n");
    rl_gate_report_enable(&proc);
    rl_report_tls_unseen(&proc, NULL, 0);
    rl_report_tls_unseen(&proc, NULL, 0);
    char out[4096];
    report_text(out, sizeof out);
    cr_expect(strstr(out, "rule [user:tester]: request seen 0, allowed 0, "
                          "denied 0, delayed 0") != NULL,
              "%s", out);
    cr_expect(strstr(out, "rule [user:tester]: 2 TLS connections: requests "
                          "not counted (TLS the shim cannot see)") != NULL,
              "%s", out);
    struct budget *b = atomic_load(&rl_proc_gen(&proc)->gate.cur);
    cr_assert_not_null(b);
    cr_expect_eq(rl_load_relaxed_u64(&b->slot.counters[RL_STORE_TLS_UNSEEN]),
                 2);
}

Test(gate, says_nothing_of_tls_when_every_request_was_seen)
{
    gate_with("[user:tester]\nconnect = 5/s\nrequest = 2/s\n");
    rl_gate_report_enable(&proc);
    char out[4096];
    report_text(out, sizeof out);
    cr_expect(strstr(out, "request seen 0") != NULL, "%s", out);
    cr_expect(strstr(out, "TLS") == NULL, "%s", out);
}

/* A site's requests are the site's: under its own name in the report,
 * every destination's budget together; the rule, which limits none, has
 * no request line. */
Test(gate, a_site_with_requests_puts_them_in_the_report)
{
    gate_with("[user:tester]\nconnect = 5/s\n"
              "[site:every]\nper = destination\nrequest = 1/h\n");
    rl_gate_report_enable(&proc);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(80)};
    inet_pton(AF_INET, "10.0.0.1", &a.sin_addr);
    struct rl_gate_req q = {.call = "send", .fd = -1, .sa = &a,
                            .salen = sizeof a, .port = 80, .method = "GET",
                            .target = "/", .units = 1};
    uint64_t now = rl_clock_now_ns();
    q.name = "a.example";
    cr_assert_eq(rl_gate_request_at(&proc, &t, now, &q), RL_GATE_GO);
    cr_assert_eq(rl_gate_request_at(&proc, &t, now, &q), RL_GATE_FAIL);
    q.name = "b.example";
    cr_assert_eq(rl_gate_request_at(&proc, &t, now, &q), RL_GATE_GO);
    char out[4096];
    report_text(out, sizeof out);
    cr_expect(strstr(out, "site [site:every]: request seen 3, allowed 2, "
                          "denied 1, delayed 0") != NULL,
              "%s", out);
    cr_expect(strstr(out, "rule [user:tester]: connect seen 0") != NULL, "%s",
              out);
    cr_expect(strstr(out, "rule [user:tester]: request") == NULL, "%s", out);
}

/* `rlshim stat` on requests the gate decided per destination: a row per
 * destination's request budget, what is left in each. */
Test(gate, stat_shows_each_destinations_request_budget)
{
    static const char text[] = "[rlshim]\non_deny = fail\n"
                               "[site:every]\nper = destination\n"
                               "request = 3/h\n";
    gate_with(text);
    char ini[128];
    snprintf(ini, sizeof ini, "%s/cfg.ini", dir);
    FILE *f = fopen(ini, "w");
    cr_assert_not_null(f);
    fputs(text, f);
    fclose(f);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(443)};
    inet_pton(AF_INET, "10.0.0.1", &a.sin_addr);
    struct rl_gate_req q = {.call = "SSL_write", .fd = -1, .sa = &a,
                            .salen = sizeof a, .port = 443, .method = "GET",
                            .target = "/", .units = 1};
    uint64_t now = rl_clock_now_ns();
    q.name = "a.example";
    for (int i = 0; i < 2; i++)
        cr_assert_eq(rl_gate_request_at(&proc, &t, now, &q), RL_GATE_GO);
    q.name = "b.example";
    cr_assert_eq(rl_gate_request_at(&proc, &t, now, &q), RL_GATE_GO);
    char cmd[512], out[8192];
    const char *b = getenv("RLSHIM_BUILD");
    snprintf(cmd, sizeof cmd, "%s/rlshim stat -c %s 2>&1", b ? b : "build",
             ini);
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p);
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = '\0';
    cr_assert_eq(pclose(p), 0, "%s", out);
    char want[256];
    snprintf(want, sizeof want, "%-10s %-14s %10s %10s %10s %12s %10s  dest %s",
             "request", "token_bucket", "-", "-", "-", "-", "1", "a.example");
    cr_expect(strstr(out, want) != NULL, "no '%s' in\n%s", want, out);
    snprintf(want, sizeof want, "%-10s %-14s %10s %10s %10s %12s %10s  dest %s",
             "request", "token_bucket", "-", "-", "-", "-", "2", "b.example");
    cr_expect(strstr(out, want) != NULL, "no '%s' in\n%s", want, out);
    /* The section's own row counts all three. */
    snprintf(want, sizeof want, "%-10s %-14s %10u %10u", "request",
             "token_bucket", 3, 0);
    cr_expect(strstr(out, want) != NULL, "no '%s' in\n%s", want, out);
}
