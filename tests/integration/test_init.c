/* Start-up and logging: a broken config, no config, RLSHIM_STRICT, and
 * the log lines (one per denial, rate-limited, in a file the shim opens
 * and closes per line). */
#include "harness.h"

static struct server srv;
static struct run r;
static char errlog[300];

static void setup(void)
{
    h_setup();
    h_server_start(&srv, "http_count.py");
    snprintf(errlog, sizeof errlog, "%s/stderr.log", h_dir);
}

static void teardown(void)
{
    h_server_stop(&srv);
    h_teardown();
}

TestSuite(init, .init = setup, .fini = teardown, .timeout = 30);

static void curl_get(void)
{
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/", srv.port);
    char *argv[] = {"curl", "-sS", "-o", "/dev/null", url, NULL};
    h_run(&r, true, 10, argv);
}

Test(init, passes_everything_and_says_one_line_for_a_broken_config)
{
    h_config_write("[default]\nconect = 1/h\n");
    h_no_strict = true;
    curl_get();
    curl_get();
    cr_expect_eq(r.status, 0);
    cr_expect_eq(h_server_wait(&srv, "", 2, 2), 2);
    cr_expect_eq(h_file_lines(errlog, ""), 2, "one line per process");
    cr_expect_eq(h_file_lines(errlog, "rlshim: "), 2);
    cr_expect_eq(h_file_lines(errlog, ":2: unknown key 'conect'"), 2);
}

Test(init, exits_78_at_start_for_a_broken_config_when_strict)
{
    h_config_write("[default]\nconnect = 0/s\n");
    curl_get();
    cr_expect_eq(r.status, 78);
    cr_expect_eq(h_file_lines(errlog, "rlshim: "), 1);
    usleep(200000);
    cr_expect_eq(h_server_count(&srv, ""), 0);
}

Test(init, passes_everything_silently_without_a_config)
{
    struct stat sb;
    if (stat("/usr/local/etc/rlshim.ini", &sb) == 0)
        cr_skip_test("a system config exists");
    h_no_config = true;
    curl_get();
    cr_expect_eq(r.status, 0);
    cr_expect_eq(h_file_lines(errlog, ""), 0);
}

Test(init, logs_one_line_per_denial_with_user_rule_call_and_destination)
{
    char log[300];
    snprintf(log, sizeof log, "%s/rlshim.log", h_dir);
    h_config_write("[rlshim]\nlog = %s\n"
                   "[default]\nconnect = 1/h\nto = 127.0.0.1:%d\n",
                   log, srv.port);
    curl_get();
    cr_expect_eq(r.status, 0);
    curl_get();
    curl_get();
    cr_expect_neq(r.status, 0);
    char want[128];
    snprintf(want, sizeof want, "denied connect fd ");
    cr_expect_eq(h_file_lines(log, want), 2);
    snprintf(want, sizeof want, "to 127.0.0.1:%d", srv.port);
    cr_expect_eq(h_file_lines(log, want), 2);
    snprintf(want, sizeof want, "(user %u, rule [default])", getuid());
    cr_expect_eq(h_file_lines(log, want), 2);
    cr_expect_eq(h_file_lines(errlog, "rlshim"), 0, "logged to stderr too");
}

Test(init, rate_limits_its_own_log_lines)
{
    char log[300];
    snprintf(log, sizeof log, "%s/rlshim.log", h_dir);
    h_config_write("[rlshim]\nlog = %s\n"
                   "[default]\nconnect = 1/h\nto = 127.0.0.1:%d\n",
                   log, srv.port);
    char bin[512], port[16];
    snprintf(port, sizeof port, "%d", srv.port);
    char *argv[] = {(char *)h_helper("client", bin, sizeof bin), "connects",
                    port, "200", NULL};
    h_run(&r, true, 10, argv);
    cr_assert_eq(r.status, 0);
    cr_assert_eq(h_out_long(&r, "denied", 0), 199);
    double secs = r.wall + 1;
    int lines = h_file_lines(log, "denied connect");
    cr_expect_geq(lines, 10);
    cr_expect_leq(lines, 10 * (int)(secs + 1), "%d lines in %.2f s", lines,
                  secs);
}

/* `connects 3` through env(1), with or without RLSHIM_KEY. */
static void connects_as(const char *key)
{
    char bin[512], port[16], kv[64];
    snprintf(port, sizeof port, "%d", srv.port);
    snprintf(kv, sizeof kv, "RLSHIM_KEY=%s", key != NULL ? key : "");
    char *with[] = {
        "env",      kv,   (char *)h_helper("client", bin, sizeof bin),
        "connects", port, "3",
        NULL};
    char *without[] = {
        "env",        "-u",
        "RLSHIM_KEY", (char *)h_helper("client", bin, sizeof bin),
        "connects",   port,
        "3",          NULL};
    char **argv = key != NULL ? with : without;
    h_run(&r, true, 10, argv);
    cr_assert_eq(r.status, 0, "status %d", r.status);
}

Test(init, picks_the_section_of_the_key_in_the_environment)
{
    h_config_write("[user:alice]\nconnect = 1/h\nto = 127.0.0.1:%d\n",
                   srv.port);
    connects_as("alice");
    cr_expect_eq(h_out_long(&r, "ok", -1), 1);
    cr_expect_eq(h_out_long(&r, "denied", -1), 2);
    connects_as("bob"); /* no section, no [default]: not throttled */
    cr_expect_eq(h_out_long(&r, "ok", -1), 3);
    connects_as(NULL);
    cr_expect_eq(h_out_long(&r, "ok", -1), 3);
}

/* `sh -c true`-like programs make no network call: what the shim must
 * still do for them at start-up, and at exit. */
static void run_true(const char *report)
{
    char kv[32];
    snprintf(kv, sizeof kv, "RLSHIM_REPORT=%s", report);
    char *argv[] = {"env", kv, "true", NULL};
    h_run(&r, true, 10, argv);
}

Test(init, exits_78_before_main_for_a_broken_config_when_strict)
{
    h_config_write("[default]\nconect = 1/h\n");
    run_true("0");
    cr_expect_eq(r.status, 78, "a program with no network call ran");
    cr_expect_eq(h_file_lines(errlog, ":2: unknown key 'conect'"), 1);
}

Test(init, reports_at_exit_a_process_that_made_no_network_call)
{
    h_config_write("[default]\nconnect = 1/h\nto = 127.0.0.1:%d\n",
                   srv.port);
    run_true("1");
    cr_expect_eq(r.status, 0);
    cr_expect_eq(h_file_lines(errlog, "rlshim: report: pid "), 2);
    cr_expect_eq(h_file_lines(errlog, "connect seen 0, allowed 0"), 1);
    cr_expect_eq(h_file_lines(errlog, "no call went to a destination"), 1);
}

/* SPEC §4: the config is read when the process first needs it. Under
 * strace, a program that never touches the network never opens it; the
 * same trace of a python connect does (so the trace would have seen it). */
static long config_opens(char *const prog[])
{
    char trace[300], *argv[16];
    snprintf(trace, sizeof trace, "%s/trace", h_dir);
    unlink(trace);
    int n = 0;
    const char *pre[] = {"strace", "-f", "-qq", "-e", "trace=open,openat",
                         "-o", trace};
    for (size_t i = 0; i < sizeof pre / sizeof pre[0]; i++)
        argv[n++] = (char *)pre[i];
    for (int i = 0; prog[i] != NULL && n < 15; i++)
        argv[n++] = prog[i];
    argv[n] = NULL;
    h_run(&r, true, 20, argv);
    cr_assert_eq(r.status, 0, "%s exited %d", prog[0], r.status);
    return h_file_lines(trace, h_config);
}

Test(init, a_program_without_network_never_reads_the_config)
{
    h_config_write("[default]\nconnect = 1/h\nto = 127.0.0.1:%d\n",
                   srv.port);
    h_no_strict = true;
    char *sh[] = {"sh", "-c", "true; ls / >/dev/null; echo hi", NULL};
    cr_expect_eq(config_opens(sh), 0, "the shell opened the config");
    /* python, not curl: curl hangs under a preloaded libasan. */
    char code[160];
    snprintf(code, sizeof code,
             "import socket; socket.create_connection(('127.0.0.1', %d))",
             srv.port);
    char *py[] = {"python3", "-c", code, NULL};
    cr_expect_geq(config_opens(py), 1, "python's connect read no config");
}

Test(init, a_broken_config_is_said_at_the_first_network_call_not_before)
{
    h_config_write("[default]\nconect = 1/h\n");
    h_no_strict = true;
    char *argv[] = {"sh", "-c", "true", NULL};
    h_run(&r, true, 10, argv);
    cr_expect_eq(r.status, 0);
    cr_expect_eq(h_file_lines(errlog, "rlshim: "), 0, "said at start-up");
    curl_get();
    cr_expect_eq(r.status, 0);
    cr_expect_eq(h_file_lines(errlog, ":2: unknown key 'conect'"), 1);
}

/* SPEC §4: a config read that fails for a passing reason (here EMFILE: the
 * first connect is made with the fd table full) is no broken config. That
 * connect passes through, and the next ones read the config again and are
 * throttled: 1 connect a minute, so of the 5 later connects 1 reaches the
 * server, 2 in all. Without strict (it reads the config at start-up). */
Test(init, a_config_read_failing_with_emfile_is_read_again_at_the_next_call)
{
    struct server sink;
    h_server_start(&sink, "sink.py");
    h_config_write("[default]\nconnect = 1/min\nconnect_burst = 1\n"
                   "to = 127.0.0.1:%d\n",
                   sink.port);
    h_no_strict = true;
    char helper[256], port[16];
    h_helper("fdfull_connect", helper, sizeof helper);
    snprintf(port, sizeof port, "%d", sink.port);
    char *argv[] = {helper, port, "5", NULL};
    h_run(&r, true, 20, argv);
    cr_assert_eq(r.status, 0, "%d: %s", r.status, r.out);
    cr_assert_eq(h_out_long(&r, "filled", -1), 1, "%s", r.out);
    cr_expect_eq(h_out_long(&r, "first", -1), 1, "%s", r.out);
    cr_expect_eq(h_out_long(&r, "ok", -1), 1, "%s", r.out);
    cr_expect_eq(h_out_long(&r, "denied", -1), 4, "%s", r.out);
    usleep(300 * 1000);
    cr_expect_eq(h_server_wait(&sink, "CONN", 2, 2), 2);
    cr_expect_eq(h_server_count(&sink, "CONN"), 2);
    cr_expect_eq(h_file_lines(errlog, "rlshim: "), 0,
                 "a passing error is no broken config");
    h_server_stop(&sink);
}
