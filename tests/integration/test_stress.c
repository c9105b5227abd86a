/* The thread storm: 4 processes x 32 threads mixing connects, sends and
 * writes on throttled and untouched fds, in fail and in delay mode, with
 * the normal and with a UBSan and an ASan build of the shim. Measured at the sink:
 * no crash, no hang, nothing over the budgets, every byte the clients
 * think they sent arrived, and untouched calls never failed.
 *
 * Runs STORM_SECONDS (5 s, not the 10 s: four storms must fit the
 * suite's time on a shared 2-core machine). */
#include "harness.h"
#include "stress_sink.h"

#define STORM_PROCS 4
#define STORM_THREADS 32
#define STORM_SECONDS 5

/* The budget of the storm's rule (shared by the 4 processes: one uid). */
struct budget {
    double conn_rate, conn_burst;
    double send_rate, send_burst; /* 0: send calls not limited */
    double byte_rate, byte_burst;
};

/* Every limit binds: 128 threads want far more. */
static const struct budget tight = {20, 10, 300, 50, 24576, 4096};
/* Only bytes, with a burst deep enough for the gate to lease (leases of
 * 4 KiB per thread: 64 of the storm's sends). */
static const struct budget leased = {20, 10, 0, 0, 1048576, 262144};

static struct budget bud;

static struct run r;
static struct stress_sink sink;

static void setup(void)
{
    h_setup();
    stress_sink_start(&sink);
}

static void teardown(void)
{
    stress_sink_kill(&sink);
    h_teardown();
}

/* Sum of every "key=N" in the run's output (one line per process). */
static long long sum(const char *key)
{
    long long total = 0;
    size_t kl = strlen(key);
    for (const char *p = r.out; (p = strstr(p, key)) != NULL; p += kl)
        if ((p == r.out || p[-1] == ' ' || p[-1] == '\n') && p[kl] == '=')
            total += strtoll(p + kl + 1, NULL, 10);
    return total;
}

static void storm_config(const char *mode, const struct budget *b)
{
    bud = *b;
    char send[80] = "";
    if (b->send_rate > 0)
        snprintf(send, sizeof send, "send = %.0f/s\nsend_burst = %.0f\n",
                 b->send_rate, b->send_burst);
    h_config_write("[rlshim]\n"
                   "on_deny = %s\n"
                   "max_delay = 300ms\n"
                   "[default]\n"
                   "connect = %.0f/s\nconnect_burst = %.0f\n"
                   "%s"
                   "send_bytes = %.0f/s\nsend_bytes_burst = %.0f\n"
                   "to = 127.0.0.1:%d\n",
                   mode, b->conn_rate, b->conn_burst, send, b->byte_rate,
                   b->byte_burst, sink.tport);
}

/* The UBSan build of the shim, built on demand (its own build dir). */
static void ubsan_shim(char *so, size_t len)
{
    /* In a sanitizer run the storm program itself is instrumented (an ASan
     * one must have libasan first): there the plain build's run covers it. */
    const char *san = getenv("RLSHIM_SANITIZER");
    if (san != NULL && *san != '\0')
        h_skip("the UBSan-shim storm runs in the plain make test");
    const char *src = h_env("RLSHIM_SRC");
    snprintf(so, len, "%s/build-ubsan/librlshim.so", src);
    char cmd[1200];
    snprintf(cmd, sizeof cmd,
             "cd '%s' && env -u MAKEFLAGS -u MAKELEVEL -u MFLAGS "
             "make -s SANITIZER=undefined build-ubsan/librlshim.so "
             ">/dev/null 2>&1",
             src);
    cr_assert_eq(system(cmd), 0, "could not build %s", so);
}

/* The ASan build of the shim, and the preload list it needs: libasan must
 * come first, before anything the program loads. */
static void asan_shim(char *pre, size_t len)
{
    const char *src = h_env("RLSHIM_SRC");
    char cmd[1200], lib[512] = "";
    snprintf(cmd, sizeof cmd,
             "cd '%s' && env -u MAKEFLAGS -u MAKELEVEL -u MFLAGS "
             "make -s SANITIZER=address build-asan/librlshim.so "
             ">/dev/null 2>&1",
             src);
    cr_assert_eq(system(cmd), 0, "could not build the ASan shim");
    FILE *p = popen("cc -print-file-name=libasan.so", "r");
    cr_assert_not_null(p);
    cr_assert_not_null(fgets(lib, sizeof lib, p));
    pclose(p);
    lib[strcspn(lib, "\n")] = '\0';
    cr_assert_eq(lib[0], '/', "no libasan.so: '%s'", lib);
    snprintf(pre, len, "%s %s/build-asan/librlshim.so", lib, src);
}

/* The largest "key=N" in the run's output (one line per process). */
static long long most(const char *key)
{
    long long top = -1;
    size_t kl = strlen(key);
    for (const char *p = r.out; (p = strstr(p, key)) != NULL; p += kl)
        if ((p == r.out || p[-1] == ' ' || p[-1] == '\n') && p[kl] == '=') {
            long long v = strtoll(p + kl + 1, NULL, 10);
            top = v > top ? v : top;
        }
    return top;
}

/* Run STORM_PROCS storms at once (so = the shim to preload, NULL for the
 * normal one) and check everything measurable. */
static void storm(const char *so)
{
    char bin[512], script[2048];
    h_helper("storm", bin, sizeof bin);
    int n = snprintf(script, sizeof script, "%s%s%s rc=0; pids=;",
                     so ? "export LD_PRELOAD='" : "", so ? so : "",
                     so ? "';" : "");
    for (int i = 0; i < STORM_PROCS; i++)
        n += snprintf(script + n, sizeof script - (size_t)n,
                      " '%s' %d %d %d %d & pids=\"$pids $!\";", bin,
                      sink.tport, sink.uport, STORM_SECONDS, STORM_THREADS);
    snprintf(script + n, sizeof script - (size_t)n,
             " for p in $pids; do wait $p || rc=$((rc + 1)); done;"
             " exit $rc");
    char *argv[] = {"sh", "-c", script, NULL};
    h_run(&r, true, STORM_SECONDS + 20, argv);

    cr_assert_neq(r.status, -1, "the storm hung (killed after %d s)",
                  STORM_SECONDS + 20);
    cr_expect_eq(r.status, 0, "%d storm processes failed or crashed: %s",
                 r.status, r.out);
    /* A delayed call sleeps at most max_delay (300 ms): each process's
     * last thread ends soon after its deadline (its own clock, so not the
     * start of four processes on a loaded machine). A delay not cut at
     * max_delay queues the storm's threads behind one another: their
     * connects alone, one each at the rule's rate, take
     * STORM_PROCS x STORM_THREADS / conn_rate (6.4 s); under half. */
    double queued_ms = 1000.0 * STORM_PROCS * STORM_THREADS / bud.conn_rate;
    cr_expect_lt(most("over_ms"), queued_ms / 2,
                 "a process's last thread ended %lld ms after its deadline "
                 "(the storm took %.1f s)",
                 most("over_ms"), r.wall);
    int lines = 0;
    for (const char *p = r.out; (p = strchr(p, '\n')) != NULL; p++)
        lines++;
    cr_assert_eq(lines, STORM_PROCS, "reports: %s", r.out);
    cr_expect_eq(sum("errors"), 0, "untouched calls failed: %s", r.out);

    long long tc, tb, uc, ub, open_now;
    stress_sink_counts(&sink, &tc, &tb, &uc, &ub, &open_now);
    double t = r.wall;
    /* Every connect and byte the clients counted arrived, and no more. */
    cr_expect_eq(tc, sum("tconn"), "throttled connections: sink %lld, "
                 "clients %lld", tc, sum("tconn"));
    cr_expect_eq(tb, sum("tbytes"), "throttled bytes: sink %lld, "
                 "clients %lld", tb, sum("tbytes"));
    cr_expect_eq(uc, sum("uconn"));
    cr_expect_eq(ub, sum("ubytes"));
    cr_expect_eq(open_now, 0);
    /* Within the budgets: burst + rate x the whole run. */
    cr_expect_leq(tc, bud.conn_burst + bud.conn_rate * t,
                  "%lld connects in %.2f s", tc, t);
    cr_expect_leq(tb, bud.byte_burst + bud.byte_rate * t,
                  "%lld bytes in %.2f s", tb, t);
    /* Each new connection carries 32 B and each kept one 64 B per send. */
    if (bud.send_rate > 0)
        cr_expect_leq(tb, 64 * (bud.send_burst + bud.send_rate * t),
                      "%lld bytes: more sends than %.0f/s", tb,
                      bud.send_rate);
    /* And the budgets were spent: 128 threads want far more. What binds
     * is the byte rate, or the send rate when it is lower. */
    double byte_use = bud.byte_rate;
    if (bud.send_rate > 0 && 64 * bud.send_rate < byte_use)
        byte_use = 64 * bud.send_rate;
    cr_expect_geq(tc, 0.7 * bud.conn_rate * STORM_SECONDS, "%lld connects",
                  tc);
    cr_expect_geq(tb, 0.5 * byte_use * STORM_SECONDS, "%lld bytes", tb);
    fprintf(stderr, "storm: %lld connects, %lld bytes in %.2f s: %.2f of "
            "the byte budget's bound; last thread %lld ms past the end\n",
            tc, tb, t, (double)tb / (bud.byte_burst + bud.byte_rate * t),
            most("over_ms"));
    cr_expect_gt(sum("tdeny") + sum("tsdeny"), 0);
    cr_expect_gt(ub, 100000, "untouched sends barely ran: %lld B", ub);
}

TestSuite(stress, .init = setup, .fini = teardown, .timeout = 60);

Test(stress, storm_in_fail_mode_stays_within_budgets_and_never_fails_others)
{
    storm_config("fail", &tight);
    storm(NULL);
}

Test(stress, storm_in_fail_mode_stays_within_a_byte_budget_deep_enough_to_lease)
{
    storm_config("fail", &leased);
    storm(NULL);
}

Test(stress, storm_in_delay_mode_stays_within_budgets_and_never_hangs)
{
    storm_config("delay", &tight);
    storm(NULL);
}

Test(stress, storm_in_fail_mode_passes_with_a_ubsan_shim, .timeout = 120)
{
    char so[600];
    ubsan_shim(so, sizeof so);
    storm_config("fail", &tight);
    storm(so);
}

Test(stress, storm_in_delay_mode_passes_with_an_asan_shim, .timeout = 120)
{
    char pre[1200];
    asan_shim(pre, sizeof pre);
    storm_config("delay", &leased);
    storm(pre);
}

Test(stress, storm_in_delay_mode_passes_with_a_ubsan_shim, .timeout = 120)
{
    char so[600];
    ubsan_shim(so, sizeof so);
    storm_config("delay", &tight);
    storm(so);
}

/* `rlshim stat --json`'s "allowed" and "available" of send_bytes. */
static void stat_bytes(long long *allowed, long long *available)
{
    char bin[512], state[300];
    snprintf(bin, sizeof bin, "%s/rlshim", h_env("RLSHIM_BUILD"));
    snprintf(state, sizeof state, "RLSHIM_STATE_DIR=%s", h_state);
    char *argv[] = {"env", state, bin, "stat", "-c", h_config, "--json",
                    NULL};
    h_run(&r, false, 10, argv);
    cr_assert_eq(r.status, 0, "rlshim stat: %s", r.out);
    const char *p = strstr(r.out, "\"send_bytes\"");
    cr_assert_not_null(p, "%s", r.out);
    const char *a = strstr(p, "\"allowed\": ");
    const char *v = strstr(p, "\"available\": ");
    cr_assert(a != NULL && v != NULL, "%s", r.out);
    *allowed = strtoll(a + 11, NULL, 10);
    *available = strtoll(v + 13, NULL, 10);
}

Test(stress, leases_go_back_when_threads_and_processes_exit)
{
    /* 10^9 B/h: deep enough to lease (256 KiB a thread), never binding in
     * one second of storm, refilling 277,778 B/s. After the storm, what
     * the budget lost is exactly what arrived: no thread kept a lease,
     * none was counted as allowed. */
    h_config_write("[default]\nsend_bytes = 1000000000/h\n"
                   "to = 127.0.0.1:%d\n",
                   sink.tport);
    char bin[512], port_t[16], port_u[16];
    snprintf(port_t, sizeof port_t, "%d", sink.tport);
    snprintf(port_u, sizeof port_u, "%d", sink.uport);
    char *argv[] = {(char *)h_helper("storm", bin, sizeof bin), port_t,
                    port_u, "1", "8", NULL};
    double t0 = h_now();
    h_run(&r, true, 20, argv);
    cr_assert_eq(r.status, 0, "%s", r.out);
    long long tc, tb, uc, ub, open_now;
    stress_sink_counts(&sink, &tc, &tb, &uc, &ub, &open_now);
    cr_assert_gt(tb, 0);
    long long allowed, available;
    stat_bytes(&allowed, &available);
    double dt = h_now() - t0;
    cr_expect_eq(allowed, tb, "allowed %lld, arrived %lld", allowed, tb);
    cr_expect_geq(available, 1000000000 - tb, "available %lld after %lld B",
                  available, tb);
    cr_expect_leq(available, 1000000000 - tb + 277778 * dt + 1000,
                  "available %lld after %lld B in %.2f s", available, tb,
                  dt);
}
