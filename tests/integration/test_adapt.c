/* Politeness that adapts (SPEC §14), measured at the server: with
 * `adapt = latency`, a server whose response time steps from 50 ms to
 * 400 ms gets requests at least adapt_factor x 400 ms apart from the next
 * response on, closer again as it recovers, and a second process of the
 * user starts at the interval the first one learned; with `jitter`, turns
 * are spread and never closer than the limit allows. Clients: python
 * requests (plaintext) and curl (TLS, through SSL_write and SSL_read).
 * The server is tests/integration/servers/http_status.py, whose path
 * /slow/MS answers after MS ms; its own clock stamps each request's head. */
#include "harness.h"

static struct server st;
static struct run r;

static void setup(void)
{
    h_setup();
}

static void teardown(void)
{
    h_server_stop(&st);
    h_teardown();
}

TestSuite(adapt, .init = setup, .fini = teardown, .timeout = 90);

/* Twenty requests a second, the floor; a response time of 400 ms spaces
 * them 800 ms. */
#define ADAPT_HEAD "[rlshim]\non_deny = delay\nmax_delay = 10s\n"
#define ADAPT_SITE                                                           \
    "[site:x]\nper = destination\nrequest = 20/s\nadapt = latency\n"      \
    "adapt_factor = 2\n"
#define ADAPT_CONFIG ADAPT_HEAD ADAPT_SITE

/* Gap (s) between the server's i-th and (i+1)-th requests. */
static double gap(const struct server *s, int i)
{
    int n = h_server_wait(s, "REQ", i + 2, 5);
    cr_assert_geq(n, i + 2, "the server saw %d requests, not %d", n, i + 2);
    return h_server_stamp(s, i + 1) - h_server_stamp(s, i);
}

/* GETs each URL in turn on one session. */
static const char requests_py[] =
    "import requests, sys, urllib3\n"
    "urllib3.disable_warnings()\n"
    "s = requests.Session()\n"
    "for u in sys.argv[1:]:\n"
    "    s.get(u, timeout=20, verify=False).content\n";

/* The URLs of a run: `fast` of 50 ms, `slow` of 400 ms, `after` of 50 ms
 * again, each path its own (/slow/MS/N). */
#define MAX_URLS 24
static char urls[MAX_URLS][160];

static int steps(const char *scheme, int fast, int slow, int after)
{
    int n = 0;
    for (int i = 0; i < fast + slow + after && n < MAX_URLS; i++, n++)
        snprintf(urls[n], sizeof urls[n], "%s://127.0.0.1:%d/slow/%d/%d",
                 scheme, st.port, i >= fast && i < fast + slow ? 400 : 50, i);
    return n;
}

static void run_python(int n)
{
    char *argv[MAX_URLS + 4] = {"/usr/bin/python3", "-c", (char *)requests_py};
    for (int i = 0; i < n; i++)
        argv[3 + i] = urls[i];
    argv[3 + n] = NULL;
    h_run(&r, true, 40, argv);
    cr_assert_eq(r.status, 0, "python: status %d\n%s", r.status, r.out);
}

/* The slow phase's gaps (the requests after the first slow response) are
 * at least 0.8 x 2 x 400 ms; after recovery, the last gap is well under
 * the slow phase's least. */
static void expect_follows(int fast, int slow, int after, const char *who)
{
    double least = 1e9;
    for (int i = fast; i < fast + slow; i++) {
        double g = gap(&st, i);
        cr_log_info("%s: slow gap %d: %.3f s", who, i, g);
        cr_expect_geq(g, 0.8 * 2 * 0.4,
                      "%s: request %d came %.3f s after the one a 400 ms "
                      "response answered",
                      who, i + 1, g);
        if (g < least)
            least = g;
    }
    double last = gap(&st, fast + slow + after - 2);
    cr_log_info("%s: last gap after recovery %.3f s", who, last);
    cr_expect_lt(last, 0.6 * least,
                 "%s: after recovery the gap is %.3f s, the slow phase's "
                 "least %.3f s",
                 who, last, least);
}

/* The decision log says why the slow phase's requests waited. */
Test(adapt, requests_session_follows_a_server_that_slows_and_recovers)
{
    char log[300];
    snprintf(log, sizeof log, "%s/decisions.jsonl", h_dir);
    h_config_write(ADAPT_HEAD "decision_log = %s\n" ADAPT_SITE, log);
    h_server_start(&st, "http_status.py");
    int n = steps("http", 3, 4, 6);
    run_python(n);
    expect_follows(3, 4, 6, "requests");
    cr_expect_geq(h_file_lines(log, "\"reason\":\"latency\""), 4,
                  "the decision log gives no latency reason");
}

Test(adapt, curl_over_tls_follows_a_server_that_slows_and_recovers)
{
    h_config_write(ADAPT_CONFIG);
    setenv("RL_TLS", "1", 1);
    h_server_start(&st, "http_status.py");
    unsetenv("RL_TLS");
    int n = steps("https", 3, 4, 6);
    char *argv[MAX_URLS + 4] = {"curl", "-sk"};
    for (int i = 0; i < n; i++)
        argv[2 + i] = urls[i];
    argv[2 + n] = NULL;
    h_run(&r, true, 40, argv);
    cr_assert_eq(r.status, 0, "curl: status %d\n%s", r.status, r.out);
    expect_follows(3, 4, 6, "curl TLS");
}

/* A second process of the user paces the destination by what the first
 * learned: its second request comes at least about half the learned
 * interval after its first (the interval falls by halves from 800 ms at
 * its first fast response), where alone it would come a response
 * (50 ms) after. `rlshim stat` shows the pace and what set it. */
Test(adapt, a_second_process_starts_at_the_learned_interval)
{
    h_config_write(ADAPT_CONFIG);
    h_server_start(&st, "http_status.py");
    int n = steps("http", 0, 3, 0);
    run_python(n);
    struct run s;
    h_rlshim_cmd(&s, "stat");
    cr_log_info("stat:\n%s", s.out);
    /* The response time shown is the slow phase's (400 ms), not the fast
     * one's (50 ms); stored to the microsecond and shown to the
     * millisecond, it may read a millisecond either side. */
    const char *shown = strstr(s.out, "(latency 2 x ");
    cr_assert(shown != NULL, "stat shows no latency pace:\n%s", s.out);
    double ms = atof(shown + strlen("(latency 2 x "));
    cr_expect_geq(ms, 360, "stat shows a response time of %.0f ms, not "
                  "the slow phase's 400 ms:\n%s", ms, s.out);
    n = steps("http", 3, 0, 0);
    run_python(n);
    double g = gap(&st, 3);
    cr_log_info("second process: first gap %.3f s", g);
    cr_expect_geq(g, 0.8 * 0.45,
                  "the second process's second request came %.3f s after "
                  "its first: the learned interval was not shared",
                  g);
}

/* Jitter: five requests a second, jitter 50 %: no two closer than the
 * limit allows (a turn of 200 ms, less what the server's stamps may
 * drift), and not all the same gap. */
Test(adapt, jitter_spreads_turns_never_closer_than_the_limit)
{
    h_config_write("[rlshim]\non_deny = delay\nmax_delay = 10s\n"
                   "[site:x]\nper = destination\nrequest = 5/s\n"
                   "request_burst = 1\njitter = 50%%\n");
    h_server_start(&st, "http_status.py");
    int n = 12;
    for (int i = 0; i < n; i++)
        snprintf(urls[i], sizeof urls[i], "http://127.0.0.1:%d/ok/%d",
                 st.port, i);
    run_python(n);
    double least = 1e9, most = 0, sum = 0;
    for (int i = 1; i < n - 1; i++) {
        double g = gap(&st, i);
        cr_log_info("jitter gap %d: %.3f s", i, g);
        least = g < least ? g : least;
        most = g > most ? g : most;
        sum += g;
    }
    double mean = sum / (n - 2);
    cr_expect_geq(least, 0.2 - 0.02,
                  "two requests %.3f s apart under request = 5/s", least);
    cr_expect_gt(most - least, 0.03,
                 "the gaps spread over %.3f s only: no jitter",
                 most - least);
    cr_expect_gt(mean, 0.2 + 0.015, "mean gap %.3f s: no jitter", mean);
}
