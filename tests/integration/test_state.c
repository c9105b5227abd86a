/* test_state.c — the state segment as real programs meet it: a full state
 * dir, two configs in use at once, and `rlshim reset` in the middle of a
 * storm. Measured at the sink. */
#include "harness.h"

#include <math.h>

TestSuite(state, .init = h_setup, .fini = h_teardown, .timeout = 60);

static void need_root_unshare(void)
{
    if (geteuid() != 0 || !h_have("unshare"))
        cr_skip_test("a private tmpfs needs root and unshare(1)");
}

/* A python client whose state dir is a full 256 KiB tmpfs, mounted in a
 * mount namespace of its own: it must not die of SIGBUS, must say so in
 * one stderr line, keep its budgets in its own memory, and leave no
 * temporary file behind. */
Test(state, a_full_state_dir_gives_one_line_and_local_budgets_never_sigbus)
{
    need_root_unshare();
    struct server sink;
    h_server_start(&sink, "sink.py");
    h_config_write("[default]\nconnect = 5/s\nto = 127.0.0.1:%d\n", sink.port);
    char script[2048], mnt[300];
    snprintf(mnt, sizeof mnt, "%s/full", h_dir);
    cr_assert_eq(mkdir(mnt, 0700), 0);
    snprintf(
        script, sizeof script,
        "P=\"$LD_PRELOAD\"; unset LD_PRELOAD\n"
        "mount -t tmpfs -o size=256k tmpfs '%s' || exit 97\n"
        "dd if=/dev/zero of='%s/fill' bs=4k 2>/dev/null\n"
        /* The interpreter itself, not a wrapper script (pyenv's execs a
         * dozen programs, each of which would say its own line). */
        "PY=/usr/bin/python3; [ -x $PY ] || PY=python3\n"
        "LD_PRELOAD=\"$P\" RLSHIM_STATE_DIR='%s' $PY -c '\n"
        "import socket\n"
        "for i in range(3):\n"
        "    s = socket.create_connection((\"127.0.0.1\", %d))\n"
        "    s.sendall(b\"x\" * 100)\n"
        "    s.close()\n"
        "print(\"sent\")'\n"
        "echo rc=$?\n"
        "echo left=$(ls -A '%s' | grep -vx fill | wc -l)\n",
        mnt, mnt, mnt, sink.port, mnt);
    char *argv[] = {"unshare", "-m", "sh", "-c", script, NULL};
    struct run r;
    h_run(&r, true, 20, argv);
    cr_assert_eq(r.status, 0, "%s", r.out);
    cr_assert_neq(h_out_long(&r, "rc", -1), 97, "the tmpfs was not mounted");
    cr_assert_eq(h_out_long(&r, "rc", -1), 0, "no SIGBUS (135): %s", r.out);
    cr_assert_not_null(strstr(r.out, "sent\n"), "%s", r.out);
    cr_assert_eq(h_out_long(&r, "left", -1), 0, "no temporary file: %s",
                 r.out);
    char errlog[300];
    snprintf(errlog, sizeof errlog, "%s/stderr.log", h_dir);
    cr_assert_eq(h_file_lines(errlog, ""), 1, "one stderr line");
    cr_assert_eq(h_file_lines(errlog, "kept in this process only"), 1);
    cr_assert_eq(h_server_wait(&sink, "CONN", 3, 2), 3);
    h_server_stop(&sink);
}

/* Server-side first-byte times of every connection, sorted. */
static size_t conn_times(const struct server *s, double *t, size_t max)
{
    FILE *f = fopen(s->log, "r");
    char line[512];
    size_t n = 0;
    cr_assert_not_null(f);
    while (n < max && fgets(line, sizeof line, f) != NULL)
        if (sscanf(line, "CONN %lf", &t[n]) == 1)
            n++;
    fclose(f);
    for (size_t i = 1; i < n; i++)
        for (size_t j = i; j > 0 && t[j - 1] > t[j]; j--) {
            double x = t[j];
            t[j] = t[j - 1];
            t[j - 1] = x;
        }
    return n;
}

/* Two programs of one uid with different configs, each started afresh 20
 * times over 5 s, interleaved: each config keeps its own segment, so each
 * budget is exact (a config that replaced the other's segment would give
 * it a full bucket at every start). */
Test(state, two_configs_in_use_at_once_keep_exact_budgets, .timeout = 60)
{
    struct server a, b;
    h_server_start(&a, "sink.py");
    h_server_start(&b, "sink.py");
    char cfg_b[300], loop[256];
    h_config_write("[default]\nconnect = 4/s\nto = 127.0.0.1:%d\n", a.port);
    snprintf(cfg_b, sizeof cfg_b, "%s/b.ini", h_dir);
    FILE *f = fopen(cfg_b, "w");
    cr_assert_not_null(f);
    fprintf(f, "[default]\nconnect = 2/s\nto = 127.0.0.1:%d\n", b.port);
    fclose(f);
    h_helper("connect_loop", loop, sizeof loop);
    char script[2048];
    snprintf(script, sizeof script,
             "for i in $(seq 20); do '%s' %d 0.25 2000 >/dev/null; done &\n"
             "for i in $(seq 20); do RLSHIM_CONFIG='%s' '%s' %d 0.25 2000 "
             ">/dev/null; done &\n"
             "wait\n",
             loop, a.port, cfg_b, loop, b.port);
    char *argv[] = {"sh", "-c", script, NULL};
    struct run r;
    h_run(&r, true, 40, argv);
    cr_assert_eq(r.status, 0, "%s", r.out);
    usleep(300000);
    static double t[4096];
    const struct {
        struct server *s;
        double rate, burst;
    } cases[] = {{&a, 4, 4}, {&b, 2, 2}};
    for (int c = 0; c < 2; c++) {
        size_t n = conn_times(cases[c].s, t, 4096);
        cr_assert_geq(n, 2);
        double span = t[n - 1] - t[0];
        double bound = cases[c].burst + cases[c].rate * span;
        cr_assert_geq(span, 4.0, "the clients ran for 5 s");
        /* Never more than the bucket gives (+1: the sink's clock reads
         * a few ms after the decision), and close to it. */
        cr_assert_leq((double)n, bound + 1, "config %d: %zu in %.2f s", c, n,
                      span);
        cr_assert_geq((double)n, 0.9 * cases[c].rate * span,
                      "config %d: %zu in %.2f s", c, n, span);
    }
    h_server_stop(&a);
    h_server_stop(&b);
}

/* Four processes storm one sliding window of 5/s for 4 s; `rlshim reset`
 * runs in the middle. After the reset a window may start full again, but
 * no window that starts at or after the reset ever holds more than 5, and
 * the window goes on admitting (its lock is not wedged). */
Test(state, a_reset_during_a_storm_never_lets_a_window_admit_more_than_n,
     .timeout = 60)
{
    struct server sink;
    h_server_start(&sink, "sink.py");
    h_config_write("[default]\nalgorithm = sliding_window\nconnect = 5/s\n"
                   "to = 127.0.0.1:%d\n",
                   sink.port);
    char loop[256];
    h_helper("connect_loop", loop, sizeof loop);
    char script[1024];
    snprintf(script, sizeof script,
             "for i in 1 2 3 4; do '%s' %d 4 0 >/dev/null & done; wait\n",
             loop, sink.port);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        char *argv[] = {"sh", "-c", script, NULL};
        struct run r;
        h_run(&r, true, 30, argv);
        _exit(r.status == 0 ? 0 : 1);
    }
    usleep(1500000);
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "RLSHIM_STATE_DIR='%s' '%s/rlshim' reset -c '%s' >/dev/null",
             h_state, h_env("RLSHIM_BUILD"), h_config);
    double reset_at = h_now();
    int rs = system(cmd);
    double reset_done = h_now();
    int status;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "storm failed");
    cr_assert_eq(rs, 0, "rlshim reset took every window's lock");
    usleep(300000);
    static double t[8192];
    size_t n = conn_times(&sink, t, 8192);
    /* Windows from the end of the reset on (a window that starts while it
     * runs may hold units from both sides): at most 5 in any 1 s, less
     * 30 ms for the sink's clock reading a little after each decision. */
    size_t first = 0, after = 0;
    while (first < n && t[first] < reset_done)
        first++;
    for (size_t i = first; i + 5 < n; i++)
        cr_assert_geq(t[i + 5] - t[i], 0.97,
                      "6 connections within %.3f s after the reset",
                      t[i + 5] - t[i]);
    for (size_t i = first; i < n; i++)
        after++;
    /* Not wedged: it went on at its rate (about 2 s of storm were left). */
    cr_assert_geq(after, 5, "%zu admitted after the reset", after);
    (void)reset_at;
    h_server_stop(&sink);
}

/* ---- the sweep never removes live state (SPEC §5) ---------------------- */

/* A config of other budgets (so another segment) in b.ini: its first
 * connect, to `port`, makes its segment and so sweeps the uid's others. */
static void sweep_by_another_config(int port)
{
    char cfg_b[300], code[200];
    snprintf(cfg_b, sizeof cfg_b, "%s/b.ini", h_dir);
    FILE *f = fopen(cfg_b, "w");
    cr_assert_not_null(f);
    fprintf(f, "[default]\nconnect = 7/s\n");
    fclose(f);
    snprintf(code, sizeof code,
             "import socket; socket.create_connection(('127.0.0.1', %d))"
             ".close(); print('swept=1')",
             port);
    char *argv[] = {"python3", "-c", code, NULL};
    struct run b;
    h_run_with(&b, true, 20, argv, cfg_b, h_state, "stderr.log");
    cr_assert_eq(b.status, 0, "%s", b.out);
    cr_assert_eq(h_out_long(&b, "swept", 0), 1);
}

/* One plain GET of `path` with http.client: "status=N", or "error=ERRNO"
 * when the shim refused it. */
static void get_once(struct run *r, int port, const char *path)
{
    char code[600];
    snprintf(code, sizeof code,
             "import http.client\n"
             "c = http.client.HTTPConnection('127.0.0.1', %d, timeout=20)\n"
             "try:\n"
             "    c.request('GET', '%s'); a = c.getresponse(); a.read()\n"
             "    print('status=%%d' %% a.status)\n"
             "except OSError as e:\n"
             "    print('error=%%d' %% e.errno)\n",
             port, path);
    char *argv[] = {"python3", "-c", code, NULL};
    h_run(r, true, 30, argv);
    cr_assert_eq(r->status, 0, "%s", r->out);
}

/* A 429 with Retry-After: 600 pauses the user's requests. Its process
 * exits; the segment then goes unused for longer than its longest period
 * (100 ms) and the sweep's slack (1 s), and a process of another config
 * makes its own segment. The pause still holds: the next request of the
 * first config fails at once and never reaches the server. */
Test(state, a_sweep_by_another_config_keeps_a_running_pause, .timeout = 60)
{
    struct server st, sink;
    h_server_start(&st, "http_status.py");
    h_server_start(&sink, "sink.py");
    h_config_write("[rlshim]\nerrno = ETIMEDOUT\n[default]\nrequest = 10/s\n"
                   "request_burst = 5\non_deny = fail\n");
    struct run a;
    get_once(&a, st.port, "/s/429/600");
    cr_assert_eq(h_out_long(&a, "status", 0), 429, "%s", a.out);
    usleep(2500 * 1000); /* unused for 2.5 s: past 100 ms and 1 s */
    sweep_by_another_config(sink.port);
    get_once(&a, st.port, "/ok");
    cr_expect_eq(h_out_long(&a, "status", 0), 0, "the request went: %s",
                 a.out);
    cr_expect_eq(h_out_long(&a, "error", 0), ETIMEDOUT, "%s", a.out);
    usleep(300 * 1000);
    cr_expect_eq(h_server_count(&st, "REQ"), 1,
                 "a request reached the server during the pause");
    h_server_stop(&sink);
    h_server_stop(&st);
}

/* A process holds the one connection max_open allows, idle; its segment
 * goes unused for longer than its longest period and the slack, and a
 * process of another config makes its own segment. The connection is
 * still counted: a second connect of the first config, from another
 * process, is refused, and the server never holds two. */
Test(state, a_sweep_by_another_config_keeps_a_held_max_open_count,
     .timeout = 60)
{
    struct server hold, sink;
    h_server_start(&hold, "hold.py");
    h_server_start(&sink, "sink.py");
    h_config_write("[default]\nconnect = 10/s\nmax_open = 1\n");
    char cfg_b[300], script[2000];
    snprintf(cfg_b, sizeof cfg_b, "%s/b.ini", h_dir);
    FILE *f = fopen(cfg_b, "w");
    cr_assert_not_null(f);
    fprintf(f, "[default]\nconnect = 7/s\n");
    fclose(f);
    snprintf(script, sizeof script,
             "python3 -c \"import socket, time\n"
             "s = socket.create_connection(('127.0.0.1', %d))\n"
             "print('held=1', flush=True)\n"
             "time.sleep(60)\" & h=$!\n"
             "sleep 2.5\n" /* unused for 2.5 s: past 100 ms and 1 s */
             "RLSHIM_CONFIG='%s' python3 -c \"import socket\n"
             "socket.create_connection(('127.0.0.1', %d)).close()\n"
             "print('swept=1')\"\n"
             "python3 -c \"import socket\n"
             "try:\n"
             "    socket.create_connection(('127.0.0.1', %d)); print('second=1')\n"
             "except OSError:\n"
             "    print('second=0')\"\n"
             "kill $h\n",
             hold.port, cfg_b, sink.port, hold.port);
    char *argv[] = {"sh", "-c", script, NULL};
    struct run r;
    h_run(&r, true, 50, argv);
    cr_assert_eq(r.status, 0, "%s", r.out);
    cr_assert_eq(h_out_long(&r, "held", 0), 1, "%s", r.out);
    cr_assert_eq(h_out_long(&r, "swept", 0), 1, "%s", r.out);
    cr_expect_eq(h_out_long(&r, "second", -1), 0,
                 "a second connection while one is held: %s", r.out);
    usleep(300 * 1000);
    char line[512];
    int most = 0, n;
    for (int i = 0;; i++) {
        h_server_line(&hold, "", i, line, sizeof line);
        if (line[0] == '\0')
            break;
        if (sscanf(line, "%*f open %d", &n) == 1 && n > most)
            most = n;
    }
    cr_expect_eq(most, 1, "the server held %d at once", most);
    h_server_stop(&sink);
    h_server_stop(&hold);
}

/* ---- a squatted segment name (SPEC §5) --------------------------------- */

/* Three connects of one process; "ok=N" of them went. */
static void three_connects(struct run *r, int port)
{
    char code[400];
    snprintf(code, sizeof code,
             "import socket\n"
             "ok = 0\n"
             "for i in range(3):\n"
             "    try:\n"
             "        socket.create_connection(('127.0.0.1', %d)).close()\n"
             "        ok += 1\n"
             "    except OSError:\n"
             "        pass\n"
             "print('ok=%%d' %% ok)\n",
             port);
    char *argv[] = {"python3", "-c", code, NULL};
    h_run(r, true, 30, argv);
    cr_assert_eq(r->status, 0, "%s", r->out);
}

/* Another user made an empty file at the segment's name first (its name
 * is the same for every uid's config, and predictable). Two processes of
 * the user, one after the other, still share one budget of 1 connect a
 * minute: 1 of their 6 connects reaches the server, and neither says its
 * budgets are its own. */
Test(state, two_processes_share_one_budget_despite_a_squatted_name,
     .timeout = 60)
{
    if (geteuid() != 0)
        h_skip("giving a file to another uid needs root");
    struct server sink;
    h_server_start(&sink, "sink.py");
    h_config_write("[default]\nconnect = 1/min\nconnect_burst = 1\n"
                   "to = 127.0.0.1:%d\n",
                   sink.port);
    /* The segment's name, from a first process: then another's empty
     * file (mode 0644, as a umask of 022 makes it) at that name. */
    struct run r;
    three_connects(&r, sink.port);
    char cmd[800], name[300] = "";
    snprintf(cmd, sizeof cmd, "ls '%s' | grep '^rlshim-' ", h_state);
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p);
    cr_assert_not_null(fgets(name, sizeof name, p), "no segment made");
    pclose(p);
    name[strcspn(name, "\n")] = '\0';
    char path[600];
    snprintf(path, sizeof path, "%s/%s", h_state, name);
    cr_assert_eq(unlink(path), 0);
    int fd = open(path, O_CREAT | O_EXCL | O_WRONLY, 0644);
    cr_assert_geq(fd, 0);
    cr_assert_eq(fchown(fd, 65534, 65534), 0);
    close(fd);
    usleep(300 * 1000);
    int before = h_server_count(&sink, "CONN");
    cr_assert_eq(before, 1, "the first process's own connect");
    three_connects(&r, sink.port);
    long first = h_out_long(&r, "ok", -1);
    three_connects(&r, sink.port);
    long second = h_out_long(&r, "ok", -1);
    cr_expect_eq(first + second, 1,
                 "one budget of 1: the processes' connects went %ld + %ld",
                 first, second);
    usleep(300 * 1000);
    cr_expect_eq(h_server_count(&sink, "CONN") - before, 1);
    char errlog[300];
    snprintf(errlog, sizeof errlog, "%s/stderr.log", h_dir);
    cr_expect_eq(h_file_lines(errlog, "kept in this process"), 0,
                 "a process kept its budgets to itself");
    struct stat st;
    cr_expect_eq(stat(path, &st), 0);
    cr_expect_eq(st.st_size, 0, "another's file is never written");
    cr_expect_eq(st.st_uid, 65534);
    h_server_stop(&sink);
}
