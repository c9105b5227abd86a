/* HTTP/2 requests over TLS (SPEC §11), measured at the server: each
 * stream a client opens is a request, paced in delay mode and refused in
 * fail mode, whether streams go one by one (curl --http2 with several
 * URLs, httpx) or many on one connection at once (curl --parallel), and
 * a TLS write that opens k streams takes k turns in delay mode and goes
 * only if all k fit in fail mode. The server is Debian's nginx with
 * HTTP/2 (nginx_fixture.h: its access log stamps each stream); bad input
 * (frames split across writes, a PING and SETTINGS flood) goes to a TLS
 * sink that hashes what it got (servers/sink_tls.py), written by
 * clients/h2_writer.py (python's ssl: SSL_write_ex). */
#include "harness.h"
#include "nginx_fixture.h"

static struct ngx_site ngx[1] = {{.addr = "127.0.0.1", .tls = true}};
static struct server sink;
static struct run r, ctl;

static void setup(void)
{
    h_setup();
    ngx_start(ngx, 1);
    h_server_start(&sink, "sink_tls.py");
}

static void teardown(void)
{
    ngx_stop();
    h_server_stop(&sink);
    h_teardown();
}

TestSuite(h2_requests, .init = setup, .fini = teardown, .timeout = 60);

/* Two requests a second, one at a time: N requests take (N-1) halves. */
static const char paced[] = "[default]\nrequest = 2/s\nrequest_burst = 1\n"
                            "on_deny = delay\n";
/* One a minute: the first goes, every other is refused (a TLS write: the
 * library's WANT_WRITE, the socket held until it could go; each client
 * then gives up at its own timeout). */
static const char refused[] = "[default]\nrequest = 1/min\nrequest_burst = 1\n"
                              "on_deny = fail\n";

#define NURLS 5

/* argv = prefix..., then (`out` and) each of NURLS URLs of the site. */
static char **client(char *const prefix[], const char *out)
{
    return ngx_client(&ngx[0], prefix, out, NURLS);
}

/* Every request in the site's log (the last run's) came over HTTP/2. */
static void expect_h2(int n, const char *who)
{
    cr_expect_eq(h_file_lines(ngx[0].log, "HTTP/2.0"), n,
                 "%s: %d of the requests over HTTP/2", who,
                 h_file_lines(ngx[0].log, "HTTP/2.0"));
}

static void check_paced(char **argv, const char *who)
{
    ngx_check_paced(&ngx[0], paced, argv, NURLS, 0.5, who);
    expect_h2(NURLS, who);
}

/* Refused, and the client waited for its timeout without spinning: the
 * socket of a denied TLS write is held until the request could go. */
static void check_refused(char **argv, const char *who)
{
    ngx_check_refused(&ngx[0], refused, argv, 1, who);
    expect_h2(1, who);
    h_run_control(&ctl, 30, argv);
    h_expect_no_spin(&ngx_run, &ctl, 0.1, who);
}

/* ---- curl (libssl, nghttp2) ---- */

static char *const curl_paced[] = {"curl", "-sSk", "--http2", "--max-time",
                                   "10", NULL};
static char *const curl_refused[] = {"curl", "-sSk", "--http2", "--max-time",
                                     "2", NULL};

Test(h2_requests, curl_http2_urls_on_one_connection_are_paced)
{
    check_paced(client(curl_paced, "/dev/null"), "curl --http2");
}

Test(h2_requests, curl_http2_urls_are_refused)
{
    check_refused(client(curl_refused, "/dev/null"), "curl --http2");
}

/* --parallel: the transfers are streams multiplexed on one connection
 * (curl waits for it rather than open more), all started at once. */
static char *const curl_parallel_paced[] = {
    "curl", "-sSk", "--http2", "--parallel", "--max-time", "10", NULL};
static char *const curl_parallel_refused[] = {
    "curl", "-sSk", "--http2", "--parallel", "--max-time", "2", NULL};

Test(h2_requests, curl_parallel_streams_on_one_connection_are_paced)
{
    check_paced(client(curl_parallel_paced, "/dev/null"), "curl --parallel");
}

Test(h2_requests, curl_parallel_streams_are_refused)
{
    check_refused(client(curl_parallel_refused, "/dev/null"),
                  "curl --parallel");
}

/* ---- httpx with h2 (python's ssl: SSL_write_ex) ---- */

static const char httpx_py[] =
    "import httpx, sys\n"
    "with httpx.Client(http2=True, verify=False, timeout=2) as c:\n"
    "    for u in sys.argv[1:]:\n"
    "        try:\n"
    "            r = c.get(u)\n"
    "            assert r.http_version == 'HTTP/2', r.http_version\n"
    "        except httpx.TransportError as e:\n"
    "            print('error: %r' % e, file=sys.stderr)\n";

static char *const httpx_argv[] = {"/usr/bin/python3", "-c", (char *)httpx_py,
                                   NULL};

static void need_httpx(void)
{
    if (system("/usr/bin/python3 -c 'import httpx, h2' 2>/dev/null") != 0)
        h_skip("python3-httpx or python3-h2 is not installed "
               "(apt-get install python3-httpx python3-h2)");
}

Test(h2_requests, httpx_http2_is_paced)
{
    need_httpx();
    check_paced(client(httpx_argv, NULL), "httpx");
}

Test(h2_requests, httpx_http2_is_refused)
{
    need_httpx();
    check_refused(client(httpx_argv, NULL), "httpx");
}

/* ---- one TLS write, k streams (clients/h2_writer.py) ---- */

static void writer(struct run *out, int port, const char *steps[])
{
    char script[512], p[16];
    snprintf(script, sizeof script, "%s/tests/integration/clients/h2_writer.py",
             h_env("RLSHIM_SRC"));
    snprintf(p, sizeof p, "%d", port);
    char *argv[24] = {"/usr/bin/python3", script, p};
    int n = 3;
    for (int i = 0; steps[i] != NULL && n < 23; i++)
        argv[n++] = (char *)steps[i];
    argv[n] = NULL;
    h_run(out, true, 30, argv);
    cr_assert_eq(out->status, 0, "h2_writer: status %d\n%s", out->status,
                 out->out);
}

/* "stepI=ok" in a writer's output (else it timed out or never ran). */
static bool step_ok(const struct run *w, int i)
{
    char want[32];
    snprintf(want, sizeof want, "step%d=ok\n", i);
    return strstr(w->out, want) != NULL;
}

static double out_double(const struct run *w, const char *key)
{
    const char *p = strstr(w->out, key);
    return p != NULL ? atof(p + strlen(key)) : -1;
}

/* Delay mode, a burst of 1, a turn of 1 s: a write opening 4 streams
 * takes 4 turns, one after another, and goes in pieces, each stream's at
 * its own turn: its 4 requests arrive one period apart, the first at once
 * (its turn is free), and the write is one whole write to the program.
 * The control (no request key) has them together. */
Test(h2_requests, a_write_opening_4_streams_takes_4_turns_one_stream_each)
{
    const char *steps[] = {"conn", "timeout:10", "streams:4", "wait", NULL};
    double span[2], late[2], early = 1e9;
    for (int ctl_run = 0; ctl_run < 2; ctl_run++) {
        h_config_write("%s", ctl_run ? "[default]\nconnect = 100/s\n"
                                     : "[default]\nrequest = 1/s\n"
                                       "request_burst = 1\non_deny = delay\n");
        ngx_truncate(&ngx[0]);
        writer(&r, ngx[0].port, steps);
        cr_assert(step_ok(&r, 3), "%s", r.out);
        ngx_settle(&ngx[0], 4);
        double t[5];
        cr_assert_eq(ngx_times(&ngx[0], t, 5), 4);
        /* Stream i's turn is i turns after the write began, or later: a
         * late stamp only moves a stream later (a neighbour's late stamp
         * would shorten the next gap). */
        for (int i = 1; i < 4 && ctl_run == 0; i++)
            if (t[i] - out_double(&r, "t2=") - i * 1.0 < early)
                early = t[i] - out_double(&r, "t2=") - i * 1.0;
        span[ctl_run] = t[3] - t[0];
        late[ctl_run] = t[0] - out_double(&r, "t2=");
    }
    /* The server's stamps are to the ms. */
    cr_expect_geq(early, -0.002, "a stream of the write came %.3f s before "
                                 "its turn", -early);
    cr_expect_geq(span[0], 3 * 1.0 * 0.9,
                  "the 4 streams spanned %.3f s, not 3 turns", span[0]);
    /* The first stream's turn is free: no later than the control's first
     * by half a turn (waiting a turn would be a whole one). */
    cr_expect_lt(late[0], late[1] + 0.5 * 1.0,
                 "the first stream went %.3f s late (control %.3f s)",
                 late[0], late[1]);
    /* Unpaced, they come together: well inside the one turn that pacing
     * would put between two of them. */
    cr_expect_lt(span[1], 0.5 * 1.0, "the control's streams spanned %.3f s",
                 span[1]);
    cr_log_info("4 streams in one write: %.3f s after the turns at the "
                "earliest, span %.3f s (control %.3f s)",
                early, span[0], span[1]);
}

/* Fail mode, a budget of 12 (more than a plan looks at one by one): a
 * write opening 13 streams does not go at all (nothing of it reaches the
 * server, and nothing is taken: 12 go next, on a new connection), and
 * the 13th request after them is refused. */
Test(h2_requests, a_write_opening_more_streams_than_fit_goes_not_at_all)
{
    h_config_write("[default]\nrequest = 1/min\nrequest_burst = 12\n"
                   "on_deny = fail\n");
    const char *over[] = {"conn", "streams:13", NULL};
    writer(&r, ngx[0].port, over);
    cr_expect(step_ok(&r, 0) && !step_ok(&r, 1),
              "13 streams on a budget of 12 went: %s", r.out);
    const char *fit[] = {"conn", "streams:12", "wait", "streams:1", NULL};
    writer(&r, ngx[0].port, fit);
    cr_expect(step_ok(&r, 1) && step_ok(&r, 2), "12 streams: %s", r.out);
    cr_expect(!step_ok(&r, 3), "a 13th request went: %s", r.out);
    ngx_settle(&ngx[0], 12);
    double first, last;
    int n = ngx_requests(&ngx[0], &first, &last);
    cr_expect_eq(n, 12, "the server saw %d requests, not 12", n);
}

/* Bad input: three requests (HEADERS with CONTINUATION; a body and
 * trailers; a plain one) among 300 PINGs and 50 SETTINGS, cut into 1 to 7
 * byte writes, on a budget of 3: every byte reaches the sink unchanged,
 * the decision log has exactly 3 requests, and a 4th is refused. */
Test(h2_requests, frames_split_across_writes_and_a_ping_flood_count_exactly)
{
    char logpath[300];
    snprintf(logpath, sizeof logpath, "%s/decisions.jsonl", h_dir);
    setenv("RLSHIM_DECISION_LOG", logpath, 1);
    h_config_write("[default]\nrequest = 1/min\nrequest_burst = 3\n"
                   "on_deny = fail\n");
    const char *steps[] = {"conn", "split:7", "streams:1", NULL};
    writer(&r, sink.port, steps);
    unsetenv("RLSHIM_DECISION_LOG");
    cr_expect(step_ok(&r, 1), "the split writes: %s", r.out);
    cr_expect(!step_ok(&r, 2), "a 4th request went: %s", r.out);
    int allowed = h_file_lines(logpath, "\"verdict\":\"allow\"");
    cr_expect_eq(allowed, 3, "%d requests allowed, not 3", allowed);
    cr_expect_eq(h_file_lines(logpath, "\"call\":\"request\""), 4,
                 "3 requests and the refused one");
    cr_assert_eq(h_server_wait(&sink, "CONN", 1, 5), 1);
    char line[512], bytes[32], sha[80], want[80];
    h_server_line(&sink, "CONN", 0, line, sizeof line);
    h_field(line, 3, bytes, sizeof bytes);
    h_field(line, 4, sha, sizeof sha);
    cr_expect_eq(atol(bytes), h_out_long(&r, "bytes0", -1),
                 "the sink got %s bytes: %s", bytes, r.out);
    const char *s0 = strstr(r.out, "sha0=");
    cr_assert_not_null(s0, "%s", r.out);
    snprintf(want, sizeof want, "%.64s", s0 + 5);
    cr_expect_str_eq(sha, want, "bytes changed on the way");
}

/* Delay mode, a burst of 1: writes of 3 and 2 streams go in pieces, each
 * at its turn, and every byte reaches the sink unchanged and once (the
 * pieces of a write are its bytes in order; none is written twice). */
Test(h2_requests, writes_that_go_in_pieces_reach_the_sink_byte_for_byte)
{
    h_config_write("%s", paced);
    const char *steps[] = {"conn", "streams:3", "streams:2", NULL};
    writer(&r, sink.port, steps);
    cr_expect(step_ok(&r, 1) && step_ok(&r, 2), "the writes: %s", r.out);
    cr_expect_geq(out_double(&r, "t2=") - out_double(&r, "t1="), 2 * 0.5 * 0.9,
                  "the write of 3 streams took less than 2 turns: %s", r.out);
    cr_assert_eq(h_server_wait(&sink, "CONN", 1, 5), 1);
    char line[512], bytes[32], sha[80], want[80];
    h_server_line(&sink, "CONN", 0, line, sizeof line);
    h_field(line, 3, bytes, sizeof bytes);
    h_field(line, 4, sha, sizeof sha);
    cr_expect_eq(atol(bytes), h_out_long(&r, "bytes0", -1),
                 "the sink got %s bytes: %s", bytes, r.out);
    const char *s0 = strstr(r.out, "sha0=");
    cr_assert_not_null(s0, "%s", r.out);
    snprintf(want, sizeof want, "%.64s", s0 + 5);
    cr_expect_str_eq(sha, want, "bytes changed on the way");
}

/* The same on a blocking socket (the shim sleeps between the pieces of
 * one write): 4 streams, arriving one period apart. */
Test(h2_requests, a_blocking_write_of_4_streams_sleeps_between_its_pieces)
{
    h_config_write("%s", paced);
    const char *steps[] = {"conn", "block", "streams:4", NULL};
    ngx_truncate(&ngx[0]);
    writer(&r, ngx[0].port, steps);
    cr_assert(step_ok(&r, 2), "%s", r.out);
    ngx_settle(&ngx[0], 4);
    double t[5];
    cr_assert_eq(ngx_times(&ngx[0], t, 5), 4, "%s", r.out);
    double least = ngx_least_gap(t, 4, 1), least2 = ngx_least_gap(t, 4, 2);
    cr_log_info("a blocking write of 4 streams: closest %.3f s, span %.3f s",
                least, t[3] - t[0]);
    /* No two at one turn (a late arrival shortens only the gap after it). */
    cr_expect_geq(least, 0.4 * 0.5, "two streams came %.3f s apart", least);
    cr_expect_geq(least2, 1.4 * 0.5, "three streams within %.3f s", least2);
    cr_expect_geq(t[3] - t[0], 3 * 0.5 * 0.9, "span %.3f s", t[3] - t[0]);
}

/* ---- concurrent streams, each at its own turn (issue 31 item 17) ---- */

/* Six threads on one httpx client (python's ssl on a socket with a
 * timeout: non-blocking), started together (clients/httpx_streams.py
 * threads): their streams share one connection, and h2 hands the
 * library several HEADERS in one write; or the first alone, then the
 * others from a pool of threads (`pool`, the conformance matrix's way). */
static char **streams_client(const char *mode, int n)
{
    static char script[512];
    static char *prefix[] = {"/usr/bin/python3", script, NULL, NULL};
    snprintf(script, sizeof script,
             "%s/tests/integration/clients/httpx_streams.py",
             h_env("RLSHIM_SRC"));
    prefix[2] = (char *)mode;
    return ngx_client(&ngx[0], prefix, NULL, n);
}

/* `rlshim ARGS...` (at most 5), its output into s. */
static void rlshim_cli(struct run *s, const char *a1, const char *a2,
                       const char *a3, const char *a4, const char *a5)
{
    char bin[300], state[300];
    snprintf(bin, sizeof bin, "%s/rlshim", h_env("RLSHIM_BUILD"));
    snprintf(state, sizeof state, "RLSHIM_STATE_DIR=%s", h_state);
    char *argv[] = {"env",      state,      bin,        (char *)a1,
                    (char *)a2, (char *)a3, (char *)a4, (char *)a5,
                    NULL};
    h_run(s, false, 20, argv);
}

#define NCONC 6

/* Delay mode, a burst of 1, six concurrent streams at `rate` a second:
 * six arrivals at the server, each at least 0.8 of a period after the
 * one before (never two together), spanning five periods; and since
 * nothing was refused, the exit report, `rlshim stat` and the decision
 * log count no denial: 6 allowed, of which 5 waited (the first turn is
 * free). The control (no request key) has them all at once. */
static void check_concurrent(int rate, const char *mode)
{
    need_httpx();
    const double period = 1.0 / rate;
    char logpath[300], errlog[300], limit[64];
    snprintf(logpath, sizeof logpath, "%s/decisions.jsonl", h_dir);
    snprintf(errlog, sizeof errlog, "%s/stderr.log", h_dir);
    snprintf(limit, sizeof limit, "request=%d/s,burst=1", rate);
    h_config_write("[rlshim]\nreport = yes\n[default]\nrequest = %d/s\n"
                   "request_burst = 1\non_deny = delay\n",
                   rate);
    char **argv = streams_client(mode, NCONC);
    ngx_truncate(&ngx[0]);
    setenv("RLSHIM_DECISION_LOG", logpath, 1);
    h_run(&r, true, 30, argv);
    unsetenv("RLSHIM_DECISION_LOG");
    cr_assert_eq(r.status, 0, "httpx: status %d\n%s", r.status, r.out);
    cr_expect_eq(h_file_lines(errlog, "error: "), 0, "a request failed");
    ngx_settle(&ngx[0], NCONC);
    double t[NCONC + 1];
    int n = ngx_times(&ngx[0], t, NCONC + 1);
    cr_assert_eq(n, NCONC, "the server saw %d requests, not %d", n, NCONC);
    expect_h2(NCONC, "httpx threads");
    cr_expect_eq(ngx_connections(&ngx[0]), 1, "%d connections",
                 ngx_connections(&ngx[0]));
    double least = ngx_least_gap(t, n, 1), least2 = ngx_least_gap(t, n, 2);
    double span = t[n - 1] - t[0];
    char at[200] = "";
    for (int i = 0; i < n; i++)
        snprintf(at + strlen(at), sizeof at - strlen(at), " %.3f", t[i] - t[0]);
    cr_log_info("arrivals (s):%s", at);
    /* The control: the same client, no request key. */
    ngx_truncate(&ngx[0]);
    h_run_control(&ctl, 30, argv);
    ngx_settle(&ngx[0], NCONC);
    double cfirst, clast;
    cr_expect_eq(ngx_requests(&ngx[0], &cfirst, &clast), NCONC);
    double cspan = clast - cfirst;
    cr_log_info("%d concurrent streams: closest gap %.3f s, span %.3f s "
                "(control %.3f s)",
                NCONC, least, span, cspan);
    /* No two at one turn (a late arrival shortens only the gap after it). */
    cr_expect_geq(least, 0.4 * period,
                  "two streams came %.3f s apart: a burst beyond 1", least);
    cr_expect_geq(least2, 1.4 * period,
                  "three streams within %.3f s: a burst beyond 1", least2);
    cr_expect(span >= 0.9 * 5 * period && span <= 1.1 * 5 * period + 3 * cspan,
              "%d streams spanned %.3f s, not 5 periods (control %.3f s)",
              NCONC, span, cspan);
    cr_expect_lt(cspan, span / 2, "the control took %.3f s", cspan);

    /* Counted as what happened: none denied, 5 delayed. */
    char want[200];
    snprintf(want, sizeof want,
             "rule [default]: request seen %d, allowed %d, denied 0, "
             "delayed %d\n",
             NCONC, NCONC, NCONC - 1);
    cr_expect_eq(h_file_lines(errlog, want), 1, "the exit report: no \"%s\"",
                 want);
    struct run s;
    rlshim_cli(&s, "stat", "-c", h_config, "--json", NULL);
    const char *row = strstr(s.out, "\"limit\": \"request\"");
    const char *end = row != NULL ? strchr(row, '}') : NULL;
    snprintf(want, sizeof want,
             "\"allowed\": %d, \"denied\": 0, \"delayed\": %d", NCONC,
             NCONC - 1);
    const char *counts = row != NULL ? strstr(row, want) : NULL;
    cr_expect(counts != NULL && counts < end, "stat --json (%s):\n%s", want,
              s.out);
    cr_expect_eq(h_file_lines(logpath, "\"verdict\":\"deny\""), 0,
                 "the decision log has denials");
    cr_expect_eq(h_file_lines(logpath, "\"verdict\":\"delay\""), NCONC - 1);
    cr_expect_eq(h_file_lines(logpath, "\"verdict\":\"allow\""), 1);
    rlshim_cli(&s, "verify", logpath, "--limit", limit, NULL);
    cr_expect_eq(s.status, 0, "rlshim verify: %s", s.out);
}

Test(h2_requests, concurrent_streams_each_reach_the_server_at_their_turn)
{
    check_concurrent(2, "threads");
}

/* The same at 4 a second, closer turns (issue 31 item 17: under ASan,
 * streams of several threads went together at one turn). */
Test(h2_requests, concurrent_streams_at_4_a_second_each_at_their_turn)
{
    check_concurrent(4, "threads");
}

/* The first stream alone, then five from a pool of threads, at 4 a
 * second. */
Test(h2_requests, pooled_streams_after_the_first_each_at_their_turn)
{
    check_concurrent(4, "pool");
}
