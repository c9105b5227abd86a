/* fleet_hosts.h — simulated hosts for the fleet tests: host h is a
 * process tree with the shim preloaded, the test's config and a state dir
 * of its own (its own host segment and host id), and, when fh_net is set
 * (netns_hosts.h), a network namespace of its own; what the hosts print
 * and what the sink logged, added up. Include after harness.h. */
#ifndef RL_TEST_FLEET_HOSTS_H
#define RL_TEST_FLEET_HOSTS_H

#include "netns_hosts.h"

/* The hosts' namespaces, when the test made some. */
static struct nethosts *fh_net;

/* Host h runs argv with the shim, the test's config and its own state
 * dir; stdout to host<h>.<n>.out, stderr to host<h>.<n>.err. */
H_FN pid_t host_spawn(int h, int n, char *const argv[])
{
    char state[300], out[300], err[300];
    snprintf(state, sizeof state, "%s/host%d", h_dir, h);
    mkdir(state, 0700);
    snprintf(out, sizeof out, "%s/host%d.%d.out", h_dir, h, n);
    snprintf(err, sizeof err, "%s/host%d.%d.err", h_dir, h, n);
    pid_t pid = fork();
    cr_assert_neq(pid, -1);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (fh_net != NULL && fh_net->on && nethosts_enter(fh_net, h) != 0)
            _exit(126);
        int o = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        int e = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        dup2(o, 1);
        dup2(e, 2);
        /* An ASan build of the shim needs libasan first (as h_run). */
        char so[1200], asan[512] = "";
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
        setenv("RLSHIM_CONFIG", h_config, 1);
        setenv("RLSHIM_STATE_DIR", state, 1);
        setenv("RLSHIM_STRICT", "1", 1);
        execv(argv[0], argv);
        _exit(127);
    }
    return pid;
}

H_FN void wait_all(pid_t *pids, int n, double timeout)
{
    double end = h_now() + timeout;
    for (int i = 0; i < n; i++) {
        int st;
        while (waitpid(pids[i], &st, WNOHANG) == 0) {
            if (h_now() > end) {
                kill(pids[i], SIGKILL);
                waitpid(pids[i], &st, 0);
                cr_assert_fail("host process %d hung", i);
            }
            usleep(10000);
        }
        cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "host %d: status %d",
                  i, st);
    }
}

/* key=value summed over the hosts' outputs (run n). */
H_FN long hosts_sum(int nhosts, int n, const char *key, bool max)
{
    long total = 0;
    for (int h = 0; h < nhosts; h++) {
        char path[300], line[512];
        snprintf(path, sizeof path, "%s/host%d.%d.out", h_dir, h, n);
        FILE *f = fopen(path, "r");
        if (f == NULL)
            continue;
        while (fgets(line, sizeof line, f) != NULL) {
            char *k = strstr(line, key);
            if (k != NULL && k[strlen(key)] == '=') {
                long v = strtol(k + strlen(key) + 1, NULL, 10);
                total = max ? (v > total ? v : total) : total + v;
            }
        }
        fclose(f);
    }
    return total;
}

/* nhosts hosts of `fleet_client connects` (procs x threads, secs) to
 * the sink at addr:port (addr NULL: 127.0.0.1), run n; returns at once,
 * their pids in pids. */
H_FN void hosts_connect(pid_t *pids, int nhosts, int n, int port, int procs,
                        int threads, double secs, const char *addr)
{
    char helper[300], ps[16], p[8], t[8], s[16];
    h_helper("fleet_client", helper, sizeof helper);
    snprintf(ps, sizeof ps, "%d", port);
    snprintf(p, sizeof p, "%d", procs);
    snprintf(t, sizeof t, "%d", threads);
    snprintf(s, sizeof s, "%g", secs);
    char *argv[] = {helper, "connects", ps, p, t, s, NULL};
    if (addr != NULL)
        setenv("FLEET_HOST", addr, 1);
    for (int h = 0; h < nhosts; h++)
        pids[h] = host_spawn(h, n, argv);
    unsetenv("FLEET_HOST");
}

/* Lines of every host's stderr (run n) that contain `needle`. */
H_FN int hosts_err_lines(int nhosts, int n, const char *needle)
{
    int total = 0;
    for (int h = 0; h < nhosts; h++) {
        char path[300];
        snprintf(path, sizeof path, "%s/host%d.%d.err", h_dir, h, n);
        total += h_file_lines(path, needle);
    }
    return total;
}

/* Connection start times the sink logged, sorted; returns how many. */
/* The first line of any host's stderr (run n) that holds `needle`, into
 * buf ("" when none): what a fallback said, for the test's own line. */
H_FN const char *hosts_err_first(int nhosts, int n, const char *needle,
                                 char *buf, size_t len)
{
    buf[0] = '\0';
    for (int h = 0; h < nhosts && buf[0] == '\0'; h++) {
        char path[300], line[512];
        snprintf(path, sizeof path, "%s/host%d.%d.err", h_dir, h, n);
        FILE *f = fopen(path, "r");
        while (f != NULL && fgets(line, sizeof line, f) != NULL)
            if (strstr(line, needle) != NULL) {
                line[strcspn(line, "\n")] = '\0';
                snprintf(buf, len, "%s", line);
                break;
            }
        if (f != NULL)
            fclose(f);
    }
    return buf;
}

H_FN int conn_times(const struct server *s, double *t, int max)
{
    int n = 0;
    char line[512];
    for (int i = 0; n < max; i++) {
        h_server_line(s, "CONN ", i, line, sizeof line);
        if (line[0] == '\0')
            break;
        t[n++] = atof(line + 5);
    }
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && t[j] < t[j - 1]; j--) {
            double x = t[j];
            t[j] = t[j - 1];
            t[j - 1] = x;
        }
    return n;
}

H_FN int count_between(const double *t, int n, double a, double b)
{
    int c = 0;
    for (int i = 0; i < n; i++)
        c += t[i] >= a && t[i] < b;
    return c;
}

#endif
