/* test_fleet_cluster.c — slots, redirections and slot maps, read from
 * replies recorded from a real Redis 7 Cluster (tests/fixtures/redis_cluster:
 * 3 masters 17001-17003 and their replicas 17004-17006; slot 12182 moved
 * from 17003 to 17001; then 17001 killed and 17004 promoted). Each .resp
 * file is the reply's bytes as they came off the socket, parsed here by
 * hiredis's reader as fleet_conn.c parses them. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "fleet/fleet_addr.h"
#include "fleet/fleet_cluster.h"

static const char *fixture_path(const char *name)
{
    static char p[1024];
    const char *src = getenv("RLSHIM_SRC");
    snprintf(p, sizeof p, "%s/tests/fixtures/redis_cluster/%s",
             src != NULL ? src : ".", name);
    return p;
}

static size_t slurp(const char *name, char *buf, size_t len)
{
    FILE *f = fopen(fixture_path(name), "rb");
    cr_assert_not_null(f, "no fixture %s", fixture_path(name));
    size_t n = fread(buf, 1, len, f);
    fclose(f);
    cr_assert_lt(n, len);
    return n;
}

/* The first reply in fixture `name`. */
static redisReply *reply_of(const char *name)
{
    static char buf[65536];
    size_t n = slurp(name, buf, sizeof buf);
    redisReader *rd = redisReaderCreate();
    cr_assert_eq(redisReaderFeed(rd, buf, n), REDIS_OK);
    void *rep = NULL;
    cr_assert_eq(redisReaderGetReply(rd, &rep), REDIS_OK);
    cr_assert_not_null(rep, "%s holds no whole reply", name);
    redisReaderFree(rd);
    return rep;
}

static struct rl_fleet_addr addr(const char *url)
{
    struct rl_fleet_addr a;
    cr_assert_null(rl_fleet_addr_parse(url, &a), "%s", url);
    return a;
}

static int port_of(const struct rl_fleet_addr *a)
{
    if (a->sa.ss_family == AF_INET6)
        return ntohs(((const struct sockaddr_in6 *)&a->sa)->sin6_port);
    return ntohs(((const struct sockaddr_in *)&a->sa)->sin_port);
}

static const char *host_of(const struct rl_fleet_addr *a)
{
    static char h[INET6_ADDRSTRLEN];
    if (a->sa.ss_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)&a->sa)->sin6_addr,
                  h, sizeof h);
    else
        inet_ntop(AF_INET, &((const struct sockaddr_in *)&a->sa)->sin_addr, h,
                  sizeof h);
    return h;
}

/* ---- slots ----------------------------------------------------------- */

/* Every key of keyslot.tsv, with the slot the cluster's CLUSTER KEYSLOT
 * gave it: plain keys, CRC16's check string, and each hash-tag edge
 * (empty tags, a '{' with no '}', nested and repeated braces). */
Test(fleet_cluster, every_key_gets_the_slot_the_cluster_gave_it)
{
    static char buf[8192];
    size_t n = slurp("keyslot.tsv", buf, sizeof buf);
    buf[n] = '\0';
    int lines = 0;
    for (char *line = strtok(buf, "\n"); line != NULL;
         line = strtok(NULL, "\n")) {
        char *tab = strchr(line, '\t');
        cr_assert_not_null(tab);
        *tab = '\0';
        unsigned want = (unsigned)strtoul(line, NULL, 10);
        const char *key = tab + 1;
        cr_expect_eq(rl_fleet_key_slot(key, strlen(key)), want,
                     "'%s': %u, the cluster said %u", key,
                     rl_fleet_key_slot(key, strlen(key)), want);
        lines++;
    }
    cr_expect_geq(lines, 20);
}

/* The keys of one script, named as fleet.c names them, are in one slot
 * whatever the label holds; two budgets are in two. */
Test(fleet_cluster, a_scripts_keys_share_one_slot_whatever_the_label)
{
    const char *labels[] = {"default|crawler",
                            "site:s|crawler",
                            "user:a}b|c",
                            "x{y}|z",
                            "{|}",
                            "site:s|u|example.org",
                            "default|}{",
                            "user:crawler|crawler"};
    const char *tails[] = {":connect:0:tb", ":send:1:sw", ":hosts",
                           ":send_bytes:2:tb", ":request:0:sw"};
    for (size_t i = 0; i < sizeof labels / sizeof *labels; i++) {
        char key[256];
        snprintf(key, sizeof key, "rlshim:{%s}%s", labels[i], tails[0]);
        unsigned first = rl_fleet_key_slot(key, strlen(key));
        for (size_t j = 1; j < sizeof tails / sizeof *tails; j++) {
            snprintf(key, sizeof key, "rlshim:{%s}%s", labels[i], tails[j]);
            cr_expect_eq(rl_fleet_key_slot(key, strlen(key)), first,
                         "label '%s': %s in another slot", labels[i], key);
        }
    }
    const char *a = "rlshim:{default|crawler}:connect:0:tb";
    const char *b = "rlshim:{site:s|crawler}:connect:0:tb";
    cr_expect_neq(rl_fleet_key_slot(a, strlen(a)),
                  rl_fleet_key_slot(b, strlen(b)));
}

/* ---- redirections ---------------------------------------------------- */

static int redirect_of(const char *name, struct rl_fleet_redirect *out)
{
    redisReply *r = reply_of(name);
    cr_assert_eq(r->type, REDIS_REPLY_ERROR, "%s is not an error", name);
    struct rl_fleet_addr asked = addr("redis://127.0.0.1:17003");
    int k = rl_fleet_redirect_parse(r->str, r->len, &asked, out);
    freeReplyObject(r);
    return k;
}

Test(fleet_cluster, moved_names_the_slot_and_its_master)
{
    struct rl_fleet_redirect rd;
    cr_assert_eq(redirect_of("moved.resp", &rd), RL_FLEET_MOVED);
    cr_expect_eq(rd.slot, 12182);
    cr_expect_str_eq(host_of(&rd.to), "127.0.0.1");
    cr_expect_eq(port_of(&rd.to), 17003);
}

Test(fleet_cluster, ask_names_the_node_importing_the_slot)
{
    struct rl_fleet_redirect rd;
    cr_assert_eq(redirect_of("ask.resp", &rd), RL_FLEET_ASK);
    cr_expect_eq(rd.slot, 12182);
    cr_expect_eq(port_of(&rd.to), 17001);
}

Test(fleet_cluster, tryagain_and_clusterdown_are_no_redirection)
{
    struct rl_fleet_redirect rd;
    cr_expect_eq(redirect_of("tryagain.resp", &rd), RL_FLEET_NO_REDIRECT);
    cr_expect_eq(redirect_of("clusterdown.resp", &rd), RL_FLEET_NO_REDIRECT);
}

static int parse_text(const char *s, struct rl_fleet_redirect *rd)
{
    struct rl_fleet_addr asked = addr("redis://[::1]:7000");
    return rl_fleet_redirect_parse(s, strlen(s), &asked, rd);
}

/* Forms Redis writes that the recorded cluster did not: an IPv6 master
 * (no brackets), and an empty host ("the node you asked"). */
Test(fleet_cluster, ipv6_and_an_empty_host_are_followed)
{
    struct rl_fleet_redirect rd;
    cr_assert_eq(parse_text("MOVED 1 fd00::5:7001", &rd), RL_FLEET_MOVED);
    cr_expect_eq(rd.to.sa.ss_family, AF_INET6);
    cr_expect_str_eq(host_of(&rd.to), "fd00::5");
    cr_expect_eq(port_of(&rd.to), 7001);
    cr_assert_eq(parse_text("ASK 16383 :7002", &rd), RL_FLEET_ASK);
    cr_expect_eq(rd.slot, 16383);
    cr_expect_str_eq(host_of(&rd.to), "::1");
    cr_expect_eq(port_of(&rd.to), 7002);
}

Test(fleet_cluster, a_host_name_or_a_bad_slot_is_not_followed)
{
    struct rl_fleet_redirect rd;
    cr_expect_eq(parse_text("MOVED 1 redis-3.example:7001", &rd), -EINVAL);
    cr_expect_eq(parse_text("MOVED 16384 127.0.0.1:7001", &rd), -EINVAL);
    cr_expect_eq(parse_text("MOVED -1 127.0.0.1:7001", &rd), -EINVAL);
    cr_expect_eq(parse_text("MOVED 1 127.0.0.1:0", &rd), -EINVAL);
    cr_expect_eq(parse_text("MOVED 1 127.0.0.1:65536", &rd), -EINVAL);
    cr_expect_eq(parse_text("MOVED 1 127.0.0.1", &rd), -EINVAL);
    cr_expect_eq(parse_text("MOVED 1", &rd), -EINVAL);
    cr_expect_eq(parse_text("NOSCRIPT No matching script", &rd),
                 RL_FLEET_NO_REDIRECT);
    cr_expect_eq(parse_text("MOVEDX 1 127.0.0.1:1", &rd), RL_FLEET_NO_REDIRECT);
}

/* ---- slot maps ------------------------------------------------------- */

struct seen {
    int n;
    unsigned first[64], last[64];
    int port[64];
    struct rl_fleet_map *map;
};

static int record(void *ctx, unsigned first, unsigned last,
                  const struct rl_fleet_addr *m)
{
    struct seen *s = ctx;
    cr_assert_lt(s->n, 64);
    s->first[s->n] = first;
    s->last[s->n] = last;
    s->port[s->n] = port_of(m);
    s->n++;
    if (s->map != NULL) {
        int i = rl_fleet_map_find(s->map, m);
        cr_assert_geq(i, 0);
        rl_fleet_map_set(s->map, first, last, i);
    }
    return 0;
}

/* The master's port serving each slot, per the map. */
static int master_port(struct rl_fleet_map *m, unsigned slot)
{
    int i = rl_fleet_map_node(m, slot);
    cr_assert_geq(i, 0, "slot %u has no node", slot);
    return port_of(&m->nodes[i]);
}

static struct rl_fleet_map map; /* 16 KiB: not on the stack */

static void walk(const char *name, bool shards, struct seen *s)
{
    memset(&map, 0, sizeof map);
    memset(s, 0, sizeof *s);
    s->map = &map;
    redisReply *r = reply_of(name);
    struct rl_fleet_addr asked = addr("redis://127.0.0.1:17002");
    int rc = shards ? rl_fleet_cluster_shards(r, &asked, record, s)
                    : rl_fleet_cluster_slots(r, &asked, record, s);
    freeReplyObject(r);
    cr_assert_eq(rc, 0, "%s: %d", name, rc);
}

Test(fleet_cluster, cluster_slots_maps_every_slot_to_its_master)
{
    struct seen s;
    walk("cluster_slots.resp", false, &s);
    cr_assert_eq(s.n, 3);
    cr_expect_eq(s.first[0], 0);
    cr_expect_eq(s.last[0], 5460);
    cr_expect_eq(s.port[0], 17001);
    cr_expect_eq(s.port[1], 17002);
    cr_expect_eq(s.last[2], 16383);
    cr_expect_eq(s.port[2], 17003);
    for (unsigned slot = 0; slot < RL_FLEET_SLOTS; slot++)
        cr_assert_geq(rl_fleet_map_node(&map, slot), 0, "slot %u", slot);
    cr_expect_eq(map.n, 3, "replicas are not masters");
    cr_expect_eq(master_port(&map, 12182), 17003);
}

Test(fleet_cluster, cluster_shards_gives_the_same_map)
{
    struct seen s;
    walk("cluster_shards.resp", true, &s);
    cr_assert_eq(s.n, 3);
    cr_expect_eq(master_port(&map, 0), 17001);
    cr_expect_eq(master_port(&map, 5461), 17002);
    cr_expect_eq(master_port(&map, 12182), 17003);
    cr_expect_eq(master_port(&map, 16383), 17003);
    cr_expect_eq(map.n, 3);
}

Test(fleet_cluster, a_moved_slot_and_a_promoted_replica_are_learnt)
{
    struct seen s;
    walk("cluster_slots_split.resp", false, &s);
    cr_expect_eq(s.n, 5);
    cr_expect_eq(master_port(&map, 12181), 17003);
    cr_expect_eq(master_port(&map, 12182), 17001);
    cr_expect_eq(master_port(&map, 12183), 17003);
    walk("cluster_slots_failover.resp", false, &s);
    cr_expect_eq(master_port(&map, 0), 17004);
    cr_expect_eq(master_port(&map, 12182), 17004);
    cr_expect_eq(master_port(&map, 5461), 17002);
}

Test(fleet_cluster, replies_of_another_shape_are_refused)
{
    struct rl_fleet_addr asked = addr("redis://127.0.0.1:17002");
    struct seen s = {0};
    redisReply *r = reply_of("moved.resp");
    cr_expect_eq(rl_fleet_cluster_slots(r, &asked, record, &s), -EPROTO);
    cr_expect_eq(rl_fleet_cluster_shards(r, &asked, record, &s), -EPROTO);
    freeReplyObject(r);
    /* SHARDS read as SLOTS, and SLOTS as SHARDS. */
    r = reply_of("cluster_shards.resp");
    cr_expect_eq(rl_fleet_cluster_slots(r, &asked, record, &s), -EPROTO);
    freeReplyObject(r);
    r = reply_of("cluster_slots.resp");
    cr_expect_eq(rl_fleet_cluster_shards(r, &asked, record, &s), -EPROTO);
    freeReplyObject(r);
    cr_expect_eq(s.n, 0, "nothing learnt from a reply of another shape");
}

Test(fleet_cluster, the_node_table_reuses_an_address_and_fills_up)
{
    memset(&map, 0, sizeof map);
    struct rl_fleet_addr a = addr("redis://127.0.0.1:7000");
    cr_expect_eq(rl_fleet_map_find(&map, &a), 0);
    cr_expect_eq(rl_fleet_map_find(&map, &a), 0);
    for (unsigned i = 1; i < RL_FLEET_NODES; i++) {
        char url[64];
        snprintf(url, sizeof url, "redis://127.0.0.1:%u", 7000 + i);
        struct rl_fleet_addr b = addr(url);
        cr_expect_eq(rl_fleet_map_find(&map, &b), (int)i);
    }
    struct rl_fleet_addr full = addr("redis://127.0.0.2:7000");
    cr_expect_eq(rl_fleet_map_find(&map, &full), -ENOSPC);
    cr_expect_eq(rl_fleet_map_node(&map, 5), -1);
    rl_fleet_map_set(&map, 0, 10, 3);
    cr_expect_eq(rl_fleet_map_node(&map, 5), 3);
    cr_expect_eq(rl_fleet_map_node(&map, 11), -1);
}

/* After the failover CLUSTER SHARDS lists the dead master in a shard of
 * its own, with no slots and health "fail": nothing maps to it, and its
 * slots map to the replica promoted in its place. */
Test(fleet_cluster, cluster_shards_after_a_failover_maps_to_the_new_master)
{
    struct seen s;
    walk("cluster_shards_failover.resp", true, &s);
    cr_expect_eq(s.n, 3, "%d ranges", s.n);
    int p0 = master_port(&map, 0);
    cr_expect_neq(p0, 60577, "slot 0 still on the dead master");
    cr_expect_eq(p0, 45495);
    cr_expect_eq(map.n, 3, "the dead master is no node of the map");
}
