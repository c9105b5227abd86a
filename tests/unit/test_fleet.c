/* Fleet budgets (SPEC §8): the config keys, and the decisions made in a
 * real redis-server that each test starts on a free port (Criterion runs
 * each test in its own process: the gate and the fleet start fresh). The
 * gate's *_at forms are the clock seam: a host's clock set minutes off
 * must change nothing, since Redis's clock decides. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../redis_server.h"
#include "fleet/fleet.h"
#include "fleet/fleet_lease.h"
#include "policy/config.h"
#include "policy/gate.h"
#include "policy/proc.h"
#include "util/clock.h"

/* The process state this file decides through. */
static struct rl_proc proc;

#define MS 1000000ull
#define S 1000000000ull

static char dir[64];
static struct redis R;
static struct rl_gate_ticket t;

static void setup(void)
{
    snprintf(dir, sizeof dir, "/tmp/rlshim-fleet-XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
    setenv("RLSHIM_STATE_DIR", dir, 1);
}

static void teardown(void)
{
    redis_kill(&R);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
}

TestSuite(fleet, .init = setup, .fini = teardown, .timeout = 30);
TestSuite(fleet_config);

static void start_redis(void)
{
    if (!redis_have())
        cr_skip_test("redis-server is not installed (apt-get install "
                     "redis-server)");
    cr_assert(redis_start(&R), "redis-server did not start");
}

static int load(const char *text, struct rl_config **cfg, struct rl_diag *d)
{
    return rl_config_load_string(text, "t.ini", cfg, d);
}

/* The first error of a config that must fail. */
static const char *first_error(const char *text)
{
    static char msg[512];
    struct rl_config *cfg = NULL;
    struct rl_diag d = {0};
    cr_assert_neq(load(text, &cfg, &d), 0, "accepted: %s", text);
    cr_assert_gt(d.n, 0);
    snprintf(msg, sizeof msg, "%s", d.msgs[0]);
    rl_diag_free(&d);
    return msg;
}

Test(fleet_config, accepts_every_fleet_key)
{
    struct rl_config *cfg = NULL;
    struct rl_diag d = {0};
    cr_assert_eq(load("[rlshim]\nfleet = redis://127.0.0.1:6380/2\n"
                      "fleet_fallback = deny\n[user:c]\nscope = fleet\n"
                      "connect = 1/s\n[user:h]\nscope = host\n",
                      &cfg, &d),
                 0, "%s", d.n ? d.msgs[0] : "");
    cr_expect_str_eq(cfg->fleet, "redis://127.0.0.1:6380/2");
    cr_expect_eq(cfg->fleet_fallback, RL_FLEET_DENY);
    cr_expect_eq(cfg->rules[0].scope, RL_SCOPE_FLEET);
    cr_expect_eq(cfg->rules[1].scope, RL_SCOPE_HOST);
    rl_config_free(cfg);
    cr_assert_eq(load("[rlshim]\nfleet = unix:/run/redis.sock\n", &cfg, &d), 0);
    rl_config_free(cfg);
    cr_assert_eq(load("[rlshim]\nfleet = redis://[::1]\n", &cfg, &d), 0);
    rl_config_free(cfg);
}

Test(fleet_config, names_the_line_of_each_mistake)
{
    cr_expect_str_eq(first_error("[rlshim]\nfleet = http://x\n"),
                     "t.ini:2: bad value 'http://x' for 'fleet' in [rlshim]: "
                     "use redis://HOST[:PORT][/DB] or unix:/path.sock");
    cr_expect(strstr(first_error("[rlshim]\n\nfleet = redis://redis.lan\n"),
                     "t.ini:3: ") != NULL);
    cr_expect(strstr(first_error("[rlshim]\nfleet = redis://1.2.3.4:0\n"),
                     "bad port") != NULL);
    cr_expect(strstr(first_error("[rlshim]\nfleet = redis://a:pw@1.2.3.4\n"),
                     "fleet_password") != NULL);
    cr_expect_str_eq(first_error("[user:c]\nconnect = 1/s\nscope = fleet\n"),
                     "t.ini:3: 'scope = fleet' in [user:c] needs 'fleet = "
                     "redis://...' in [rlshim]");
    cr_expect(strstr(first_error("[rlshim]\nfleet_fallback = maybe\n"),
                     "t.ini:2: bad value 'maybe'") != NULL);
    cr_expect(strstr(first_error("[user:c]\nscope = world\n"),
                     "t.ini:2: bad value 'world'") != NULL);
    cr_expect(strstr(first_error("[rlshim]\nfleet = off\n"
                                 "fleet_password = secret\n"),
                     "t.ini:3: 'fleet_password' in [rlshim] must be the "
                     "absolute path") != NULL);
}

Test(fleet_config, refuses_a_password_file_others_can_read)
{
    char path[128], text[256];
    snprintf(path, sizeof path, "/tmp/rlshim-pw-%d", (int)getpid());
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    cr_assert_geq(fd, 0);
    close(fd);
    chmod(path, 0644);
    snprintf(text, sizeof text,
             "[rlshim]\nfleet = redis://127.0.0.1\nfleet_password = %s\n",
             path);
    cr_expect(strstr(first_error(text), "mode 0600 or 0640, not 0644") != NULL,
              "%s", first_error(text));
    chmod(path, 0640);
    struct rl_config *cfg = NULL;
    struct rl_diag d = {0};
    cr_expect_eq(load(text, &cfg, &d), 0, "%s", d.n ? d.msgs[0] : "");
    rl_config_free(cfg);
    unlink(path);
}

/* ---- decisions in Redis -------------------------------------------------*/

static void gate_with(const char *fmt)
{
    char text[1024];
    snprintf(text, sizeof text, fmt, R.port);
    struct rl_config *cfg = NULL;
    struct rl_diag d = {0};
    cr_assert_eq(load(text, &cfg, &d), 0, "%s", d.n ? d.msgs[0] : "");
    struct rl_identity id = {.has_key = true, .uid = (uint32_t)getuid()};
    snprintf(id.key, sizeof id.key, "crawler");
    char why[256] = "";
    cr_assert_eq(rl_gate_init(&proc, cfg, &id, why, sizeof why), 0, "%s", why);
}

static struct sockaddr_in dest(void)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(80)};
    inet_pton(AF_INET, "10.0.0.1", &a.sin_addr);
    return a;
}

static int connect_at(uint64_t now)
{
    struct sockaddr_in a = dest();
    return rl_gate_connect_at(&proc, &t, now, "connect", 3, &a, sizeof a);
}

#define FLEET_10 "[rlshim]\nfleet = redis://127.0.0.1:%d\n" \
                 "fleet_fallback = allow\n"                 \
                 "[user:crawler]\nscope = fleet\nconnect = 10/s\n"

Test(fleet, token_bucket_admits_the_burst_then_denies)
{
    start_redis();
    gate_with(FLEET_10);
    uint64_t now = rl_clock_now_ns();
    for (int i = 0; i < 10; i++)
        cr_assert_eq(connect_at(now), RL_GATE_GO, "call %d", i);
    cr_expect_eq(connect_at(now), RL_GATE_FAIL);
    cr_expect(rl_fleet_up(&proc.fleet));
}

Test(fleet, a_host_clock_minutes_off_changes_nothing)
{
    start_redis();
    gate_with(FLEET_10);
    uint64_t now = rl_clock_now_ns();
    /* Five at the true time, five ten minutes ahead, then one more at
     * the true time: were the host clock used, the jump would have
     * refilled the bucket (or the last call seen time go backwards). */
    for (int i = 0; i < 5; i++)
        cr_assert_eq(connect_at(now), RL_GATE_GO);
    for (int i = 0; i < 5; i++)
        cr_assert_eq(connect_at(now + 600 * S), RL_GATE_GO);
    cr_expect_eq(connect_at(now + 600 * S), RL_GATE_FAIL);
    cr_expect_eq(connect_at(now - 600 * S), RL_GATE_FAIL);
}

Test(fleet, keys_carry_a_hash_tag_and_expire_when_refilled)
{
    start_redis();
    gate_with(FLEET_10);
    uint64_t now = rl_clock_now_ns();
    for (int i = 0; i < 10; i++)
        connect_at(now);
    char out[256];
    redis_cli(&R, "PTTL 'rlshim:{user:crawler|crawler}:connect:0:tb'", out,
              sizeof out);
    long ttl = strtol(out, NULL, 10);
    /* Ten taken from 10/s: full again in one second. */
    cr_expect(ttl > 0 && ttl <= 1002, "PTTL %s", out);
    redis_cli(&R, "TTL 'rlshim:{user:crawler|crawler}:hosts'", out, sizeof out);
    cr_expect(strtol(out, NULL, 10) > 0, "hosts TTL %s", out);
}

/* A Redis that lost the scripts (SCRIPT FLUSH; a replica promoted, which
 * never had them) answers NOSCRIPT: the call is made again as EVAL of
 * the text, on the same connection, within the same decision. */
Test(fleet, runs_the_script_as_eval_after_noscript)
{
    start_redis();
    gate_with(FLEET_10);
    uint64_t now = rl_clock_now_ns();
    cr_assert_eq(connect_at(now), RL_GATE_GO);
    char out[64];
    redis_cli(&R, "SCRIPT FLUSH", out, sizeof out);
    cr_assert_eq(connect_at(now), RL_GATE_GO);
    cr_expect(rl_fleet_up(&proc.fleet));
    cr_expect_eq(redis_calls(&R, "eval"), 1);
    /* The first decision's, and the one NOSCRIPT answered. */
    cr_expect_eq(redis_calls(&R, "evalsha"), 2);
    /* EVAL loaded it again: the next decision is an EVALSHA. */
    cr_assert_eq(connect_at(now), RL_GATE_GO);
    cr_expect_eq(redis_calls(&R, "evalsha"), 3);
    cr_expect_eq(redis_calls(&R, "eval"), 1);
}

Test(fleet, sliding_window_keeps_unique_stamps)
{
    start_redis();
    gate_with("[rlshim]\nfleet = redis://127.0.0.1:%d\n"
              "[user:crawler]\nscope = fleet\nalgorithm = sliding_window\n"
              "connect = 5/s\n");
    uint64_t now = rl_clock_now_ns();
    for (int i = 0; i < 5; i++)
        cr_assert_eq(connect_at(now), RL_GATE_GO, "call %d", i);
    cr_expect_eq(connect_at(now), RL_GATE_FAIL);
    char out[64];
    redis_cli(&R, "ZCARD 'rlshim:{user:crawler|crawler}:connect:0:sw'", out,
              sizeof out);
    cr_expect_str_eq(out, "5");
}

Test(fleet, a_million_a_second_is_exact)
{
    start_redis();
    gate_with("[rlshim]\nfleet = redis://127.0.0.1:%d\n"
              "[user:crawler]\nscope = fleet\nsend_bytes = 1000000/s\n");
    uint64_t now = rl_clock_now_ns();
    struct sockaddr_in a = dest();
    cr_assert_eq(rl_gate_send_at(&proc, &t, now, "send", 3, &a, sizeof a, 1, 1,
                                 1000000, 1000000),
                 RL_GATE_GO);
    cr_expect_eq(t.bytes, 1000000);
    /* Empty now: 1 byte refills in 1 us; ask for 100000 at once and get
     * about what a few hundred microseconds of round trips refilled. */
    int r = rl_gate_send_at(&proc, &t, now, "send", 3, &a, sizeof a, 1, 1,
                            100000, 1);
    if (r == RL_GATE_GO)
        cr_expect_lt(t.bytes, 20000, "granted %llu",
                     (unsigned long long)t.bytes);
}

Test(fleet, redis_away_falls_back_within_50ms_and_says_so_once)
{
    start_redis();
    gate_with("[rlshim]\nfleet = redis://127.0.0.1:%d\nfleet_fallback = deny\n"
              "[user:crawler]\nscope = fleet\nconnect = 1000/s\n");
    uint64_t now = rl_clock_now_ns();
    cr_assert_eq(connect_at(now), RL_GATE_GO);
    redis_kill(&R);
    for (int i = 0; i < 50; i++) {
        uint64_t t0 = rl_clock_now_ns();
        cr_assert_eq(connect_at(rl_clock_now_ns()), RL_GATE_FAIL);
        cr_assert_lt(rl_clock_now_ns() - t0, 50 * MS + 5 * MS);
    }
    cr_expect_not(rl_fleet_up(&proc.fleet));
    /* Back: the next try (at most a second later) finds it. */
    cr_assert(redis_start(&R));
    uint64_t t1 = rl_clock_now_ns();
    while (connect_at(rl_clock_now_ns()) != RL_GATE_GO &&
           rl_clock_now_ns() - t1 < 3 * S)
        usleep(10000);
    cr_expect(rl_fleet_up(&proc.fleet));
    cr_expect_lt(rl_clock_now_ns() - t1, 1100 * MS);
}

/* `rlshim check` names the fleet budgets and pings Redis. */
static void check_output(const char *ini, char *out, size_t len)
{
    const char *b = getenv("RLSHIM_BUILD");
    cr_assert_not_null(b, "RLSHIM_BUILD is not set (run through make unit)");
    char path[128], cmd[512];
    snprintf(path, sizeof path, "%s/check.ini", dir);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs(ini, f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "'%s/rlshim' check -c '%s' 2>&1", b, path);
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p);
    size_t n = fread(out, 1, len - 1, p);
    out[n] = '\0';
    pclose(p);
}

Test(fleet, check_names_fleet_budgets_and_pings_redis)
{
    start_redis();
    char ini[512], out[4096];
    snprintf(ini, sizeof ini,
             "[rlshim]\nfleet = redis://127.0.0.1:%d\n[user:crawler]\n"
             "scope = fleet\nconnect = 1/s\n[user:local]\nconnect = 1/s\n",
             R.port);
    check_output(ini, out, sizeof out);
    cr_expect(strstr(out, "fleet budgets: [user:crawler]\n") != NULL, "%s",
              out);
    cr_expect(strstr(out, "answers (PING") != NULL, "%s", out);
    redis_kill(&R);
    check_output(ini, out, sizeof out);
    cr_expect(strstr(out, "is not answering (Connection refused): fleet "
                          "budgets would use fleet_fallback = share") != NULL,
              "%s", out);
}

/* ---- the caller's stack -------------------------------------------------*/

/* A fleet decision runs on the program's thread, whose stack may be small
 * (musl's 128 KiB, a green thread's few KiB): the fleet's buffers are in
 * the process's state, and what a decision takes of the caller's stack
 * (the fleet's own frames, hiredis's reader, libc's formatting and
 * system calls) stays well under 4 KiB. Measured as the deepest byte
 * decisions changed on a painted stack: one that connects and loads the
 * scripts, then two of a round trip each. */
#define PAINT 0xa5
#define STACK (2 * 1024 * 1024) /* TSan keeps ~900 KiB of its own at the top */

struct deep {
    const struct rl_rule *rule;
    rl_word *states[RL_MAX_RATES];
    int granted;
};

static void *decide(void *arg)
{
    struct deep *d = arg;
    struct rl_verdict v[RL_MAX_RATES];
    for (int i = 0; i < 3; i++) {
        struct rl_verdict r =
            rl_fleet_take(&proc.fleet, d->rule, NULL, NULL, RL_KIND_CONNECT,
                          d->states, NULL, NULL, rl_clock_now_ns(), 1, 1, 0, 0, 0, v,
                          NULL);
        d->granted += r.granted > 0;
    }
    return NULL;
}

/* Bytes of the stack at `base` (STACK long, growing down) that one call of
 * decide() changed, less those a thread that only returns changes. */
static size_t stack_used(void *(*fn)(void *), void *arg, unsigned char *base)
{
    memset(base, PAINT, STACK);
    pthread_attr_t a;
    pthread_attr_init(&a);
    cr_assert_eq(pthread_attr_setstack(&a, base, STACK), 0);
    pthread_t th;
    cr_assert_eq(pthread_create(&th, &a, fn, arg), 0);
    pthread_join(th, NULL);
    pthread_attr_destroy(&a);
    size_t i = 0;
    while (i < STACK && base[i] == PAINT)
        i++;
    return STACK - i;
}

static void *nothing(void *arg)
{
    return arg;
}

Test(fleet, a_decision_takes_well_under_4_KiB_of_the_callers_stack)
{
    start_redis();
    char text[512];
    snprintf(text, sizeof text, FLEET_10, R.port);
    struct rl_config *cfg = NULL;
    struct rl_diag d = {0};
    cr_assert_eq(load(text, &cfg, &d), 0);
    cr_assert_eq(rl_fleet_init(&proc.fleet, cfg, "user:crawler|crawler"), 0);
    static rl_word words[RL_MAX_RATES][8];
    struct deep dp = {.rule = &cfg->rules[cfg->nrules - 1]};
    for (int i = 0; i < RL_MAX_RATES; i++)
        dp.states[i] = words[i];
    cr_assert_eq(dp.rule->scope, RL_SCOPE_FLEET);
    static unsigned char stack[STACK] __attribute__((aligned(4096)));
    size_t base = stack_used(nothing, NULL, stack);
    /* The first calls of libc's functions in a process go through the
     * dynamic linker's lazy binding (kilobytes of stack, once): made here,
     * on the main thread, then the connection dropped as in a forked
     * child, so that the measured decisions open a new one. */
    decide(&dp);
    rl_fleet_atfork_child(&proc.fleet);
    size_t used = stack_used(decide, &dp, stack);
    printf("fleet stack: a decision used %zu bytes of the caller's stack "
           "(a thread that only returns: %zu)\n",
           used - base, base);
    cr_expect_eq(dp.granted, 6, "%d of 6 granted", dp.granted);
    cr_expect(rl_fleet_up(&proc.fleet), "Redis did not answer");
    cr_expect_lt(used - base, 3072, "%zu bytes of the caller's stack",
                 used - base);
}

/* Requests (SPEC §11) under scope = fleet are decided on Redis, like
 * connects, and never from the host's lease of send units: the pool has
 * words for send and send_bytes only, and a request's kind read as a pool
 * word would be the pool's clock (a few billion requests "left"). */
Test(fleet, requests_are_decided_on_redis_never_from_the_send_lease)
{
    start_redis();
    char text[512];
    snprintf(text, sizeof text,
             "[rlshim]\nfleet = redis://127.0.0.1:%d\nfleet_fallback = deny\n"
             "[user:crawler]\nscope = fleet\nsend = 1000/s\n"
             "send_burst = 4096\nrequest = 1/s\nrequest_burst = 1\n",
             R.port);
    struct rl_config *cfg = NULL;
    struct rl_diag d = {0};
    cr_assert_eq(load(text, &cfg, &d), 0, "%s", d.n ? d.msgs[0] : "");
    struct rl_identity id = {.has_key = true, .uid = (uint32_t)getuid()};
    snprintf(id.key, sizeof id.key, "crawler");
    char why[256] = "";
    cr_assert_eq(rl_gate_init(&proc, cfg, &id, why, sizeof why), 0, "%s", why);
    const struct rl_rule *rule = &cfg->rules[0];
    cr_assert(rl_fleet_leasable(rule), "the rule's sends can be leased");
    /* A fresh pool of the host, as a lease of sends leaves it. */
    static rl_atomic_u64 area[RL_FLEET_POOL_AREA_WORDS + 8];
    struct rl_fleet_pool pool;
    rl_fleet_pool_at(area, NULL, 0, &pool);
    uint64_t cnow = rl_clock_coarse_ns();
    for (unsigned i = 0; i < 16; i++)
        rl_store_relaxed_u64(&pool.w[i], cnow);
    rl_store_relaxed_u64(&pool.w[0], 100); /* 100 sends leased */
    rl_word *states[RL_MAX_RATES] = {0};
    struct rl_verdict v[RL_MAX_RATES];
    uint64_t now = rl_clock_now_ns();
    struct rl_verdict a =
        rl_fleet_take(&proc.fleet, rule, NULL, NULL, RL_KIND_REQUEST, states,
                      &pool,
                      NULL, now, 1, 1, 0, 0, 0, v, NULL);
    struct rl_verdict b =
        rl_fleet_take(&proc.fleet, rule, NULL, NULL, RL_KIND_REQUEST, states,
                      &pool,
                      NULL, now, 1, 1, 0, 0, 0, v, NULL);
    cr_expect_eq(a.granted, 1);
    cr_expect_eq(b.granted, 0, "request_burst = 1: the second waits");
    cr_expect_eq(rl_load_relaxed_u64(&pool.w[0]), 100, "no send spent");
    char out[256];
    redis_cli(&R, "EXISTS 'rlshim:{user:crawler|crawler}:request:0:tb'", out,
              sizeof out);
    cr_expect_eq(strtol(out, NULL, 10), 1, "the request key on Redis: %s",
                 out);
}

/* A fleet request budget of `algo`, fail mode, for the pause tests. */
static void gate_with_requests(const char *algo)
{
    char fmt[512];
    snprintf(fmt, sizeof fmt,
             "[rlshim]\nfleet = redis://127.0.0.1:%%d\n"
             "fleet_fallback = allow\n[user:crawler]\nscope = fleet\n"
             "algorithm = %s\nrequest = 100/s\non_deny = fail\n",
             algo);
    gate_with(fmt);
}

/* A 429's pause on Redis (SPEC §12) holds every host's requests of the
 * budget: set on Redis alone (this process's own word left as another
 * host's is), it still refuses this process's request in fail mode, with
 * what is left of it and the reason. Both algorithms' scripts. */
static void check_pause_on_redis(const char *algo)
{
    gate_with_requests(algo);
    struct sockaddr_in a = dest();
    struct rl_gate_req q = {
        .call = "send", .fd = -1, .sa = &a, .salen = sizeof a, .units = 1};
    uint64_t now = rl_clock_now_ns();
    cr_assert_eq(rl_gate_request_at(&proc, &t, now, &q), RL_GATE_GO, "%s",
                 algo);
    cr_assert_eq(rl_fleet_pause(&proc.fleet, NULL, NULL, 2000000000ull, false), 0,
                 "%s: Redis took no pause", algo);
    now = rl_clock_now_ns();
    cr_assert_eq(rl_gate_request_at(&proc, &t, now, &q), RL_GATE_FAIL,
                 "%s: a request went during Redis's pause", algo);
    cr_expect_gt(t.retry_ns, 1800000000ull, "%s: %llu ns left", algo,
                 (unsigned long long)t.retry_ns);
    cr_expect_leq(t.retry_ns, 2000000000ull, "%s", algo);
    cr_assert_not_null(t.reason, "%s", algo);
    cr_expect_str_eq(t.reason, "retry_after", "%s", algo);
}

/* A 429 from one destination pauses that destination on Redis, not the
 * others sharing the budget (SPEC §12: a hostile site cannot pause the
 * crawl); a pause of a destination no response could name ("-") holds
 * every request of the budget. */
static int request_to(const char *name)
{
    struct sockaddr_in a = dest();
    struct rl_gate_req q = {.call = "send",
                            .fd = -1,
                            .sa = &a,
                            .salen = sizeof a,
                            .name = name,
                            .units = 1};
    return rl_gate_request_at(&proc, &t, rl_clock_now_ns(), &q);
}

static void check_pause_per_destination(const char *algo)
{
    gate_with_requests(algo);
    cr_assert_eq(request_to("evil.test"), RL_GATE_GO, "%s", algo);
    cr_assert_eq(rl_fleet_pause(&proc.fleet, NULL, "evil.test", 2000000000ull,
                                false),
                 0, "%s: Redis took no pause", algo);
    cr_expect_eq(request_to("evil.test"), RL_GATE_FAIL,
                 "%s: a request went during its destination's pause", algo);
    cr_expect_eq(request_to("good.test"), RL_GATE_GO,
                 "%s: another destination's pause held good.test", algo);
    cr_assert_eq(rl_fleet_pause(&proc.fleet, NULL, NULL, 2000000000ull, false),
                 0, "%s: Redis took no pause", algo);
    cr_expect_eq(request_to("good.test"), RL_GATE_FAIL,
                 "%s: the untold destinations' pause did not hold it", algo);
}

Test(fleet, a_pause_on_redis_holds_its_destination_only_token_bucket)
{
    start_redis();
    check_pause_per_destination("token_bucket");
}

Test(fleet, a_pause_on_redis_holds_its_destination_only_sliding_window)
{
    start_redis();
    check_pause_per_destination("sliding_window");
}

Test(fleet, a_pause_on_redis_holds_the_requests_token_bucket)
{
    start_redis();
    check_pause_on_redis("token_bucket");
}

Test(fleet, a_pause_on_redis_holds_the_requests_sliding_window)
{
    start_redis();
    check_pause_on_redis("sliding_window");
}

/* ---- the host's "Redis is back" word ------------------------------------*/

/* A process away from Redis tries again at most once a second, but at
 * once when another process of its host saw Redis answer (the host
 * segment's word, here an array of our own): so every process of a host
 * comes back together, not one a second. */
Test(fleet, the_hosts_back_word_brings_an_away_process_back_at_once)
{
    start_redis();
    char text[512];
    snprintf(text, sizeof text,
             "[rlshim]\nfleet = redis://127.0.0.1:%d\nfleet_fallback = deny\n"
             "[user:crawler]\nscope = fleet\nconnect = 1000/s\n",
             R.port);
    struct rl_config *cfg = NULL;
    struct rl_diag d = {0};
    cr_assert_eq(load(text, &cfg, &d), 0);
    cr_assert_eq(rl_fleet_init(&proc.fleet, cfg, "user:crawler|crawler"), 0);
    const struct rl_rule *rule = &cfg->rules[cfg->nrules - 1];
    static rl_word words[RL_MAX_RATES][8];
    rl_word *states[RL_MAX_RATES];
    for (int i = 0; i < RL_MAX_RATES; i++)
        states[i] = words[i];
    static rl_atomic_u64 host[2];
    struct rl_verdict v[RL_MAX_RATES];
#define TAKE()                                                                 \
    rl_fleet_take(&proc.fleet, rule, NULL, NULL, RL_KIND_CONNECT, states, NULL, \
                  host, rl_clock_now_ns(), 1, 1, 0, 0, 0, v, NULL)
    cr_assert_eq(TAKE().granted, 1);
    usleep(100000); /* its reply is no longer the last word of Redis */
    /* Away: stopped, a call gets no reply within 50 ms. */
    kill(R.pid, SIGSTOP);
    cr_expect_eq(TAKE().granted, 0);
    cr_expect_not(rl_fleet_up(&proc.fleet));
    kill(R.pid, SIGCONT);
    usleep(20000);
    long before = redis_calls(&R, "evalsha");
    /* Back, but this process's next try is a second away: it stays on the
     * fallback (deny), and asks nothing. */
    cr_expect_eq(TAKE().granted, 0);
    cr_expect_eq(redis_calls(&R, "evalsha"), before, "asked before its try");
    /* Another process of the host saw Redis answer: this one tries now. */
    rl_store_relaxed_u64(&host[RL_FLEET_HOST_BACK], rl_clock_coarse_ns());
    cr_expect_eq(TAKE().granted, 1, "not back with the host's word");
    cr_expect(rl_fleet_up(&proc.fleet));
    cr_expect_gt(redis_calls(&R, "evalsha"), before);
#undef TAKE
}
