/* harness.h — what the integration tests share: servers on 127.0.0.1,
 * a temporary config and state directory, and running a real program with
 * the shim preloaded in *its* environment only (never the test runner's).
 *
 * Everything is static: each test_*.c includes this header. */
#ifndef RL_TEST_HARNESS_H
#define RL_TEST_HARNESS_H

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Every helper is static and may go unused in one test file. */
#define H_FN static __attribute__((unused))

struct server {
    pid_t pid;
    int port;
    char log[256];
};

struct run {
    int status;      /* exit status, or 128 + signal, or -1 on timeout */
    double wall;     /* seconds */
    double cpu;      /* user + system seconds of the child (and its
                        waited-for children) */
    char out[65536]; /* its stdout */
};

/* Set by a test before h_run: run without RLSHIM_STRICT=1, or without
 * RLSHIM_CONFIG (the sysconfdir file, normally absent, is then used). */
static bool h_no_strict, h_no_config;

static char h_dir[128]; /* per-test temp dir: config, state, logs */
static char h_config[256];
static char h_state[256];

H_FN double h_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

H_FN const char *h_env(const char *name)
{
    const char *v = getenv(name);
    cr_assert_not_null(v, "%s is not set (run through make test)", name);
    return v;
}

H_FN void h_setup(void)
{
    snprintf(h_dir, sizeof h_dir, "/tmp/rlshim-it-XXXXXX");
    cr_assert_not_null(mkdtemp(h_dir));
    snprintf(h_config, sizeof h_config, "%s/rlshim.ini", h_dir);
    snprintf(h_state, sizeof h_state, "%s/state", h_dir);
    cr_assert_eq(mkdir(h_state, 0700), 0);
}

H_FN void h_teardown(void)
{
    /* A failed test shows what its programs said on stderr. */
    if (getenv("RLSHIM_TEST_VERBOSE") != NULL) {
        char cat[300];
        snprintf(cat, sizeof cat, "cat '%s/stderr.log' >&2 2>/dev/null", h_dir);
        if (system(cat) != 0)
            fprintf(stderr, "(no stderr.log)\n");
    }
    char cmd[300];
    if (h_dir[0] != '\0') {
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", h_dir);
        if (system(cmd) != 0)
            fprintf(stderr, "could not remove %s\n", h_dir);
    }
}

/* Skip the test, saying why. Criterion runs no .fini after a skip: the
 * temp dir goes here, and servers and sinks die with the test's process
 * (PR_SET_PDEATHSIG) instead of holding its output open. */
#define h_skip(...)                                                          \
    do {                                                                     \
        h_teardown();                                                        \
        cr_skip_test(__VA_ARGS__);                                           \
    } while (0)

/* Write the config file from a format string. */
__attribute__((format(printf, 1, 2))) static void
h_config_write(const char *fmt, ...)
{
    FILE *f = fopen(h_config, "w");
    cr_assert_not_null(f);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    fclose(f);
}

/* Start tests/integration/servers/NAME with a log file in the temp dir;
 * waits for its "PORT n" line. */
H_FN void h_server_start(struct server *s, const char *name)
{
    char script[512];
    snprintf(script, sizeof script, "%s/tests/integration/servers/%s",
             h_env("RLSHIM_SRC"), name);
    static int nth;
    snprintf(s->log, sizeof s->log, "%s/%s.%d.log", h_dir, name, nth++);
    int p[2];
    cr_assert_eq(pipe(p), 0);
    s->pid = fork();
    cr_assert_neq(s->pid, -1);
    if (s->pid == 0) {
        /* Dies with the test worker, even one Criterion times out. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        dup2(p[1], 1);
        close(p[0]);
        close(p[1]);
        unsetenv("LD_PRELOAD");
        execlp("python3", "python3", script, s->log, (char *)NULL);
        _exit(127);
    }
    close(p[1]);
    char buf[64] = "";
    size_t n = 0;
    while (n < sizeof buf - 1) {
        ssize_t r = read(p[0], buf + n, 1);
        if (r <= 0 || buf[n] == '\n')
            break;
        n++;
    }
    buf[n] = '\0';
    close(p[0]);
    cr_assert_eq(sscanf(buf, "PORT %d", &s->port), 1,
                 "server %s did not start: '%s'", name, buf);
}

H_FN void h_server_stop(struct server *s)
{
    if (s->pid > 0) {
        kill(s->pid, SIGKILL);
        waitpid(s->pid, NULL, 0);
        s->pid = 0;
    }
}

/* Lines of the server's log that start with `prefix`. */
H_FN int h_server_count(const struct server *s, const char *prefix)
{
    FILE *f = fopen(s->log, "r");
    if (f == NULL)
        return 0;
    char line[512];
    int n = 0;
    while (fgets(line, sizeof line, f) != NULL)
        if (strncmp(line, prefix, strlen(prefix)) == 0)
            n++;
    fclose(f);
    return n;
}

/* The i-th log line starting with prefix (0-based), or "" . */
H_FN const char *h_server_line(const struct server *s, const char *prefix,
                               int i, char *buf, size_t len)
{
    FILE *f = fopen(s->log, "r");
    buf[0] = '\0';
    if (f == NULL)
        return buf;
    char line[512];
    int n = 0;
    while (fgets(line, sizeof line, f) != NULL)
        if (strncmp(line, prefix, strlen(prefix)) == 0 && n++ == i) {
            snprintf(buf, len, "%s", line);
            break;
        }
    fclose(f);
    return buf;
}

/* Wait until the server logged `want` lines with prefix, up to `secs`. */
H_FN int h_server_wait(const struct server *s, const char *prefix, int want,
                       double secs)
{
    double end = h_now() + secs;
    int n;
    while ((n = h_server_count(s, prefix)) < want && h_now() < end)
        usleep(10000);
    return n;
}

/* Run argv with the shim preloaded, `config` and `state`, its stderr
 * appended to h_dir/`errname`, and RLSHIM_STRICT=1 (a config the shim
 * rejects fails the test, never runs unthrottled). `preload` false runs it
 * bare. Kills it after `timeout` seconds (status -1). */
H_FN void h_run_with(struct run *r, bool preload, double timeout,
                     char *const argv[], const char *config,
                     const char *state, const char *errname)
{
    /* A libasan preloaded into curl or wget hangs them in glibc's setlocale
     * lock, with or without the shim; their runs are in `make ubsan`. */
    const char *sanitizer = getenv("RLSHIM_SANITIZER");
    const char *prog = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1
                                             : argv[0];
    if (preload && sanitizer != NULL && strcmp(sanitizer, "address") == 0 &&
        (strcmp(prog, "curl") == 0 || strcmp(prog, "wget") == 0))
        h_skip("%s hangs under a preloaded libasan, shim or not "
                     "(glibc's setlocale lock); make ubsan runs it",
                     prog);
    int p[2];
    cr_assert_eq(pipe(p), 0);
    double t0 = h_now();
    pid_t pid = fork();
    cr_assert_neq(pid, -1);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        dup2(p[1], 1);
        close(p[0]);
        close(p[1]);
        int null = open("/dev/null", O_RDONLY);
        dup2(null, 0);
        char errlog[300];
        snprintf(errlog, sizeof errlog, "%s/%s", h_dir, errname);
        int e = open(errlog, O_WRONLY | O_CREAT | O_APPEND, 0600);
        if (e >= 0)
            dup2(e, 2);
        if (preload) {
            /* An ASan build of the shim needs libasan first in the
             * preload list; the programs' own leaks are not ours. */
            char so[1024], asan[512] = "";
            const char *san = getenv("RLSHIM_SANITIZER");
            if (san != NULL && strcmp(san, "address") == 0) {
                FILE *p = popen("cc -print-file-name=libasan.so", "r");
                if (p != NULL && fgets(asan, sizeof asan, p) != NULL)
                    asan[strcspn(asan, "\n")] = ' ';
                if (p != NULL)
                    pclose(p);
                setenv("ASAN_OPTIONS", "detect_leaks=0", 1);
            }
            snprintf(so, sizeof so, "%s%s/librlshim.so", asan,
                     h_env("RLSHIM_BUILD"));
            setenv("LD_PRELOAD", so, 1);
            if (h_no_config)
                unsetenv("RLSHIM_CONFIG");
            else
                setenv("RLSHIM_CONFIG", config, 1);
            setenv("RLSHIM_STATE_DIR", state, 1);
            if (h_no_strict)
                unsetenv("RLSHIM_STRICT");
            else
                setenv("RLSHIM_STRICT", "1", 1);
        }
        execvp(argv[0], argv);
        _exit(127);
    }
    close(p[1]);
    fcntl(p[0], F_SETFL, O_NONBLOCK);
    size_t n = 0;
    int st = 0;
    struct rusage ru;
    memset(&ru, 0, sizeof ru);
    r->status = -1;
    for (;;) {
        ssize_t k = read(p[0], r->out + n, sizeof r->out - 1 - n);
        if (k > 0)
            n += (size_t)k;
        pid_t w = wait4(pid, &st, WNOHANG, &ru);
        if (w == pid) {
            while ((k = read(p[0], r->out + n, sizeof r->out - 1 - n)) > 0)
                n += (size_t)k;
            r->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
            break;
        }
        if (h_now() - t0 > timeout) {
            kill(pid, SIGKILL);
            wait4(pid, &st, 0, &ru);
            r->status = -1;
            break;
        }
        usleep(2000);
    }
    r->wall = h_now() - t0;
    r->cpu = (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
             (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
    r->out[n] = '\0';
    close(p[0]);
}

/* Run argv under the test's config and state dir: see h_run_with. */
H_FN void h_run(struct run *r, bool preload, double timeout, char *const argv[])
{
    h_run_with(r, preload, timeout, argv, h_config, h_state, "stderr.log");
}

/* `rlshim CMD -c CONFIG` (stat, reset...) on this test's state dir, bare;
 * its status is the caller's to check. */
H_FN void h_rlshim_cmd(struct run *r, const char *cmd)
{
    char bin[512], state[300];
    snprintf(bin, sizeof bin, "%s/rlshim", h_env("RLSHIM_BUILD"));
    snprintf(state, sizeof state, "RLSHIM_STATE_DIR=%s", h_state);
    char *argv[] = {"env", state, bin, (char *)cmd, "-c", h_config, NULL};
    h_run(r, false, 10, argv);
}

/* The control of a CPU assertion: argv run the same way as h_run runs it
 * (the same build of the shim preloaded, under the same sanitizer), with
 * a config whose limits never bind and a state dir of its own, so that
 * what the client costs by itself (python's allocations through the ASan
 * runtime, a JVM's start) is measured, not guessed. Its stderr goes to
 * control.log: the test's stderr.log stays the throttled run's. Run it
 * after the test has read its servers' logs: the control reaches them
 * too. */
/* A config whose limits never bind: the control's. */
static const char h_never_binds[] =
    "[default]\n"
    "connect = 1000000/s\nconnect_burst = 1000000000\n"
    "send = 1000000/s\nsend_burst = 1000000000\n"
    "send_bytes = 10GiB/s\nsend_bytes_burst = 1000000000000\n";

H_FN void h_run_control(struct run *c, double timeout, char *const argv[])
{
    char config[300], state[300];
    snprintf(config, sizeof config, "%s/control.ini", h_dir);
    snprintf(state, sizeof state, "%s/control-state", h_dir);
    FILE *f = fopen(config, "w");
    cr_assert_not_null(f);
    fputs(h_never_binds, f);
    fclose(f);
    if (mkdir(state, 0700) != 0)
        cr_assert_eq(errno, EEXIST);
    bool no_config = h_no_config;
    h_no_config = false;
    h_run_with(c, true, timeout, argv, config, state, "control.log");
    h_no_config = no_config;
    cr_assert_eq(c->status, 0, "the control run failed: status %d\n%s",
                 c->status, c->out);
}

/* What waiting cost: the throttled run's CPU beyond its control's (the same
 * client, build and work with nothing throttled) is under `share` of the
 * throttled run's wall time. A throttled client that sleeps costs what
 * its control costs; one that spins burns up to its whole wall time.
 * Under ASan the share is at least H_ASAN_SPIN_SHARE: the client's own
 * allocations go through ASan's runtime, whose cost varies between two
 * runs of one unthrottled client by more than a plain build's share on a
 * loaded machine (seen: 2.9 to 4.0 s of CPU for one python upload of
 * 13 s); a spin still costs most of the wall time. */
#define H_ASAN_SPIN_SHARE 0.25
/* Two runs of the same short client differ by up to this share of its
 * own CPU (12 curls that fail at once: 0.11 s against 0.13 s, seen in a
 * clean-clone run); a spin burns the whole wall time on top of it. */
#define H_SPIN_NOISE 0.25

#define h_expect_no_spin(r, ctl, share, who)                                 \
    do {                                                                     \
        const char *san_ = getenv("RLSHIM_SANITIZER");                       \
        double share_ = (share);                                             \
        if (san_ != NULL && strcmp(san_, "address") == 0 &&                  \
            share_ < H_ASAN_SPIN_SHARE)                                      \
            share_ = H_ASAN_SPIN_SHARE;                                      \
        cr_log_info("%s: cpu %.2f s throttled in %.2f s, %.2f s "            \
                    "unthrottled in %.2f s",                                 \
                    (who), (r)->cpu, (r)->wall, (ctl)->cpu, (ctl)->wall);    \
        cr_expect_lt((r)->cpu - (ctl)->cpu,                                  \
                     share_ * (r)->wall + H_SPIN_NOISE * (ctl)->cpu,         \
                     "%s spun: cpu %.2f s throttled in %.2f s, %.2f s "     \
                     "unthrottled (the control, in %.2f s): over %.2f s "   \
                     "is spin",                                              \
                     (who), (r)->cpu, (r)->wall, (ctl)->cpu, (ctl)->wall,    \
                     (ctl)->cpu + share_ * (r)->wall +                       \
                         H_SPIN_NOISE * (ctl)->cpu);                         \
    } while (0)

/* The helper program NAME built beside the shim. */
H_FN const char *h_helper(const char *name, char *buf, size_t len)
{
    snprintf(buf, len, "%s/tests/helpers/%s", h_env("RLSHIM_BUILD"), name);
    return buf;
}

/* "key=value" from a run's output, as a long; `missing` when absent. */
H_FN long h_out_long(const struct run *r, const char *key, long missing)
{
    size_t kl = strlen(key);
    const char *p = r->out;
    while (p != NULL && *p != '\0') {
        if (strncmp(p, key, kl) == 0 && p[kl] == '=')
            return strtol(p + kl + 1, NULL, 10);
        p = strchr(p, '\n');
        if (p != NULL)
            p++;
    }
    return missing;
}

/* Lines of a file that contain `needle` (all lines for ""). */
H_FN int h_file_lines(const char *path, const char *needle)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return 0;
    char line[1024];
    int n = 0;
    while (fgets(line, sizeof line, f) != NULL)
        if (strstr(line, needle) != NULL)
            n++;
    fclose(f);
    return n;
}

/* The sha256 of a file, in hex, through sha256sum. */
H_FN void h_sha256_file(const char *path, char out[65])
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "sha256sum '%s'", path);
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p);
    cr_assert_eq(fscanf(p, "%64s", out), 1);
    pclose(p);
}

/* Write `n` bytes of `c` to dir/name and return the path in buf. */
H_FN const char *h_file_fill(const char *name, const char *data, size_t n,
                             char *buf, size_t len)
{
    snprintf(buf, len, "%s/%s", h_dir, name);
    FILE *f = fopen(buf, "w");
    cr_assert_not_null(f);
    cr_assert_eq(fwrite(data, 1, n, f), n);
    fclose(f);
    return buf;
}

/* Field `k` (0-based, space-separated) of a server log line. */
H_FN const char *h_field(const char *line, int k, char *buf, size_t len)
{
    const char *p = line;
    for (int i = 0; i < k && p != NULL; i++) {
        p = strchr(p, ' ');
        if (p != NULL)
            p++;
    }
    buf[0] = '\0';
    if (p != NULL) {
        size_t n = strcspn(p, " \n");
        if (n >= len)
            n = len - 1;
        memcpy(buf, p, n);
        buf[n] = '\0';
    }
    return buf;
}

/* The stamp (s) of s's i-th request line ("REQ <stamp> ..."; 0-based);
 * -1 if there is none. */
H_FN double h_server_stamp(const struct server *s, int i)
{
    char line[512], f[64];
    h_server_line(s, "REQ", i, line, sizeof line);
    if (line[0] == '\0')
        return -1;
    return atof(h_field(line, 1, f, sizeof f));
}

H_FN bool h_have(const char *cmd)
{
    char buf[256];
    snprintf(buf, sizeof buf, "command -v %s >/dev/null 2>&1", cmd);
    return system(buf) == 0;
}

#endif
