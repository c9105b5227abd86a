/* The files the shim writes (SPEC §3): the decision log and `log = /path`
 * are used only when the path is a regular file. A FIFO (with or without
 * a reader), a symbolic link or a device at the path gets one stderr line
 * naming the path and what it is, and no log: the program finishes, is
 * throttled as before, and nothing reaches the FIFO, the link's target or
 * the device. The same run with a regular file at the path is the
 * control: it writes the lines the planted path would have taken. */
#include "harness.h"

#include <poll.h>

static struct server sink;
static struct run r;
static char errlog[300], logpath[300];

static void setup(void)
{
    h_setup();
    h_server_start(&sink, "sink.py");
    snprintf(errlog, sizeof errlog, "%s/stderr.log", h_dir);
    snprintf(logpath, sizeof logpath, "%s/logs/rlshim.log", h_dir);
    char dir[300];
    snprintf(dir, sizeof dir, "%s/logs", h_dir);
    cr_assert_eq(mkdir(dir, 0700), 0);
}

static void teardown(void)
{
    unsetenv("RLSHIM_DECISION_LOG");
    h_server_stop(&sink);
    h_teardown();
}

TestSuite(logpaths, .init = setup, .fini = teardown, .timeout = 60);

enum which { DECLOG, LOGFILE };
enum kind { FIFO_ALONE, FIFO_READ, SYMLINK, DEVICE };

/* Three connects under connect = 1/h: one allowed, two denied. The
 * decision log takes a line per decision (3), `log` one per denial (2). */
static void run_client(enum which w, const char *path, const char *state,
                       const char *errname)
{
    if (w == DECLOG) {
        setenv("RLSHIM_DECISION_LOG", path, 1);
        h_config_write("[default]\nconnect = 1/h\nto = 127.0.0.1:%d\n",
                       sink.port);
    } else {
        unsetenv("RLSHIM_DECISION_LOG");
        h_config_write("[rlshim]\nlog = %s\n"
                       "[default]\nconnect = 1/h\nto = 127.0.0.1:%d\n",
                       path, sink.port);
    }
    char bin[512], port[16];
    snprintf(port, sizeof port, "%d", sink.port);
    char *argv[] = {(char *)h_helper("client", bin, sizeof bin), "connects",
                    port, "3", NULL};
    /* A hang in open() is what a FIFO did: the timeout tells it. */
    h_run_with(&r, true, 10, argv, h_config, state, errname);
}

static void expect_throttled_as_before(const char *what)
{
    cr_expect_neq(r.status, -1, "%s: the program hung (killed after 10 s)",
                  what);
    cr_expect_eq(r.status, 0, "%s: status %d\n%s", what, r.status, r.out);
    cr_expect_eq(h_out_long(&r, "ok", -1), 1, "%s:\n%s", what, r.out);
    cr_expect_eq(h_out_long(&r, "denied", -1), 2, "%s:\n%s", what, r.out);
}

/* The control: a regular file at the same path takes the run's lines, and
 * stderr says nothing. */
static void control(enum which w)
{
    char path[300], err[300], state[300];
    snprintf(path, sizeof path, "%s/logs/control.log", h_dir);
    /* A budget of its own: the planted run starts as full. */
    snprintf(state, sizeof state, "%s/control-state", h_dir);
    cr_assert_eq(mkdir(state, 0700), 0);
    run_client(w, path, state, "control-stderr.log");
    expect_throttled_as_before("control");
    cr_expect_eq(h_file_lines(path, ""), w == DECLOG ? 3 : 2,
                 "the control's lines");
    snprintf(err, sizeof err, "%s/control-stderr.log", h_dir);
    cr_expect_eq(h_file_lines(err, "rlshim"), 0, "the control's stderr");
    struct stat st;
    cr_assert_eq(stat(path, &st), 0);
    cr_expect_eq(st.st_mode & 07777, 0600, "a log is created 0600: %o",
                 st.st_mode & 07777);
}

/* One stderr line that names the path and what it is. */
static void expect_one_line(const char *path, const char *what)
{
    cr_expect_eq(h_file_lines(errlog, "rlshim"), 1, "stderr lines");
    cr_expect_eq(h_file_lines(errlog, path), 1, "a line naming %s", path);
    cr_expect_eq(h_file_lines(errlog, what), 1, "a line saying '%s'", what);
}

/* Bytes waiting on fd (non-blocking), after a short wait for stragglers. */
static ssize_t pending(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, 200) <= 0)
        return 0;
    char buf[4096];
    ssize_t n = read(fd, buf, sizeof buf);
    return n > 0 ? n : 0;
}

static void planted(enum which w, enum kind k)
{
    control(w);
    const char *path = logpath;
    int reader = -1, master = -1, slave = -1;
    char target[300], before[65], after[65];
    switch (k) {
    case FIFO_ALONE:
    case FIFO_READ:
        cr_assert_eq(mkfifo(path, 0600), 0);
        /* With a reader, a non-blocking open would succeed: only the
         * check that it is not a regular file keeps the lines out. */
        if (k == FIFO_READ)
            reader = open(path, O_RDONLY | O_NONBLOCK);
        if (k == FIFO_READ)
            cr_assert_geq(reader, 0);
        break;
    case SYMLINK:
        h_file_fill("precious", "precious\n", 9, target, sizeof target);
        h_sha256_file(target, before);
        cr_assert_eq(symlink(target, path), 0);
        break;
    case DEVICE:
        /* A pty: what is written to its slave is read at the master, so
         * a line written through the device is seen. (A node of it made
         * with mknod elsewhere cannot be opened: devpts answers EIO.) */
        master = posix_openpt(O_RDWR | O_NOCTTY);
        cr_assert_geq(master, 0);
        cr_assert_eq(grantpt(master), 0);
        cr_assert_eq(unlockpt(master), 0);
        path = ptsname(master);
        cr_assert_not_null(path);
        slave = open(path, O_RDWR | O_NOCTTY);
        cr_assert_geq(slave, 0);
        break;
    }
    run_client(w, path, h_state, "stderr.log");
    expect_throttled_as_before("planted");
    switch (k) {
    case FIFO_ALONE:
        expect_one_line(path, "a FIFO");
        break;
    case FIFO_READ:
        expect_one_line(path, "a FIFO");
        cr_expect_eq(pending(reader), 0, "lines written into the FIFO");
        close(reader);
        break;
    case SYMLINK:
        expect_one_line(path, "a symbolic link");
        h_sha256_file(target, after);
        cr_expect_str_eq(after, before, "the link's target was written");
        break;
    case DEVICE:
        expect_one_line(path, "a character device");
        cr_expect_eq(pending(master), 0, "lines written into the device");
        close(slave);
        close(master);
        break;
    }
}

Test(logpaths, decision_log_at_a_fifo_without_reader_neither_hangs_nor_logs)
{
    planted(DECLOG, FIFO_ALONE);
}

Test(logpaths, decision_log_at_a_fifo_with_a_reader_sends_it_nothing)
{
    planted(DECLOG, FIFO_READ);
}

Test(logpaths, decision_log_at_a_symlink_leaves_its_target_unchanged)
{
    planted(DECLOG, SYMLINK);
}

Test(logpaths, decision_log_at_a_device_writes_nothing_into_it)
{
    planted(DECLOG, DEVICE);
}

Test(logpaths, log_file_at_a_fifo_without_reader_neither_hangs_nor_logs)
{
    planted(LOGFILE, FIFO_ALONE);
}

Test(logpaths, log_file_at_a_fifo_with_a_reader_sends_it_nothing)
{
    planted(LOGFILE, FIFO_READ);
}

Test(logpaths, log_file_at_a_symlink_leaves_its_target_unchanged)
{
    planted(LOGFILE, SYMLINK);
}

Test(logpaths, log_file_at_a_device_writes_nothing_into_it)
{
    planted(LOGFILE, DEVICE);
}

/* A `log` path that cannot be opened: the process says so once, however
 * many lines it had to write. */
Test(logpaths, an_unwritable_log_file_is_said_once_per_process)
{
    const char *path = "/nonexistent-rlshim-dir/rlshim.log";
    run_client(LOGFILE, path, h_state, "stderr.log");
    expect_throttled_as_before("unwritable");
    cr_expect_eq(h_file_lines(errlog, "rlshim"), 1, "stderr lines");
    cr_expect_eq(h_file_lines(errlog, path), 1, "a line naming %s", path);
}
