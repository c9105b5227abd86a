/* The fleet's Lua scripts as the library links them in (src/fleet/lua/,
 * fleet_scripts.h), each run by redis-cli --eval on a real redis-server
 * that each test starts on a free port of 127.0.0.1: one real call of
 * each, and its known answer. A script that does not compile, or answers
 * otherwise, fails here before any decision goes through it. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../redis_server.h"
#include "fleet/fleet_conn.h"
#include "fleet/fleet_scripts.h"

#define MINUTE_US 60000000LL

static struct redis R;

static void teardown(void)
{
    redis_kill(&R);
}

TestSuite(fleet_lua, .fini = teardown, .timeout = 30);

static size_t length(const struct rl_fleet_lua *s)
{
    return (size_t)(s->end - s->text);
}

static void start_redis(void)
{
    if (!redis_have())
        cr_skip_test("redis-server is not installed (apt-get install "
                     "redis-server)");
    cr_assert(redis_start(&R), "redis-server did not start");
}

/* What one script call answered: its integers, or the text of a reply
 * that was not one. */
struct answer {
    long long v[8];
    int n;
    char text[512];
};

/* s, the text the library links in, written to a file of its own and run
 * by redis-cli --eval on R with `keys` and `args` (space separated). */
static struct answer eval(const char *name, const struct rl_fleet_lua *s,
                          const char *keys, const char *args)
{
    char path[] = "/tmp/rlshim-lua-XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    ssize_t w = write(fd, s->text, length(s));
    close(fd);
    cr_assert_eq(w, (ssize_t)length(s));

    char cmd[512];
    snprintf(cmd, sizeof cmd,
             "redis-cli -h 127.0.0.1 -p %d --eval %s %s , %s 2>&1", R.port,
             path, keys, args);
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p);
    struct answer a = {.n = 0};
    char line[256];
    size_t used = 0;
    bool numbers = true;
    while (fgets(line, sizeof line, p) != NULL) {
        used +=
            (size_t)snprintf(a.text + used, sizeof a.text - used, "%s", line);
        if (used >= sizeof a.text)
            used = sizeof a.text - 1;
        char *end = NULL;
        long long v = strtoll(line, &end, 10);
        if (end == line || *end != '\n' || a.n == 8)
            numbers = false;
        else
            a.v[a.n++] = v;
    }
    int rc = pclose(p);
    unlink(path);
    cr_assert_eq(rc, 0, "redis-cli --eval %s failed: %s", name, a.text);
    cr_assert(numbers, "%s answered more than integers: %s", name, a.text);
    return a;
}

/* KEYS: one limit, then the budget's hosts key; ARGV: want 1, min 1, no
 * wait, no debt, host h1, call id c1, no lease, nothing returned, not
 * capped, no hold, no jitter, then the limit: 1 a minute, burst 1. (The hash tag has no "|":
 * the command goes through a shell.) */
#define ONE_A_MINUTE_KEYS(kind)                                                \
    "rlshim:{t.u}:send:0:" kind " rlshim:{t.u}:hosts"
#define ONE_A_MINUTE_ARGS "1 1 0 0 h1 c1 0 0 0 0 0 1 60000000 1"

Test(fleet_lua, the_scripts_are_their_files_without_comment_lines)
{
    const struct rl_fleet_lua *all[] = {
        &rl_fleet_lua_bucket, &rl_fleet_lua_window, &rl_fleet_lua_pause};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        const char *s = all[i]->text, *end = all[i]->end;
        cr_assert_gt(end - s, 0);
        cr_assert_eq(end[-1], '\n', "script %zu does not end a line", i);
        for (const char *l = s; l < end; l = memchr(l, '\n', end - l) + 1) {
            const char *c = l;
            while (c < end && *c == ' ')
                c++;
            cr_assert(end - c < 2 || c[0] != '-' || c[1] != '-',
                      "script %zu keeps a comment line", i);
        }
    }
    /* The handshake sends both decision scripts in one buffer. */
    cr_assert_lt(length(&rl_fleet_lua_bucket) + length(&rl_fleet_lua_window),
                 RL_FLEET_CMD_MAX - 1024);
}

/* One unit a minute with a burst of one: the first call is granted
 * {granted 1, wait 0, hosts 1, leased 0, off 0, why 0}, the second denied
 * with a wait of about a minute. */
static void grants_one_then_denies(const char *name,
                                   const struct rl_fleet_lua *s,
                                   const char *keys)
{
    start_redis();
    struct answer a = eval(name, s, keys, ONE_A_MINUTE_ARGS);
    cr_assert_eq(a.n, 6, "%s", a.text);
    cr_assert_eq(a.v[0], 1, "%s", a.text);
    cr_assert_eq(a.v[1], 0, "%s", a.text);
    cr_assert_eq(a.v[2], 1, "%s", a.text);
    cr_assert_eq(a.v[3] + a.v[4] + a.v[5], 0, "%s", a.text);

    a = eval(name, s, keys, ONE_A_MINUTE_ARGS);
    cr_assert_eq(a.n, 6, "%s", a.text);
    cr_assert_eq(a.v[0], 0, "%s", a.text);
    cr_assert(a.v[1] > MINUTE_US - 10000000 && a.v[1] <= MINUTE_US,
              "denied with a wait of %lld us", a.v[1]);
    cr_assert_eq(a.v[2], 1, "%s", a.text);
}

Test(fleet_lua, bucket_grants_its_burst_then_denies_until_it_refills)
{
    grants_one_then_denies("bucket", &rl_fleet_lua_bucket,
                           ONE_A_MINUTE_KEYS("tb"));
}

Test(fleet_lua, window_grants_its_count_then_denies_until_it_slides)
{
    grants_one_then_denies("window", &rl_fleet_lua_window,
                           ONE_A_MINUTE_KEYS("sw"));
}

Test(fleet_lua, pause_moves_only_later_and_holds_the_bucket)
{
    start_redis();
    const char *key = "rlshim:{t.u}:pause:-";
    struct answer a = eval("pause", &rl_fleet_lua_pause, key, "30000000 1");
    cr_assert_eq(a.n, 1, "%s", a.text);
    cr_assert_eq(a.v[0], 1, "a new pause did not move: %s", a.text);
    a = eval("pause", &rl_fleet_lua_pause, key, "1000000 2");
    cr_assert_eq(a.n, 1, "%s", a.text);
    cr_assert_eq(a.v[0], 0, "an earlier end moved the pause: %s", a.text);

    /* A request's bucket, full, with the pause key: denied (no wait
     * allowed) until the backoff's pause ends. */
    a = eval("bucket", &rl_fleet_lua_bucket,
             ONE_A_MINUTE_KEYS("tb") " rlshim:{t.u}:pause:-",
             ONE_A_MINUTE_ARGS);
    cr_assert_eq(a.n, 6, "%s", a.text);
    cr_assert_eq(a.v[0], 0, "%s", a.text);
    cr_assert(a.v[1] > 20000000 && a.v[1] <= 30000000, "held for %lld us",
              a.v[1]);
    cr_assert_eq(a.v[1], a.v[4], "%s", a.text);
    cr_assert_eq(a.v[5], 1, "not the backoff's pause: %s", a.text);
}

/* Field `field` of hash `key` on R, as an integer (-1: none). */
static long long hget(const char *key, const char *field)
{
    char cmd[256];
    snprintf(cmd, sizeof cmd, "redis-cli -h 127.0.0.1 -p %d HGET %s %s",
             R.port, key, field);
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p);
    char line[64] = "";
    long long v = -1;
    if (fgets(line, sizeof line, p) != NULL && line[0] >= '0' &&
        line[0] <= '9')
        v = strtoll(line, NULL, 10);
    pclose(p);
    return v;
}

Test(fleet_lua, a_hosts_lower_interval_halves_the_fleets_not_replaces_it)
{
    start_redis();
    const char *key = "rlshim:{t.u}:pause:slow.test";
    /* One host learned 800 ms of a slow server. */
    eval("pace", &rl_fleet_lua_pace, key, "a 800000 60000");
    cr_assert_eq(hget(key, "a"), 800000);
    /* Another, which saw only fast answers, says 60 ms: the fleet's
     * falls by half the way, as one host's would at one fast answer. */
    eval("pace", &rl_fleet_lua_pace, key, "a 60000 60000");
    cr_expect_eq(hget(key, "a"), 430000);
    /* A slower one rises at once. */
    eval("pace", &rl_fleet_lua_pace, key, "a 900000 60000");
    cr_expect_eq(hget(key, "a"), 900000);
}
