/* test_cli.c — `rlshim` as a user runs it: build/rlshim in a subprocess.
 *
 * `rlshim run` tests copy the binary into a temporary tree with a stand-in
 * librlshim.so (a copy of libdl.so.2, harmless to preload) so that the
 * build-tree and install layouts are both exercised without the real shim.
 * The runner itself is never preloaded. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#define STANDIN_LIB "/lib/x86_64-linux-gnu/libdl.so.2"

struct result {
    int status; /* exit status, or 128 + signal */
    char out[16384];
    char err[16384];
};

static const char *build_dir(void)
{
    const char *b = getenv("RLSHIM_BUILD");
    return b != NULL ? b : "build";
}

static const char *src_dir(void)
{
    const char *s = getenv("RLSHIM_SRC");
    return s != NULL ? s : ".";
}

static void slurp(int fd, char *buf, size_t len)
{
    ssize_t n = pread(fd, buf, len - 1, 0);
    buf[n > 0 ? n : 0] = '\0';
    close(fd);
}

/* Run argv with exactly envp, in cwd (NULL: here). */
static void run(struct result *r, char *const argv[], char *const envp[],
                const char *cwd)
{
    char o[] = "/tmp/rlshim-out-XXXXXX", e[] = "/tmp/rlshim-err-XXXXXX";
    int fo = mkstemp(o), fe = mkstemp(e), st;
    pid_t pid;

    cr_assert(fo >= 0 && fe >= 0);
    unlink(o);
    unlink(e);
    pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        dup2(fo, 1);
        dup2(fe, 2);
        if (cwd != NULL && chdir(cwd) != 0)
            _exit(120);
        execve(argv[0], argv, envp);
        _exit(121);
    }
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    r->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    slurp(fo, r->out, sizeof r->out);
    slurp(fe, r->err, sizeof r->err);
}

static char *rlshim_path(void)
{
    static char p[1024];
    snprintf(p, sizeof p, "%s/rlshim", build_dir());
    return p;
}

static char *fixture(const char *name)
{
    static char p[4][1024];
    static int i;
    i = (i + 1) % 4;
    snprintf(p[i], sizeof p[i], "%s/tests/fixtures/%s", src_dir(), name);
    return p[i];
}

static char *const base_env[] = {"PATH=/usr/local/bin:/usr/bin:/bin", NULL};

static unsigned count_lines(const char *s)
{
    unsigned n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

static void copy_file(const char *from, const char *to, mode_t mode)
{
    char buf[65536];
    int in = open(from, O_RDONLY), out;
    ssize_t n;

    cr_assert(in >= 0, "%s", from);
    out = open(to, O_WRONLY | O_CREAT | O_TRUNC, mode);
    cr_assert(out >= 0, "%s", to);
    while ((n = read(in, buf, sizeof buf)) > 0)
        cr_assert_eq(write(out, buf, (size_t)n), n);
    close(in);
    close(out);
    chmod(to, mode);
}

/* A tree with bin/rlshim and the library at bin/../LIB (an installed
 * layout), or, with LIB NULL, both side by side (build layout). */
static void make_tree_at(char *dir, size_t len, const char *lib)
{
    char p[1100];
    snprintf(dir, len, "/tmp/rlshim-cli-XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
    if (lib != NULL) {
        snprintf(p, sizeof p, "%s/bin", dir);
        mkdir(p, 0755);
        snprintf(p, sizeof p, "%s/bin/rlshim", dir);
        copy_file(rlshim_path(), p, 0755);
        snprintf(p, sizeof p, "%s/%s", dir, lib);
        /* mkdir -p of the library's directory */
        for (char *c = p + strlen(dir) + 1; *c != '\0'; c++) {
            if (*c == '/') {
                *c = '\0';
                mkdir(p, 0755);
                *c = '/';
            }
        }
        copy_file(STANDIN_LIB, p, 0644);
    } else {
        snprintf(p, sizeof p, "%s/rlshim", dir);
        copy_file(rlshim_path(), p, 0755);
        snprintf(p, sizeof p, "%s/librlshim.so", dir);
        copy_file(STANDIN_LIB, p, 0644);
    }
}

/* make install's layout (PREFIX/lib/rlshim), or the build's. */
static void make_tree(char *dir, size_t len, bool install)
{
    make_tree_at(dir, len, install ? "lib/rlshim/librlshim.so" : NULL);
}

static void remove_tree(const char *dir)
{
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_expect_eq(system(cmd), 0);
}

/* ---- every command ------------------------------------------------------*/

Test(cli, prints_its_version_from_every_command)
{
    struct result r;
    const char *cmds[] = {NULL, "check", "run"};
    for (size_t i = 0; i < 3; i++) {
        char *argv[] = {rlshim_path(), (char *)cmds[i], "--version", NULL};
        if (cmds[i] == NULL) {
            argv[1] = "--version";
            argv[2] = NULL;
        }
        run(&r, argv, base_env, NULL);
        cr_expect_eq(r.status, 0);
        cr_expect_str_eq(r.out, "rlshim " RL_VERSION "\n");
    }
}

Test(cli, prints_help_to_stdout_and_exits_0)
{
    struct result r;
    char *a1[] = {rlshim_path(), "--help", NULL};
    char *a2[] = {rlshim_path(), "check", "--help", NULL};
    char *a3[] = {rlshim_path(), "run", "-h", NULL};

    run(&r, a1, base_env, NULL);
    cr_expect_eq(r.status, 0);
    cr_expect(strstr(r.out, "usage: rlshim COMMAND"));
    run(&r, a2, base_env, NULL);
    cr_expect_eq(r.status, 0);
    cr_expect(strstr(r.out, "usage: rlshim check"));
    run(&r, a3, base_env, NULL);
    cr_expect_eq(r.status, 0);
    cr_expect(strstr(r.out, "usage: rlshim run"));
    cr_expect_str_eq(r.err, "");
}

Test(cli, calls_an_unknown_command_a_usage_error)
{
    struct result r;
    char *a1[] = {rlshim_path(), "frobnicate", NULL};
    char *a2[] = {rlshim_path(), NULL};
    run(&r, a1, base_env, NULL);
    cr_expect_eq(r.status, 2);
    cr_expect(strstr(r.err, "unknown command 'frobnicate'"));
    cr_expect_str_eq(r.out, "");
    run(&r, a2, base_env, NULL);
    cr_expect_eq(r.status, 2);
}

/* ---- check --------------------------------------------------------------*/

Test(check, prints_one_line_per_rule_and_limit)
{
    struct result r;
    char *argv[] = {rlshim_path(), "check", "-c",
                    fixture("good/spec_example.ini"), NULL};
    run(&r, argv, base_env, NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_expect_eq(count_lines(r.out), 2 + 5, "%s", r.out);
    cr_expect(strstr(r.out, "spec_example.ini: valid; 3 rules; key=env "
                            "on_deny=fail max_delay=10s errno=EAGAIN "
                            "dry_run=no state=shared unknown=allow log=off "
                            "report=no max_users=4096 hash="),
              "%s", r.out);
    cr_expect(strstr(r.out, "\nuser:1000        send_bytes token_bucket   "
                            "1MiB/s     1MiB    delay<=500ms,EAGAIN        "
                            "127.0.0.1:8080,10.0.0.0/8,[::1]:443\n"),
              "%s", r.out);
    cr_expect(strstr(r.out, "\nuser:scraper     connect    sliding_window "
                            "2/s        -       fail,EAGAIN                "
                            "all\n"),
              "%s", r.out);
    cr_expect_str_eq(r.err, "");
}

Test(check, reports_every_error_and_exits_1)
{
    struct result r;
    char *argv[] = {rlshim_path(), "check", "-c",
                    fixture("bad/many_errors.ini"), NULL};
    run(&r, argv, base_env, NULL);
    cr_expect_eq(r.status, 1);
    cr_expect_eq(count_lines(r.err), 4 + 1, "%s", r.err);
    cr_expect(strstr(r.err, "many_errors.ini:12: bad destination"));
    cr_expect(strstr(r.err, "rlshim check: 4 errors in "));
    cr_expect_str_eq(r.out, "");
}

Test(check, reads_rlshim_config_from_the_environment)
{
    struct result r;
    char env1[1200];
    snprintf(env1, sizeof env1, "RLSHIM_CONFIG=%s",
             fixture("bad/zero_rate.ini"));
    char *envp[] = {env1, NULL};
    char *argv[] = {rlshim_path(), "check", NULL};
    run(&r, argv, envp, NULL);
    cr_expect_eq(r.status, 1);
    cr_expect(strstr(r.err, "zero_rate.ini:3: zero rate"), "%s", r.err);
}

/* A config file of the test's own, from `text`; its path in `p`. */
static void diff_file(char *p, const char *text)
{
    int fd = mkstemp(p);
    cr_assert(fd >= 0);
    cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
}

Test(check, diff_says_which_budgets_an_edit_restarts)
{
    char cur[] = "/tmp/rlshim-cur-XXXXXX", ed[] = "/tmp/rlshim-ed-XXXXXX";
    diff_file(cur, "[default]\nconnect = 5/s\n[user:a]\nconnect = 1/s\n"
                   "[user:gone]\nsend = 3/s\n");
    diff_file(ed, "[default]\nconnect = 5/s\non_deny = delay\n"
                  "[user:a]\nconnect = 2/s\n[user:new]\nconnect = 1/s\n");
    struct result r;
    char *argv[] = {rlshim_path(), "check", "-c", cur, "--diff", ed, NULL};
    run(&r, argv, base_env, NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_expect(strstr(r.out, "[default]                  keeps its spent "
                            "units\n"),
              "%s", r.out);
    cr_expect(strstr(r.out, "[user:a]                   restarts (its "
                            "limits changed)\n"),
              "%s", r.out);
    cr_expect(strstr(r.out, "[user:new]                 new\n"), "%s",
              r.out);
    cr_expect(strstr(r.out, "[user:gone]                removed\n"), "%s",
              r.out);
    /* Only behaviour edited: the same segment, every budget kept. */
    char *same[] = {rlshim_path(), "check", "-c", cur, "--diff", cur, NULL};
    run(&r, same, base_env, NULL);
    cr_expect(strstr(r.out, "every budget keeps its state"), "%s", r.out);
    /* A broken edit: running processes keep the config in use. */
    char bad[] = "/tmp/rlshim-bad-XXXXXX";
    diff_file(bad, "[default]\nconect = 5/s\n");
    char *broken[] = {rlshim_path(), "check", "-c", cur, "--diff", bad, NULL};
    run(&r, broken, base_env, NULL);
    cr_expect_eq(r.status, 1);
    cr_expect(strstr(r.err, "would keep the config in use"), "%s", r.err);
    unlink(cur);
    unlink(ed);
    unlink(bad);
}

Test(check, fails_for_a_missing_file_that_was_named)
{
    struct result r;
    char *argv[] = {rlshim_path(), "check", "-c", "/nonexistent.ini", NULL};
    run(&r, argv, base_env, NULL);
    cr_expect_eq(r.status, 1);
    cr_expect_str_eq(r.err, "/nonexistent.ini: cannot read: No such file or "
                            "directory\n");
}

Test(check, passes_the_example_host_config)
{
    struct result r;
    char p[1024];
    snprintf(p, sizeof p, "%s/conf/rlshim.ini", src_dir());
    char *argv[] = {rlshim_path(), "check", "-c", p, NULL};
    run(&r, argv, base_env, NULL);
    cr_expect_eq(r.status, 0, "%s", r.err);
}

Test(check, says_nothing_is_throttled_when_there_is_no_config_at_all)
{
    struct result r;
    char *argv[] = {rlshim_path(), "check", NULL};
    if (access(RL_SYSCONFDIR "/rlshim.ini", F_OK) == 0)
        cr_skip_test("%s exists on this host", RL_SYSCONFDIR "/rlshim.ini");
    run(&r, argv, base_env, NULL);
    cr_expect_eq(r.status, 0, "%s", r.err);
    cr_expect_str_eq(r.out, RL_SYSCONFDIR "/rlshim.ini: no such file: "
                                          "nothing is throttled\n");
}

Test(check, calls_an_extra_argument_a_usage_error)
{
    struct result r;
    char *argv[] = {rlshim_path(), "check", "extra", NULL};
    run(&r, argv, base_env, NULL);
    cr_expect_eq(r.status, 2);
    cr_expect(strstr(r.err, "unexpected argument 'extra'"), "%s", r.err);
}

Test(check, finds_every_key_explained_in_the_example_host_config)
{
    static const char *const keys[] = {
        "key",
        "on_deny",
        "max_delay",
        "errno",
        "state",
        "unknown",
        "log",
        "dry_run",
        "report",
        "max_users",
        "algorithm",
        "connect",
        "connect_burst",
        "send",
        "send_burst",
        "send_bytes",
        "send_bytes_burst",
        "request",
        "request_burst",
        "to",
    };
    char p[1024], text[16384], pat[64];
    FILE *f;
    size_t n;

    snprintf(p, sizeof p, "%s/conf/rlshim.ini", src_dir());
    f = fopen(p, "r");
    cr_assert_not_null(f);
    n = fread(text + 1, 1, sizeof text - 2, f);
    fclose(f);
    text[0] = '\n';
    text[n + 1] = '\0';
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        /* "\nKEY " or "\nKEY=" : the key set on a line of its own, and a
         * comment line just above it. */
        snprintf(pat, sizeof pat, "\n%s ", keys[i]);
        const char *at = strstr(text, pat);
        if (at == NULL) {
            snprintf(pat, sizeof pat, "\n%s=", keys[i]);
            at = strstr(text, pat);
        }
        cr_expect_not_null(at, "conf/rlshim.ini does not set '%s'", keys[i]);
        if (at != NULL) {
            const char *prev = at - 1;
            while (prev > text && *prev != '\n')
                prev--;
            cr_expect(prev[1] == ';', "'%s' has no comment above it", keys[i]);
        }
    }
}

/* ---- run ----------------------------------------------------------------*/

Test(run, prepends_the_shim_and_sets_config_and_key)
{
    struct result r;
    char dir[64], bin[128], want[256], env1[1200];
    make_tree(dir, sizeof dir, true);
    snprintf(bin, sizeof bin, "%s/bin/rlshim", dir);
    snprintf(env1, sizeof env1, "LD_PRELOAD=%s", STANDIN_LIB);
    /* rlshim itself starts with that LD_PRELOAD: an ASan build of it must
     * be told that this is on purpose. */
    char *envp[] = {"PATH=/usr/bin:/bin", env1, "RLSHIM_KEY=old",
                    "ASAN_OPTIONS=verify_asan_link_order=0", NULL};
    char *argv[] = {bin,  "run", "-c", fixture("good/spec_example.ini"),
                    "-k", "bob", "--", "env",
                    NULL};

    run(&r, argv, envp, NULL);
    cr_expect_eq(r.status, 0, "%s", r.err);
    snprintf(want, sizeof want, "\nLD_PRELOAD=%s/lib/rlshim/librlshim.so %s\n",
             dir, STANDIN_LIB);
    cr_expect(strstr(r.out, want) ||
                  strncmp(r.out, want + 1, strlen(want + 1)) == 0,
              "want %s in:\n%s", want, r.out);
    snprintf(want, sizeof want, "RLSHIM_CONFIG=%s\n",
             fixture("good/spec_example.ini"));
    cr_expect(strstr(r.out, want), "%s", r.out);
    cr_expect(strstr(r.out, "RLSHIM_KEY=bob\n"), "%s", r.out);
    cr_expect_str_eq(r.err, "");
    remove_tree(dir);
}

/* The package's layout (/usr/bin, /usr/lib/MULTIARCH/rlshim) and an
 * install made before the private directory (PREFIX/lib). */
static void expect_finds(const char *lib)
{
    struct result r;
    char dir[64], bin[128], want[1200];
    make_tree_at(dir, sizeof dir, lib);
    snprintf(bin, sizeof bin, "%s/bin/rlshim", dir);
    char *envp[] = {"PATH=/usr/bin:/bin", NULL};
    char *argv[] = {bin, "run", "-c", fixture("good/spec_example.ini"), "--",
                    "sh", "-c", "printf %s \"$LD_PRELOAD\"", NULL};
    run(&r, argv, envp, NULL);
    cr_expect_eq(r.status, 0, "%s", r.err);
    snprintf(want, sizeof want, "%s/%s", dir, lib);
    cr_expect_str_eq(r.out, want);
    remove_tree(dir);
}

#ifdef RL_MULTIARCH
Test(run, finds_the_shim_where_the_debian_package_puts_it)
{
    expect_finds("lib/" RL_MULTIARCH "/rlshim/librlshim.so");
}
#endif

Test(run, finds_the_shim_of_an_install_made_before_its_own_directory)
{
    expect_finds("lib/librlshim.so");
}

Test(run, finds_the_shim_beside_a_build_tree_binary)
{
    struct result r;
    char dir[64], bin[128], want[256];
    make_tree(dir, sizeof dir, false);
    snprintf(bin, sizeof bin, "%s/rlshim", dir);
    char *argv[] = {
        bin,        "run",        "-c", fixture("good/spec_example.ini"),
        "printenv", "LD_PRELOAD", NULL};
    run(&r, argv, base_env, NULL);
    cr_expect_eq(r.status, 0, "%s", r.err);
    snprintf(want, sizeof want, "%s/librlshim.so\n", dir);
    cr_expect_str_eq(r.out, want);
    remove_tree(dir);
}

Test(run, passes_on_the_program_exit_status)
{
    struct result r;
    char dir[64], bin[128];
    make_tree(dir, sizeof dir, false);
    snprintf(bin, sizeof bin, "%s/rlshim", dir);
    char *argv[] = {bin,  "run", "-c",     fixture("good/spec_example.ini"),
                    "sh", "-c",  "exit 7", NULL};
    run(&r, argv, base_env, NULL);
    cr_expect_eq(r.status, 7, "%s", r.err);
    remove_tree(dir);
}

Test(run, exits_127_when_the_program_is_not_found)
{
    struct result r;
    char *argv[] = {
        rlshim_path(),       "run", "-c", fixture("good/spec_example.ini"),
        "no-such-program-x", NULL};
    run(&r, argv, base_env, NULL);
    cr_expect_eq(r.status, 127);
    cr_expect_str_eq(r.err, "rlshim: no-such-program-x: command not found\n");
}

Test(run, never_searches_the_current_directory_unless_path_says_so)
{
    struct result r;
    char dir[64], tool[128];
    make_tree(dir, sizeof dir, false);
    snprintf(tool, sizeof tool, "%s/mytool", dir);
    copy_file("/bin/true", tool, 0755);
    char bin[128];
    snprintf(bin, sizeof bin, "%s/rlshim", dir);
    char *argv[] = {bin,      "run", "-c", fixture("good/spec_example.ini"),
                    "mytool", NULL};
    run(&r, argv, base_env, dir);
    cr_expect_eq(r.status, 127, "%s", r.err);

    char *envp[] = {"PATH=/usr/bin:/bin:", NULL}; /* empty entry: "." */
    run(&r, argv, envp, dir);
    cr_expect_eq(r.status, 0, "%s", r.err);
    remove_tree(dir);
}

Test(run, refuses_to_start_with_a_broken_config)
{
    struct result r;
    char *argv[] = {rlshim_path(), "run", "-c", fixture("bad/zero_rate.ini"),
                    "true",        NULL};
    run(&r, argv, base_env, NULL);
    cr_expect_eq(r.status, 1);
    cr_expect(strstr(r.err, "zero_rate.ini:3: zero rate in '0/s'"), "%s",
              r.err);
}

Test(run, calls_a_missing_program_a_usage_error)
{
    struct result r;
    char *argv[] = {rlshim_path(), "run", "-c",
                    fixture("good/spec_example.ini"), NULL};
    run(&r, argv, base_env, NULL);
    cr_expect_eq(r.status, 2);
}

/* `tail`: what follows "unthrottled" (for static and Go programs, the
 * hint to use --seccomp). */
static void expect_one_warning_tail(const char *prog, const char *reason,
                                    const char *tail)
{
    struct result r;
    char dir[64], bin[128], want[512];
    make_tree(dir, sizeof dir, false);
    snprintf(bin, sizeof bin, "%s/rlshim", dir);
    char *argv[] = {
        bin,          "run",       "-c", fixture("good/spec_example.ini"),
        (char *)prog, "--version", NULL};
    run(&r, argv, base_env, NULL);
    snprintf(want, sizeof want,
             "rlshim: warning: the shim cannot see the calls of %s (%s); "
             "running it unthrottled%s\n",
             prog, reason, tail);
    cr_expect_eq(count_lines(r.err), 1, "%s", r.err);
    cr_expect(strncmp(r.err, want, strlen(want)) == 0, "want %s got %s", want,
              r.err);
    cr_expect_neq(r.status, 127);
    remove_tree(dir);
}

static void expect_one_warning(const char *prog, const char *reason)
{
    expect_one_warning_tail(prog, reason, "");
}

static const char seccomp_hint[] = " (rlshim run --seccomp throttles it)";

Test(run, warns_once_and_runs_a_statically_linked_program)
{
    /* Debian's ldconfig is static-pie. */
    if (access("/sbin/ldconfig", X_OK) != 0)
        cr_skip_test("no /sbin/ldconfig");
    expect_one_warning_tail("/sbin/ldconfig", "statically linked",
                            seccomp_hint);
}

Test(run, warns_about_setuid_and_setgid_programs)
{
    char p[] = "/tmp/rlshim-suid-XXXXXX";
    int fd = mkstemp(p);
    cr_assert(fd >= 0);
    close(fd);
    copy_file("/bin/true", p, 06755);
    expect_one_warning(p, "setuid, setgid");
    unlink(p);
}

Test(run, warns_about_a_go_program)
{
    char p[] = "/tmp/rlshim-go-XXXXXX", cmd[256];
    int fd = mkstemp(p);
    cr_assert(fd >= 0);
    close(fd);
    /* A dynamically linked ELF that carries Go's build-id note. */
    snprintf(cmd, sizeof cmd,
             "objcopy --add-section .note.go.buildid=/dev/null /bin/true %s "
             "2>/dev/null && chmod 755 %s",
             p, p);
    if (system(cmd) != 0) {
        unlink(p);
        cr_skip_test("objcopy is not available");
    }
    expect_one_warning_tail(p, "a Go program (raw system calls)",
                            seccomp_hint);
    unlink(p);
}

Test(run, warns_about_a_program_with_file_capabilities)
{
    char p[] = "/tmp/rlshim-cap-XXXXXX";
    struct vfs_cap_data cap = {0};
    int fd = mkstemp(p);
    cr_assert(fd >= 0);
    close(fd);
    copy_file("/bin/true", p, 0755);
    /* What `setcap cap_net_raw+ep` writes. */
    cap.magic_etc = VFS_CAP_REVISION_2 | VFS_CAP_FLAGS_EFFECTIVE;
    cap.data[0].permitted = 1u << CAP_NET_RAW;
    if (setxattr(p, "security.capability", &cap, XATTR_CAPS_SZ_2, 0) != 0) {
        unlink(p);
        cr_skip_test("cannot set file capabilities here: %s", strerror(errno));
    }
    expect_one_warning(p, "file capabilities");
    unlink(p);
}

Test(run, does_not_warn_about_an_ordinary_program)
{
    struct result r;
    char dir[64], bin[128];
    make_tree(dir, sizeof dir, false);
    snprintf(bin, sizeof bin, "%s/rlshim", dir);
    char *argv[] = {bin,    "run", "-c", fixture("good/spec_example.ini"),
                    "true", NULL};
    run(&r, argv, base_env, NULL);
    cr_expect_eq(r.status, 0);
    cr_expect_str_eq(r.err, "");
    remove_tree(dir);
}

/* ---- with the real shim -------------------------------------------------*/

/* Five connects to a listener of its own: how many went, how many got
 * EAGAIN. */
static char counting_client[] =
    "import socket, errno\n"
    "srv = socket.socket(); srv.bind(('127.0.0.1', 0)); srv.listen(16)\n"
    "ok = denied = 0\n"
    "for i in range(5):\n"
    "    c = socket.socket()\n"
    "    try:\n"
    "        c.connect(srv.getsockname()); ok += 1\n"
    "    except OSError as e:\n"
    "        if e.errno != errno.EAGAIN: raise\n"
    "        denied += 1\n"
    "    c.close()\n"
    "print(ok, denied)\n";

Test(run, throttles_a_real_program_exactly_as_ld_preload_does)
{
    char so[1100], dir[64], bin[128], lib[128], ini[128], env1[1200], env2[256];
    const char *san = getenv("RLSHIM_SANITIZER");
    struct result viarun, viapreload;
    FILE *f;

    snprintf(so, sizeof so, "%s/librlshim.so", build_dir());
    if (access(so, R_OK) != 0)
        cr_skip_test("no %s in this build", so);
    if (san != NULL && strcmp(san, "address") == 0)
        cr_skip_test("an ASan shim needs libasan preloaded first");
    if (access("/usr/bin/python3", X_OK) != 0)
        cr_skip_test("no python3");

    make_tree(dir, sizeof dir, false);
    snprintf(bin, sizeof bin, "%s/rlshim", dir);
    snprintf(lib, sizeof lib, "%s/librlshim.so", dir);
    copy_file(so, lib, 0755); /* the real shim, not the stand-in */
    snprintf(ini, sizeof ini, "%s/t.ini", dir);
    f = fopen(ini, "w");
    cr_assert_not_null(f);
    /* 2 per hour: two connects go, three are denied, whatever the clock. */
    fputs("[rlshim]\nstate = process\n[default]\nconnect = 2/h\n", f);
    fclose(f);

    char *argv1[] = {bin,  "run",           "-c", ini, "python3",
                     "-c", counting_client, NULL};
    run(&viarun, argv1, base_env, NULL);
    cr_expect_eq(viarun.status, 0, "%s", viarun.err);
    cr_expect_str_eq(viarun.out, "2 3\n", "%s", viarun.err);

    snprintf(env1, sizeof env1, "LD_PRELOAD=%s/librlshim.so", dir);
    snprintf(env2, sizeof env2, "RLSHIM_CONFIG=%s", ini);
    char *envp[] = {"PATH=/usr/bin:/bin", env1, env2, NULL};
    char *argv2[] = {"/usr/bin/python3", "-c", counting_client, NULL};
    run(&viapreload, argv2, envp, NULL);
    cr_expect_eq(viapreload.status, 0, "%s", viapreload.err);
    cr_expect_str_eq(viapreload.out, viarun.out);
    remove_tree(dir);
}

/* The first "; expect:" of a bad fixture, as the host program's line
 * starts: "rlshim: PATH:LINE: MESSAGE". */
static int first_expect(const char *path, char *out, size_t len)
{
    char line[512];
    FILE *f = fopen(path, "r");
    int n = 0;
    cr_assert_not_null(f, "%s", path);
    while (fgets(line, sizeof line, f) != NULL &&
           strncmp(line, "; expect: ", 10) == 0) {
        line[strcspn(line, "\n")] = '\0';
        if (n++ == 0)
            snprintf(out, len, "rlshim: %s:%s", path, line + 10);
    }
    fclose(f);
    return n;
}

Test(run, a_broken_config_leaves_the_program_running_with_one_line)
{
    char so[1100], dir[1100], path[2200], want[4096], env1[1200], env2[2300];
    const char *san = getenv("RLSHIM_SANITIZER");
    struct dirent *e;
    struct result r;
    int checked = 0;
    DIR *dp;

    snprintf(so, sizeof so, "%s/librlshim.so", build_dir());
    if (access(so, R_OK) != 0)
        cr_skip_test("no %s in this build", so);
    if (san != NULL && strcmp(san, "address") == 0)
        cr_skip_test("an ASan shim needs libasan preloaded first");
    snprintf(env1, sizeof env1, "LD_PRELOAD=%s", so);
    snprintf(dir, sizeof dir, "%s/tests/fixtures/bad", src_dir());
    dp = opendir(dir);
    cr_assert_not_null(dp);
    while ((e = readdir(dp)) != NULL) {
        if (strstr(e->d_name, ".ini") == NULL)
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        int n = first_expect(path, want, sizeof want);
        snprintf(env2, sizeof env2, "RLSHIM_CONFIG=%s", path);
        char *envp[] = {"PATH=/usr/bin:/bin", env1, env2, NULL};
        char *strict_envp[] = {"PATH=/usr/bin:/bin", env1, env2,
                               "RLSHIM_STRICT=1", NULL};
        char *argv[] = {"/bin/echo", "ran", NULL};
        /* The config is read at the first network call (SPEC §4): a
         * connect to the discard port makes one. */
        char *net_argv[] = {
            "/usr/bin/python3", "-c",
            "import socket; socket.socket().connect_ex(('127.0.0.1', 9)); "
            "print('ran')",
            NULL};
        size_t wl = strlen(want);

        run(&r, net_argv, envp, NULL);
        cr_expect_eq(r.status, 0, "%s", e->d_name);
        cr_expect_str_eq(r.out, "ran\n", "%s", e->d_name);
        cr_expect_eq(count_lines(r.err), 1, "%s: %s", e->d_name, r.err);
        cr_expect(strncmp(r.err, want, wl) == 0, "%s:\n want %s\n got  %s",
                  e->d_name, want, r.err);
        cr_expect(strstr(r.err, n > 1 ? " more: run 'rlshim check'); "
                                        "nothing is throttled\n"
                                      : "; nothing is throttled\n"),
                  "%s", r.err);

        run(&r, argv, strict_envp, NULL);
        cr_expect_eq(r.status, 78, "%s", e->d_name);
        cr_expect_str_eq(r.out, "", "%s", e->d_name);
        cr_expect_eq(count_lines(r.err), 1, "%s: %s", e->d_name, r.err);
        cr_expect(strncmp(r.err, want, wl) == 0, "%s", e->d_name);
        cr_expect(strstr(r.err, "; exiting with status 78 "
                                "(RLSHIM_STRICT=1)\n"),
                  "%s", r.err);
        checked++;
    }
    closedir(dp);
    cr_expect_geq(checked, 30);
}
