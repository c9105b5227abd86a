/* The shim's own lines go to the stderr the process had when the shim
 * loaded (SPEC §3). A daemon that closed fd 2 and opened its data file
 * there (helpers/fd2data.c) gets none of them in that file: not the
 * config's error line, not the exit report, not a `log = stderr` line
 * (they go to syslog). The control, the same program with fd 2 left
 * alone, shows that each line was said. */
#include "harness.h"

static struct server sink;
static struct run r;
static char data[300], errlog[300];

static void setup(void)
{
    h_setup();
    h_server_start(&sink, "sink.py");
    snprintf(data, sizeof data, "%s/data", h_dir);
    snprintf(errlog, sizeof errlog, "%s/stderr.log", h_dir);
}

static void teardown(void)
{
    h_server_stop(&sink);
    h_teardown();
}

TestSuite(fd2, .init = setup, .fini = teardown, .timeout = 60);

static void fd2data(const char *mode, const char *state, const char *errname)
{
    char bin[512], port[16];
    snprintf(port, sizeof port, "%d", sink.port);
    char *argv[] = {(char *)h_helper("fd2data", bin, sizeof bin), (char *)mode,
                    data, port, "3", NULL};
    h_run_with(&r, true, 20, argv, h_config, state, errname);
    cr_assert_eq(r.status, 0, "fd2data %s: status %d\n%s", mode, r.status,
                 r.out);
}

/* The control (fd 2 kept, its own budget) says `line` `n` times on its
 * stderr; the daemon's data file then holds its two lines and nothing
 * else, and its stderr.log (where fd 2 pointed before it was closed) gets
 * nothing either. */
static void expect_only_program_data(const char *line, int n)
{
    char state[300], err[300];
    snprintf(state, sizeof state, "%s/control-state", h_dir);
    cr_assert_eq(mkdir(state, 0700), 0);
    fd2data("keep", state, "control.log");
    cr_assert_geq(h_out_long(&r, "fd", -1), 3);
    snprintf(err, sizeof err, "%s/control.log", h_dir);
    cr_expect_eq(h_file_lines(err, line), n, "the control said '%s'", line);

    fd2data("swap", h_state, "stderr.log");
    cr_expect_eq(h_out_long(&r, "fd", -1), 2, "the data file is not at 2");
    cr_expect_eq(h_file_lines(data, ""), 2, "%d lines in the data file",
                 h_file_lines(data, ""));
    cr_expect_eq(h_file_lines(data, "program data "), 2,
                 "the program's lines");
    cr_expect_eq(h_file_lines(data, "rlshim"), 0,
                 "the shim wrote %d lines into the program's data",
                 h_file_lines(data, "rlshim"));
    cr_expect_eq(h_file_lines(errlog, "rlshim"), 0,
                 "the shim wrote to a stderr the program had closed");
}

Test(fd2, a_config_error_line_never_lands_in_the_file_at_fd_2)
{
    /* Not strict: the broken line is said at the first connect, after the
     * program moved its data to fd 2. */
    h_no_strict = true;
    h_config_write("[default]\nconect = 1/h\n");
    expect_only_program_data("unknown key 'conect'", 1);
}

Test(fd2, the_exit_report_never_lands_in_the_file_at_fd_2)
{
    h_config_write("[rlshim]\nreport = yes\n"
                   "[default]\nconnect = 1/h\nto = 127.0.0.1:%d\n",
                   sink.port);
    expect_only_program_data("report: pid ", 1);
    cr_expect_eq(h_out_long(&r, "ok", -1), 1);
    cr_expect_eq(h_out_long(&r, "denied", -1), 2);
}

Test(fd2, log_stderr_lines_never_land_in_the_file_at_fd_2)
{
    h_config_write("[rlshim]\nlog = stderr\n"
                   "[default]\nconnect = 1/h\nto = 127.0.0.1:%d\n",
                   sink.port);
    expect_only_program_data("denied connect", 2);
    cr_expect_eq(h_out_long(&r, "ok", -1), 1);
    cr_expect_eq(h_out_long(&r, "denied", -1), 2);
}
