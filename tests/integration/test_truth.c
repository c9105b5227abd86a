/* What users read must be true: `rlshim stat` while a program runs counts
 * what it spent (not what its threads took ahead), a reset while it runs
 * wraps no counter, the exit report counts the same units, and a dry run
 * never sleeps. Real python clients against the sink, counted at the
 * server and read back through the real `rlshim stat`. */
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

TestSuite(truth, .init = setup, .fini = teardown, .timeout = 60);

/* One connection; sends one 100-byte message, prints `rlshim stat`,
 * resets, sends one more, prints stat again, then exits (and stat is read
 * once more by the test). Runs rlshim without the preload, by fork and
 * exec: subprocess's vfork child would close fds in the parent's memory
 * (the shim's fd marks), which is not what this test is about. */
static const char one_message_py[] =
    "import os, socket, sys\n"
    "port, rlshim, cfg = int(sys.argv[1]), sys.argv[2], sys.argv[3]\n"
    "env = dict(os.environ); env.pop('LD_PRELOAD', None)\n"
    "def cli(*a):\n"
    "    r, w = os.pipe()\n"
    "    pid = os.fork()\n"
    "    if pid == 0:\n"
    "        os.dup2(w, 1)\n"
    "        os.execve(rlshim, [rlshim, *a, '-c', cfg], env)\n"
    "    os.close(w)\n"
    "    out = b''\n"
    "    while True:\n"
    "        b = os.read(r, 65536)\n"
    "        if not b: break\n"
    "        out += b\n"
    "    os.close(r)\n"
    "    assert os.waitpid(pid, 0)[1] == 0\n"
    "    return out.decode()\n"
    "s = socket.create_connection(('127.0.0.1', port))\n"
    "s.sendall(b'x' * 100)\n"
    "print('STAT1', cli('stat', '--json').replace('\\n', ' '), flush=True)\n"
    "cli('reset')\n"
    "print('STAT2', cli('stat', '--json').replace('\\n', ' '), flush=True)\n"
    "s.sendall(b'y' * 100)\n"
    "print('STAT3', cli('stat', '--json').replace('\\n', ' '), flush=True)\n"
    "s.close()\n";

/* The number after "KEY": in the element of limit `limit` of the stat
 * line that starts with `tag` in `out`; -1 when absent. Parsed as
 * unsigned, so that a wrapped counter shows as one. */
static unsigned long long field(const char *out, const char *tag,
                                const char *limit, const char *key)
{
    const char *p = strstr(out, tag);
    if (p == NULL)
        return (unsigned long long)-1;
    const char *end = strchr(p, '\n');
    char want[64];
    snprintf(want, sizeof want, "\"limit\": \"%s\"", limit);
    p = strstr(p, want);
    if (p == NULL || (end != NULL && p > end))
        return (unsigned long long)-1;
    snprintf(want, sizeof want, "\"%s\": ", key);
    p = strstr(p, want);
    if (p == NULL || (end != NULL && p > end))
        return (unsigned long long)-1;
    return strtoull(p + strlen(want), NULL, 10);
}

static void stat_after(char *out, size_t len)
{
    char bin[512], state[300];
    snprintf(bin, sizeof bin, "%s/rlshim", h_env("RLSHIM_BUILD"));
    snprintf(state, sizeof state, "RLSHIM_STATE_DIR=%s", h_state);
    char *argv[] = {"env", state, bin, "stat", "-c", h_config, "--json", NULL};
    struct run s;
    h_run(&s, false, 10, argv);
    cr_assert_eq(s.status, 0, "rlshim stat: %s", s.out);
    /* One line, tagged like the ones the program printed. */
    snprintf(out, len, "STAT4 ");
    size_t n = strlen(out);
    for (const char *p = s.out; *p && n + 1 < len; p++)
        out[n++] = *p == '\n' ? ' ' : *p;
    out[n] = '\0';
}

Test(truth, stat_counts_one_message_as_one_send_and_a_reset_wraps_nothing)
{
    /* Deep budgets: the first send leases ahead (255 sends, 256 KiB). */
    h_config_write("[rlshim]\nreport = yes\n"
                   "[default]\nsend = 100000/s\nsend_bytes = 100000000/s\n"
                   "to = 127.0.0.1:%d\n",
                   srv.port);
    char port[16], bin[512];
    snprintf(port, sizeof port, "%d", srv.port);
    snprintf(bin, sizeof bin, "%s/rlshim", h_env("RLSHIM_BUILD"));
    char *argv[] = {"python3", "-c", (char *)one_message_py, port, bin,
                    h_config,  NULL};
    h_run(&r, true, 30, argv);
    cr_assert_eq(r.status, 0, "python: %s", r.out);
    cr_expect_eq(h_server_wait(&srv, "CONN", 1, 5.0), 1);
    /* While it runs: one message is one send and 100 bytes. */
    cr_expect_eq(field(r.out, "STAT1", "send", "allowed"), 1, "%s", r.out);
    cr_expect_eq(field(r.out, "STAT1", "send_bytes", "allowed"), 100, "%s",
                 r.out);
    /* (What `available` leaves out of a live lease is checked in the
     * unit test stat::counts_what_leases_spent_and_leaves_out_what_they_
     * hold: here the bucket refills 100 bytes in a microsecond.) */
    cr_expect_eq(field(r.out, "STAT2", "send", "allowed"), 0, "%s", r.out);
    cr_expect_eq(field(r.out, "STAT3", "send", "allowed"), 1, "%s", r.out);
    cr_expect_eq(field(r.out, "STAT3", "send_bytes", "allowed"), 100, "%s",
                 r.out);
    /* After its exit (its lease given back): still the truth, no wrap. */
    char after[4096];
    stat_after(after, sizeof after);
    cr_expect_eq(field(after, "STAT4", "send", "allowed"), 1, "%s", after);
    cr_expect_eq(field(after, "STAT4", "send_bytes", "allowed"), 100, "%s",
                 after);
    cr_expect_eq(field(after, "STAT4", "send_bytes", "available"), 100000000ull,
                 "the whole budget is back: %s", after);
    /* The exit report counts the same units: both messages. */
    cr_expect_eq(h_file_lines(errlog, "send seen 2, allowed 2, denied 0"), 1);
    cr_expect_eq(
        h_file_lines(errlog, "send_bytes seen 200, allowed 200, denied 0"), 1);
}

static const char three_sends_py[] =
    "import socket, sys, time\n"
    "s = socket.create_connection(('127.0.0.1', int(sys.argv[1])))\n"
    "t = time.monotonic()\n"
    "for i in range(3):\n"
    "    s.sendall(b'0123456789')\n"
    "print('elapsed_us=%d' % int((time.monotonic() - t) * 1e6))\n"
    "s.close()\n";

static long three_sends(const char *extra)
{
    h_config_write("[rlshim]\nlog = stderr\n"
                   "[default]\nsend = 1/s\non_deny = delay\n%s"
                   "to = 127.0.0.1:%d\n",
                   extra, srv.port);
    char port[16];
    snprintf(port, sizeof port, "%d", srv.port);
    char *argv[] = {"python3", "-c", (char *)three_sends_py, port, NULL};
    h_run(&r, true, 20, argv);
    cr_assert_eq(r.status, 0, "python: %s", r.out);
    return h_out_long(&r, "elapsed_us", -1);
}

Test(truth, dry_run_with_delay_never_sleeps_but_counts_and_logs)
{
    /* The control: the same three sends, throttled for real (2 s). */
    long real = three_sends("");
    struct run s;
    h_rlshim_cmd(&s, "reset");
    cr_assert_eq(s.status, 0, "%s", s.out);
    long dry = three_sends("dry_run = yes\n");
    cr_expect_geq(real, 1500000, "the control did not sleep: %ld us", real);
    cr_expect_lt(dry, real / 10, "dry run took %ld us, the control %ld us", dry,
                 real);
    cr_expect_eq(h_server_wait(&srv, "CONN", 2, 5.0), 2);
    cr_expect_eq(h_file_lines(errlog, "(dry run: not slept)"), 2);
    char after[4096];
    stat_after(after, sizeof after);
    cr_expect_eq(field(after, "STAT4", "send", "allowed"), 3, "%s", after);
    cr_expect_eq(field(after, "STAT4", "send", "delayed"), 2, "%s", after);
}
