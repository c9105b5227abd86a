/* redis_cluster.h — a real Redis Cluster for the fleet tests: 3 masters
 * (and, for failover, a replica each) on free ports of 127.0.0.1, made by
 * `redis-cli --cluster create`, started by the test and stopped after
 * (every node dies with the test process too: PR_SET_PDEATHSIG).
 * Header-only, static; include after redis_server.h. */
#ifndef RL_TEST_REDIS_CLUSTER_H
#define RL_TEST_REDIS_CLUSTER_H

#include <errno.h>
#include <sys/stat.h>

#include "redis_server.h"

#define CLUSTER_MAX 6

struct redis_cluster {
    int n; /* nodes: the first 3 are the masters redis-cli was given */
    struct redis node[CLUSTER_MAX];
    int bus[CLUSTER_MAX]; /* each node's cluster bus port */
    char dir[300];        /* nodes.conf files */
    int node_timeout_ms;  /* cluster-node-timeout: how soon a failover */
};

static __attribute__((unused)) bool cluster_have(void)
{
    return redis_have() && system("command -v redis-cli >/dev/null 2>&1") == 0;
}

/* Node i on its ports, cluster-enabled, no persistence. */
static __attribute__((unused)) bool cluster_node_start(struct redis_cluster *c,
                                                       int i)
{
    char bus[16], conf[64], timeout[16];
    snprintf(bus, sizeof bus, "%d", c->bus[i]);
    snprintf(conf, sizeof conf, "nodes-%d.conf", c->node[i].port);
    snprintf(timeout, sizeof timeout, "%d", c->node_timeout_ms);
    char *more[] = {"--cluster-enabled", "yes", "--cluster-port", bus,
                    "--cluster-config-file", conf, "--cluster-node-timeout",
                    timeout, "--dir", c->dir,
                    /* a replica in sync at once, not after 5 s */
                    "--repl-diskless-sync-delay", "0", NULL};
    return redis_start_with(&c->node[i], more);
}

/* Every line of `redis-cli -p PORT ARGS` into out (len bytes). */
static __attribute__((unused)) int cluster_cli_all(int port, const char *args,
                                                   char *out, size_t len)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "redis-cli -p %d %s 2>/dev/null", port, args);
    FILE *p = popen(cmd, "r");
    if (p == NULL)
        return -1;
    size_t n = fread(out, 1, len - 1, p);
    out[n] = '\0';
    return pclose(p);
}

/* Does every live node say cluster_state:ok, and (`synced`) does every
 * master have its replica in sync? */
static __attribute__((unused)) bool cluster_ok(const struct redis_cluster *c,
                                               bool synced)
{
    static char buf[8192];
    int masters_synced = 0, masters = 0;
    for (int i = 0; i < c->n; i++) {
        if (c->node[i].pid <= 0)
            continue;
        if (cluster_cli_all(c->node[i].port, "CLUSTER INFO", buf, sizeof buf) !=
                0 ||
            strstr(buf, "cluster_state:ok") == NULL)
            return false;
        if (cluster_cli_all(c->node[i].port, "INFO replication", buf,
                            sizeof buf) != 0)
            return false;
        if (strstr(buf, "role:master") != NULL) {
            masters++;
            /* slave0:ip=...,state=online */
            masters_synced += strstr(buf, "state=online") != NULL;
        }
    }
    return !synced || masters_synced == masters;
}

static __attribute__((unused)) bool
cluster_wait_ok(const struct redis_cluster *c, bool synced, double secs)
{
    for (int k = 0; k < (int)(secs * 20); k++) {
        if (cluster_ok(c, synced))
            return true;
        usleep(50000);
    }
    return false;
}

/* A port nothing listens on, with room for another. */
static __attribute__((unused)) void cluster_ports(struct redis_cluster *c)
{
    int used[2 * CLUSTER_MAX], nused = 0;
    for (int i = 0; i < c->n; i++)
        for (int which = 0; which < 2; which++) {
            int p;
            bool again;
            do {
                p = redis_free_port();
                again = false;
                for (int k = 0; k < nused; k++)
                    again |= used[k] == p;
            } while (again);
            used[nused++] = p;
            if (which == 0)
                c->node[i].port = p;
            else
                c->bus[i] = p;
        }
}

/* Start `masters` masters (3) and, when `replicas`, a replica of each, in
 * a directory under `parent`; wait until the cluster is ok. */
static __attribute__((unused)) bool cluster_start(struct redis_cluster *c,
                                                  int masters, bool replicas,
                                                  const char *parent)
{
    memset(c, 0, sizeof *c);
    c->n = replicas ? 2 * masters : masters;
    if (c->n > CLUSTER_MAX)
        return false;
    if (c->node_timeout_ms == 0)
        c->node_timeout_ms = 500;
    snprintf(c->dir, sizeof c->dir, "%s/cluster-XXXXXX", parent);
    if (mkdtemp(c->dir) == NULL)
        return false;
    cluster_ports(c);
    for (int i = 0; i < c->n; i++)
        if (!cluster_node_start(c, i))
            return false;
    char cmd[1024];
    int len = snprintf(cmd, sizeof cmd, "redis-cli --cluster create");
    for (int i = 0; i < c->n; i++)
        len += snprintf(cmd + len, sizeof cmd - (size_t)len, " 127.0.0.1:%d",
                        c->node[i].port);
    snprintf(cmd + len, sizeof cmd - (size_t)len,
             " --cluster-replicas %d --cluster-yes >/dev/null 2>&1",
             replicas ? 1 : 0);
    if (system(cmd) != 0)
        return false;
    return cluster_wait_ok(c, replicas, 20);
}

static __attribute__((unused)) void cluster_stop(struct redis_cluster *c)
{
    for (int i = 0; i < c->n; i++)
        redis_kill(&c->node[i]);
    if (c->dir[0] != '\0') {
        char cmd[400];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", c->dir);
        if (system(cmd) != 0)
            fprintf(stderr, "could not remove %s\n", c->dir);
        c->dir[0] = '\0';
    }
}

/* The index of the node that is master of `slot` now, as node `via`
 * sees it (CLUSTER NODES: "id ip:port@bus flags master ... slots...", a
 * master's flags say "master", a failed one's "fail" too); -1 when none. */
static __attribute__((unused)) int
cluster_master_of(const struct redis_cluster *c, int via, unsigned slot)
{
    static char buf[16384];
    if (cluster_cli_all(c->node[via].port, "CLUSTER NODES", buf, sizeof buf) !=
        0)
        return -1;
    char *save = NULL;
    for (char *l = strtok_r(buf, "\n", &save); l != NULL;
         l = strtok_r(NULL, "\n", &save)) {
        char *f[64];
        int nf = 0;
        char *s2 = NULL;
        for (char *w = strtok_r(l, " ", &s2); w != NULL && nf < 64;
             w = strtok_r(NULL, " ", &s2))
            f[nf++] = w;
        if (nf < 9 || strstr(f[2], "master") == NULL ||
            strstr(f[2], "fail") != NULL)
            continue;
        int port =
            atoi(strchr(f[1], ':') != NULL ? strchr(f[1], ':') + 1 : f[1]);
        for (int k = 8; k < nf; k++) {
            unsigned a, b;
            if (f[k][0] == '[')
                continue; /* a slot migrating: [slot->-id] */
            int got = sscanf(f[k], "%u-%u", &a, &b);
            if (got == 1)
                b = a;
            if (got >= 1 && slot >= a && slot <= b)
                for (int i = 0; i < c->n; i++)
                    if (c->node[i].port == port)
                        return i;
        }
    }
    return -1;
}

/* Is node i a master now (INFO replication)? */
static __attribute__((unused)) bool
cluster_is_master(const struct redis_cluster *c, int i)
{
    char buf[4096];
    return c->node[i].pid > 0 &&
           cluster_cli_all(c->node[i].port, "INFO replication", buf,
                           sizeof buf) == 0 &&
           strstr(buf, "role:master") != NULL;
}

#endif
