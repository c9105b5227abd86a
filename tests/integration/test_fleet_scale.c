/* Fleet budgets at scale (SPEC §8): a Redis Cluster losing a master, 16
 * hosts on a network of their own, a Redis that answers late, a Redis
 * that stops, or dies, and comes back. Every Redis is started by the test
 * on free ports and stopped after; every admission is counted where it
 * arrives (sink.py logs a line per connection with its monotonic times).
 *
 * The bound a budget of rate r and burst b keeps over t seconds is
 * b + r·t, and it holds here however many processes fell back: SPEC §8
 * lets a process with no reply within 50 ms spend its host's share
 * meanwhile (an outage of that process: one stderr line says so), and
 * that is charged in full when it is back (fleet_scripts.h). (What a
 * process still away at the very end of a run had spent is charged by no
 * one: the processes here are back long before.) */
#include "harness.h"

#include "../redis_cluster.h"
#include "../redis_server.h"
#include "fleet_hosts.h"
#include "ping_control.h"
#include "stress_sink.h"

static struct server srv;
static struct redis R;
static struct redis_cluster C;
static struct server proxy;
static struct nethosts net;
static struct stress_sink fast;

static void setup(void)
{
    h_setup();
    memset(&R, 0, sizeof R);
    fh_net = NULL;
}

static void teardown(void)
{
    cluster_stop(&C);
    stress_sink_kill(&fast);
    if (R.pid > 0)
        kill(R.pid, SIGCONT);
    redis_kill(&R);
    h_server_stop(&proxy);
    h_server_stop(&srv);
    nethosts_remove(&net);
    h_teardown();
}

TestSuite(fleet_scale, .init = setup, .fini = teardown, .timeout = 120);

static void need_redis(void)
{
    if (!redis_have())
        cr_skip_test("redis-server is not installed");
    cr_assert(redis_start(&R), "redis-server did not start");
}

/* The most arrivals in any window of `w` seconds whose start is in
 * [from, to), and (at) where that window starts. */
static int worst_window(const double *t, int n, double from, double to,
                        double w, double *at)
{
    int worst = 0;
    *at = from;
    for (int i = 0; i < n; i++) {
        if (t[i] < from || t[i] >= to)
            continue;
        int c = count_between(t, n, t[i], t[i] + w);
        if (c > worst) {
            worst = c;
            *at = t[i];
        }
    }
    return worst;
}

/* Wait for the hosts, then what the sink saw: its arrival times (sorted,
 * into t, returned count), their span, and how many processes fell back. */
static int arrivals(pid_t *pids, int nhosts, double *t, int max, double *span,
                    int *away)
{
    wait_all(pids, nhosts, 40);
    usleep(200000);
    int n = conn_times(&srv, t, max);
    cr_assert_gt(n, 0);
    *span = t[n - 1] - t[0];
    *away = hosts_err_lines(nhosts, 0, "fleet Redis");
    return n;
}

/* ---- a Redis Cluster losing a master ------------------------------------*/

/* The master that holds the fleet's keys now (its DBSIZE is not 0). */
static int keys_master(void)
{
    for (int i = 0; i < C.n; i++) {
        char out[64];
        if (!cluster_is_master(&C, i))
            continue;
        redis_cli(&C.node[i], "DBSIZE", out, sizeof out);
        if (atol(out) > 0)
            return i;
    }
    return -1;
}

/* 3 hosts x 2 processes x 4 threads on `connect = 20/s` of a 6-node
 * cluster; the master of the budget's slot is killed 2.5 s into the 8 s
 * run and its replica promoted (about 1.5 s later, cluster-node-timeout
 * 500 ms): at the server, never more than the budget (plus, for each
 * process that fell back meanwhile, its uncharged burst). */
Test(fleet_scale, a_master_killed_mid_run_keeps_the_budget)
{
    if (!cluster_have())
        cr_skip_test("redis-server or redis-cli is not installed");
    cr_assert(cluster_start(&C, 3, true, h_dir), "the cluster did not start");
    h_server_start(&srv, "sink.py");
    const int r = 20, b = 20;
    h_config_write("[rlshim]\nfleet = redis://127.0.0.1:%d\n"
                   "[default]\nscope = fleet\nconnect = %d/s\n"
                   "connect_burst = %d\nto = 127.0.0.1:%d\n",
                   C.node[0].port, r, b, srv.port);
    pid_t pids[3];
    hosts_connect(pids, 3, 0, srv.port, 2, 4, 8, NULL);
    usleep(2500000);
    int victim = keys_master();
    cr_assert_geq(victim, 0, "no master holds the budget's keys");
    char out[64];
    redis_cli(&C.node[victim], "WAIT 1 500", out, sizeof out);
    double killed = h_now();
    redis_kill(&C.node[victim]);
    static double t[8192];
    double span;
    int away;
    int n = arrivals(pids, 3, t, 8192, &span, &away);
    int promoted = keys_master();
    int after = count_between(t, n, killed + 3, t[n - 1] + 1);
    printf("fleet failover: %d admitted in %.2f s (budget %.0f), %d processes "
           "fell back, master %d killed, %d holds the keys after, %d "
           "admitted from 3 s after the kill\n",
           n, span, b + r * span, away, victim, promoted, after);
    cr_expect_neq(promoted, victim);
    cr_expect_geq(promoted, 0, "no master holds the keys after the failover");
    cr_expect_leq(n, b + r * span + 1, "%d admitted", n);
    /* The promoted master decides again: from 3 s after the kill the fleet
     * is back near its rate, not stopped. Half the rate: a promotion
     * that comes late on a loaded machine (it is a timeout of the
     * cluster's) starts the count late. */
    cr_expect_gt(after, r * (t[n - 1] - killed - 3) * 0.5, "%d after", after);
}

/* ---- many hosts ---------------------------------------------------------*/

/* 16 hosts x 4 processes x 8 threads on one `connect = 50/s` budget for
 * 10 s: at the server, never more than b + r·t, and at least 95 % of it.
 * Each host is a network namespace with its own address on a bridge
 * where Redis and the sink listen (netns_hosts.h); where namespaces
 * cannot be made, 16 state dirs on loopback (the line says which). */
Test(fleet_scale, sixteen_hosts_of_32_threads_fill_one_budget_and_no_more)
{
    const int hosts = 16, r = 50, b = 50;
    const double secs = 10;
    const char *addr = "127.0.0.1";
    if (getenv("FLEET_SCALE_LOOPBACK") == NULL && nethosts_make(&net, hosts)) {
        fh_net = &net;
        addr = net.bridge_ip;
        snprintf(R.bind, sizeof R.bind, "%s", addr);
        setenv("SINK_HOST", addr, 1);
        printf("fleet 16 hosts: network namespaces on a bridge at %s\n", addr);
    } else {
        printf("fleet 16 hosts: 16 state dirs on loopback (no network "
               "namespaces: %s)\n",
               net.why);
    }
    need_redis();
    h_server_start(&srv, "sink.py");
    unsetenv("SINK_HOST");
    const char *fb = getenv("FLEET_SCALE_FALLBACK");
    h_config_write("[rlshim]\nfleet = redis://%s:%d\nfleet_fallback = %s\n"
                   "[default]\nscope = fleet\nconnect = %d/s\n"
                   "connect_burst = %d\nto = %s:%d\n",
                   addr, R.port, fb != NULL ? fb : "share", r, b, addr,
                   srv.port);
    setenv("FLEET_DENY_SLEEP_MS", "20", 1);
    pid_t pids[16];
    hosts_connect(pids, hosts, 0, srv.port, 4, 8, secs, addr);
    unsetenv("FLEET_DENY_SLEEP_MS");
    static double t[8192];
    double span;
    int away;
    int n = arrivals(pids, hosts, t, 8192, &span, &away);
    double budget = b + r * span;
    long ok = hosts_sum(hosts, 0, "ok", false);
    long slowest = hosts_sum(hosts, 0, "slowest_us", true);
    long evals = redis_calls(&R, "evalsha");
    printf("fleet 16 hosts: %ld EVALSHA, slowest connect %ld us\n", evals,
           slowest);
    if (getenv("FLEET_SCALE_BINS") != NULL) {
        for (int h = 0; h < hosts; h++) {
            char path[300];
            snprintf(path, sizeof path, "%s/host%d.0.err", h_dir, h);
            printf("  host %d: ok %ld, %d fallback lines\n", h,
                   hosts_sum(h + 1, 0, "ok", false) -
                       hosts_sum(h, 0, "ok", false),
                   h_file_lines(path, "fleet Redis"));
        }
        for (double x = t[0]; x < t[n - 1]; x += 0.5)
            printf(" %d", count_between(t, n, x, x + 0.5));
        printf("\n");
    }
    char why[512];
    printf("fleet 16 hosts x 4 x 8 threads: %d admitted in %.2f s, budget "
           "%.0f (%.1f %%), %d processes fell back (%s), %ld ok at the "
           "clients\n",
           n, span, budget, 100.0 * n / budget, away,
           hosts_err_first(hosts, 0, "fleet Redis", why, sizeof why), ok);
    cr_expect_eq(ok, n, "the clients' ok and the server's count");
    /* Redis's decisions against the server's arrivals: an arrival comes
     * up to the slowest connect after its decision (hundreds of ms while
     * 64 processes start at once), and the span the server sees is that
     * much short of Redis's. */
    double lag = (double)slowest / 1e6;
    cr_expect_leq(n, budget + r * lag + 1, "%d admitted (lag %.3f s)", n,
                  lag);
    /* 95 % of the budget at least. A sanitizer's build spends several
     * times the CPU per decision, and 512 threads of it on a small
     * machine take tokens later than they come (92 % seen under ASan on
     * 2 cores): there, 85 %. The bound above holds in every build. */
    const char *san = getenv("RLSHIM_SANITIZER");
    double least = san != NULL && *san != '\0' ? 0.85 : 0.95;
    cr_expect_geq(n, budget * least, "%d admitted, < %.0f %% of %.0f", n,
                  least * 100, budget);
}

/* ---- a Redis 30 ms away ---------------------------------------------------*/

/* 32 threads of one process on a budget far from binding, every reply of
 * Redis handed over 30 ms late (delay_proxy.py): each decision waits for
 * its own reply, under SPEC §8's 50 ms, so none is denied in 10 s. */
Test(fleet_scale, thirty_two_threads_with_redis_30_ms_away_are_never_denied)
{
    need_redis();
    char to[16];
    snprintf(to, sizeof to, "%d", R.port);
    setenv("DELAY_TO", to, 1);
    setenv("DELAY_MS", "30", 1);
    h_server_start(&proxy, "delay_proxy.py");
    unsetenv("DELAY_TO");
    unsetenv("DELAY_MS");
    h_server_start(&srv, "sink.py");
    h_config_write("[rlshim]\nfleet = redis://127.0.0.1:%d\n"
                   "[default]\nscope = fleet\nconnect = 100000/s\n"
                   "connect_burst = 100000\nto = 127.0.0.1:%d\n",
                   proxy.port, srv.port);
    /* The control: the same proxy's round trip, measured meanwhile. */
    struct ping_control pc;
    ping_control_start(&pc, proxy.port);
    pid_t pid;
    hosts_connect(&pid, 1, 0, srv.port, 1, 32, 10, NULL);
    wait_all(&pid, 1, 40);
    ping_control_stop(&pc);
    long ok = hosts_sum(1, 0, "ok", false);
    long denied = hosts_sum(1, 0, "denied", false);
    long slowest = hosts_sum(1, 0, "slowest_us", true);
    int away = hosts_err_lines(1, 0, "fleet Redis");
    long evals = redis_calls(&R, "evalsha");
    printf("fleet 30 ms away: %ld ok, %ld denied in 10 s by 32 threads, "
           "slowest connect %ld us, %ld EVALSHA, %d fallback lines; the "
           "control's slowest PING %.1f ms of %d\n",
           ok, denied, slowest, evals, away, pc.slowest_ms, pc.pings);
    cr_expect_gt(ok, 32 * 10 * 10, "only %ld in 10 s", ok);
    /* Never a denial without the line that says Redis was away. */
    if (away == 0)
        cr_expect_eq(denied, 0, "%ld denied with no line", denied);
    if (pc.slowest_ms < 45) {
        cr_expect_eq(denied, 0, "%ld denied", denied);
        cr_expect_eq(away, 0, "Redis taken for away");
        cr_expect_geq(evals, ok - denied, "decided without Redis");
    } else {
        /* The machine held a reply past the bound: Redis was away for
         * that call, and the process may fall back for a retry's while
         * (RL_FLEET_RETRY_NS). A shim that made each reply wait behind
         * the others' would be away for the whole run and decide all
         * but a few calls without Redis: most went to Redis. */
        printf("fleet 30 ms away: the machine held a round trip past "
               "45 ms: fallback allowed, most decisions through Redis\n");
        cr_expect_geq(evals, ok / 2, "%ld of %ld decided by Redis", evals,
                      ok);
    }
}

/* ---- a healthy Redis on a loaded host ----------------------------------*/

/* `n` processes that spin until `secs` from now (and die with the test):
 * a machine whose CPUs are all taken, so that a thread of ours that is
 * owed a reply may be scheduled long after it came. */
static void burners(pid_t *pids, int n, double secs)
{
    for (int i = 0; i < n; i++) {
        pids[i] = fork();
        cr_assert_neq(pids[i], -1);
        if (pids[i] == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            double end = h_now() + secs;
            volatile unsigned long spin = 0;
            while (h_now() < end)
                for (int k = 0; k < 100000; k++)
                    spin++;
            _exit(0);
        }
    }
}

/* 32 threads of one process connecting as fast as they can on a fleet
 * budget far from binding, fleet_fallback = deny, Redis local and
 * healthy, beside busy loops that take every CPU for the whole run: a
 * reply is late only behind the others, which keep coming, or because the
 * thread it is for was not run, so Redis is never away (SPEC §8): none
 * is denied, no line says it is away, and the server counts exactly the
 * connects made. The sink is stress_sink (its accept queue never
 * overflows, so no connect waits a second for a SYN sent again).
 *
 * The load is the host's: the client and the busy loops run at nice 5,
 * Redis and the sink (started before) at the test's own, and Redis at -10
 * where the test may raise it (root). A fleet's Redis is another machine,
 * answering whatever this host's load; one on this host at the weight of
 * the loops (and of whatever else the machine runs) is itself left unrun
 * for longer than SPEC §8's 50 ms now and then, and that is Redis away. */
Test(fleet_scale, thirty_two_threads_on_a_loaded_host_are_never_denied)
{
    need_redis();
    bool raised = setpriority(PRIO_PROCESS, (id_t)R.pid, -10) == 0;
    stress_sink_start(&fast);
    h_config_write("[rlshim]\nfleet = redis://127.0.0.1:%d\n"
                   "fleet_fallback = deny\n"
                   "[default]\nscope = fleet\nconnect = 100000/s\n"
                   "connect_burst = 100000\nto = 127.0.0.1:%d\n",
                   R.port, fast.tport);
    const double secs = 8;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    const char *per = getenv("FLEET_BURNERS_PER_CPU");
    int nburn = (int)((cpus > 0 && cpus < 16 ? cpus : 16) *
                      (per != NULL ? atoi(per) : 1));
    pid_t burn[64];
    if (nburn > 64)
        nburn = 64;
    errno = 0;
    cr_assert(nice(5) != -1 || errno == 0, "nice: %s", strerror(errno));
    burners(burn, nburn, secs + 1);
    pid_t pid;
    hosts_connect(&pid, 1, 0, fast.tport, 1, 32, secs, NULL);
    wait_all(&pid, 1, secs + 20);
    for (int i = 0; i < nburn; i++) {
        kill(burn[i], SIGKILL);
        waitpid(burn[i], NULL, 0);
    }
    long ok = hosts_sum(1, 0, "ok", false);
    long denied = hosts_sum(1, 0, "denied", false);
    long slowest = hosts_sum(1, 0, "slowest_us", true);
    int away = hosts_err_lines(1, 0, "fleet Redis");
    long long tc, tb, uc, ub, open_now;
    stress_sink_counts(&fast, &tc, &tb, &uc, &ub, &open_now);
    long evals = redis_calls(&R, "evalsha");
    char why[512];
    printf("fleet loaded host: %ld ok, %ld denied by 32 threads in %.0f s "
           "beside %d busy loops (nice 5; Redis at %s), %lld at the server, "
           "slowest connect %ld us, %ld EVALSHA, %d away lines (%s)\n",
           ok, denied, secs, nburn, raised ? "-10" : "0", tc, slowest, evals,
           away, hosts_err_first(1, 0, "fleet Redis", why, sizeof why));
    cr_expect_eq(denied, 0, "%ld of %ld connects denied on a healthy Redis",
                 denied, ok + denied);
    cr_expect_eq(away, 0, "a healthy Redis taken for away: %s", why);
    cr_expect_eq(tc, ok + denied, "%lld at the server, %ld connects made", tc,
                 ok + denied);
    cr_expect_geq(evals, ok, "decided without Redis");
    cr_expect_gt(ok, 1000, "only %ld connects in %.0f s", ok, secs);
}

/* ---- Redis away, and back -----------------------------------------------*/

enum away { PAUSE, KILL };

/* 3 hosts x 2 processes x 4 threads on `connect = 50/s` (burst 50) for
 * 8 s; Redis stopped (SIGSTOP) or killed at 2 s for `secs`, then
 * continued or restarted without persistence. Around the return, no
 * second at the server holds more than 1.3 times the rate (a burst would
 * be 2); over the run, the budget holds (and each process that fell back
 * may leave its burst uncharged). */
static void away_and_back(enum away how, double secs)
{
    need_redis();
    h_server_start(&srv, "sink.py");
    const int r = 50, b = 50;
    h_config_write("[rlshim]\nfleet = redis://127.0.0.1:%d\n"
                   "[default]\nscope = fleet\nconnect = %d/s\n"
                   "connect_burst = %d\nto = 127.0.0.1:%d\n",
                   R.port, r, b, srv.port);
    pid_t pids[3];
    hosts_connect(pids, 3, 0, srv.port, 2, 4, 8, NULL);
    usleep(2000000);
    double down = h_now();
    if (how == PAUSE)
        kill(R.pid, SIGSTOP);
    else
        redis_kill(&R);
    usleep((useconds_t)(secs * 1e6));
    double back = h_now();
    if (how == PAUSE)
        kill(R.pid, SIGCONT);
    else
        cr_assert(redis_start(&R), "redis-server did not come back");
    static double t[8192];
    double span;
    int away;
    int n = arrivals(pids, 3, t, 8192, &span, &away);
    /* Windows of 1 s that start from 1 s before the return to 2 s after
     * it: the return, whichever host comes back first. */
    double at;
    int worst = worst_window(t, n, back - 1, back + 2, 1.0, &at);
    int during = count_between(t, n, down + 0.1, back);
    printf("fleet %s %.1f s: %d admitted in %.2f s (budget %.0f), %d during, "
           "at most %d in a second around the return (from %+.2f s; rate "
           "%d), %d fallback lines\n",
           how == PAUSE ? "paused" : "killed", secs, n, span, b + r * span,
           during, worst, at - back, r, away);
    if (getenv("FLEET_SCALE_BINS") != NULL) {
        /* Arrivals per 250 ms from the start, the return marked. */
        for (double x = t[0]; x < t[n - 1]; x += 0.25)
            printf("%s%d", x <= back && back < x + 0.25 ? " |" : " ",
                   count_between(t, n, x, x + 0.25));
        printf("\n");
    }
    /* A burst would be the rate and the whole burst in one second (GCRA
     * at 50/s, burst 50: up to 100), what Redis's idle budget would let
     * go were nothing done about the return. Without one, a second holds
     * the rate and the arrivals a slow connect pushed into it: seen 54 to
     * 61 in the plain build (61 in one CI run of eight runs by hand, all
     * after a second with none: the hosts look again for Redis after
     * 1 s), 61 under ASan. So 1.3 times the rate in every build: a burst
     * of even a sixth of the budget's fails it. But the hosts come back
     * one by one on a loaded machine (each looks again for Redis a second
     * after its last try): while one is back at the fleet's rate, the
     * others spend their shares of it (SPEC §8, `share`: r/hosts each),
     * and a second then holds up to r + r(hosts-1)/hosts. That, with
     * the same room, in every build; a burst on top of it still fails.
     * The budget over the run holds in every build. */
    const int hosts = 3;
    double bound = r * 1.3 + (double)r * (hosts - 1) / hosts;
    cr_expect_leq(worst, bound, "%d in one second around the return (bound "
                  "%.0f)", worst, bound);
    cr_expect_leq(n, b + r * span + 1, "%d admitted", n);
}

Test(fleet_scale, redis_paused_200_ms_returns_without_a_burst)
{
    away_and_back(PAUSE, 0.2);
}

Test(fleet_scale, redis_paused_2_s_returns_without_a_burst)
{
    away_and_back(PAUSE, 2.0);
}

Test(fleet_scale, redis_killed_and_restarted_returns_without_a_burst)
{
    away_and_back(KILL, 2.0);
}
