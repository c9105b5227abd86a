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

static struct run r, ctl;
/* The CPU and wall time of a test's curls, added up. */
static struct run sum, ctl_sum;

static void add(struct run *to, const struct run *one)
{
    to->cpu += one->cpu;
    to->wall += one->wall;
}

static void curl_get(double timeout)
{
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/", srv.port);
    char *argv[] = {"curl",       "-sS", "-o", "/dev/null",
                    "--max-time", "5",   url,  NULL};
    h_run(&r, true, timeout, argv);
    add(&sum, &r);
}

/* The control of the CPU the test's `n` curls spent: as many curls,
 * nothing throttled. Run after the server's log was read. */
static void expect_no_spin(int n)
{
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/", srv.port);
    char *argv[] = {"curl",       "-sS", "-o", "/dev/null",
                    "--max-time", "5",   url,  NULL};
    for (int i = 0; i < n; i++) {
        h_run_control(&ctl, 5, argv);
        add(&ctl_sum, &ctl);
    }
    h_expect_no_spin(&sum, &ctl_sum, 0.1, "curl");
}

TestSuite(curl, .init = setup, .fini = teardown, .timeout = 30);

Test(curl, lets_exactly_five_of_twelve_connects_through_in_fail_mode)
{
    /* A sliding window admits exactly 5 in any minute: the 12 curls fit
     * in it on any machine, however loaded (at 5/s they had to fit in one
     * second). The window's sliding is the unit tests', on a fake clock. */
    h_config_write("[default]\n"
                   "algorithm = sliding_window\n"
                   "connect = 5/min\n"
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
        /* Refused at once, not left to curl's --max-time (5 s): half of
         * that, whatever curl takes to start. */
        cr_expect_lt(r.wall, 0.5 * 5, "denied curl %d took %.2f s", i,
                     r.wall);
    }
    double span = h_now() - t0;
    cr_assert_lt(span, 60.0, "12 curls took %.2f s: inconclusive", span);
    cr_expect_eq(ok, 5, "%d curls succeeded", ok);
    cr_expect_eq(h_server_wait(&srv, "", 5, 1), 5);
    usleep(200 * 1000);
    cr_expect_eq(h_server_count(&srv, ""), 5, "a denied connect arrived");
    expect_no_spin(12);
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
    }
    double span = h_now() - t0;
    cr_assert_eq(h_server_wait(&srv, "", 12, 1), 12);
    /* One token every 200 ms after the first, which came after t0: the
     * i-th request reached the server 0.2 i s after t0 or later (the
     * server stamps on the same clock). A late stamp (a loaded machine)
     * only moves a request later; comparing neighbours' stamps instead
     * would fail on the next one's gap. */
    char line[512];
    for (int i = 0; i < 12; i++) {
        double t = atof(h_server_line(&srv, "", i, line, sizeof line));
        cr_expect_geq(t - t0, 0.2 * i - 0.001, "request %d at %.3f s", i,
                      t - t0);
    }
    cr_expect_geq(span, 2.2, "12 curls in %.2f s", span);
    expect_no_spin(12);
    /* No longer than the 11 turns and what the same 12 curls take
     * unthrottled in this run (a loaded machine starts curl slowly),
     * with room: a connect charged twice would add 2.2 s. */
    cr_expect_lt(span, 1.15 * 2.2 + 2 * ctl_sum.wall,
                 "12 curls in %.2f s; unthrottled %.2f s", span,
                 ctl_sum.wall);
}
