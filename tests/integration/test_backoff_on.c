/* Politeness that adapts, its errors (SPEC §14 backoff_on), measured at
 * the server: what backoff_on lists pauses a destination as §12's
 * backoff does (one turn, doubling with each in a row, a success ends
 * it), and what it does not list changes nothing. 5xx answers, a
 * connection reset after the request was read, and a request left
 * unanswered past response_timeout; python requests and curl. The server
 * is tests/integration/servers/http_status.py (its path picks the answer:
 * /s/500/- a 500, /reset a reset, /hang/N no answer); its own clock
 * stamps each request. */
#include "harness.h"

static struct server st, sts;
static struct run r;

static void setup(void)
{
    h_setup();
    h_server_start(&st, "http_status.py");
}

static void teardown(void)
{
    h_server_stop(&st);
    h_server_stop(&sts);
    h_teardown();
}

TestSuite(backoff_on, .init = setup, .fini = teardown, .timeout = 90);

/* Gap (s) between the server's i-th and j-th requests, once it has seen
 * both. */
static double gap(int i, int j)
{
    int n = h_server_wait(&st, "REQ", j + 1, 5);
    cr_assert_geq(n, j + 1, "the server saw %d requests, not %d", n, j + 1);
    return h_server_stamp(&st, j) - h_server_stamp(&st, i);
}

static char url_buf[8][160];

static char *url(const char *path)
{
    static int k;
    char *u = url_buf[k++ % 8];
    snprintf(u, 160, "http://127.0.0.1:%d%s", st.port, path);
    return u;
}

/* GETs each URL in turn on one session, with a timeout of argv[1]
 * seconds (an argument t=N sets it for the URLs after it); "error: ..."
 * for one that failed (the process goes on). */
static const char session_py[] =
    "import requests, sys\n"
    "s = requests.Session()\n"
    "t = float(sys.argv[1])\n"
    "for u in sys.argv[2:]:\n"
    "    if u.startswith('t='):\n"
    "        t = float(u[2:])\n"
    "        continue\n"
    "    try:\n"
    "        s.get(u, timeout=t).content\n"
    "    except Exception as e:\n"
    "        print('error: %r' % e)\n";

#define MAX_URLS 8

static void run_python(const char *timeout, const char *const *paths,
                       int n)
{
    char *argv[MAX_URLS + 4] = {"/usr/bin/python3", "-c", (char *)session_py,
                                (char *)timeout};
    for (int i = 0; i < n; i++)
        argv[4 + i] = strncmp(paths[i], "t=", 2) == 0 ? (char *)paths[i]
                                                      : url(paths[i]);
    argv[4 + n] = NULL;
    h_run(&r, true, 60, argv);
    cr_assert_eq(r.status, 0, "python: status %d\n%s", r.status, r.out);
}

/* The limit itself never spaces these requests (a burst of 10 at 2/s):
 * the backoff's turn is 0.5 s, and a pause is all that spaces them. */
#define CONFIG_5XX(on)                                                       \
    "[default]\nrequest = 2/s\nrequest_burst = 10\non_deny = delay\n"     \
    "max_delay = 20s\nmax_retry_after = 10s\nbackoff_on = " on "\n"

static const char *const fives[] = {"/s/500/-", "/s/502/-", "/s/500/-",
                                    "/s/599/-", "/ok",      "/s/500/-",
                                    "/ok"};

Test(backoff_on, python_500s_in_a_row_double_the_pause_and_a_success_ends_it)
{
    h_config_write(CONFIG_5XX("429, 503, 5xx"));
    run_python("20", fives, 7);
    /* 0.5, 1, 2, 4 s after the 500s; none after the 200; one turn after
     * the 500 that follows it (not the 8 s the run would have come to). */
    const double want[6] = {0.5, 1, 2, 4, 0, 0.5};
    for (int i = 0; i < 6; i++) {
        double g = gap(i, i + 1);
        cr_log_info("5xx backoff %d: %.3f s", i, g);
        cr_expect_geq(g, 0.8 * want[i], "gap %d: %.3f s, want %.1f s", i, g,
                      want[i]);
    }
    cr_expect_lt(gap(5, 6), 4.0, "the success did not end the doubling");
}

Test(backoff_on, the_same_500s_without_5xx_listed_change_nothing)
{
    h_config_write(CONFIG_5XX("429, 503"));
    run_python("20", fives, 7);
    double all = gap(0, 6);
    cr_log_info("500s not listed: 7 requests in %.3f s", all);
    /* Listed, they take 7.5 s at least. */
    cr_expect_lt(all, 3.0, "500s that backoff_on does not list paused: "
                           "%.3f s",
                 all);
}

Test(backoff_on, curl_500s_in_a_row_double_the_pause)
{
    h_config_write(CONFIG_5XX("5xx"));
    char *argv[] = {"curl",           "-s",
                    url("/s/500/-"), url("/s/503/-"),
                    url("/s/500/-"), url("/ok"),
                    NULL};
    h_run(&r, true, 30, argv);
    cr_assert_eq(r.status, 0, "curl: status %d\n%s", r.status, r.out);
    const double want[3] = {0.5, 1, 2};
    for (int i = 0; i < 3; i++) {
        double g = gap(i, i + 1);
        cr_log_info("curl 5xx backoff %d: %.3f s", i, g);
        cr_expect_geq(g, 0.8 * want[i], "gap %d: %.3f s, want %.1f s", i, g,
                      want[i]);
    }
}

/* A turn of 2 s: the pause a reset or a timeout makes stands out. */
#define CONFIG_SLOW(on)                                                      \
    "[default]\nrequest = 30/min\nrequest_burst = 10\non_deny = delay\n"  \
    "max_delay = 20s\nresponse_timeout = 1s\nbackoff_on = " on "\n"

Test(backoff_on, a_reset_after_the_request_was_read_counts_under_reset_only)
{
    static const char *const paths[] = {"/reset", "/ok"};
    h_config_write(CONFIG_SLOW("429, 503, reset"));
    run_python("20", paths, 2);
    cr_expect(strstr(r.out, "error:") != NULL, "no reset seen:\n%s", r.out);
    double g = gap(0, 1);
    cr_log_info("reset listed: %.3f s to the next request", g);
    cr_expect_geq(g, 0.8 * 2, "a reset under backoff_on = reset: %.3f s",
                  g);

    /* Not listed: the next request goes at once. */
    h_config_write(CONFIG_SLOW("429, 503"));
    run_python("20", paths, 2);
    g = gap(2, 3);
    cr_log_info("reset not listed: %.3f s to the next request", g);
    cr_expect_lt(g, 1.0, "a reset not listed paused %.3f s", g);
}

/* The client gives up after 2 s and closes the connection: its request
 * had waited past response_timeout (1 s), and the next one (whose own
 * timeout is longer than the pause) waits a turn more (2 s) under
 * backoff_on = timeout. */
Test(backoff_on, a_request_unanswered_past_response_timeout_counts_a_timeout)
{
    static const char *const paths[] = {"/hang/4", "t=20", "/ok"};
    h_config_write(CONFIG_SLOW("timeout"));
    run_python("2", paths, 3);
    cr_expect(strstr(r.out, "error:") != NULL, "no timeout seen:\n%s", r.out);
    double g = gap(0, 1);
    cr_log_info("timeout listed: %.3f s to the next request", g);
    cr_expect_geq(g, 2 + 0.8 * 2, "a timeout under backoff_on = timeout: "
                                  "%.3f s",
                  g);

    h_config_write(CONFIG_SLOW("429, 503"));
    run_python("2", paths, 3);
    g = gap(2, 3);
    cr_log_info("timeout not listed: %.3f s to the next request", g);
    cr_expect_lt(g, 3.5, "a timeout not listed paused: %.3f s", g);
}

/* Under TLS: the reset reaches the program through its TLS library (curl:
 * SSL_read; python: SSL_read_ex). */
Test(backoff_on, a_reset_under_tls_counts_too)
{
    setenv("RL_TLS", "1", 1);
    h_server_start(&sts, "http_status.py");
    unsetenv("RL_TLS");
    h_config_write(CONFIG_SLOW("reset"));
    char u1[160], u2[160];
    snprintf(u1, sizeof u1, "https://127.0.0.1:%d/reset", sts.port);
    snprintf(u2, sizeof u2, "https://127.0.0.1:%d/ok", sts.port);
    char *curl[] = {"curl", "-sk", u1, u2, NULL};
    h_run(&r, true, 30, curl);
    int n = h_server_wait(&sts, "REQ", 2, 5);
    cr_assert_eq(n, 2, "the server saw %d requests\n%s", n, r.out);
    char line[512], f[64];
    h_server_line(&sts, "REQ", 0, line, sizeof line);
    double t0 = atof(h_field(line, 1, f, sizeof f));
    h_server_line(&sts, "REQ", 1, line, sizeof line);
    double g = atof(h_field(line, 1, f, sizeof f)) - t0;
    cr_log_info("curl over TLS, reset: %.3f s to the next request", g);
    cr_expect_geq(g, 0.8 * 2, "a reset under TLS (SSL_read): %.3f s", g);

    static const char py[] =
        "import requests, sys, urllib3\n"
        "urllib3.disable_warnings()\n"
        "s = requests.Session()\n"
        "for u in sys.argv[1:]:\n"
        "    try:\n"
        "        s.get(u, timeout=20, verify=False).content\n"
        "    except Exception as e:\n"
        "        print('error: %r' % e)\n";
    char *python[] = {"/usr/bin/python3", "-c", (char *)py, u1, u2, NULL};
    h_run(&r, true, 30, python);
    n = h_server_wait(&sts, "REQ", 4, 5);
    cr_assert_eq(n, 4, "the server saw %d requests\n%s", n, r.out);
    h_server_line(&sts, "REQ", 2, line, sizeof line);
    t0 = atof(h_field(line, 1, f, sizeof f));
    h_server_line(&sts, "REQ", 3, line, sizeof line);
    g = atof(h_field(line, 1, f, sizeof f)) - t0;
    cr_log_info("python over TLS, reset: %.3f s to the next request", g);
    cr_expect_geq(g, 0.8 * 2, "a reset under TLS (SSL_read_ex): %.3f s", g);
}

/* Runs a python program (argv[1]: the server's base URL), status 0. */
static void run_py_program(const char *prog)
{
    char base[64];
    snprintf(base, sizeof base, "127.0.0.1:%d", st.port);
    char *argv[] = {"/usr/bin/python3", "-c", (char *)prog, base, NULL};
    h_run(&r, true, 60, argv);
    cr_assert_eq(r.status, 0, "python: status %d\n%s", r.status, r.out);
}

/* A timeout lives with the destination, not the connection (SPEC §14:
 * noticed at the destination's next request). http.client sends /hang on
 * one connection and leaves it open, unread; 1.5 s later (past
 * response_timeout, 1 s) it asks /ok on a second connection, which waits
 * the backoff's turn (2 s) under backoff_on = timeout and goes at once
 * without. */
static const char left_open_py[] =
    "import http.client, sys, time\n"
    "a = http.client.HTTPConnection(sys.argv[1])\n"
    "a.request('GET', '/hang/8')\n"
    "time.sleep(1.5)\n"
    "b = http.client.HTTPConnection(sys.argv[1])\n"
    "b.request('GET', '/ok')\n"
    "b.getresponse().read()\n"
    "b.close()\n"
    "a.close()\n";

Test(backoff_on, a_timeout_on_a_connection_left_open_holds_the_next_one)
{
    h_config_write(CONFIG_SLOW("timeout"));
    run_py_program(left_open_py);
    double g = gap(0, 1);
    cr_log_info("left open, timeout listed: %.3f s to the next request", g);
    /* The program's own 1.5 s, then the turn of 2 s. */
    cr_expect_geq(g - 1.5, 0.8 * 2, "a timeout on another connection: "
                                    "%.3f s after its own wait, turn 2 s",
                  g - 1.5);

    h_config_write(CONFIG_SLOW("429, 503"));
    run_py_program(left_open_py);
    g = gap(2, 3);
    cr_log_info("left open, timeout not listed: %.3f s", g);
    cr_expect_lt(g - 1.5, 0.5 * 2, "a timeout not listed paused: %.3f s",
                 g - 1.5);
}

/* A program that gives up before response_timeout (its own timeout
 * 0.3 s) and closes the connection: the request never got its answer,
 * and once response_timeout (1 s) has passed since it went, the
 * destination's next request (1.3 s after it, on a new connection) waits
 * the turn (2 s). python requests (urllib3 closes a connection that
 * timed out). */
static const char gave_up_py[] =
    "import requests, sys, time\n"
    "s = requests.Session()\n"
    "u = 'http://' + sys.argv[1]\n"
    "try:\n"
    "    s.get(u + '/hang/8', timeout=0.3)\n"
    "except requests.exceptions.Timeout:\n"
    "    print('gave up')\n"
    "time.sleep(1.0)\n"
    "s.get(u + '/ok', timeout=20).content\n";

Test(backoff_on, a_request_given_up_before_response_timeout_still_counts)
{
    h_config_write(CONFIG_SLOW("timeout"));
    run_py_program(gave_up_py);
    cr_expect(strstr(r.out, "gave up") != NULL, "no timeout:\n%s", r.out);
    double g = gap(0, 1);
    cr_log_info("gave up, timeout listed: %.3f s to the next request", g);
    cr_expect_geq(g - 1.3, 0.8 * 2, "a request given up: %.3f s after the "
                                    "program's own wait, turn 2 s",
                  g - 1.3);

    h_config_write(CONFIG_SLOW("429, 503"));
    run_py_program(gave_up_py);
    g = gap(2, 3);
    cr_log_info("gave up, timeout not listed: %.3f s", g);
    cr_expect_lt(g - 1.3, 0.5 * 2, "a timeout not listed paused: %.3f s",
                 g - 1.3);
}
