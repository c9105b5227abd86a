/* curl under the shim: connects limited per second, fail and delay modes,
 * measured at the server. */
#include "harness.h"

static struct server srv;

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

static struct run r;

static void curl_get(double timeout)
{
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/", srv.port);
    char *argv[] = {"curl",       "-sS", "-o", "/dev/null",
                    "--max-time", "5",   url,  NULL};
    h_run(&r, true, timeout, argv);
}

TestSuite(curl, .init = setup, .fini = teardown, .timeout = 30);

Test(curl, lets_exactly_five_of_twelve_connects_through_in_fail_mode)
{
    h_config_write("[default]\n"
                   "algorithm = sliding_window\n"
                   "connect = 5/s\n"
                   "to = 127.0.0.1:%d\n",
                   srv.port);
    double t0 = h_now();
    int ok = 0;
    for (int i = 0; i < 12; i++) {
        curl_get(5);
        if (r.status == 0) {
            ok++;
            continue;
        }
        cr_expect_neq(r.status, -1, "curl %d hung", i);
        cr_expect_lt(r.wall, 1.0, "denied curl %d took %.2f s", i, r.wall);
        cr_expect_lt(r.cpu, 0.5, "denied curl %d spun: cpu %.2f s", i, r.cpu);
    }
    double span = h_now() - t0;
    /* A sliding window admits exactly 5 in any second: the test means
     * something only if all 12 ran inside that second. */
    cr_assert_lt(span, 1.0, "12 curls took %.2f s: inconclusive", span);
    cr_expect_eq(ok, 5, "%d curls succeeded", ok);
    cr_expect_eq(h_server_wait(&srv, "", 5, 1), 5);
    usleep(1100 * 1000); /* the window has moved on */
    curl_get(5);
    cr_expect_eq(r.status, 0, "curl after 1 s: status %d", r.status);
    cr_expect_eq(h_server_wait(&srv, "", 6, 1), 6);
}

Test(curl, spaces_twelve_connects_at_the_rate_in_delay_mode)
{
    h_config_write("[rlshim]\n"
                   "on_deny = delay\n"
                   "[default]\n"
                   "connect = 5/s\n"
                   "connect_burst = 1\n"
                   "to = 127.0.0.1:%d\n",
                   srv.port);
    double t0 = h_now();
    for (int i = 0; i < 12; i++) {
        curl_get(5);
        cr_expect_eq(r.status, 0, "curl %d: status %d", i, r.status);
        cr_expect_lt(r.cpu, 0.5, "curl %d spun: cpu %.2f s", i, r.cpu);
    }
    double span = h_now() - t0;
    cr_assert_eq(h_server_wait(&srv, "", 12, 1), 12);
    /* One token every 200 ms after the first: 11 gaps of 0.2 s. */
    double prev = 0;
    char line[512];
    for (int i = 0; i < 12; i++) {
        double t = atof(h_server_line(&srv, "", i, line, sizeof line));
        if (i > 0)
            cr_expect_geq(t - prev, 0.17, "gap %d was %.3f s", i, t - prev);
        prev = t;
    }
    cr_expect_geq(span, 2.15, "12 curls in %.2f s", span);
    cr_expect_lt(span, 3.5, "12 curls in %.2f s", span);
}
