/* A destination's pace shared by a fleet (SPEC §14, §8): what one host
 * learns of a destination, a response time's interval or a robots.txt's
 * Crawl-delay, goes to Redis beside the destination's pause, and another
 * host's requests to it are spaced by Redis's script. Two processes, each
 * with a state directory of its own (two hosts), share one real
 * redis-server that each test starts on a free port. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../redis_server.h"
#include "policy/config.h"
#include "policy/gate.h"
#include "policy/gate_crawl.h"
#include "policy/proc.h"
#include "util/clock.h"

#define MS 1000000ull

static struct rl_proc proc;
static struct rl_gate_ticket t;
static char dir[2][64];
static struct redis R;

static void setup(void)
{
    for (int i = 0; i < 2; i++) {
        snprintf(dir[i], sizeof dir[i], "/tmp/rlshim-fpace-XXXXXX");
        cr_assert_not_null(mkdtemp(dir[i]));
    }
}

static void teardown(void)
{
    redis_kill(&R);
    for (int i = 0; i < 2; i++) {
        char cmd[160];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir[i]);
        if (system(cmd) != 0)
            fprintf(stderr, "could not remove %s\n", dir[i]);
    }
}

TestSuite(fleet_pace, .init = setup, .fini = teardown, .timeout = 30);

/* Host `h` (its state directory) with a fleet request budget of `algo`
 * that adapts to latency, fail mode: 0, or -1 (no assertion here: host A
 * is a child process, outside the runner's reach). */
static int host_init(int h, const char *algo)
{
    setenv("RLSHIM_STATE_DIR", dir[h], 1);
    char text[512];
    snprintf(text, sizeof text,
             "[rlshim]\nfleet = redis://127.0.0.1:%d\n"
             "fleet_fallback = deny\n[user:crawler]\nscope = fleet\n"
             "algorithm = %s\nrequest = 100/s\n%s"
             "adapt = latency\nadapt_factor = 2\non_deny = fail\n",
             R.port, algo,
             strcmp(algo, "token_bucket") == 0 ? "request_burst = 10\n" : "");
    struct rl_config *cfg = NULL;
    struct rl_diag d = {0};
    if (rl_config_load_string(text, "t.ini", &cfg, &d) != 0)
        return -1;
    struct rl_identity id = {.has_key = true, .uid = (uint32_t)getuid()};
    snprintf(id.key, sizeof id.key, "crawler");
    char why[256] = "";
    return rl_gate_init(&proc, cfg, &id, why, sizeof why) == 0 ? 0 : -1;
}

static void host(int h, const char *algo)
{
    cr_assert_eq(host_init(h, algo), 0, "host %d did not start", h);
}

static struct sockaddr_in a;

static struct rl_gate_req req(const char *name)
{
    a = (struct sockaddr_in){.sin_family = AF_INET, .sin_port = htons(80)};
    inet_pton(AF_INET, "10.0.0.1", &a.sin_addr);
    return (struct rl_gate_req){.call = "send",
                                .fd = -1,
                                .sa = &a,
                                .salen = sizeof a,
                                .name = name,
                                .units = 1};
}

static int request_to(const char *name)
{
    struct rl_gate_req q = req(name);
    return rl_gate_request_at(&proc, &t, rl_clock_now_ns(), &q);
}

/* Host A, another process: a response of slow.test taking 400 ms
 * (crawl false), or its robots.txt's Crawl-delay of 2 s (true). */
static void host_a_learns(const char *algo, bool crawl)
{
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        if (host_init(0, algo) != 0)
            _exit(1);
        struct rl_gate_req q = req("slow.test");
        uint64_t now = rl_clock_now_ns();
        if (rl_gate_request_at(&proc, &t, now, &q) != RL_GATE_GO)
            _exit(2);
        if (crawl)
            _exit(rl_gate_crawl_delay_at(&proc, &q, 2000 * MS, now) == 1 ? 0
                                                                        : 3);
        rl_gate_request_latency(&proc, &q, 400 * MS, now);
        _exit(0);
    }
    int st = 0;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "host A: %d", st);
}

/* Host B's first request to slow.test goes at once (Redis knows no turn
 * of it yet); its next is held for about the interval host A learned (in
 * fail mode: refused, with that long left and the reason), and another
 * destination is not held. */
static void check_shared(const char *algo, bool crawl)
{
    if (!redis_have())
        cr_skip_test("redis-server is not installed");
    cr_assert(redis_start(&R), "redis-server did not start");
    host_a_learns(algo, crawl);
    host(1, algo);
    uint64_t spacing = crawl ? 2000 * MS : 800 * MS;
    cr_assert_eq(request_to("slow.test"), RL_GATE_GO, "%s", algo);
    cr_assert_eq(request_to("slow.test"), RL_GATE_FAIL,
                 "%s: host B's next request was not spaced by host A's pace",
                 algo);
    cr_expect_gt(t.retry_ns, spacing - 100 * MS, "%s: %llu ns left", algo,
                 (unsigned long long)t.retry_ns);
    cr_expect_leq(t.retry_ns, spacing, "%s", algo);
    cr_assert_not_null(t.reason, "%s", algo);
    cr_expect_str_eq(t.reason, crawl ? "crawl_delay" : "latency", "%s", algo);
    cr_expect_eq(request_to("fast.test"), RL_GATE_GO,
                 "%s: another destination was held", algo);
    cr_expect_eq(request_to("fast.test"), RL_GATE_GO, "%s", algo);
}

Test(fleet_pace, a_latency_learned_on_one_host_spaces_another_token_bucket)
{
    check_shared("token_bucket", false);
}

Test(fleet_pace, a_latency_learned_on_one_host_spaces_another_sliding_window)
{
    check_shared("sliding_window", false);
}

Test(fleet_pace, a_crawl_delay_read_on_one_host_spaces_another_token_bucket)
{
    check_shared("token_bucket", true);
}

Test(fleet_pace, a_crawl_delay_read_on_one_host_spaces_another_sliding_window)
{
    check_shared("sliding_window", true);
}

/* A pace that did not move writes nothing: the same response time twice
 * is one write (the key's fields say so: no `l` while nothing paces). */
Test(fleet_pace, a_destination_nothing_paces_gets_no_pace_in_redis)
{
    if (!redis_have())
        cr_skip_test("redis-server is not installed");
    cr_assert(redis_start(&R), "redis-server did not start");
    host(1, "token_bucket");
    cr_assert_eq(request_to("slow.test"), RL_GATE_GO);
    cr_assert_eq(request_to("slow.test"), RL_GATE_GO);
    char out[256];
    redis_cli(&R, "EXISTS 'rlshim:{user:crawler|crawler}:pause:slow.test'",
              out, sizeof out);
    cr_expect_eq(strtol(out, NULL, 10), 0, "a pause key with no pace: %s",
                 out);
}

/* Redis away (nothing listens on its port): the fallback grants as Redis
 * would, each turn later by its jitter (SPEC §14 jitter = 50%: up to
 * half of 10/s's 100 ms), never earlier than the budget allows. */
static void away(const char *fallback)
{
    setenv("RLSHIM_STATE_DIR", dir[1], 1);
    char text[512];
    snprintf(text, sizeof text,
             "[rlshim]\nfleet = redis://127.0.0.1:1\nfleet_fallback = %s\n"
             "[user:crawler]\nscope = fleet\nrequest = 10/s\n"
             "request_burst = 1\njitter = 50%%\ncrawl_delay = ignore\n"
             "on_deny = delay\nmax_delay = 60s\n",
             fallback);
    struct rl_config *cfg = NULL;
    struct rl_diag d = {0};
    cr_assert_eq(rl_config_load_string(text, "t.ini", &cfg, &d), 0);
    struct rl_identity id = {.has_key = true, .uid = (uint32_t)getuid()};
    snprintf(id.key, sizeof id.key, "crawler");
    char why[256] = "";
    cr_assert_eq(rl_gate_init(&proc, cfg, &id, why, sizeof why), 0, "%s",
                 why);
}

Test(fleet_pace, the_fallback_jitters_a_granted_turn)
{
    away("allow");
    struct rl_gate_req q = req("a.test");
    uint64_t now = rl_clock_now_ns(), later = 0;
    for (int i = 0; i < 20; i++) {
        cr_assert_eq(rl_gate_request_at(&proc, &t, now, &q), RL_GATE_GO);
        cr_assert_leq(t.wait_ns, 50 * MS, "turn %d: %llu ns", i,
                      (unsigned long long)t.wait_ns);
        later += t.wait_ns > 0;
    }
    cr_expect_geq(later, 15, "only %llu of 20 turns jittered",
                  (unsigned long long)later);
    cr_expect(!rl_fleet_up(&proc.fleet), "Redis was away");
}

Test(fleet_pace, the_local_fallback_counts_a_jittered_turn_when_it_goes)
{
    away("local");
    struct rl_gate_req q = req("a.test");
    uint64_t now = rl_clock_now_ns(), prev = 0, later = 0;
    for (int i = 0; i < 10; i++) {
        cr_assert_eq(rl_gate_request_at(&proc, &t, now, &q), RL_GATE_GO);
        /* Each turn is the limit's period after the one before, at
         * least: counted at its jittered turn, never at an earlier one. */
        if (i > 0)
            cr_assert_geq(t.wait_ns, prev + 100 * MS - MS,
                          "turn %d: %llu ns after %llu", i,
                          (unsigned long long)t.wait_ns,
                          (unsigned long long)prev);
        later += i > 0 && t.wait_ns > prev + 100 * MS + MS;
        prev = t.wait_ns;
    }
    cr_expect_geq(later, 5, "only %llu of 9 turns jittered",
                  (unsigned long long)later);
}
