/* `rlshim run --seccomp`: programs the preload cannot reach (a static C
 * client, a Go HTTP client) throttled by the supervisor, measured at the
 * server. The clients are built here (gcc -static; go build with the
 * standard library only, offline) into the build tree, once (see
 * tests/seccomp/clients.h). */
#include "harness.h"

#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/syscall.h>

#include "../seccomp/clients.h"

static struct server srv;
static char rlshim_bin[512], static_bin[512], go_bin[512];

static void build_clients(void)
{
    struct sc_clients c;
    const char *why =
        sc_build_clients(h_env("RLSHIM_BUILD"), h_env("RLSHIM_SRC"), &c);
    if (why != NULL)
        cr_skip_test("%s", why);
    snprintf(rlshim_bin, sizeof rlshim_bin, "%s", c.rlshim);
    snprintf(static_bin, sizeof static_bin, "%s", c.static_bin);
    snprintf(go_bin, sizeof go_bin, "%s", c.go_bin);
}

static void setup_with(const char *server)
{
    h_setup();
    const char *why = sc_kernel_lacks();
    if (why != NULL)
        cr_skip_test("%s", why);
    build_clients();
    h_server_start(&srv, server);
    /* The supervisor reads these like the shim does; the runner itself is
     * never preloaded. */
    setenv("RLSHIM_CONFIG", h_config, 1);
    setenv("RLSHIM_STATE_DIR", h_state, 1);
    setenv("RLSHIM_STRICT", "1", 1);
    unsetenv("LD_PRELOAD");
}

static void setup(void)
{
    setup_with("http_count.py");
}

static void setup_sink(void)
{
    setup_with("sink.py");
}

static void teardown(void)
{
    h_server_stop(&srv);
    h_teardown();
}

static struct run r, throttled;

/* rlshim run --seccomp -- ARGS... */
static void sc_run(double timeout, char *const args[])
{
    char *argv[16] = {rlshim_bin, "run", "--seccomp", "--"};
    int n = 4;
    for (int i = 0; args[i] != NULL && n < 15; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    h_run(&r, false, timeout, argv);
}

static char url[64], port[16];

static void names(void)
{
    snprintf(url, sizeof url, "http://127.0.0.1:%d/", srv.port);
    snprintf(port, sizeof port, "%d", srv.port);
}

/* 5 a minute in an exact window: a slow run (a sanitizer, a loaded
 * machine) cannot see the window slide, so "exactly 5" is exact. */
/* The rule's `to`: the server's address, or none ("": every connect is
 * then charged alike, and the supervisor lets the kernel make it). */
static const char *to_server(bool to)
{
    static char line[64];
    snprintf(line, sizeof line, "to = 127.0.0.1:%d\n", srv.port);
    return to ? line : "";
}

static void fail_config_to(const char *kind, bool to)
{
    h_config_write("[default]\n"
                   "algorithm = sliding_window\n"
                   "%s = 5/min\n"
                   "%s",
                   kind, to_server(to));
    names();
}

static void fail_config(const char *kind)
{
    fail_config_to(kind, true);
}

static void delay_config_to(bool to)
{
    h_config_write("[rlshim]\n"
                   "on_deny = delay\n"
                   "[default]\n"
                   "connect = 5/s\n"
                   "connect_burst = 1\n"
                   "%s",
                   to_server(to));
    names();
}

static void delay_config(void)
{
    delay_config_to(true);
}

/* The server saw `n` requests, one every 200 ms (5/s) within 5 %. */
static void expect_paced(int n)
{
    cr_assert_eq(h_server_wait(&srv, "", n, 2), n);
    char line[512];
    double first = atof(h_server_line(&srv, "", 0, line, sizeof line));
    double last = atof(h_server_line(&srv, "", n - 1, line, sizeof line));
    double rate = (n - 1) / (last - first);
    cr_expect(rate > 5 * 0.95 && rate < 5 * 1.05,
              "%d requests at %.3f/s, not 5/s within 5 %%", n, rate);
}

TestSuite(seccomp, .init = setup, .fini = teardown, .timeout = 60);

Test(seccomp, static_client_gets_exactly_the_budget_in_fail_mode)
{
    fail_config("connect");
    sc_run(20, (char *[]){static_bin, "connect", port, "20", NULL});
    cr_assert_eq(r.status, 0, "status %d: %s", r.status, r.out);
    cr_expect_eq(h_out_long(&r, "ok", -1), 5, "%s", r.out);
    cr_expect_eq(h_out_long(&r, "fail", -1), 15, "%s", r.out);
    cr_expect(strstr(r.out, "err=EAGAIN") != NULL, "%s", r.out);
    usleep(200000);
    cr_expect_eq(h_server_count(&srv, ""), 5);
}

/* A site alone throttles the static client: the supervisor's exit report
 * names the site with what its connects spent, which the server saw (it
 * said "no section applies: nothing was throttled"). */
Test(seccomp, the_supervisors_report_names_a_sites_budget)
{
    h_config_write("[rlshim]\n"
                   "report = yes\n"
                   "[site:local]\n"
                   "to = 127.0.0.1:%d\n"
                   "algorithm = sliding_window\n"
                   "connect = 2/min\n",
                   srv.port);
    names();
    sc_run(20, (char *[]){static_bin, "connect", port, "4", NULL});
    cr_assert_eq(r.status, 0, "status %d: %s", r.status, r.out);
    cr_expect_eq(h_out_long(&r, "ok", -1), 2, "%s", r.out);
    cr_expect_eq(h_out_long(&r, "fail", -1), 2, "%s", r.out);
    usleep(200000);
    cr_expect_eq(h_server_count(&srv, ""), 2);
    char log[300], want[160];
    snprintf(log, sizeof log, "%s/stderr.log", h_dir);
    snprintf(want, sizeof want,
             "user %u site [site:local]: connect seen 4, allowed 2, denied 2, "
             "delayed 0\n",
             getuid());
    cr_expect_eq(h_file_lines(log, want), 1, "%s", want);
    cr_expect_eq(h_file_lines(log, "nothing was throttled"), 0);
    cr_expect_eq(h_file_lines(log, "rlshim: report: "), 1);
}

/* 16 goroutines, 20 requests, a new connection each: 5 go (the server
 * counts them), 15 fail. */
static void go_gets_exactly_five(void)
{
    sc_run(20, (char *[]){go_bin, url, "20", "16", NULL});
    cr_assert_eq(r.status, 0, "status %d: %s", r.status, r.out);
    cr_expect_eq(h_out_long(&r, "ok", -1), 5, "%s", r.out);
    cr_expect_eq(h_out_long(&r, "fail", -1), 15, "%s", r.out);
    usleep(200000);
    cr_expect_eq(h_server_count(&srv, ""), 5);
}

Test(seccomp, go_client_with_16_goroutines_gets_exactly_the_budget)
{
    fail_config("connect");
    go_gets_exactly_five();
}

/* Without `to` (nor site, per-destination budget or max_open) every inet
 * connect is charged alike: the supervisor charges it and lets the kernel
 * make it in the program's thread (sup_calls.c). Still exact. */
Test(seccomp, without_to_a_go_clients_connects_are_charged_then_continued)
{
    fail_config_to("connect", false);
    go_gets_exactly_five();
}

Test(seccomp, without_to_a_static_client_is_paced_in_delay_mode)
{
    delay_config_to(false);
    sc_run(20, (char *[]){static_bin, "connect", port, "20", NULL});
    cr_assert_eq(r.status, 0, "status %d: %s", r.status, r.out);
    cr_expect_eq(h_out_long(&r, "ok", -1), 20, "%s", r.out);
    expect_paced(20);
}

/* Without `to` the supervisor decides a connect without reading its
 * address (sup_calls.c), and reads it only for a line that names it: the
 * denials still name the server, as with a `to`. */
Test(seccomp, without_to_a_denied_connects_line_names_its_destination)
{
    char log[300], line[64];
    snprintf(log, sizeof log, "%s/rule.log", h_dir);
    h_config_write("[rlshim]\n"
                   "log = %s\n"
                   "[default]\n"
                   "algorithm = sliding_window\n"
                   "connect = 5/min\n",
                   log);
    names();
    sc_run(20, (char *[]){static_bin, "connect", port, "20", NULL});
    cr_assert_eq(r.status, 0, "status %d: %s", r.status, r.out);
    cr_expect_eq(h_out_long(&r, "fail", -1), 15, "%s", r.out);
    snprintf(line, sizeof line, "to 127.0.0.1:%d: connect 1 over quota",
             srv.port);
    int named = h_file_lines(log, line);
    int denied = h_file_lines(log, "denied connect");
    cr_expect_gt(named, 0, "no denial names 127.0.0.1:%d", srv.port);
    cr_expect_eq(named, denied, "%d of %d denials name the server", named,
                 denied);
}

/* With the decision log on, the address is read before the decision:
 * each of the 20 lines names the server's address and port. */
Test(seccomp, without_to_the_decision_log_names_every_connects_destination)
{
    char log[300], dest[64];
    snprintf(log, sizeof log, "%s/decisions.jsonl", h_dir);
    setenv("RLSHIM_DECISION_LOG", log, 1);
    fail_config_to("connect", false);
    sc_run(20, (char *[]){static_bin, "connect", port, "20", NULL});
    unsetenv("RLSHIM_DECISION_LOG");
    cr_assert_eq(r.status, 0, "status %d: %s", r.status, r.out);
    snprintf(dest, sizeof dest, "\"127.0.0.1\",\"port\":%d", srv.port);
    cr_expect_eq(h_file_lines(log, "\"call\":\"connect\""), 20);
    cr_expect_eq(h_file_lines(log, dest), 20, "lines naming %s", dest);
}

Test(seccomp, static_client_is_paced_at_the_rate_in_delay_mode)
{
    delay_config();
    sc_run(20, (char *[]){static_bin, "connect", port, "20", NULL});
    cr_assert_eq(r.status, 0, "status %d: %s", r.status, r.out);
    cr_expect_eq(h_out_long(&r, "ok", -1), 20, "%s", r.out);
    expect_paced(20);
    /* The control: the same supervisor and client, nothing throttled. */
    throttled = r;
    h_config_write("%s", h_never_binds);
    sc_run(20, (char *[]){static_bin, "connect", port, "20", NULL});
    cr_assert_eq(r.status, 0, "control: status %d: %s", r.status, r.out);
    h_expect_no_spin(&throttled, &r, 0.1, "the supervisor");
}

Test(seccomp, go_client_with_16_goroutines_is_paced_in_delay_mode)
{
    delay_config();
    sc_run(20, (char *[]){go_bin, url, "20", "16", NULL});
    cr_assert_eq(r.status, 0, "status %d: %s", r.status, r.out);
    cr_expect_eq(h_out_long(&r, "ok", -1), 20, "%s", r.out);
    expect_paced(20);
    /* The control: the same supervisor and client, nothing throttled. */
    throttled = r;
    h_config_write("%s", h_never_binds);
    sc_run(20, (char *[]){go_bin, url, "20", "16", NULL});
    cr_assert_eq(r.status, 0, "control: status %d: %s", r.status, r.out);
    h_expect_no_spin(&throttled, &r, 0.1, "the supervisor and Go");
}

/* A non-blocking connect is made by the supervisor on its copy of the
 * socket; its EINPROGRESS goes back to the program, which polls. */
Test(seccomp, non_blocking_connects_are_paced_and_complete)
{
    delay_config();
    sc_run(20, (char *[]){static_bin, "nbconnect", port, "10", NULL});
    cr_assert_eq(r.status, 0, "status %d: %s", r.status, r.out);
    cr_expect_eq(h_out_long(&r, "ok", -1), 10, "%s", r.out);
    expect_paced(10);
}

/* A blocking connect is made by the supervisor too, and those that cannot
 * complete (their SYNs dropped) must not hold up the program's other
 * calls: 20 connects of another thread are decided, made and served while
 * 4 wait (more than the receivers kept waiting). */
Test(seccomp, a_stuck_blocking_connect_holds_up_no_other_call)
{
    h_config_write("[default]\n"
                   "connect = 1000/s\n"
                   "to = 127.0.0.0/8\n");
    names();
    sc_run(30, (char *[]){static_bin, "stuck", port, "20", NULL});
    cr_assert_eq(r.status, 0, "status %d: %s", r.status, r.out);
    cr_expect_eq(h_out_long(&r, "ok", -1), 20, "%s", r.out);
    cr_expect_eq(h_out_long(&r, "stuck_waiting", -1), 4,
                 "the other connects waited for the stuck one: %s", r.out);
    cr_expect_eq(h_server_wait(&srv, "", 20, 2), 20);
}

/* One user, one budget: curl under the preload and the Go client under the
 * supervisor take from the same shared segment. */
Test(seccomp, shares_one_budget_with_a_preloaded_curl_loop)
{
    fail_config("connect");
    char *curl[] = {"curl",       "-sS", "-o", "/dev/null",
                    "--max-time", "5",   url,  NULL};
    int curl_ok = 0;
    for (int i = 0; i < 3; i++) {
        h_run(&r, true, 5, curl);
        curl_ok += r.status == 0;
    }
    sc_run(20, (char *[]){go_bin, url, "10", "4", NULL});
    cr_assert_eq(r.status, 0, "status %d: %s", r.status, r.out);
    long go_ok = h_out_long(&r, "ok", -1);
    for (int i = 0; i < 3; i++) {
        h_run(&r, true, 5, curl);
        curl_ok += r.status == 0;
    }
    cr_expect_eq(curl_ok, 3, "curl got %d", curl_ok);
    cr_expect_eq(go_ok, 2, "go got %ld", go_ok);
    usleep(200000);
    cr_expect_eq(h_server_count(&srv, ""), 5, "the sum obeys 5/min");
}

/* The supervisor dies (SIGKILL, nothing it can catch) while a connect is
 * held: the program must not run on with ENOSYS networking, it is ended
 * (PR_SET_PDEATHSIG). The client paces its 20 connects 100 ms apart on
 * top of the 2/s, so one left running would still be at it seconds
 * later. */
Test(seccomp, a_killed_supervisor_ends_the_program)
{
    h_config_write("[rlshim]\n"
                   "on_deny = delay\n"
                   "[default]\n"
                   "connect = 2/s\n"
                   "connect_burst = 1\n"
                   "to = 127.0.0.1:%d\n",
                   srv.port);
    names();
    /* The program is re-parented to us when the supervisor dies. */
    cr_assert_eq(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
    char out[300];
    snprintf(out, sizeof out, "%s/out.txt", h_dir);
    pid_t sup = fork();
    cr_assert_neq(sup, -1);
    if (sup == 0) {
        int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        dup2(fd, 1);
        execl(rlshim_bin, rlshim_bin, "run", "--seccomp", "--", static_bin,
              "connect", port, "20", "100", (char *)NULL);
        _exit(127);
    }
    cr_assert_geq(h_server_wait(&srv, "", 2, 5), 2);
    usleep(100000); /* the third connect is held now */
    kill(sup, SIGKILL);
    int st;
    cr_assert_eq(waitpid(sup, &st, 0), sup);
    double killed = h_now();
    pid_t p = 0;
    while (h_now() < killed + 5 && (p = waitpid(-1, &st, WNOHANG)) == 0)
        usleep(10000);
    double gone = h_now() - killed;
    struct run got;
    FILE *f = fopen(out, "r");
    cr_assert_not_null(f);
    size_t n = fread(got.out, 1, sizeof got.out - 1, f);
    got.out[n] = '\0';
    fclose(f);
    if (p <= 0 && h_out_long(&got, "pid", 0) > 0)
        kill((pid_t)h_out_long(&got, "pid", 0), SIGKILL);
    cr_assert_gt(p, 0, "the program ran on 5 s after its supervisor died");
    cr_expect(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL,
              "the program was not killed: status %#x after %.2f s: %s", st,
              gone, got.out);
    cr_expect_lt(gone, 1.0, "the program ran on %.2f s", gone);
    cr_expect_eq(h_out_long(&got, "done", 0), 0, "it finished: %s", got.out);
    cr_expect_lt(h_server_count(&srv, ""), 4);
}

/* Run rlshim run --seccomp under a filter of our own (what a container's
 * seccomp policy would do) and expect one line, 126, and no run. */
static void refused_saying(struct sock_filter *code, unsigned short len,
                           const char *says)
{
    fail_config("connect");
    char err[300];
    snprintf(err, sizeof err, "%s/refused.log", h_dir);
    pid_t pid = fork();
    cr_assert_neq(pid, -1);
    if (pid == 0) {
        struct sock_fprog prog = {len, code};
        int fd = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        dup2(fd, 2);
        dup2(open("/dev/null", O_WRONLY), 1);
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
            prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0)
            _exit(99);
        execl(rlshim_bin, rlshim_bin, "run", "--seccomp", "--", static_bin,
              "connect", port, "3", (char *)NULL);
        _exit(127);
    }
    int st;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 126, "status %d", st);
    cr_expect_eq(h_file_lines(err, ""), 1, "one line");
    cr_expect_eq(h_file_lines(err, "unthrottled"), 1);
    if (says != NULL)
        cr_expect_eq(h_file_lines(err, says), 1, "the line names the cause");
    usleep(200000);
    cr_expect_eq(h_server_count(&srv, ""), 0, "the program ran");
}

static void refused(struct sock_filter *code, unsigned short len)
{
    refused_saying(code, len, NULL);
}

#define NR_IS(num, skip)                                                       \
    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),     \
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, num, 0, skip)

/* Every seccomp(2) fails: libseccomp cannot even build the filter. */
Test(seccomp, no_seccomp_at_all_means_126_and_no_run)
{
    struct sock_filter code[] = {
        NR_IS(__NR_seccomp, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    refused(code, 4);
}

/* Only installing a real filter fails (libseccomp's probes pass NULL):
 * the child's seccomp(2) is refused after fork. */
Test(seccomp, a_refused_filter_means_126_and_no_run)
{
    struct sock_filter code[] = {
        NR_IS(__NR_seccomp, 5),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
                 offsetof(struct seccomp_data, args[0])),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SECCOMP_SET_MODE_FILTER, 0, 3),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
                 offsetof(struct seccomp_data, args[2])),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    refused(code, 8);
}

/* Yama's ptrace_scope 2 or 3 (without CAP_SYS_PTRACE), an LSM, a
 * container's policy: the supervisor may not take the program's sockets
 * (pidfd_getfd) or read its memory (process_vm_readv). Probed on the child
 * before it execs: one line saying so, 126, and no run, rather than a
 * program whose every connect fails. This kernel may have no Yama (and
 * ptrace_scope 3 cannot be undone), so EPERM comes from a filter of ours
 * on rlshim itself, which is what the probe sees under Yama too. */
Test(seccomp, no_pidfd_getfd_permission_means_126_and_no_run)
{
    struct sock_filter code[] = {
        NR_IS(__NR_pidfd_getfd, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    refused_saying(code, 4, "may not read the program's sockets and memory");
}

Test(seccomp, no_process_vm_readv_permission_means_126_and_no_run)
{
    struct sock_filter code[] = {
        NR_IS(__NR_process_vm_readv, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    refused_saying(code, 4, "may not read the program's sockets and memory");
}

Test(seccomp, states_once_what_it_cannot_enforce)
{
    h_config_write("[default]\n"
                   "connect = 100/s\n"
                   "send_bytes = 1MiB/s\n"
                   "to = 127.0.0.1:%d\n",
                   srv.port);
    names();
    sc_run(20, (char *[]){static_bin, "connect", port, "2", NULL});
    cr_assert_eq(r.status, 0, "status %d: %s", r.status, r.out);
    char log[300];
    snprintf(log, sizeof log, "%s/stderr.log", h_dir);
    cr_expect_eq(h_file_lines(log, "warning"), 1);
    cr_expect_eq(h_file_lines(log, "send_bytes is enforced on datagrams"), 1);
}

/* A Go client's requests (its TLS is its own, and the supervisor sees no
 * stream write anyway) are not counted: said once, and its connects are
 * still limited. Keep-alive off, so that each request connects. */
Test(seccomp, says_once_that_a_go_clients_requests_are_not_counted)
{
    h_config_write("[default]\n"
                   "algorithm = sliding_window\n"
                   "connect = 5/min\n"
                   "request = 1/min\n"
                   "to = 127.0.0.1:%d\n",
                   srv.port);
    names();
    sc_run(20, (char *[]){go_bin, url, "20", "4", NULL});
    cr_assert_eq(r.status, 0, "status %d: %s", r.status, r.out);
    cr_expect_eq(h_out_long(&r, "ok", -1), 5, "%s", r.out);
    usleep(200000);
    cr_expect_eq(h_server_count(&srv, ""), 5,
                 "the connects are limited, the requests not counted");
    char log[300];
    snprintf(log, sizeof log, "%s/stderr.log", h_dir);
    cr_expect_eq(h_file_lines(log, "requests are not counted ([default] "
                                   "request)"),
                 1);
}

Test(seccomp, run_without_it_suggests_it_for_a_go_binary)
{
    fail_config("connect");
    char *argv[] = {rlshim_bin, "run", "--", go_bin, url, "1", "1", NULL};
    h_run(&r, false, 20, argv);
    cr_assert_eq(r.status, 0, "status %d: %s", r.status, r.out);
    char log[300];
    snprintf(log, sizeof log, "%s/stderr.log", h_dir);
    cr_expect_eq(h_file_lines(log, "rlshim run --seccomp throttles it"), 1);
}

TestSuite(seccomp_udp, .init = setup_sink, .fini = teardown, .timeout = 60);

Test(seccomp_udp, addressed_datagrams_get_exactly_the_budget)
{
    fail_config("send");
    sc_run(20, (char *[]){static_bin, "udp", port, "20", NULL});
    cr_assert_eq(r.status, 0, "status %d: %s", r.status, r.out);
    cr_expect_eq(h_out_long(&r, "ok", -1), 5, "%s", r.out);
    cr_expect_eq(h_server_wait(&srv, "DGRAM", 5, 1), 5);
    usleep(200000);
    cr_expect_eq(h_server_count(&srv, "DGRAM"), 5);
}

Test(seccomp, exits_with_the_status_of_the_program)
{
    fail_config("connect");
    sc_run(20, (char *[]){static_bin, "no-such-mode", "1", NULL});
    cr_expect_eq(r.status, 2, "status %d", r.status);
}

/* A SIGTERM sent to the supervisor (kill, systemd) goes on to the program,
 * held in a delayed connect here; the supervisor exits as it did. */
Test(seccomp, passes_a_sigterm_on_to_the_program)
{
    h_config_write("[rlshim]\n"
                   "on_deny = delay\n"
                   "[default]\n"
                   "connect = 1/s\n"
                   "connect_burst = 1\n"
                   "to = 127.0.0.1:%d\n",
                   srv.port);
    names();
    pid_t sup = fork();
    cr_assert_neq(sup, -1);
    if (sup == 0) {
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 1);
        dup2(null, 2);
        execl(rlshim_bin, rlshim_bin, "run", "--seccomp", "--", static_bin,
              "connect", port, "20", (char *)NULL);
        _exit(127);
    }
    cr_assert_geq(h_server_wait(&srv, "", 1, 5), 1);
    usleep(200000); /* the second connect is held */
    double t0 = h_now();
    kill(sup, SIGTERM);
    int st = 0;
    pid_t p = 0;
    while (h_now() - t0 < 5 && (p = waitpid(sup, &st, WNOHANG)) == 0)
        usleep(10000);
    if (p == 0) {
        kill(sup, SIGKILL);
        waitpid(sup, &st, 0);
    }
    cr_assert_eq(p, sup, "the supervisor did not exit after SIGTERM");
    cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 128 + SIGTERM, "status %d",
              st);
    cr_expect_lt(h_server_count(&srv, ""), 3);
}

/* A program killed while its connect is held does not keep the turn it
 * reserved: at that turn the supervisor finds the call gone and gives the
 * unit back, so the next program does not wait for it. */
Test(seccomp, a_held_call_whose_program_died_gives_its_turn_back)
{
    h_config_write("[rlshim]\n"
                   "on_deny = delay\n"
                   "[default]\n"
                   "connect = 15/min\n"
                   "connect_burst = 1\n"
                   "to = 127.0.0.1:%d\n",
                   srv.port);
    names();
    cr_assert_eq(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
    char out[300];
    snprintf(out, sizeof out, "%s/out.txt", h_dir);
    pid_t sup = fork();
    cr_assert_neq(sup, -1);
    if (sup == 0) {
        int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        dup2(fd, 1);
        execl(rlshim_bin, rlshim_bin, "run", "--seccomp", "--", static_bin,
              "connect", port, "3", (char *)NULL);
        _exit(127);
    }
    double t0 = h_now();
    cr_assert_eq(h_server_wait(&srv, "", 1, 5), 1);
    usleep(200000); /* the second connect is held until t0 + 4 s */
    struct run got;
    FILE *f = fopen(out, "r");
    cr_assert_not_null(f);
    size_t n = fread(got.out, 1, sizeof got.out - 1, f);
    got.out[n] = '\0';
    fclose(f);
    pid_t prog = (pid_t)h_out_long(&got, "pid", 0);
    cr_assert_gt(prog, 0, "%s", got.out);
    kill(prog, SIGKILL);
    int st;
    cr_assert_eq(waitpid(sup, &st, 0), sup);
    waitpid(-1, &st, WNOHANG);
    /* Past the dead call's turn: its unit is back, so one connect goes at
     * once (without the refund it would wait until t0 + 8 s, almost 4 s
     * more: half of that tells the two apart on a machine several times
     * slower at starting the supervisor). */
    double turn = t0 + 4.15 - h_now();
    if (turn > 0)
        usleep((useconds_t)(turn * 1e6));
    double t1 = h_now();
    sc_run(20, (char *[]){static_bin, "connect", port, "1", NULL});
    cr_assert_eq(r.status, 0, "status %d: %s", r.status, r.out);
    cr_expect_eq(h_out_long(&r, "ok", -1), 1, "%s", r.out);
    cr_expect_lt(h_now() - t1, 2.0, "the next connect waited %.2f s",
                 h_now() - t1);
}

/* io_uring's connects would never reach the filter: io_uring_setup
 * answers ENOSYS under it, as under the library. */
Test(seccomp, io_uring_setup_answers_enosys)
{
    fail_config("connect");
    char *bare[] = {static_bin, "uring", NULL};
    h_run(&r, false, 10, bare);
    if (strstr(r.out, "uring=fd") == NULL)
        cr_skip_test("io_uring is not available here: %s", r.out);
    sc_run(10, (char *[]){static_bin, "uring", NULL});
    cr_assert_eq(r.status, 0, "status %d: %s", r.status, r.out);
    cr_expect(strstr(r.out, "uring=ENOSYS") != NULL, "%s", r.out);
}

/* With librlshim.so in the environment's LD_PRELOAD, neither the program
 * nor the supervisor keeps it: each connect is charged once. */
Test(seccomp, charges_once_when_the_shim_is_preloaded_too)
{
    fail_config("connect");
    char so[600];
    snprintf(so, sizeof so, "%s/librlshim.so", h_env("RLSHIM_BUILD"));
    if (strcmp(getenv("RLSHIM_SANITIZER") ? getenv("RLSHIM_SANITIZER") : "",
               "address") == 0)
        cr_skip_test("an ASan librlshim.so cannot be preloaded alone");
    char *curl[] = {"curl",       "-sS", "-o", "/dev/null",
                    "--max-time", "5",   url,  NULL};
    int ok = 0;
    setenv("LD_PRELOAD", so, 1);
    for (int i = 0; i < 6; i++) {
        sc_run(10, curl);
        ok += r.status == 0;
    }
    unsetenv("LD_PRELOAD");
    cr_expect_eq(ok, 5, "%d of 6 curls got through", ok);
    usleep(200000);
    cr_expect_eq(h_server_count(&srv, ""), 5);
}

/* ---- max_open (SPEC §4) under --seccomp --------------------------------
 * Measured at hold.py, which logs how many connections it holds at every
 * change. The clients close politely (half-close, wait for the server's
 * close), so that the server's count has gone down before the place can
 * be given to another connect. */

static void setup_hold(void)
{
    setup_with("hold.py");
}

TestSuite(seccomp_open, .init = setup_hold, .fini = teardown, .timeout = 60);

/* The most connections the server held at once, and the lines it logged
 * (an accept or a close each). */
static int most_open(int *lines)
{
    char line[512];
    int most = 0, n, i;
    for (i = 0;; i++) {
        h_server_line(&srv, "", i, line, sizeof line);
        if (line[0] == '\0')
            break;
        if (sscanf(line, "%*f open %d", &n) == 1 && n > most)
            most = n;
    }
    if (lines != NULL)
        *lines = i;
    return most;
}

static void open_config(bool delay)
{
    h_config_write("[rlshim]\n"
                   "on_deny = %s\n"
                   "[default]\n"
                   "max_open = 2\n"
                   "errno = ECONNREFUSED\n"
                   "to = 127.0.0.1:%d\n",
                   delay ? "delay" : "fail", srv.port);
    names();
}

/* All `n` connections were opened and closed, never more than 2 at once. */
static void expect_two_at_most(int n)
{
    int lines = 0;
    usleep(200 * 1000);
    int most = most_open(&lines);
    cr_expect_eq(most, 2, "the server held %d at once", most);
    cr_expect_eq(lines, 2 * n, "%d accepts and closes, not %d", lines, 2 * n);
}

Test(seccomp_open, static_client_holding_ten_gets_two_in_fail_mode)
{
    open_config(false);
    sc_run(20, (char *[]){static_bin, "hold", port, "10", "300", NULL});
    cr_assert_eq(r.status, 0, "status %d: %s", r.status, r.out);
    cr_expect_eq(h_out_long(&r, "ok", -1), 2, "%s", r.out);
    cr_expect_eq(h_out_long(&r, "fail", -1), 8, "%s", r.out);
    cr_expect(strstr(r.out, "err=ECONNREFUSED") != NULL,
              "the configured errno: %s", r.out);
    expect_two_at_most(2);
}

Test(seccomp_open, go_client_holding_ten_gets_two_in_fail_mode)
{
    char addr[64];
    open_config(false);
    snprintf(addr, sizeof addr, "127.0.0.1:%d", srv.port);
    sc_run(20, (char *[]){go_bin, "hold", addr, "10", "300", NULL});
    cr_assert_eq(r.status, 0, "status %d: %s", r.status, r.out);
    cr_expect_eq(h_out_long(&r, "ok", -1), 2, "%s", r.out);
    cr_expect_eq(h_out_long(&r, "fail", -1), 8, "%s", r.out);
    cr_expect(strstr(r.out, "connection refused") != NULL,
              "the configured errno: %s", r.out);
    expect_two_at_most(2);
}

/* Delay mode: each of 10 holds its connection 200 ms; 2 at a time, the
 * others go as places free: all 10, in 5 rounds. */
static void expect_rounds(double secs)
{
    cr_expect_eq(h_out_long(&r, "ok", -1), 10, "%s", r.out);
    cr_expect_eq(h_out_long(&r, "fail", -1), 0, "%s", r.out);
    expect_two_at_most(10);
    cr_expect_geq(secs, 5 * 0.2 * 0.9, "10 x 200 ms, 2 at a time, in %.2f s",
                  secs);
}

Test(seccomp_open, static_processes_wait_for_a_place_in_delay_mode)
{
    open_config(true);
    double t0 = h_now();
    sc_run(20, (char *[]){static_bin, "forks", port, "10", "200", NULL});
    double secs = h_now() - t0;
    cr_assert_eq(r.status, 0, "status %d: %s", r.status, r.out);
    expect_rounds(secs);
}

Test(seccomp_open, go_goroutines_wait_for_a_place_in_delay_mode)
{
    char addr[64];
    open_config(true);
    snprintf(addr, sizeof addr, "127.0.0.1:%d", srv.port);
    double t0 = h_now();
    sc_run(20, (char *[]){go_bin, "hold", addr, "10", "200", NULL});
    double secs = h_now() - t0;
    cr_assert_eq(r.status, 0, "status %d: %s", r.status, r.out);
    expect_rounds(secs);
}

/* Connections the server accepted: the lines where its count rose. */
static int accepted(void)
{
    char line[512];
    int prev = 0, n, acc = 0;
    for (int i = 0;; i++) {
        h_server_line(&srv, "", i, line, sizeof line);
        if (line[0] == '\0')
            break;
        if (sscanf(line, "%*f open %d", &n) == 1) {
            acc += n > prev;
            prev = n;
        }
    }
    return acc;
}

/* A thread flips the family of the address another thread connects inet
 * sockets to, between AF_UNIX and AF_INET 127.0.0.1:PORT, 10,000 times.
 * An address read as AF_UNIX and answered "continue" is read again by the
 * kernel, maybe as AF_INET: a connect nobody charged. Counted at the
 * server: never more than the budget's 5. `to`: the rule names the
 * server (the supervisor makes each connect), or nothing (each new
 * attempt is charged whatever was read, then continued). */
static void flip_gets_at_most_five(bool to)
{
    fail_config_to("connect", to);
    sc_run(60, (char *[]){static_bin, "flip", port, "10000", NULL});
    cr_assert_eq(r.status, 0, "status %d: %s", r.status, r.out);
    cr_assert_eq(h_out_long(&r, "done", 0), 1, "%s", r.out);
    long ok = h_out_long(&r, "ok", -1), unix_ = h_out_long(&r, "unix", -1);
    cr_expect_eq(h_out_long(&r, "other", -1), 0, "%s", r.out);
    if (to) {
        /* Both families were seen (the flip raced the connects): an
         * address read as AF_UNIX is continued uncharged, so the kernel
         * reads many of them. */
        cr_expect_gt(unix_, 0, "%s", r.out);
        cr_expect_gt(h_out_long(&r, "fail", 0), 0, "%s", r.out);
    } else {
        /* Every attempt is charged whatever family it was read as, so
         * only the budget's 5 reach the kernel (whichever family it then
         * reads: how many of the 5 it read as AF_UNIX is the race's, and
         * may be none), and all the others are refused. */
        cr_expect_eq(ok + unix_, 5, "%s", r.out);
        cr_expect_eq(h_out_long(&r, "fail", -1), 10000 - 5, "%s", r.out);
    }
    usleep(300 * 1000);
    int acc = accepted();
    cr_expect_leq(acc, 5, "the server accepted %d connects, the budget is 5",
                  acc);
    cr_expect_eq(acc, ok, "%s", r.out);
}

Test(seccomp_open, a_thread_flipping_the_family_gets_no_uncharged_connect)
{
    flip_gets_at_most_five(true);
}

Test(seccomp_open, without_to_a_thread_flipping_the_family_gets_no_free_connect)
{
    flip_gets_at_most_five(false);
}

/* close, dup2 over the fd, close_range, and the exit of the process that
 * held them (its pid, not the supervisor's, names the holder) each give
 * the places back. */
Test(seccomp_open, every_way_of_giving_an_fd_up_frees_its_place)
{
    open_config(false);
    sc_run(20, (char *[]){static_bin, "paths", port, NULL});
    cr_assert_eq(r.status, 0, "status %d: %s", r.status, r.out);
    cr_expect(strstr(r.out, "error=") == NULL, "%s", r.out);
    cr_expect_eq(h_out_long(&r, "third", -1), 0, "max_open 2: %s", r.out);
    cr_expect_eq(h_out_long(&r, "after_close", -1), 1, "%s", r.out);
    cr_expect_eq(h_out_long(&r, "after_dup2", -1), 1, "%s", r.out);
    cr_expect_eq(h_out_long(&r, "after_close_range", -1), 2, "%s", r.out);
    cr_expect_eq(h_out_long(&r, "after_exit", -1), 2, "%s", r.out);
    usleep(200 * 1000);
    cr_expect_leq(most_open(NULL), 2, "the server held %d at once",
                  most_open(NULL));
}
