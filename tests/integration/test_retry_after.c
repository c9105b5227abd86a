/* Politeness that listens (SPEC §12), measured at the server: a 429 or
 * 503 a real client receives pauses the request budget of its request,
 * and the next request (from the same process, another process of the
 * user, or another host of a fleet) reaches the server no earlier than
 * the pause's end. Retry-After in seconds, as an HTTP-date, missing
 * (the backoff: one turn, doubling, capped at max_retry_after),
 * malformed (as missing), huge (cut) and 0 (no pause); HTTP/1.1 in
 * plaintext (the receive family) and under TLS (SSL_read, SSL_read_ex,
 * gnutls_record_recv), HTTP/2 over TLS (nginx); python requests, curl
 * with and without its own --retry, Scrapy's retry, aiohttp, wget. The
 * server is tests/integration/servers/http_status.py (its path picks the
 * answer) or nginx-light; the server's own clock stamps each request. */
#include "harness.h"
#include "nginx_fixture.h"

#include "../redis_server.h"

static struct server st, sts;
static struct run r, ctl;
static struct redis R;

static void setup(void)
{
    h_setup();
    memset(&R, 0, sizeof R);
    h_server_start(&st, "http_status.py");
}

static void teardown(void)
{
    redis_kill(&R);
    ngx_stop();
    h_server_stop(&st);
    h_server_stop(&sts);
    h_teardown();
}

TestSuite(retry_after, .init = setup, .fini = teardown, .timeout = 90);

/* Ten requests a second, one at a time (a gap of 0.1 s), so that a pause
 * of seconds stands out; a wait of 10 s at most. */
#define CONFIG_HEAD                                                          \
    "[default]\nrequest = 10/s\nrequest_burst = 1\non_deny = delay\n"     \
    "max_delay = 10s\n"

/* Gap (s) between the server's i-th and j-th requests, once it has seen
 * both. */
static double gap(const struct server *s, int i, int j)
{
    int n = h_server_wait(s, "REQ", j + 1, 5);
    cr_assert_geq(n, j + 1, "the server saw %d requests, not %d", n, j + 1);
    return h_server_stamp(s, j) - h_server_stamp(s, i);
}

static char url_buf[8][160];

/* http(s)://127.0.0.1:PORT/PATH, in one of 8 buffers. */
static char *url(const char *scheme, int port, const char *path)
{
    static int k;
    char *u = url_buf[k++ % 8];
    snprintf(u, 160, "%s://127.0.0.1:%d%s", scheme, port, path);
    return u;
}

/* GETs each URL in turn on one session; "error: ..." for one that failed
 * (the process goes on). */
static const char requests_py[] =
    "import requests, sys, urllib3\n"
    "urllib3.disable_warnings()\n"
    "s = requests.Session()\n"
    "for u in sys.argv[1:]:\n"
    "    try:\n"
    "        s.get(u, timeout=20, verify=False).content\n"
    "    except Exception as e:\n"
    "        print('error: %r' % e)\n";

static void run_requests(bool preload, const char *u1, const char *u2)
{
    char *argv[] = {"/usr/bin/python3", "-c", (char *)requests_py,
                    (char *)u1, (char *)u2, NULL};
    h_run(&r, preload, 30, argv);
    cr_assert_eq(r.status, 0, "python: status %d\n%s", r.status, r.out);
}

/* The pause asked for, as the server sees it: its second request came
 * `want` s after the first at least (less 50 ms: the client read the 429
 * after the server stamped its request, so the gap is at least the
 * pause), and nearer the pause than the pause charged twice (a client's
 * own sleep and the shim's in a row, or a pause taken at the answer and
 * again at the next request): under half-way, 1.5 times `want`. */
static void expect_paused(double g, double want, const char *who)
{
    cr_log_info("%s: %.3f s between the 429/503 and the next request", who,
                g);
    cr_expect_geq(g, want - 0.05, "%s: the next request came %.3f s after "
                                  "the answer that asked for %.1f s",
                  who, g, want);
    cr_expect_lt(g, 1.5 * want,
                 "%s: %.3f s: waited more than asked (%.1f s)", who, g, want);
}

Test(retry_after, requests_session_waits_for_retry_after_seconds)
{
    h_config_write(CONFIG_HEAD);
    run_requests(true, url("http", st.port, "/s/429/2"),
                 url("http", st.port, "/ok"));
    expect_paused(gap(&st, 0, 1), 2, "requests, Retry-After: 2");
    /* The control: bare, the client itself goes on at once. */
    run_requests(false, url("http", st.port, "/s/429/2"),
                 url("http", st.port, "/ok"));
    cr_expect_lt(gap(&st, 2, 3), 0.5, "bare python waited %.3f s itself",
                 gap(&st, 2, 3));
}

Test(retry_after, another_process_of_the_user_waits_too)
{
    h_config_write(CONFIG_HEAD);
    /* The second process starts within the pause (python's start-up is
     * a few tenths of a second) and waits for its end. */
    run_requests(true, url("http", st.port, "/s/503/2"), NULL);
    run_requests(true, url("http", st.port, "/ok"), NULL);
    expect_paused(gap(&st, 0, 1), 2, "a second process after a 503");
}

Test(retry_after, an_http_date_is_a_wait_until_then)
{
    h_config_write(CONFIG_HEAD);
    /* The date has whole seconds: 3 s from now is 2 to 3 s away. */
    run_requests(true, url("http", st.port, "/s/503/date+3"),
                 url("http", st.port, "/ok"));
    double g = gap(&st, 0, 1);
    cr_log_info("Retry-After: date + 3 s: %.3f s", g);
    cr_expect_geq(g, 1.95, "an HTTP-date 3 s ahead: %.3f s", g);
    /* Room for the next request to reach the server late after the
     * pause's end; a date read wrongly (another zone, as seconds from
     * the epoch) is hours off. */
    cr_expect_lt(g, 3.5, "an HTTP-date 3 s ahead: %.3f s", g);
}

/* Two requests a second: the backoff's turn is 0.5 s; a burst of 5, so
 * that the requests themselves go at once (a pause is all that spaces
 * them). */
#define BACKOFF_CONFIG                                                       \
    "[default]\nrequest = 2/s\nrequest_burst = 5\non_deny = delay\n"      \
    "max_delay = 10s\nmax_retry_after = 2s\n"

static const char forever_py[] =
    "import requests, sys\n"
    "s = requests.Session()\n"
    "for u in sys.argv[1:]:\n"
    "    s.get(u, timeout=20).content\n";

Test(retry_after, without_retry_after_the_backoff_doubles_up_to_max_retry_after)
{
    h_config_write(BACKOFF_CONFIG);
    /* A server that says 429 forever: pauses of 0.5, 1, 2, then 2 s
     * (max_retry_after); a success pauses nothing and ends the doubling:
     * the 429 after it pauses 0.5 s again. */
    const char *p = "/s/429/-";
    char *argv[] = {"/usr/bin/python3", "-c", (char *)forever_py,
                    url("http", st.port, p), url("http", st.port, p),
                    url("http", st.port, p), url("http", st.port, p),
                    url("http", st.port, "/ok"), url("http", st.port, p),
                    url("http", st.port, "/ok"), NULL};
    h_run(&r, true, 40, argv);
    cr_assert_eq(r.status, 0, "python: status %d\n%s", r.status, r.out);
    const double want[6] = {0.5, 1, 2, 2, 0, 0.5};
    double g[6];
    for (int i = 0; i < 6; i++)
        g[i] = gap(&st, i, i + 1);
    /* The control: the same requests, all answered 200, bare; its longest
     * gap is what this machine's python takes from one answer to the next
     * request anyway. */
    char *bare[] = {argv[0], argv[1], argv[2], NULL, NULL, NULL, NULL,
                    NULL, NULL, NULL, NULL};
    for (int i = 3; i < 10; i++)
        bare[i] = url("http", st.port, "/ok");
    h_run(&ctl, false, 40, bare);
    cr_assert_eq(ctl.status, 0, "bare python: status %d\n%s", ctl.status,
                 ctl.out);
    double ctl_gap = 0;
    for (int i = 7; i < 13; i++)
        if (gap(&st, i, i + 1) > ctl_gap)
            ctl_gap = gap(&st, i, i + 1);
    for (int i = 0; i < 6; i++) {
        /* The wrong answer above each: the next doubling (or a cap not
         * kept), and after a success a pause still held (the backoff's
         * turn, 0.5 s, at least). Under half-way to it, plus twice the
         * control's gap. */
        double wrong = want[i] > 0 ? 2 * want[i] : 0.5;
        cr_log_info("backoff %d: %.3f s (bare: %.3f s)", i, g[i], ctl_gap);
        cr_expect_geq(g[i], want[i] - 0.05, "gap %d: %.3f s, want %.1f s", i,
                      g[i], want[i]);
        cr_expect_lt(g[i], (want[i] + wrong) / 2 + 2 * ctl_gap,
                     "gap %d: %.3f s, want %.1f s (bare: %.3f s)", i, g[i],
                     want[i], ctl_gap);
    }
}

/* One request a second here: the backoff's turn (1 s) is then far enough
 * from twice itself and from max_retry_after (both 2 s) to tell apart. */
Test(retry_after, a_malformed_retry_after_is_as_none)
{
    h_config_write("[default]\nrequest = 1/s\nrequest_burst = 5\n"
                   "on_deny = delay\nmax_delay = 10s\nmax_retry_after = 2s\n");
    run_requests(true, url("http", st.port, "/s/429/soon"),
                 url("http", st.port, "/ok"));
    expect_paused(gap(&st, 0, 1), 1, "Retry-After: soon (the backoff)");
}

Test(retry_after, a_huge_retry_after_is_cut_at_max_retry_after)
{
    h_config_write(BACKOFF_CONFIG);
    run_requests(true, url("http", st.port, "/s/429/99999999999999999999"),
                 url("http", st.port, "/ok"));
    expect_paused(gap(&st, 0, 1), 2, "Retry-After: 1e20 s, cut at 2 s");
}

/* An HTTP-date just over 2^64 ns ahead (year 2611): cut at
 * max_retry_after like any long wait. Its nanoseconds taken modulo 2^64
 * would be a pause of about a second. */
Test(retry_after, an_http_date_past_2_pow_64_ns_is_cut_not_wrapped)
{
    h_config_write(BACKOFF_CONFIG);
    run_requests(true, url("http", st.port, "/s/429/date+18446744075"),
                 url("http", st.port, "/ok"));
    expect_paused(gap(&st, 0, 1), 2, "Retry-After: a date in 2611, cut at 2 s");
}

Test(retry_after, retry_after_zero_pauses_nothing)
{
    char log[300];
    snprintf(log, sizeof log, "%s/decisions.jsonl", h_dir);
    h_config_write("[rlshim]\ndecision_log = %s\n" BACKOFF_CONFIG, log);
    run_requests(true, url("http", st.port, "/s/429/0"),
                 url("http", st.port, "/ok"));
    double g = gap(&st, 0, 1);
    cr_expect_lt(g, 0.3, "Retry-After: 0 paused %.3f s", g);
    cr_expect_eq(h_file_lines(log, "\"verdict\":\"pause\""), 0,
                 "Retry-After: 0 paused (as missing: the backoff)");
    cr_expect_eq(h_file_lines(log, "\"call\":\"request\""), 2);
}

/* After the answer at `path`, the next request fails in the program (it
 * goes on) and never reaches the server; the program is done in under
 * `secs` (the pause is longer). */
static void expect_refused(const char *path, double secs)
{
    run_requests(true, url("http", st.port, path),
                 url("http", st.port, "/ok"));
    cr_expect_lt(r.wall, secs, "the program took %.1f s", r.wall);
    cr_expect(strstr(r.out, "error:") != NULL, "the request did not fail:\n%s",
              r.out);
    usleep(300 * 1000);
    cr_expect_eq(h_server_count(&st, "REQ"), 1,
                 "a request went during the pause");
}

Test(retry_after, a_pause_past_max_delay_fails_the_request_not_hangs_it)
{
    /* ETIMEDOUT: a client told EAGAIN would wait for its socket, which
     * the shim holds until the request's turn (the pause's end). */
    h_config_write("[rlshim]\nerrno = ETIMEDOUT\n[default]\nrequest = 10/s\n"
                   "request_burst = 1\non_deny = delay\nmax_delay = 1s\n");
    expect_refused("/s/429/60", 5);
}

Test(retry_after, fail_mode_fails_at_once_during_the_pause)
{
    /* A burst of 5: only the pause can refuse the second request. */
    h_config_write("[rlshim]\nerrno = ETIMEDOUT\n[default]\nrequest = 10/s\n"
                   "request_burst = 5\non_deny = fail\n");
    expect_refused("/s/429/3", 2.5);
}

/* The TLS server, started by the tests that need it. */
static void start_tls(void)
{
    setenv("RL_TLS", "1", 1);
    h_server_start(&sts, "http_status.py");
    unsetenv("RL_TLS");
}

Test(retry_after, requests_over_tls_waits)
{
    start_tls();
    h_config_write(CONFIG_HEAD);
    run_requests(true, url("https", sts.port, "/s/429/2"),
                 url("https", sts.port, "/ok"));
    expect_paused(gap(&sts, 0, 1), 2, "requests over TLS (SSL_read_ex)");
}

/* curl [EXTRA [ARG]] URL [URL]: two requests on one connection. Into a
 * file (a retry truncates what it wrote). */
static void run_curl(const char *extra, const char *arg, const char *u1,
                     const char *u2)
{
    char *argv[16], body[300];
    snprintf(body, sizeof body, "%s/curl.out", h_dir);
    int n = 0;
    argv[n++] = "curl";
    argv[n++] = "-sk";
    argv[n++] = "--max-time";
    argv[n++] = "20";
    if (extra != NULL)
        argv[n++] = (char *)extra;
    if (arg != NULL)
        argv[n++] = (char *)arg;
    argv[n++] = "-o";
    argv[n++] = body;
    argv[n++] = (char *)u1;
    if (u2 != NULL) {
        argv[n++] = "-o";
        argv[n++] = body;
        argv[n++] = (char *)u2;
    }
    argv[n] = NULL;
    h_run(&r, true, 30, argv);
    cr_assert_eq(r.status, 0, "curl: status %d\n%s", r.status, r.out);
}

Test(retry_after, curl_waits_in_plaintext_and_over_tls)
{
    h_config_write(CONFIG_HEAD);
    run_curl(NULL, NULL, url("http", st.port, "/s/429/2"),
             url("http", st.port, "/ok"));
    expect_paused(gap(&st, 0, 1), 2, "curl (recv)");
    start_tls();
    run_curl(NULL, NULL, url("https", sts.port, "/s/503/2"),
             url("https", sts.port, "/ok"));
    expect_paused(gap(&sts, 0, 1), 2, "curl over TLS (SSL_read)");
}

Test(retry_after, curl_with_its_own_retry_waits_once_not_twice)
{
    h_config_write(CONFIG_HEAD);
    /* curl sleeps the Retry-After itself, then retries; the shim's pause
     * ends about when curl's sleep does. */
    run_curl("--retry", "1", url("http", st.port, "/once/429/2"), NULL);
    double g = gap(&st, 0, 1);
    expect_paused(g, 2, "curl --retry 1");
}

static const char scrapy_py[] =
    "import scrapy, sys\n"
    "from scrapy.crawler import CrawlerProcess\n"
    "class S(scrapy.Spider):\n"
    "    name = 's'\n"
    "    start_urls = [sys.argv[1]]\n"
    "    def parse(self, response):\n"
    "        print('status', response.status)\n"
    "p = CrawlerProcess(settings={'RETRY_HTTP_CODES': [429],\n"
    "    'RETRY_TIMES': 1, 'LOG_LEVEL': 'ERROR', 'TELNETCONSOLE_ENABLED': False,\n"
    "    'ROBOTSTXT_OBEY': False})\n"
    "p.crawl(S)\n"
    "p.start()\n";

Test(retry_after, scrapys_retry_of_a_429_waits)
{
    h_config_write(CONFIG_HEAD);
    char *argv[] = {"/usr/bin/python3", "-c", (char *)scrapy_py,
                    url("http", st.port, "/once/429/2"), NULL};
    h_run(&r, true, 60, argv);
    cr_assert_eq(r.status, 0, "scrapy: status %d\n%s", r.status, r.out);
    cr_expect(strstr(r.out, "status 200") != NULL, "scrapy: %s", r.out);
    expect_paused(gap(&st, 0, 1), 2, "Scrapy's retry");
    /* Bare, Scrapy retries at once (issue #3849). */
    char *bare[] = {"/usr/bin/python3", "-c", (char *)scrapy_py,
                    url("http", st.port, "/once/429/2?bare"), NULL};
    h_run(&ctl, false, 60, bare);
    cr_expect_lt(gap(&st, 2, 3), 1, "bare Scrapy waited %.3f s itself",
                 gap(&st, 2, 3));
}

static const char aiohttp_py[] =
    "import aiohttp, asyncio, sys\n"
    "async def main():\n"
    "    async with aiohttp.ClientSession() as s:\n"
    "        for u in sys.argv[1:]:\n"
    "            async with s.get(u) as r:\n"
    "                await r.read()\n"
    "asyncio.run(main())\n";

Test(retry_after, aiohttp_waits)
{
    h_config_write(CONFIG_HEAD);
    char *argv[] = {"/usr/bin/python3", "-c", (char *)aiohttp_py,
                    url("http", st.port, "/s/429/2"),
                    url("http", st.port, "/ok"), NULL};
    h_run(&r, true, 30, argv);
    cr_assert_eq(r.status, 0, "aiohttp: status %d\n%s", r.status, r.out);
    expect_paused(gap(&st, 0, 1), 2, "aiohttp");
}

Test(retry_after, wget_waits_in_plaintext_and_over_tls)
{
    h_config_write(CONFIG_HEAD);
    char *argv[] = {"wget", "-q", "-t", "1", "--no-check-certificate",
                    "-O", "/dev/null", url("http", st.port, "/s/429/2"),
                    url("http", st.port, "/ok"), NULL};
    h_run(&r, true, 30, argv);
    cr_assert_neq(r.status, -1, "wget hung");
    expect_paused(gap(&st, 0, 1), 2, "wget (read)");
    start_tls();
    argv[7] = url("https", sts.port, "/s/429/2");
    argv[8] = url("https", sts.port, "/ok");
    h_run(&r, true, 30, argv);
    cr_assert_neq(r.status, -1, "wget hung");
    expect_paused(gap(&sts, 0, 1), 2, "wget over TLS (gnutls_record_recv)");
}

static struct ngx_site h2[1] = {
    {.addr = "127.0.0.1",
     .tls = true,
     .extra = "    location = /busy {\n"
              "      add_header Retry-After 2 always;\n"
              "      return 429;\n"
              "    }\n"}};

Test(retry_after, curl_over_http2_waits)
{
    ngx_start(h2, 1);
    h_config_write(CONFIG_HEAD);
    char u1[160], u2[160];
    snprintf(u1, sizeof u1, "https://127.0.0.1:%d/busy", h2[0].port);
    snprintf(u2, sizeof u2, "https://127.0.0.1:%d/a.txt", h2[0].port);
    run_curl("--http2", NULL, u1, u2);
    ngx_settle(&h2[0], 2);
    double first, last;
    int n = ngx_requests(&h2[0], &first, &last);
    cr_assert_eq(n, 2, "nginx saw %d requests", n);
    cr_assert_eq(h_file_lines(h2[0].log, "HTTP/2.0"), 2, "not HTTP/2");
    expect_paused(last - first, 2, "curl over HTTP/2 (nginx)");
}

/* Two threads' requests on one HTTP/2 connection over TLS, a third thread
 * reading: the second request waits for its turn (a second) inside its
 * write while the reader reads the first one's 429 (Retry-After: 2). The
 * pause holds it at its turn. Before, a write asleep for its turn held
 * the session, and the reader's answer went by unseen; and a write while
 * the reader looked at an answer went uncounted: the second request came
 * 0.002 s after the first. */
Test(retry_after, an_http2_stream_asleep_for_its_turn_is_held_by_a_429)
{
    ngx_start(h2, 1);
    h_config_write("[default]\nrequest = 1/s\nrequest_burst = 1\n"
                   "on_deny = delay\nmax_delay = 10s\n");
    char script[300], port[16];
    snprintf(script, sizeof script, "%s/tests/integration/clients/h2_threads.py",
             h_env("RLSHIM_SRC"));
    snprintf(port, sizeof port, "%d", h2[0].port);
    char *argv[] = {"/usr/bin/python3", script, port, "/busy", "/a.txt",
                    NULL};
    h_run(&r, true, 30, argv);
    cr_assert_eq(r.status, 0, "h2_threads: status %d\n%s", r.status, r.out);
    cr_expect(strstr(r.out, "status1=429") != NULL, "%s", r.out);
    cr_expect(strstr(r.out, "status3=200") != NULL, "%s", r.out);
    ngx_settle(&h2[0], 2);
    double first, last;
    int n = ngx_requests(&h2[0], &first, &last);
    cr_assert_eq(n, 2, "nginx saw %d requests", n);
    expect_paused(last - first, 2, "an HTTP/2 stream of another thread");
}

Test(retry_after, the_decision_log_carries_the_pause_and_verify_checks_it)
{
    char log[300];
    snprintf(log, sizeof log, "%s/decisions.jsonl", h_dir);
    h_config_write("[rlshim]\ndecision_log = %s\n" CONFIG_HEAD, log);
    run_requests(true, url("http", st.port, "/s/429/2"),
                 url("http", st.port, "/ok"));
    cr_expect_eq(h_file_lines(log, "\"verdict\":\"pause\""), 1);
    cr_expect_eq(h_file_lines(log, "\"status\":429"), 1);
    cr_expect_eq(h_file_lines(log, "\"reason\":\"retry_after\""), 2,
                 "the pause and the request it held");
    char cmd[800];
    snprintf(cmd, sizeof cmd, "%s/rlshim verify '%s' --obeyed-retry-after",
             h_env("RLSHIM_BUILD"), log);
    cr_expect_eq(system(cmd), 0, "%s", cmd);
    /* The same log with the held request moved into the pause fails. */
    snprintf(cmd, sizeof cmd,
             "sed -i '/\"target\":\"\\/ok\"/s/\"wait_ns\":[0-9]*/"
             "\"wait_ns\":0/' '%s' && %s/rlshim verify '%s' "
             "--obeyed-retry-after >/dev/null",
             log, h_env("RLSHIM_BUILD"), log);
    cr_expect_eq(WEXITSTATUS(system(cmd)), 1, "%s", cmd);
}

Test(retry_after, stat_shows_paused_until)
{
    h_config_write(CONFIG_HEAD "max_retry_after = 1min\n");
    run_requests(true, url("http", st.port, "/s/429/30"), NULL);
    char cmd[800];
    snprintf(cmd, sizeof cmd,
             "RLSHIM_CONFIG='%s' RLSHIM_STATE_DIR='%s' %s/rlshim stat",
             h_config, h_state, h_env("RLSHIM_BUILD"));
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p);
    char out[8192] = "";
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = '\0';
    pclose(p);
    cr_expect(strstr(out, "paused until") != NULL, "rlshim stat:\n%s", out);
}

Test(retry_after, a_second_host_on_the_fleet_waits_too)
{
    if (!redis_have())
        cr_skip_test("redis-server is not installed");
    cr_assert(redis_start(&R), "redis-server did not start");
    h_config_write("[rlshim]\nfleet = redis://127.0.0.1:%d\n"
                   "[default]\nscope = fleet\nrequest = 10/s\n"
                   "request_burst = 1\non_deny = delay\nmax_delay = 10s\n",
                   R.port);
    char host_a[300], host_b[300];
    snprintf(host_a, sizeof host_a, "%s/host-a", h_dir);
    snprintf(host_b, sizeof host_b, "%s/host-b", h_dir);
    cr_assert_eq(mkdir(host_a, 0700), 0);
    cr_assert_eq(mkdir(host_b, 0700), 0);
    char *a[] = {"/usr/bin/python3", "-c", (char *)requests_py,
                 url("http", st.port, "/s/429/2"), NULL};
    char *b[] = {"/usr/bin/python3", "-c", (char *)requests_py,
                 url("http", st.port, "/ok"), NULL};
    h_run_with(&r, true, 30, a, h_config, host_a, "host-a.log");
    cr_assert_eq(r.status, 0, "host a: %s", r.out);
    h_run_with(&r, true, 30, b, h_config, host_b, "host-b.log");
    cr_assert_eq(r.status, 0, "host b: %s", r.out);
    expect_paused(gap(&st, 0, 1), 2, "a second host of the fleet");
}

/* The hooks only read what the program receives: a body of random bytes
 * arrives byte for byte, in plaintext (recv) and over HTTP/2 with TLS
 * (SSL_read), on connections whose responses are scanned. */
Test(retry_after, a_download_arrives_byte_for_byte)
{
    static struct ngx_site sites[2] = {{.addr = "127.0.0.1"},
                                       {.addr = "127.0.0.1", .tls = true}};
    ngx_start(sites, 2);
    h_config_write(CONFIG_HEAD);
    char body[300], got[300], cmd[700], want_sum[65], got_sum[65];
    snprintf(body, sizeof body, "%s/www/random.bin", h_dir);
    snprintf(cmd, sizeof cmd,
             "head -c 3000000 /dev/urandom > '%s' && chmod 644 '%s'", body,
             body);
    cr_assert_eq(system(cmd), 0);
    h_sha256_file(body, want_sum);
    for (int i = 0; i < 2; i++) {
        char u[160];
        snprintf(u, sizeof u, "%s://127.0.0.1:%d/random.bin",
                 i == 0 ? "http" : "https", sites[i].port);
        snprintf(got, sizeof got, "%s/got.%d", h_dir, i);
        char *argv[] = {"curl", "-sk", "--max-time", "20", "-o", got, u,
                        "-o", got, u, NULL}; /* twice on one connection */
        h_run(&r, true, 30, argv);
        cr_assert_eq(r.status, 0, "curl: status %d", r.status);
        h_sha256_file(got, got_sum);
        cr_expect_str_eq(got_sum, want_sum, "%s: the body changed", u);
    }
    cr_expect_eq(h_file_lines(sites[1].log, "HTTP/2.0"), 2, "not HTTP/2");
}
