/* The decision log of real runs: every call of every process in one file,
 * one line per call with leases off, and a program that sweeps its fds
 * with close_range neither loses the log nor gets lines in its own files. */
#include "harness.h"

static struct server sink;
static struct run r;
static char logpath[300];

static void setup(void)
{
    h_setup();
    h_server_start(&sink, "sink.py");
    snprintf(logpath, sizeof logpath, "%s/decisions.jsonl", h_dir);
    setenv("RLSHIM_DECISION_LOG", logpath, 1);
}

static void teardown(void)
{
    unsetenv("RLSHIM_DECISION_LOG");
    h_server_stop(&sink);
    h_teardown();
}

TestSuite(declog, .init = setup, .fini = teardown, .timeout = 30);

static void client(const char *mode, const char *a1, const char *a2)
{
    char bin[512], port[16];
    snprintf(port, sizeof port, "%d", sink.port);
    char *argv[] = {(char *)h_helper("client", bin, sizeof bin),
                    (char *)mode, port, (char *)a1, (char *)a2, NULL};
    h_run(&r, true, 20, argv);
    cr_assert_eq(r.status, 0, "client %s: status %d\n%s", mode, r.status,
                 r.out);
}

static long out(const char *key)
{
    long v = h_out_long(&r, key, -999);
    cr_assert_neq(v, -999, "no %s in:\n%s", key, r.out);
    return v;
}

/* rlshim verify LOG ARGS: its exit status. */
static int verify(const char *limit, const char *more)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s/rlshim verify %s --limit %s %s >/dev/null",
             h_env("RLSHIM_BUILD"), logpath, limit, more ? more : "");
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* A budget far from binding would lease tokens to the thread and decide
 * most sends with nothing logged; with the log on, each call is a line. */
Test(declog, each_send_is_a_line_when_the_log_is_on)
{
    h_config_write("[default]\nsend = 100000/s\nto = 127.0.0.1:%d\n",
                   sink.port);
    client("sends", "300", "10");
    cr_expect_eq(out("calls_ok"), 300);
    char port[48];
    snprintf(port, sizeof port, "\"port\":%d}", sink.port);
    cr_expect_eq(h_file_lines(logpath, "\"limit\":\"send\""), 300);
    cr_expect_eq(h_file_lines(logpath, "\"verdict\":\"allow\""), 300);
    cr_expect_eq(h_file_lines(logpath, port), 300);
    /* No connect limit: connects are not decisions, not lines. */
    cr_expect_eq(h_file_lines(logpath, "\"call\":\"connect\""), 0);
    cr_expect_eq(h_file_lines(logpath, "\"dest\":{\"name\":\"127.0.0.1\""),
                 300);
    cr_expect_eq(verify("send=100000/s", NULL), 0);
}

/* Fail mode: the log has what was denied, and verify agrees with the
 * server about what was allowed. */
Test(declog, denials_are_logged_and_verify_agrees)
{
    h_config_write("[default]\nconnect = 2/h\nconnect_burst = 2\n"
                   "to = 127.0.0.1:%d\n",
                   sink.port);
    client("connects", "5", NULL);
    cr_expect_eq(out("ok"), 2);
    cr_expect_eq(h_file_lines(logpath, "\"verdict\":\"allow\""), 2);
    cr_expect_eq(h_file_lines(logpath, "\"verdict\":\"deny\""), 3);
    cr_expect_eq(verify("connect=2/h,burst=2", NULL), 0);
    cr_expect_eq(verify("connect=1/h,burst=1", NULL), 1);
}

/* close_range(3, ~0) in the program, then more calls: still logged, and
 * the lines land in the log, not in a file the program opened since. */
Test(declog, a_close_range_sweep_does_not_break_the_log)
{
    h_config_write("[default]\nsend = 1000/s\nto = 127.0.0.1:%d\n",
                   sink.port);
    client("closerange", NULL, NULL);
    cr_expect_eq(out("sent"), 13);
    cr_expect_eq(h_file_lines(logpath, "\"limit\":\"send\""), 4);
    cr_expect_eq(h_file_lines(logpath, "\"units\":1,"), 4);
}

/* Parent and child write into one log, each line whole. */
Test(declog, parent_and_child_share_one_log)
{
    h_config_write("[default]\nsend = 3/h\nsend_burst = 3\n"
                   "to = 127.0.0.1:%d\n",
                   sink.port);
    client("fork", NULL, NULL);
    cr_expect_eq(out("child_ok") + out("parent_ok"), 3);
    cr_expect_eq(h_file_lines(logpath, "\"limit\":\"send\""), 4);
    cr_expect_eq(h_file_lines(logpath, "\"verdict\":\"deny\""), 1);
    char cmd[600];
    snprintf(cmd, sizeof cmd,
             "python3 -c 'import json,sys; p=set(json.loads(l)[\"pid\"] for l "
             "in open(sys.argv[1])); sys.exit(0 if len(p) == 2 else 1)' %s",
             logpath);
    cr_expect_eq(system(cmd), 0, "lines of two pids");
}

/* RLSHIM_DECISION_LOG wins over the config's decision_log; without it the
 * config's is used. */
Test(declog, the_environment_wins_over_the_config)
{
    char cfglog[300];
    snprintf(cfglog, sizeof cfglog, "%s/from-config.jsonl", h_dir);
    h_config_write("[rlshim]\ndecision_log = %s\n[default]\nconnect = 100/s\n"
                   "to = 127.0.0.1:%d\n",
                   cfglog, sink.port);
    client("connects", "3", NULL);
    cr_expect_eq(h_file_lines(logpath, "\"call\":\"connect\""), 3);
    cr_expect_eq(access(cfglog, F_OK), -1, "the config's log was written");
    unsetenv("RLSHIM_DECISION_LOG");
    client("connects", "2", NULL);
    cr_expect_eq(h_file_lines(cfglog, "\"call\":\"connect\""), 2);
    cr_expect_eq(h_file_lines(logpath, "\"call\":\"connect\""), 3);
}

/* A log that cannot be written: one stderr line, the program goes on and
 * is throttled as before. */
Test(declog, an_unwritable_log_is_one_stderr_line_and_the_run_goes_on)
{
    setenv("RLSHIM_DECISION_LOG", "/nonexistent-rlshim-dir/log.jsonl", 1);
    h_config_write("[default]\nconnect = 2/h\nconnect_burst = 2\n"
                   "to = 127.0.0.1:%d\n",
                   sink.port);
    client("connects", "5", NULL);
    cr_expect_eq(out("ok"), 2);
    cr_expect_eq(out("denied"), 3);
    char errlog[300];
    snprintf(errlog, sizeof errlog, "%s/stderr.log", h_dir);
    cr_expect_eq(h_file_lines(errlog, "decision_log"), 1);
}
