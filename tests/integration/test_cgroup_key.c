/* key = cgroup (SPEC §16): a process's user is its cgroup v2 path. The
 * test makes cgroups of its own (rlshim-test-PID/a and /b under the
 * cgroup v2 mount: /sys/fs/cgroup, or /sys/fs/cgroup/unified on a hybrid
 * host), starts shells that move themselves into one before they run
 * curl, and counts at the server what arrived. Root only, and only where
 * cgroup v2 is mounted and writable: elsewhere it skips, saying why. */
#include <sys/statfs.h>

#include "harness.h"

#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif

static struct server srv;
static struct run r;
static char errlog[300];
static char base[256]; /* the test's own cgroup dir, "" when none made */

static bool is_cgroup2(const char *dir)
{
    struct statfs fs;
    return statfs(dir, &fs) == 0 && fs.f_type == CGROUP2_SUPER_MAGIC;
}

/* Make base/a and base/b; false (and why) when this host cannot. */
static bool make_cgroups(char *why, size_t len)
{
    const char *root = is_cgroup2("/sys/fs/cgroup") ? "/sys/fs/cgroup"
                       : is_cgroup2("/sys/fs/cgroup/unified")
                           ? "/sys/fs/cgroup/unified"
                           : NULL;
    if (geteuid() != 0) {
        snprintf(why, len, "not root: cannot make cgroups");
        return false;
    }
    if (root == NULL) {
        snprintf(why, len, "no cgroup v2 mount at /sys/fs/cgroup or "
                           "/sys/fs/cgroup/unified");
        return false;
    }
    /* A name long enough that "SECTION|KEY" outgrows the store's label
     * (rlshim stat must show the key whole all the same). */
    snprintf(base, sizeof base, "%s/rlshim-test-%d-cgroup-key", root,
             (int)getpid());
    if (mkdir(base, 0755) != 0) {
        snprintf(why, len, "cgroup v2 at %s is not writable: %s", root,
                 strerror(errno));
        base[0] = '\0';
        return false;
    }
    char sub[300];
    snprintf(sub, sizeof sub, "%s/a", base);
    cr_assert_eq(mkdir(sub, 0755), 0, "%s: %s", sub, strerror(errno));
    snprintf(sub, sizeof sub, "%s/b", base);
    cr_assert_eq(mkdir(sub, 0755), 0, "%s: %s", sub, strerror(errno));
    return true;
}

static void remove_cgroups(void)
{
    if (base[0] == '\0')
        return;
    /* A program the harness killed at its timeout may leave children
     * behind: cgroup.kill ends them (each is ours), then the dirs go. */
    static const char *const subs[] = {"a", "b"};
    for (int i = 0; i < 2; i++) {
        char sub[300], kill_file[320];
        snprintf(sub, sizeof sub, "%s/%s", base, subs[i]);
        snprintf(kill_file, sizeof kill_file, "%s/cgroup.kill", sub);
        int fd = open(kill_file, O_WRONLY | O_CLOEXEC);
        if (fd >= 0) {
            if (write(fd, "1", 1) != 1)
                fprintf(stderr, "%s: %s\n", kill_file, strerror(errno));
            close(fd);
        }
        for (int t = 0; t < 100 && rmdir(sub) != 0 && errno == EBUSY; t++)
            usleep(20 * 1000);
    }
    if (rmdir(base) != 0)
        fprintf(stderr, "could not remove %s: %s\n", base, strerror(errno));
    base[0] = '\0';
}

static void setup(void)
{
    h_setup();
    h_server_start(&srv, "http_count.py");
    snprintf(errlog, sizeof errlog, "%s/stderr.log", h_dir);
}

static void teardown(void)
{
    h_server_stop(&srv);
    remove_cgroups();
    h_teardown();
}

TestSuite(cgroup_key, .init = setup, .fini = teardown, .timeout = 60);

static void need_cgroups(void)
{
    char why[300];
    /* curl under a preloaded libasan hangs (harness.h says why), and the
     * shells here run curl: make ubsan runs these. */
    const char *san = getenv("RLSHIM_SANITIZER");
    if (san != NULL && strcmp(san, "address") == 0) {
        h_server_stop(&srv);
        h_skip("curl hangs under a preloaded libasan; make ubsan runs it");
    }
    if (!make_cgroups(why, sizeof why)) {
        h_server_stop(&srv);
        h_skip("%s", why);
    }
}

/* The path a process in base/SUB reads from /proc/self/cgroup (relative
 * to the cgroup namespace's root, which may not be the mount's). */
static void path_of(const char *sub, char *out, size_t len)
{
    char script[600];
    snprintf(script, sizeof script,
             "echo $$ > %s/%s/cgroup.procs && "
             "sed -n 's/^0:://p' /proc/self/cgroup",
             base, sub);
    char *argv[] = {"sh", "-c", script, NULL};
    h_run(&r, false, 10, argv);
    cr_assert_eq(r.status, 0, "moving a shell into %s/%s", base, sub);
    r.out[strcspn(r.out, "\n")] = '\0';
    cr_assert_eq(r.out[0], '/', "no 0:: line: '%s'", r.out);
    cr_assert_lt(strlen(r.out), len, "a path too long for the test");
    memcpy(out, r.out, strlen(r.out) + 1);
}

/* A shell that moves itself into base/SUB, then runs `n` curls (each a
 * process of the cgroup), as `uid` (0: as itself). */
static void curls_in(const char *sub, int n, const char *as)
{
    char script[1200];
    snprintf(script, sizeof script,
             "echo $$ > %s/%s/cgroup.procs || exit 9; i=0; "
             "while [ $i -lt %d ]; do i=$((i+1)); "
             "%s curl -sS -o /dev/null --max-time 3 "
             "http://127.0.0.1:%d/ 2>/dev/null; done; true",
             base, sub, n, as != NULL ? as : "", srv.port);
    char *argv[] = {"sh", "-c", script, NULL};
    h_run(&r, true, 30, argv);
    cr_assert_eq(r.status, 0, "the shell in %s: status %d", sub, r.status);
}

Test(cgroup_key, two_processes_of_one_cgroup_share_its_budget)
{
    need_cgroups();
    char a[300];
    path_of("a", a, sizeof a);
    h_config_write("[rlshim]\nkey = cgroup\n"
                   "[user:cgroup:%s]\n"
                   "algorithm = sliding_window\nconnect = 2/min\n",
                   a);
    curls_in("a", 3, NULL);
    curls_in("a", 3, NULL);
    usleep(200 * 1000);
    cr_expect_eq(h_server_count(&srv, ""), 2,
                 "two shells of 3 curls each in %s: the server saw %d", a,
                 h_server_count(&srv, ""));
    /* No section for b, no [default]: not throttled. */
    curls_in("b", 3, NULL);
    cr_expect_eq(h_server_wait(&srv, "", 5, 5), 5, "b's curls: %d",
                 h_server_count(&srv, "") - 2);
    cr_expect_eq(h_file_lines(errlog, "key = cgroup"), 0,
                 "a cgroup was found: nothing to say");

    /* rlshim stat shows the key whole (the store's label would cut it). */
    char want[800];
    h_rlshim_cmd(&r, "stat");
    cr_expect_eq(r.status, 0, "stat: status %d", r.status);
    /* A row: USER (the key), then the section. */
    snprintf(want, sizeof want, "\ncgroup:%s user:cgroup:%s ", a, a);
    cr_expect(strstr(r.out, want) != NULL, "stat, no '%s' in:\n%s", want + 1,
              r.out);
    /* rlshim check --explain, run in a, says its key. */
    char script[1200];
    snprintf(script, sizeof script,
             "echo $$ > %s/a/cgroup.procs && exec %s/rlshim check -c %s "
             "--explain 127.0.0.1:%d",
             base, h_env("RLSHIM_BUILD"), h_config, srv.port);
    char *argv[] = {"sh", "-c", script, NULL};
    h_run(&r, false, 10, argv);
    cr_expect_eq(r.status, 0, "explain: status %d", r.status);
    snprintf(want, sizeof want, "key cgroup:%s\n", a);
    cr_expect(strstr(r.out, want) != NULL, "explain, no '%s' in:\n%s", want,
              r.out);
}

Test(cgroup_key, a_wildcard_covers_every_cgroup_below)
{
    need_cgroups();
    char a[300];
    path_of("a", a, sizeof a);
    char parent[300];
    snprintf(parent, sizeof parent, "%.*s", (int)(strrchr(a, '/') - a), a);
    /* The parent's own processes are no service: only those below. */
    h_config_write("[rlshim]\nkey = cgroup\n"
                   "[user:cgroup:%s/*]\n"
                   "algorithm = sliding_window\nconnect = 2/min\n",
                   parent);
    curls_in("a", 3, NULL);
    curls_in("b", 3, NULL);
    usleep(200 * 1000);
    cr_expect_eq(h_server_count(&srv, ""), 2,
                 "3 curls in a, 3 in b under %s/*: the server saw %d",
                 parent, h_server_count(&srv, ""));
}

Test(cgroup_key, an_exact_section_wins_over_the_wildcard)
{
    need_cgroups();
    char a[300];
    path_of("a", a, sizeof a);
    char parent[300];
    snprintf(parent, sizeof parent, "%.*s", (int)(strrchr(a, '/') - a), a);
    h_config_write("[rlshim]\nkey = cgroup\n"
                   "[user:cgroup:%s/*]\n"
                   "algorithm = sliding_window\nconnect = 1/min\n"
                   "[user:cgroup:%s]\n"
                   "algorithm = sliding_window\nconnect = 3/min\n",
                   parent, a);
    curls_in("a", 4, NULL);
    usleep(200 * 1000);
    cr_expect_eq(h_server_count(&srv, ""), 3, "a's own section: %d",
                 h_server_count(&srv, ""));
    curls_in("b", 4, NULL);
    usleep(200 * 1000);
    cr_expect_eq(h_server_count(&srv, ""), 4, "b under the wildcard: %d",
                 h_server_count(&srv, "") - 3);
}

Test(cgroup_key, rlshim_key_still_wins)
{
    need_cgroups();
    char a[300];
    path_of("a", a, sizeof a);
    h_config_write("[rlshim]\nkey = cgroup\n"
                   "[user:cgroup:%s]\nconnect = 1/min\n"
                   "[user:crawler]\nconnect = 3/min\n",
                   a);
    curls_in("a", 4, "RLSHIM_KEY=crawler");
    usleep(200 * 1000);
    cr_expect_eq(h_server_count(&srv, ""), 3, "the key's section: %d",
                 h_server_count(&srv, ""));
}

/* SPEC §5: two uids never share a segment, so a cgroup whose processes
 * run as two uids has a budget per uid. */
Test(cgroup_key, two_uids_in_one_cgroup_have_a_budget_each)
{
    need_cgroups();
    if (!h_have("setpriv"))
        h_skip("no setpriv(1) to run a process as another uid");
    char a[300];
    path_of("a", a, sizeof a);
    h_config_write("[rlshim]\nkey = cgroup\n"
                   "[user:cgroup:%s]\n"
                   "algorithm = sliding_window\nconnect = 2/min\n",
                   a);
    /* The other uid reads the config and keeps its segment in the state
     * dir (its own file in it, mode 0600). */
    cr_assert_eq(chmod(h_dir, 0755), 0);
    cr_assert_eq(chmod(h_config, 0644), 0);
    cr_assert_eq(chmod(h_state, 01777), 0);
    curls_in("a", 3, NULL);
    curls_in("a", 3, "setpriv --reuid=65534 --regid=65534 --clear-groups");
    usleep(200 * 1000);
    cr_expect_eq(h_server_count(&srv, ""), 4, "root's 2 and nobody's 2: %d",
                 h_server_count(&srv, ""));
    cr_expect_eq(h_file_lines(errlog, "rlshim:"), 0,
                 "no process kept its budgets to itself");
}

/* A python process in cgroup a under `connect = 2/min` there forks a
 * child that moves itself to b and connects 3 times; then the parent
 * connects 3 times (once more before the fork when `first` is set).
 * Returns the connects the server saw. */
static int child_moves_to_b(bool first)
{
    need_cgroups();
    char a[300];
    path_of("a", a, sizeof a);
    h_config_write("[rlshim]\nkey = cgroup\n"
                   "[user:cgroup:%s]\n"
                   "algorithm = sliding_window\nconnect = 2/min\n",
                   a);
    char prog[1500];
    snprintf(prog, sizeof prog,
             "import os, socket\n"
             "def get():\n"
             "    s = socket.socket()\n"
             "    try:\n"
             "        s.connect(('127.0.0.1', %d))\n"
             "        s.sendall(b'GET / HTTP/1.0\\r\\n\\r\\n')\n"
             "        s.recv(100)\n"
             "    except OSError:\n"
             "        pass\n"
             "    s.close()\n"
             "open('%s/a/cgroup.procs', 'w').write(str(os.getpid()))\n"
             "%s"
             "pid = os.fork()\n"
             "if pid == 0:\n"
             "    open('%s/b/cgroup.procs', 'w').write(str(os.getpid()))\n"
             "    for i in range(3): get()\n"
             "    os._exit(0)\n"
             "os.waitpid(pid, 0)\n"
             "for i in range(3): get()\n",
             srv.port, base, first ? "get()\n" : "", base);
    char *argv[] = {"python3", "-c", prog, NULL};
    h_run(&r, true, 30, argv);
    cr_assert_eq(r.status, 0, "python: status %d", r.status);
    usleep(200 * 1000);
    return h_server_count(&srv, "");
}

/* The key is read at the process's first call that needs the config: a
 * child forked before that reads its own, so a child that moves itself
 * to another cgroup after fork is keyed by the one it moved to. */
Test(cgroup_key, a_child_moved_after_fork_is_keyed_by_its_new_cgroup)
{
    int n = child_moves_to_b(false);
    cr_expect_eq(n, 5, "the child's 3 in b and the parent's 2 in a: %d", n);
}

/* A child forked after its parent's first call reads its cgroup again at
 * its first decision (SPEC §16: again after a fork only if it changed):
 * moved to b, it is charged to b's budget (none), not to its parent's. */
Test(cgroup_key, a_child_forked_after_the_first_call_follows_its_move)
{
    int n = child_moves_to_b(true);
    cr_expect_eq(n, 5, "the parent's 2 in a and the child's 3 in b: %d", n);
}
