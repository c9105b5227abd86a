/* Two struct rl_proc in one process (policy/proc.h) share no state: what
 * one instance notes, leases, holds, binds or decides, the other never
 * sees. The first instance is gate_fixture.h's `proc`, the second is made
 * here (megabytes: on the heap). */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "gate_fixture.h"
#include "policy/gate.h"
#include "policy/gate_int.h"
#include "policy/lease.h"
#include "policy/names.h"
#include "policy/open.h"
#include "policy/proc.h"
#include "policy/ready.h"
#include "proc_new.h"
#include "util/clock.h"
#include "ready_look.h"

#define MS 1000000ull
#define S 1000000000ull
#define T0 (1000 * S)

static struct rl_proc *other;

static void setup(void)
{
    fixture_state_dir("owners");
    other = proc_new();
}

static void teardown(void)
{
    free(other);
    fixture_state_dir_remove();
}

TestSuite(owners, .init = setup, .fini = teardown);

static struct sockaddr_in v4(const char *ip, int port)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    inet_pton(AF_INET, ip, &a.sin_addr);
    return a;
}

Test(owners, a_name_noted_in_one_is_unknown_to_the_other)
{
    uint8_t addr[4];
    char buf[RL_NAME_MAX + 1];
    inet_pton(AF_INET, "192.0.2.7", addr);
    rl_names_note(&proc.names, AF_INET, addr, "only-a.test", 11);
    cr_expect_eq(rl_names_find(&proc.names, AF_INET, addr, buf), 11);
    cr_expect_str_eq(buf, "only-a.test");
    cr_expect_eq(rl_names_find(&other->names, AF_INET, addr, buf), 0,
                 "the other knows %s", buf);
    rl_names_note(&other->names, AF_INET, addr, "only-b.test", 11);
    cr_expect_eq(rl_names_find(&proc.names, AF_INET, addr, buf), 11);
    cr_expect_str_eq(buf, "only-a.test");
}

/* A bucket that does not refill during a test, deep enough to lease. */
#define LEASING "[user:tester]\nsend = 6400/h\n"

Test(owners, a_lease_taken_through_one_is_not_spent_through_the_other)
{
    fixture_gate(&proc, "tester", LEASING);
    fixture_gate(other, "tester", LEASING);
    struct rl_gate_ticket t;
    /* Decided on its own, which fills this thread's lease in `proc`. */
    cr_assert_eq(rl_gate_send_at(&proc, &t, rl_clock_now_ns(), "send", 3, NULL,
                                 0, 1, 1, 64, 64),
                 RL_GATE_GO);
    cr_expect(!t.leased);
    cr_expect_eq(rl_gate_send_leased(&proc, 64, true), 64,
                 "the lease of proc covers the next send");
    cr_expect_eq(rl_gate_send_leased(other, 64, true), 0,
                 "the other instance has no lease of this thread's");
    /* And the other's own lease is its own. */
    cr_assert_eq(rl_gate_send_at(other, &t, rl_clock_now_ns(), "send", 3, NULL,
                                 0, 1, 1, 64, 64),
                 RL_GATE_GO);
    cr_expect_eq(rl_gate_send_leased(other, 64, true), 64);
    cr_expect_eq(rl_gate_send_leased(&proc, 64, true), 64);
}

Test(owners, a_socket_held_in_one_is_not_held_in_the_other)
{
    fixture_gate(&proc, "tester", "[user:tester]\nsend = 1/s\n");
    fixture_gate(other, "tester", "[user:tester]\nsend = 1/s\n");
    cr_expect_eq(rl_ready_hold(&proc, 7, T0 + 100 * MS), 1);
    cr_expect(rl_ready_any(&proc.ready));
    cr_expect_eq(ready_hidden(&proc, 7, T0), RL_READY_HOLD);
    cr_expect(!rl_ready_any(&other->ready));
    cr_expect_eq(ready_hidden(other, 7, T0), 0);
    rl_ready_forget(other, 7);
    cr_expect_eq(ready_hidden(&proc, 7, T0), RL_READY_HOLD,
                 "the other's forget leaves proc's entry alone");
}

Test(owners, two_gates_on_two_configs_decide_apart)
{
    fixture_gate(&proc, "tester",
                 "[user:tester]\nconnect = 1/s\non_deny = fail\n");
    fixture_gate(other, "tester",
                 "[user:tester]\nconnect = 100/s\nconnect_burst = 100\n"
                 "on_deny = fail\n");
    struct sockaddr_in a = v4("127.0.0.1", 80);
    struct rl_gate_ticket t;
    cr_expect_eq(rl_gate_connect_at(&proc, &t, T0, "connect", 3, &a, sizeof a),
                 RL_GATE_GO);
    cr_expect_eq(rl_gate_connect_at(&proc, &t, T0, "connect", 3, &a, sizeof a),
                 RL_GATE_FAIL, "proc's budget: 1 a second");
    for (int i = 0; i < 10; i++)
        cr_expect_eq(
            rl_gate_connect_at(other, &t, T0, "connect", 3, &a, sizeof a),
            RL_GATE_GO, "the other's budget: 100 at once (%d)", i);
    /* A gate with no section for the user passes everything, while the
     * first still denies. */
    struct rl_proc *third = proc_new();
    fixture_gate(third, "tester", "[user:someone]\nconnect = 1/s\n");
    cr_expect(!rl_gate_active(third));
    cr_expect(rl_gate_active(&proc));
    cr_expect_eq(rl_gate_connect_at(&proc, &t, T0, "connect", 3, &a, sizeof a),
                 RL_GATE_FAIL);
    free(third);
}

Test(owners, a_connection_bound_in_one_map_is_not_closed_through_the_other)
{
    rl_atomic_u64 area[RL_OPEN_WORDS] = {0};
    rl_atomic_u64 *a = area;
    uint32_t seq;
    rl_open_enable(&proc.open);
    rl_open_enable(&other->open);
    cr_assert_eq(rl_open_acquire(&proc.open, area, 1, &seq), 0);
    rl_open_bind(&proc.open, 100, &a, 1);
    rl_open_forget(&other->open, 100); /* the other's close of fd 100 */
    rl_open_forget_range(&other->open, 0, ~0u);
    cr_expect_eq(rl_open_acquire(&proc.open, area, 1, &seq), -EAGAIN,
                 "the connection is still open in proc's map");
    rl_open_forget(&proc.open, 100);
    cr_expect_eq(rl_open_acquire(&proc.open, area, 1, &seq), 0,
                 "proc's own close gave it back");
}

/* Two threads sending at once, each through both instances in turn, on
 * one budget (the same config and user: one slot of one segment): every
 * send is counted once in the segment, and in the report of the instance
 * it went through, whichever lease it came out of (run under TSan too). */
static struct rl_proc *both[2];

struct sender {
    unsigned first; /* the instance of the first send */
    unsigned go[2]; /* sends granted through each */
};

static void *send_many(void *arg)
{
    struct sender *s = arg;
    for (unsigned i = 0; i < 300; i++) {
        unsigned k = (s->first + i / 10) % 2;
        struct rl_gate_ticket t;
        if (rl_gate_send(both[k], &t, "send", 3, NULL, 0, 1, 1, 64, 64) ==
            RL_GATE_GO)
            s->go[k]++;
    }
    /* The thread's leases back, what they spent counted. */
    rl_lease_finish(both[0]);
    rl_lease_finish(both[1]);
    return NULL;
}

Test(owners, two_threads_through_two_instances_count_every_send_once)
{
    fixture_gate(&proc, "tester", LEASING);
    fixture_gate(other, "tester", LEASING);
    rl_gate_report_enable(&proc);
    rl_gate_report_enable(other);
    both[0] = &proc;
    both[1] = other;
    struct sender a = {0, {0, 0}}, b = {1, {0, 0}};
    pthread_t ta, tb;
    cr_assert_eq(pthread_create(&ta, NULL, send_many, &a), 0);
    cr_assert_eq(pthread_create(&tb, NULL, send_many, &b), 0);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    cr_expect_eq(a.go[0] + a.go[1] + b.go[0] + b.go[1], 600);
    struct budget *cur = atomic_load(&rl_proc_gen(&proc)->gate.cur);
    cr_assert_not_null(cur);
    uint64_t allowed = rl_load_relaxed_u64(
        &cur->slot.counters[RL_KIND_SEND * RL_STORE_STATS_PER_KIND +
                            RL_STAT_ALLOWED]);
    cr_expect_eq(allowed, 600, "%llu sends counted of 600",
                 (unsigned long long)allowed);
    for (unsigned k = 0; k < 2; k++) {
        uint64_t mine = rl_load_relaxed_u64(
            &rl_proc_gen(both[k])->gate.report.mine.n[RL_KIND_SEND][RL_STAT_ALLOWED]);
        cr_expect_eq(mine, a.go[k] + b.go[k],
                     "instance %u's report: %llu of %u sent through it", k,
                     (unsigned long long)mine, a.go[k] + b.go[k]);
    }
}
