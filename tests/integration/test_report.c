/* The exit report (report = yes or RLSHIM_REPORT=1): one stderr line per
 * limit of the rule with what this process's calls met, so that a user
 * tells "not throttled" from "not intercepted". */
#include "harness.h"

static struct server srv;
static struct run r;
static char errlog[300];

static void setup(void)
{
    h_setup();
    h_server_start(&srv, "sink.py");
    snprintf(errlog, sizeof errlog, "%s/stderr.log", h_dir);
}

static void teardown(void)
{
    h_server_stop(&srv);
    h_teardown();
}

TestSuite(report, .init = setup, .fini = teardown, .timeout = 30);

static void connects(int n, bool env_report)
{
    char bin[300], port[16], count[16];
    snprintf(port, sizeof port, "%d", srv.port);
    snprintf(count, sizeof count, "%d", n);
    h_helper("client", bin, sizeof bin);
    char *plain[] = {bin, "connects", port, count, NULL};
    char *env[] = {"env", "RLSHIM_REPORT=1", bin, "connects", port, count,
                   NULL};
    h_run(&r, true, 10, env_report ? env : plain);
    cr_assert_eq(r.status, 0, "status %d: %s", r.status, r.out);
}

static void show_stderr(void)
{
    char cat[400];
    snprintf(cat, sizeof cat, "cat '%s' >&2", errlog);
    cr_expect_eq(system(cat), 0);
}

Test(report, says_per_limit_what_was_seen_allowed_denied_and_delayed)
{
    h_config_write("[rlshim]\nreport = yes\n"
                   "[default]\nconnect = 2/h\nsend = 10/s\n"
                   "to = 127.0.0.1:%d\n",
                   srv.port);
    connects(5, false);
    cr_expect_eq(h_out_long(&r, "ok", -1), 2);
    char want[160];
    snprintf(want, sizeof want,
             "rlshim: report: pid %s", ""); /* any pid */
    cr_expect_eq(h_file_lines(errlog, "rlshim: report: "), 2,
                 "one line per limit (connect, send)");
    snprintf(want, sizeof want,
             "user %u rule [default]: connect seen 5, allowed 2, "
             "denied 3, delayed 0\n",
             getuid());
    cr_expect_eq(h_file_lines(errlog, want), 1);
    cr_expect_eq(h_file_lines(errlog, "send seen 0, allowed 0, denied 0, "
                                      "delayed 0\n"),
                 1);
    if (h_file_lines(errlog, want) != 1)
        show_stderr();
}

Test(report, counts_delays_and_says_so_from_the_environment_too)
{
    /* 2/s: the client's three connects in a row wait 0.5 s each, the
     * second and third delayed however slowly a loaded machine runs it
     * (at 20/s a pause of 50 ms let one through undelayed). */
    h_config_write("[rlshim]\non_deny = delay\n"
                   "[default]\nconnect = 2/s\nconnect_burst = 1\n"
                   "to = 127.0.0.1:%d\n",
                   srv.port);
    connects(3, true);
    cr_expect_eq(h_out_long(&r, "ok", -1), 3);
    cr_expect_eq(h_file_lines(errlog, "connect seen 3, allowed 3, "
                                      "denied 0, delayed 2\n"),
                 1);
    if (h_file_lines(errlog, "delayed 2\n") != 1)
        show_stderr();
}

Test(report, says_nothing_was_throttled_when_no_call_matched)
{
    /* The rule covers another port: the program's connects pass. */
    h_config_write("[rlshim]\nreport = yes\n"
                   "[default]\nconnect = 1/h\nto = 127.0.0.1:%d\n",
                   srv.port == 65535 ? 1 : srv.port + 1);
    connects(3, false);
    cr_expect_eq(h_out_long(&r, "ok", -1), 3);
    cr_expect_eq(h_file_lines(errlog, "connect seen 0, allowed 0"), 1);
    cr_expect_eq(h_file_lines(errlog, "no call went to a destination of "
                                      "the rule: nothing was throttled"),
                 1);
}

Test(report, says_which_user_has_no_section)
{
    h_config_write("[rlshim]\nreport = yes\n"
                   "[user:somebody-else]\nconnect = 1/h\n");
    connects(2, false);
    cr_expect_eq(h_out_long(&r, "ok", -1), 2);
    cr_expect_eq(h_file_lines(errlog, "no section of "), 1);
    cr_expect_eq(h_file_lines(errlog, "nothing was throttled"), 1);
}

Test(report, says_there_is_no_config_when_asked_without_one)
{
    struct stat sb;
    if (stat("/etc/rlshim.ini", &sb) == 0)
        h_skip("a system config exists");
    h_no_config = true;
    connects(1, true);
    cr_expect_eq(h_file_lines(errlog, "rlshim: report: "), 1);
    cr_expect_eq(h_file_lines(errlog, "no config (RLSHIM_CONFIG unset"), 1);
}

Test(report, stays_quiet_when_not_asked)
{
    h_config_write("[default]\nconnect = 2/h\nto = 127.0.0.1:%d\n",
                   srv.port);
    connects(3, false);
    cr_expect_eq(h_file_lines(errlog, "report"), 0);
}
