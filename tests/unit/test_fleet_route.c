/* test_fleet_route.c — a budget's calls routed to the Redis Cluster master
 * of its slot: a real 3-master cluster (tests/redis_cluster.h), started
 * per test on free ports and stopped after. The process is given a node
 * that does not serve the budget: its first call is redirected. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../redis_cluster.h"
#include "../redis_server.h"
#include "fleet/fleet_addr.h"
#include "fleet/fleet_cluster.h"
#include "fleet/fleet_route.h"
#include "util/clock.h"

#define MS 1000000ull

static struct redis_cluster C;
static struct redis R;
static char dir[64];
static struct rl_fleet_route route; /* 20 KiB: not on the stack */

static void setup(void)
{
    snprintf(dir, sizeof dir, "/tmp/rlshim-route-XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
}

static void teardown(void)
{
    cluster_stop(&C);
    redis_kill(&R);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
}

TestSuite(fleet_route, .init = setup, .fini = teardown, .timeout = 90);

static void start_cluster(bool replicas)
{
    if (!cluster_have())
        cr_skip_test("redis-server or redis-cli is not installed");
    cr_assert(cluster_start(&C, 3, replicas, dir), "the cluster did not start");
}

static const char *label = "user:crawler|crawler";

static unsigned label_slot(void)
{
    char key[128];
    snprintf(key, sizeof key, "rlshim:{%s}:hosts", label);
    return rl_fleet_key_slot(key, strlen(key));
}

static void route_to(int port)
{
    char url[64];
    struct rl_fleet_addr a;
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", port);
    cr_assert_null(rl_fleet_addr_parse(url, &a));
    memset(&route, 0, sizeof route);
    rl_fleet_route_init(&route, &a, NULL, 500 * MS, 1000 * MS, NULL, NULL);
}

/* A script on the budget's hosts key: INCR it, answer the count. With
 * sha NULL (after NOSCRIPT) EVAL; else EVALSHA of `sha_to_use`. */
static const char *script = "return {redis.call('INCR', KEYS[1])}";
static const char *sha_to_use;

static void build_incr(struct rl_fleet_conn *c, const char (*sha)[41],
                       void *ctx)
{
    (void)ctx;
    char key[128];
    snprintf(key, sizeof key, "rlshim:{%s}:hosts", label);
    rl_fleet_cmd_start(c, 4);
    if (sha != NULL && sha_to_use != NULL) {
        rl_fleet_cmd_str(c, "EVALSHA");
        rl_fleet_cmd_str(c, sha_to_use);
    } else {
        rl_fleet_cmd_str(c, "EVAL");
        rl_fleet_cmd_str(c, script);
    }
    rl_fleet_cmd_u64(c, 1);
    rl_fleet_cmd_str(c, key);
}

/* One call; its count, or -errno. */
static long call(int *node, char *why, size_t len)
{
    struct rl_fleet_call owed;
    struct rl_fleet_result res;
    int e = rl_fleet_route_call(&route, label, build_incr, NULL,
                                rl_clock_now_ns() + 500 * MS, &owed, &res);
    *node = owed.node;
    snprintf(why, len, "%s", owed.why);
    if (e == -ETIMEDOUT) {
        struct rl_fleet_late none = {{0}};
        rl_fleet_route_abandon(&route, &owed, &none);
    }
    if (e < 0)
        return e;
    if (res.type == RL_FLEET_REPLY_ERROR) {
        snprintf(why, len, "%s", res.text);
        return -EPROTO;
    }
    return res.type == RL_FLEET_REPLY_INTS && res.n == 1 ? (long)res.v[0]
                                                         : -EPROTO;
}

/* The key's count on node i of the cluster (behind ASKING: a node
 * importing the slot answers for it only then). */
static long count_on(int i)
{
    char cmd[256], out[64] = "", line[64];
    snprintf(cmd, sizeof cmd,
             "printf 'ASKING\\nGET rlshim:{%s}:hosts\\n' | redis-cli -p %d "
             "2>/dev/null",
             label, C.node[i].port);
    FILE *p = popen(cmd, "r");
    while (p != NULL && fgets(line, sizeof line, p) != NULL)
        snprintf(out, sizeof out, "%s", line); /* the last: GET's */
    if (p != NULL)
        pclose(p);
    return out[0] >= '0' && out[0] <= '9' ? strtol(out, NULL, 10) : -1;
}

/* Calls of `cmd` that node i refused (a redirection is one). */
static long rejected(int i, const char *cmd)
{
    char c[256], line[512] = "";
    snprintf(c, sizeof c,
             "redis-cli -p %d INFO commandstats | grep '^cmdstat_%s:'",
             C.node[i].port, cmd);
    FILE *p = popen(c, "r");
    long n = 0;
    if (p != NULL && fgets(line, sizeof line, p) != NULL) {
        char *k = strstr(line, "rejected_calls=");
        if (k != NULL)
            n = strtol(k + 15, NULL, 10);
    }
    if (p != NULL)
        pclose(p);
    return n;
}

Test(fleet_route, a_moved_budget_is_followed_and_its_master_learnt)
{
    start_cluster(false);
    int owner = cluster_master_of(&C, 0, label_slot());
    cr_assert_geq(owner, 0);
    int seed = (owner + 1) % 3;
    route_to(C.node[seed].port);
    cr_expect_eq(rl_fleet_route_node(&route, label), 0, "the seed, at first");
    char why[256] = "";
    int node = -1;
    for (long i = 1; i <= 5; i++)
        cr_expect_eq(call(&node, why, sizeof why), i, "call %ld: %s", i, why);
    cr_expect(atomic_load(&route.cluster), "a MOVED makes it a cluster");
    int learnt = rl_fleet_route_node(&route, label);
    cr_expect_neq(learnt, 0);
    cr_expect_eq(node, learnt);
    int port =
        ntohs(((struct sockaddr_in *)&route.map.nodes[learnt].sa)->sin_port);
    cr_expect_eq(port, C.node[owner].port, "learnt %d, the owner is %d", port,
                 C.node[owner].port);
    cr_expect_eq(count_on(owner), 5, "every call ran once, on the owner");
    /* One redirection in all: the rest went straight there. */
    cr_expect_eq(rejected(seed, "eval"), 1);
}

/* A slot migrating: the budget's keys are not on the old master yet, so
 * it answers ASK; the call goes to the importing node behind ASKING, and
 * the map keeps the old master (an ASK is for one call). */
Test(fleet_route, an_asked_call_goes_once_to_the_importing_node)
{
    start_cluster(false);
    unsigned slot = label_slot();
    int from = cluster_master_of(&C, 0, slot);
    int to = (from + 1) % 3;
    char out[128], args[160], id_from[64], id_to[64];
    redis_cli(&C.node[from], "CLUSTER MYID", id_from, sizeof id_from);
    redis_cli(&C.node[to], "CLUSTER MYID", id_to, sizeof id_to);
    snprintf(args, sizeof args, "CLUSTER SETSLOT %u IMPORTING %s", slot,
             id_from);
    redis_cli(&C.node[to], args, out, sizeof out);
    cr_assert_str_eq(out, "OK");
    snprintf(args, sizeof args, "CLUSTER SETSLOT %u MIGRATING %s", slot, id_to);
    redis_cli(&C.node[from], args, out, sizeof out);
    cr_assert_str_eq(out, "OK");
    route_to(C.node[from].port);
    char why[256] = "";
    int node = -1;
    cr_expect_eq(call(&node, why, sizeof why), 1, "%s", why);
    struct redis to_r = {.port = C.node[to].port};
    cr_expect_eq(redis_calls(&to_r, "asking"), 1);
    cr_expect_eq(count_on(to), 1, "ran on the importing node");
    cr_expect_neq(node, 0, "answered by another node than the seed");
    cr_expect_not(atomic_load(&route.cluster), "an ASK teaches no map");
}

/* The budget's master killed: calls fail while the cluster notices, the
 * node is down, the map is asked again, and the calls go to the replica
 * promoted in its place — with the count the old master had replicated. */
Test(fleet_route, a_failed_over_master_is_replaced_by_its_replica)
{
    start_cluster(true);
    unsigned slot = label_slot();
    int owner = cluster_master_of(&C, 0, slot);
    int seed = (owner + 1) % 3;
    route_to(C.node[seed].port);
    char why[256] = "";
    int node = -1;
    for (long i = 1; i <= 3; i++)
        cr_assert_eq(call(&node, why, sizeof why), i, "%s", why);
    /* Let the replica have the writes (asynchronous replication): WAIT
     * says how many replicas acknowledged them, and a loaded machine can
     * take more than one WAIT's second (a replica still in its first
     * sync acknowledges nothing). Without the writes the promoted
     * replica would count from 0, which is not what this test asks. */
    char out[64];
    int acked = 0;
    for (int i = 0; i < 30 && acked < 1; i++) {
        redis_cli(&C.node[owner], "WAIT 1 1000", out, sizeof out);
        acked = atoi(out);
    }
    cr_assert_geq(acked, 1, "no replica acknowledged the writes in 30 s");
    redis_kill(&C.node[owner]);
    uint64_t t0 = rl_clock_now_ns();
    long got = -1;
    int failures = 0;
    while (rl_clock_now_ns() - t0 < 15000 * MS) {
        got = call(&node, why, sizeof why);
        if (got > 0)
            break;
        failures++;
        rl_fleet_route_failed(&route, node, rl_clock_now_ns(), 0);
        usleep(100000);
    }
    printf("route failover: %d failed calls, then %ld after %.2f s (%s)\n",
           failures, got, (double)(rl_clock_now_ns() - t0) / 1e9, why);
    cr_expect_eq(got, 4, "the promoted replica's count: %ld (%s)", got, why);
    cr_expect_gt(failures, 0, "the old master answered after its kill?");
    int now_owner = cluster_master_of(&C, seed, slot);
    cr_expect_neq(now_owner, owner);
    int port =
        ntohs(((struct sockaddr_in *)&route.map.nodes[node].sa)->sin_port);
    cr_expect_eq(port, C.node[now_owner].port);
}

/* A Redis that lost the scripts (a restart, SCRIPT FLUSH, a replica
 * promoted: SCRIPT LOAD is not replicated) answers NOSCRIPT: the call is
 * made again as EVAL of the text. */
Test(fleet_route, noscript_is_answered_by_eval_of_the_text)
{
    if (!redis_have())
        cr_skip_test("redis-server is not installed");
    cr_assert(redis_start(&R));
    route_to(R.port);
    sha_to_use = "0123456789012345678901234567890123456789";
    char why[256] = "";
    int node = -1;
    cr_expect_eq(call(&node, why, sizeof why), 1, "%s", why);
    cr_expect_eq(call(&node, why, sizeof why), 2, "%s", why);
    cr_expect_eq(redis_calls(&R, "evalsha"), 2);
    cr_expect_eq(redis_calls(&R, "eval"), 2);
    sha_to_use = NULL;
}
