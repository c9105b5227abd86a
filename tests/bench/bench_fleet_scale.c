/* bench_fleet_scale.c — one hot fleet key as the fleet grows: 1, 4 and 16
 * simulated hosts (a process each, with a state dir of its own: its own
 * host segment and host id) of 4 threads each, making connect decisions
 * as fast as they can for 1 s on one fleet budget that never binds;
 * against one redis-server, then against a 3-master Redis Cluster (the
 * process given a node that does not serve the key: its first decision
 * is redirected). Both are started here on free ports of 127.0.0.1 and
 * stopped after.
 *
 * Per run: decisions per second (all hosts), p50 and p99 of one
 * decision's latency, and round trips per decision (the scripts Redis
 * ran, EVALSHA and EVAL, with the cluster's redirections and map look-ups,
 * counted at the servers by INFO commandstats, over decisions made); and
 * the decisions that fell back (made without Redis: SPEC §8's outage). The
 * machine is shared and has few cores: the figures are of this run, not
 * targets. The exit status is 0 unless the benchmark could not run. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "../redis_cluster.h"
#include "../redis_server.h"
#include "bench_gate.h"
#include "fleet/fleet.h"
#include "fleet/fleet_cluster.h"
#include "policy/config.h"
#include "policy/gate.h"
#include "policy/proc.h"
#include "util/clock.h"

#define THREADS 4
#define SAMPLES 20000 /* per thread, the first ones */

static char dir[64];
static struct rl_proc proc; /* this process's: the bench is its owner */

struct shared {
    long decisions, fellback;
    float us[16 * THREADS][SAMPLES];
    long n[16 * THREADS];
};
static struct shared *sh;

static void gate_with(const char *text)
{
    bench_gate_with(&proc, text);
}

struct thr {
    int slot;
    uint64_t end;
};

static void *hot(void *arg)
{
    struct thr *t = arg;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(80)};
    a.sin_addr.s_addr = htonl(0x0a000001);
    struct rl_gate_ticket tk;
    long n = 0, fb = 0;
    while (rl_clock_now_ns() < t->end) {
        uint64_t t0 = rl_clock_now_ns();
        rl_gate_connect(&proc, &tk, "connect", 3, &a, sizeof a);
        uint64_t dt = rl_clock_now_ns() - t0;
        fb += !rl_fleet_up(&proc.fleet);
        if (n < SAMPLES)
            sh->us[t->slot][n] = (float)dt / 1e3f;
        n++;
    }
    sh->n[t->slot] = n;
    __atomic_add_fetch(&sh->decisions, n, __ATOMIC_RELAXED);
    __atomic_add_fetch(&sh->fellback, fb, __ATOMIC_RELAXED);
    return NULL;
}

static int cmpf(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

/* Scripts and redirections the servers at `ports` ran since their last
 * CONFIG RESETSTAT. */
static long round_trips(const int *ports, int n)
{
    static const char *const cmds[] = {"evalsha", "eval", "asking",
                                       "cluster|slots", "cluster|shards"};
    long total = 0;
    for (int i = 0; i < n; i++) {
        struct redis r = {.port = ports[i]};
        for (size_t k = 0; k < sizeof cmds / sizeof *cmds; k++)
            total += redis_calls(&r, cmds[k]);
    }
    return total;
}

static void reset_stats(const int *ports, int n)
{
    char out[64];
    for (int i = 0; i < n; i++) {
        struct redis r = {.port = ports[i]};
        redis_cli(&r, "CONFIG RESETSTAT", out, sizeof out);
    }
}

/* nhosts processes x THREADS threads on `url` for 1 s. */
static void run(const char *what, const char *url, const int *ports, int nports,
                int nhosts)
{
    char cfg[512];
    snprintf(cfg, sizeof cfg,
             "[rlshim]\nfleet = %s\n[user:bench]\nscope = fleet\n"
             "connect = 1000000/s\n",
             url);
    memset(sh, 0, sizeof *sh);
    reset_stats(ports, nports);
    /* Each host starts its threads at the same moment, after its set-up
     * (its first decision opens its connection). */
    uint64_t start = rl_clock_now_ns() + 300000000u;
    pid_t pids[16];
    for (int h = 0; h < nhosts; h++) {
        fflush(stdout);
        pids[h] = fork();
        if (pids[h] == 0) {
            char sd[128];
            snprintf(sd, sizeof sd, "%s/%s-%d-host%d", dir, what, nhosts, h);
            mkdir(sd, 0700);
            setenv("RLSHIM_STATE_DIR", sd, 1);
            gate_with(cfg);
            pthread_t th[THREADS];
            struct thr t[THREADS];
            while (rl_clock_now_ns() < start)
                usleep(1000);
            for (int i = 0; i < THREADS; i++) {
                t[i] = (struct thr){h * THREADS + i, start + 1000000000u};
                pthread_create(&th[i], NULL, hot, &t[i]);
            }
            for (int i = 0; i < THREADS; i++)
                pthread_join(th[i], NULL);
            _exit(0);
        }
    }
    for (int h = 0; h < nhosts; h++)
        waitpid(pids[h], NULL, 0);
    long trips = round_trips(ports, nports);
    /* Every sample of every thread, sorted. */
    static float all[16 * THREADS * SAMPLES];
    size_t m = 0;
    for (int s = 0; s < nhosts * THREADS; s++)
        for (long i = 0; i < sh->n[s] && i < SAMPLES; i++)
            all[m++] = sh->us[s][i];
    qsort(all, m, sizeof *all, cmpf);
    double p50 = m ? all[m / 2] : 0, p99 = m ? all[m * 99 / 100] : 0;
    printf("hot key, %-7s %2d hosts x %d threads: %7ld decisions/s, p50 "
           "%7.1f us, p99 %8.1f us, %.2f round trips per decision, %ld fell "
           "back\n",
           what, nhosts, THREADS, sh->decisions, p50, p99,
           sh->decisions ? (double)trips / (double)sh->decisions : 0.0,
           sh->fellback);
    fflush(stdout);
}

int main(void)
{
    if (!cluster_have()) {
        printf("bench_fleet_scale: skipped (redis-server or redis-cli is not "
               "installed)\n");
        return 0;
    }
    snprintf(dir, sizeof dir, "/tmp/rlshim-bscale-XXXXXX");
    if (mkdtemp(dir) == NULL)
        return 1;
    sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE,
              MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED)
        return 1;
    static const int hosts[] = {1, 4, 16};
    char url[64];

    struct redis R = {0};
    if (!redis_start(&R))
        return 1;
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", R.port);
    for (size_t i = 0; i < 3; i++)
        run("redis", url, &R.port, 1, hosts[i]);
    redis_kill(&R);

    static struct redis_cluster C;
    if (!cluster_start(&C, 3, false, dir)) {
        cluster_stop(&C);
        fprintf(stderr, "bench_fleet_scale: the cluster did not start\n");
        return 1;
    }
    /* A seed that does not serve the hot key: the first decision of each
     * process is redirected (MOVED) and learns the map. */
    const char *key = "rlshim:{user:bench|bench}:connect:0:tb";
    unsigned slot = rl_fleet_key_slot(key, strlen(key));
    int owner = cluster_master_of(&C, 0, slot);
    if (owner < 0) {
        cluster_stop(&C);
        fprintf(stderr, "bench_fleet_scale: no master serves slot %u\n", slot);
        return 1;
    }
    int seed = (owner + 1) % 3;
    int ports[3] = {C.node[0].port, C.node[1].port, C.node[2].port};
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", C.node[seed].port);
    for (size_t i = 0; i < 3; i++)
        run("cluster", url, ports, 3, hosts[i]);
    cluster_stop(&C);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : 1;
}
