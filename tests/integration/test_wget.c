/* wget -T leaves a sleeping connect by siglongjmp from SIGALRM: the shim
 * must hold nothing across that sleep, so the next attempt in the same
 * process (and thread) is throttled again, not passed through. */
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

TestSuite(wget, .init = setup, .fini = teardown, .timeout = 30);

Test(wget, is_throttled_again_after_its_timeout_escapes_a_delayed_connect)
{
    h_config_write("[rlshim]\non_deny = delay\nmax_delay = 30s\n"
                   "[default]\nconnect = 6/min\nconnect_burst = 1\n"
                   "to = 127.0.0.1:%d\n",
                   srv.port);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/", srv.port);
    /* Spend the one token: the next connect waits 10 s, then 20 s. */
    char *curl[] = {"curl", "-sS", "-o", "/dev/null", url, NULL};
    h_run(&r, true, 10, curl);
    cr_assert_eq(r.status, 0);
    cr_assert_eq(h_server_wait(&srv, "", 1, 2), 1);
    char *wget[] = {"wget", "-q", "-O", "/dev/null",     "-T",
                    "1",    "-t", "2",  "--waitretry=0", url,
                    NULL};
    h_run(&r, true, 15, wget);
    cr_expect_eq(r.status, 4, "wget: status %d", r.status); /* network */
    /* Two tries of 1 s: a connect that slept on past SIGALRM would wait
     * its turn, 10 s; half of that. */
    cr_expect_lt(r.wall, 0.5 * 10, "wget took %.2f s", r.wall);
    usleep(300000);
    cr_expect_eq(h_server_count(&srv, ""), 1,
                 "a retry went through unthrottled");
    /* The same wget, nothing throttled: its first try gets through. */
    h_run_control(&ctl, 15, wget);
    h_expect_no_spin(&r, &ctl, 0.1, "wget");
}
