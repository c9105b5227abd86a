/* A destination's pace shared by a fleet (SPEC §14, §8), measured at the
 * server: host A (a network namespace of its own, when the test may make
 * one; else a state dir of its own on loopback) learns that a server
 * answers in 400 ms, and host B's first requests to it, by python
 * requests under the shim, sent at once from threads of their own (so
 * that B has no response of its own to learn from), come at least
 * adapt_factor x 400 ms apart (less the server's stamp drift), though
 * B's own limit would let them go 50 ms apart. The server is
 * servers/http_status.py (/slow/MS/N). */
#include "harness.h"

#include "../redis_server.h"
#include "fleet_hosts.h"

static struct server st;
static struct redis R;
static struct nethosts net;

static void setup(void)
{
    h_setup();
    memset(&R, 0, sizeof R);
    fh_net = NULL;
}

static void teardown(void)
{
    redis_kill(&R);
    h_server_stop(&st);
    nethosts_remove(&net);
    h_teardown();
}

TestSuite(fleet_pace, .init = setup, .fini = teardown, .timeout = 90);

/* GETs each URL, in turn or (RL_AT_ONCE set) each from a thread. */
static const char requests_py[] =
    "import os, requests, sys, threading\n"
    "def get(u):\n"
    "    requests.get(u, timeout=20).content\n"
    "if os.environ.get('RL_AT_ONCE'):\n"
    "    ts = [threading.Thread(target=get, args=(u,)) for u in sys.argv[1:]]\n"
    "    [t.start() for t in ts]\n"
    "    [t.join() for t in ts]\n"
    "else:\n"
    "    [get(u) for u in sys.argv[1:]]\n";

/* Host h GETs /slow/MS/N for N in [from, from + n), and is waited for. */
static void host_gets(int h, const char *addr, int ms, int from, int n,
                      bool at_once)
{
    static char urls[8][160];
    char *argv[12] = {"/usr/bin/python3", "-c", (char *)requests_py};
    for (int i = 0; i < n && i < 8; i++) {
        snprintf(urls[i], sizeof urls[i], "http://%s:%d/slow/%d/%d", addr,
                 st.port, ms, from + i);
        argv[3 + i] = urls[i];
    }
    argv[3 + n] = NULL;
    if (at_once)
        setenv("RL_AT_ONCE", "1", 1);
    pid_t pid = host_spawn(h, from, argv);
    unsetenv("RL_AT_ONCE");
    wait_all(&pid, 1, 40);
}

/* The server's stamp (s) of its i-th request (0-based). */
static double stamp(int i)
{
    cr_assert_geq(h_server_wait(&st, "REQ", i + 1, 5), i + 1);
    return h_server_stamp(&st, i);
}

Test(fleet_pace, a_latency_learned_on_one_host_spaces_another_hosts_requests)
{
    if (!redis_have())
        cr_skip_test("redis-server is not installed");
    const char *addr = "127.0.0.1";
    if (nethosts_make(&net, 2)) {
        fh_net = &net;
        addr = net.bridge_ip;
        snprintf(R.bind, sizeof R.bind, "%s", addr);
        setenv("HTTP_STATUS_HOST", addr, 1);
        printf("fleet pace: two network namespaces on a bridge at %s\n",
               addr);
    } else {
        printf("fleet pace: two state dirs on loopback (no network "
               "namespaces: %s)\n",
               net.why);
    }
    cr_assert(redis_start(&R), "redis-server did not start");
    h_server_start(&st, "http_status.py");
    unsetenv("HTTP_STATUS_HOST");
    h_config_write("[rlshim]\nfleet = redis://%s:%d\nfleet_fallback = deny\n"
                   "on_deny = delay\nmax_delay = 10s\n"
                   "[default]\nscope = fleet\nrequest = 20/s\n"
                   "adapt = latency\nadapt_factor = 2\n",
                   addr, R.port);
    host_gets(0, addr, 400, 0, 2, false);
    host_gets(1, addr, 400, 2, 3, true);
    double t[3];
    for (int i = 0; i < 3; i++)
        t[i] = stamp(2 + i); /* in the order they came */
    for (int i = 0; i < 2; i++) {
        double g = t[i + 1] - t[i];
        printf("fleet pace: host B gap %d: %.3f s\n", i + 1, g);
        cr_expect_geq(g, 0.8 * 2 * 0.4,
                      "host B's request %d came %.3f s after its previous: "
                      "host A's interval was not shared",
                      i + 2, g);
    }
}

/* Jitter (SPEC §14) with scope = fleet: each turn later by a random part
 * of the interval (jitter = 100%: up to one more), and Redis counts the
 * turn when it goes, so that no two requests come closer than the
 * interval (2/s: 0.5 s). One host, python requests one after the other;
 * without the jitter (the control) the gaps are the interval. */
static void gaps(int first, int n, double *mean, double *least)
{
    *mean = 0;
    *least = 1e9;
    for (int i = 0; i < n; i++) {
        double g = stamp(first + i + 1) - stamp(first + i);
        *mean += g / n;
        if (g < *least)
            *least = g;
    }
}

Test(fleet_pace, jitter_spreads_a_fleet_budgets_turns_never_closer)
{
    if (!redis_have())
        cr_skip_test("redis-server is not installed");
    cr_assert(redis_start(&R), "redis-server did not start");
    h_server_start(&st, "http_status.py");
    const char *conf = "[rlshim]\nfleet = redis://127.0.0.1:%d\n"
                       "fleet_fallback = deny\non_deny = delay\n"
                       "max_delay = 10s\n[default]\nscope = fleet\n"
                       "request = 2/s\nrequest_burst = 1\njitter = %s\n";
    h_config_write(conf, R.port, "0%");
    host_gets(0, "127.0.0.1", 0, 0, 7, false);
    double mean0, least0;
    gaps(0, 6, &mean0, &least0);
    h_config_write(conf, R.port, "100%");
    host_gets(0, "127.0.0.1", 0, 7, 7, false);
    double mean, least;
    gaps(7, 6, &mean, &least);
    printf("fleet jitter: mean gap %.3f s (without: %.3f s), least %.3f s "
           "(without: %.3f s)\n",
           mean, mean0, least, least0);
    cr_expect_geq(mean, mean0 * 1.15,
                  "jitter = 100%% spread no fleet turn: mean gap %.3f s, "
                  "%.3f s without",
                  mean, mean0);
    cr_expect_geq(least, 0.5 * 0.9,
                  "a jittered fleet turn came %.3f s after the one before, "
                  "the interval is 0.5 s",
                  least);
}
