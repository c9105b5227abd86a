/* Real multithreaded and multiplexing clients under one byte budget, in
 * delay mode: Java's HttpClient with 16 requests at once, curl --parallel,
 * and one curl upload at megabytes per second. The aggregate rate holds at
 * the server, every body arrives intact, nothing fails, nothing spins. */
#include "harness.h"

static struct server srv;
static struct run r, ctl;

static void setup(void)
{
    h_setup();
    h_server_start(&srv, "http_count.py");
}

static void teardown(void)
{
    h_server_stop(&srv);
    h_teardown();
}

TestSuite(parallel, .init = setup, .fini = teardown, .timeout = 60);

static void byte_budget(const char *rate, const char *burst)
{
    h_config_write("[rlshim]\non_deny = delay\n"
                   "[default]\nsend_bytes = %s\nsend_bytes_burst = %s\n"
                   "to = 127.0.0.1:%d\n",
                   rate, burst, srv.port);
}

/* Request bodies (POST lines) the server logged, and their total size. */
static long long posted(int n, double *last)
{
    long long total = 0;
    char line[512], f[80];
    *last = 0;
    for (int i = 0; i < n; i++) {
        h_server_line(&srv, "", i, line, sizeof line);
        total += strtoll(h_field(line, 2, f, sizeof f), NULL, 10);
        double t = atof(line);
        if (t > *last)
            *last = t;
    }
    return total;
}

Test(parallel, java_httpclient_sixteen_requests_share_the_byte_rate)
{
    if (!h_have("javac") || !h_have("java"))
        h_skip("no JDK (make test installs default-jdk-headless)");
    char cmd[1200];
    snprintf(cmd, sizeof cmd,
             "javac -d '%s' '%s/tests/integration/stress/Parallel.java'",
             h_dir, h_env("RLSHIM_SRC"));
    cr_assert_eq(system(cmd), 0, "javac failed");
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/", srv.port);
    char *argv[] = {"java", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
                    "-cp", h_dir, "Parallel", url, "16", "65536", NULL};
    /* The control first: what the JVM itself costs in CPU, under this
     * build of the shim with nothing throttled. */
    h_run_control(&ctl, 30, argv);
    cr_assert_eq(h_server_wait(&srv, "", 16, 3), 16);
    h_server_stop(&srv);
    h_server_start(&srv, "http_count.py");
    snprintf(url, sizeof url, "http://127.0.0.1:%d/", srv.port);
    argv[6] = url;

    byte_budget("512KiB/s", "64KiB");
    double t0 = h_now();
    h_run(&r, true, 30, argv);
    cr_assert_eq(r.status, 0, "java under the shim: status %d", r.status);
    cr_expect_eq(h_out_long(&r, "ok", -1), 16, "%s", r.out);
    cr_expect_eq(h_out_long(&r, "errors", -1), 0, "%s", r.out);
    cr_assert_eq(h_server_wait(&srv, "", 16, 3), 16);
    double last;
    long long total = posted(16, &last);
    cr_expect_eq(total, 16 * 65536);
    /* Headers ride on the same budget; the burst went at once. */
    double ideal = (double)(total - 65536) / (512 * 1024);
    double span = last - t0;
    cr_expect_geq(span, 0.95 * ideal, "16 bodies in %.2f s, rate allows "
                  "%.2f s", span, ideal);
    /* The span counts the JVM's start: not later than the ideal with room
     * plus twice the whole unthrottled run (its start and its 1 MiB), what
     * this machine takes anyway. Threads that each sleep whole turns of
     * their own, not sharing the budget's, take several times the ideal. */
    cr_expect_lt(span, 1.15 * ideal + 2 * ctl.wall,
                 "16 bodies in %.2f s (ideal %.2f s, unthrottled %.2f s)",
                 span, ideal, ctl.wall);
    /* Bodies differ per request: each arrived intact. */
    char line[512], f[80];
    for (int i = 0; i < 16; i++) {
        h_server_line(&srv, "", i, line, sizeof line);
        cr_expect_str_eq(h_field(line, 1, f, sizeof f), "POST");
    }
    h_expect_no_spin(&r, &ctl, 0.2, "java");
}

Test(parallel, curl_parallel_transfers_share_the_byte_rate_without_spinning)
{
    /* 8 uploads of 128 KiB at once at 512 KiB/s: about 1.9 s. */
    byte_budget("512KiB/s", "64KiB");
    static char body[131072];
    for (size_t i = 0; i < sizeof body; i++)
        body[i] = (char)(i * 31 % 255);
    char file[300], data[320], url[64], sha[65];
    h_file_fill("body.bin", body, sizeof body, file, sizeof file);
    h_sha256_file(file, sha);
    snprintf(data, sizeof data, "@%s", file);
    snprintf(url, sizeof url, "http://127.0.0.1:%d/", srv.port);
    char *argv[40] = {"curl", "-Z", "--parallel-max", "8", "-sS",
                      "--data-binary", data};
    int k = 7;
    for (int i = 0; i < 8; i++) {
        argv[k++] = "-o";
        argv[k++] = "/dev/null";
        argv[k++] = url;
    }
    argv[k] = NULL;
    double t0 = h_now();
    h_run(&r, true, 30, argv);
    cr_assert_eq(r.status, 0, "curl: status %d", r.status);
    cr_assert_eq(h_server_wait(&srv, "", 8, 3), 8);
    double last;
    long long total = posted(8, &last);
    cr_expect_eq(total, 8 * 131072);
    char line[512], f[80];
    for (int i = 0; i < 8; i++)
        cr_expect_str_eq(h_field(h_server_line(&srv, "", i, line,
                                               sizeof line),
                                 3, f, sizeof f),
                         sha, "body %d arrived changed", i);
    double ideal = (double)(total - 65536) / (512 * 1024);
    double span = last - t0;
    cr_expect_geq(span, 0.95 * ideal, "8 bodies in %.2f s, rate allows "
                  "%.2f s", span, ideal);
    /* Not later than the ideal with room plus twice what the same curl
     * takes unthrottled on this machine (its start and its 1 MiB). */
    h_run_control(&ctl, 30, argv);
    cr_expect_lt(span, 1.15 * ideal + 2 * ctl.wall,
                 "8 bodies in %.2f s (ideal %.2f s, unthrottled %.2f s)", span,
                 ideal, ctl.wall);
    h_expect_no_spin(&r, &ctl, 0.1, "curl --parallel");
}

Test(parallel, one_upload_at_megabytes_per_second_sleeps_instead_of_spinning)
{
    /* At 4 MiB/s a byte comes every 240 ns: a partial grant of whatever
     * trickled in since the last call would turn the upload into a stream
     * of tiny sends that never sleep. */
    byte_budget("4MiB/s", "64KiB");
    static char body[8 << 20];
    for (size_t i = 0; i < sizeof body; i++)
        body[i] = (char)(i * 17 % 253);
    char file[300], data[320], url[64];
    h_file_fill("big.bin", body, sizeof body, file, sizeof file);
    snprintf(data, sizeof data, "@%s", file);
    snprintf(url, sizeof url, "http://127.0.0.1:%d/", srv.port);
    char *argv[] = {"curl", "-sS", "-o", "/dev/null", "--data-binary", data,
                    url, NULL};
    h_run(&r, true, 30, argv);
    cr_assert_eq(r.status, 0, "curl: status %d", r.status);
    cr_assert_eq(h_server_wait(&srv, "", 1, 3), 1);
    double last;
    cr_expect_eq(posted(1, &last), 8 << 20);
    double ideal = (double)((8 << 20) - 65536) / (4 << 20);
    cr_expect_geq(r.wall, 0.95 * ideal, "%.2f s", r.wall);
    /* Not later than the ideal with room plus twice what the same curl
     * takes unthrottled (its start and its 8 MiB): a grant that makes the
     * upload sleep a turn per small send falls far behind the rate. */
    h_run_control(&ctl, 30, argv);
    cr_expect_lt(r.wall, 1.15 * ideal + 2 * ctl.wall,
                 "%.2f s (ideal %.2f s, unthrottled %.2f s)", r.wall, ideal,
                 ctl.wall);
    h_expect_no_spin(&r, &ctl, 0.1, "curl");
}
