/* robots.txt's Crawl-delay (SPEC §14), measured at the server: python
 * requests fetches /robots.txt through the shim, then pages; the server
 * stamps each request, and the pages of that destination come at least
 * the Crawl-delay of the client's group apart (`User-agent: polite-bot`
 * 1 s, `*` 0.5 s), from this process and from another process of the
 * user that never read robots.txt. Plain, chunked, gzip and both; a 404
 * changes nothing. A C client that links no zlib reads a gzip robots.txt
 * all the same: the shim loads libz.so.1 at it, and only then (a plain
 * one loads none). `rlshim stat` shows the delay in force. The server is
 * tests/integration/servers/robots.py (RL_ROBOTS picks the answer).
 * Over HTTP/2 (httpx with h2 by ALPN to nginx over TLS) the robots.txt
 * stream's DATA is read the same, measured in nginx's access log. */
#include "harness.h"
#include "nginx_fixture.h"

static struct server st;
static struct run r;

static void setup(void)
{
    h_setup();
}

static void teardown(void)
{
    h_server_stop(&st);
    ngx_stop();
    h_teardown();
}

TestSuite(crawl_delay, .init = setup, .fini = teardown, .timeout = 60);

/* Twenty requests a second per destination: the limit alone never spaces
 * pages more than 0.05 s. */
#define CONFIG                                                                 \
    "[site:every]\nper = destination\nrequest = 20/s\nrequest_burst = 1\n"     \
    "on_deny = delay\nmax_delay = 10s\n"

static void start(const char *mode)
{
    setenv("RL_ROBOTS", mode, 1);
    h_server_start(&st, "robots.py");
    unsetenv("RL_ROBOTS");
    h_config_write(CONFIG);
}

/* GETs each path in turn on one session with User-Agent argv[1] ("-":
 * requests' own). */
static const char requests_py[] =
    "import requests, sys\n"
    "s = requests.Session()\n"
    "if sys.argv[1] != '-':\n"
    "    s.headers['User-Agent'] = sys.argv[1]\n"
    "base = sys.argv[2]\n"
    "for p in sys.argv[3:]:\n"
    "    s.get(base + p, timeout=20).content\n";

static void fetch(const char *ua, const char *p1, const char *p2,
                  const char *p3, const char *p4)
{
    char base[64];
    snprintf(base, sizeof base, "http://127.0.0.1:%d", st.port);
    char *argv[] = {"/usr/bin/python3", "-c", (char *)requests_py,
                    (char *)ua, base, (char *)p1, (char *)p2, (char *)p3,
                    (char *)p4, NULL};
    h_run(&r, true, 30, argv);
    cr_assert_eq(r.status, 0, "python: status %d\n%s", r.status, r.out);
}

/* tests/helpers/http_get: argv[1..] are its UA and paths, one connection
 * each; *before and *after say whether libz was mapped into it before its
 * first request and after its last. */
static void fetch_c(int *before, int *after, const char *ua, const char *p1,
                    const char *p2, const char *p3, const char *p4)
{
    char bin[512], port[16];
    snprintf(port, sizeof port, "%d", st.port);
    char *argv[] = {(char *)h_helper("http_get", bin, sizeof bin),
                    port, (char *)ua, (char *)p1, (char *)p2, (char *)p3,
                    (char *)p4, NULL};
    h_run(&r, true, 30, argv);
    cr_assert_eq(r.status, 0, "http_get: status %d\n%s", r.status, r.out);
    *before = (int)h_out_long(&r, "libz_before", -1);
    *after = (int)h_out_long(&r, "libz_after", -1);
}

/* The server's stamp (s) of its i-th request (0-based). */
static double stamp(int i)
{
    cr_assert_geq(h_server_wait(&st, "REQ", i + 1, 5), i + 1);
    return h_server_stamp(&st, i);
}

/* Requests from..to (inclusive) came at least half of `want` s apart,
 * each from the one before: the wrong answer, no crawl delay, is the
 * limit's own short period; a page that reaches the server late on a
 * loaded machine shortens the gap after it, by less than half a delay. */
static void spaced(int from, int to, double want, const char *who)
{
    for (int i = from + 1; i <= to; i++) {
        double g = stamp(i) - stamp(i - 1);
        cr_log_info("%s: request %d came %.3f s after the one before", who, i,
                    g);
        cr_expect_geq(g, 0.5 * want,
                      "%s: request %d came %.3f s after the one before; the "
                      "Crawl-delay is %.1f s",
                      who, i, g, want);
    }
}

/* `rlshim stat`'s rows for 127.0.0.1 say `text` (NULL: no crawl-delay). */
static void stat_says(const char *text)
{
    h_rlshim_cmd(&r, "stat");
    cr_assert_eq(r.status, 0, "%s", r.out);
    if (text != NULL)
        cr_expect_not_null(strstr(r.out, text), "stat: no '%s' in\n%s", text,
                           r.out);
    else
        cr_expect_null(strstr(r.out, "crawl-delay"),
                       "stat: a crawl-delay after a 404\n%s", r.out);
}

static void polite_bot_is_spaced(const char *mode)
{
    start(mode);
    fetch("polite-bot/1.0", "/robots.txt", "/a", "/b", "/c");
    stat_says("crawl-delay 1 s");
    spaced(1, 3, 1.0, mode);
}

Test(crawl_delay, the_agent_s_group_spaces_its_pages)
{
    polite_bot_is_spaced("plain");
}

Test(crawl_delay, a_chunked_robots_txt_is_read)
{
    polite_bot_is_spaced("chunked");
}

Test(crawl_delay, a_gzip_robots_txt_is_read)
{
    polite_bot_is_spaced("gzip");
}

Test(crawl_delay, a_gzip_and_chunked_robots_txt_is_read)
{
    polite_bot_is_spaced("gzip-chunked");
}

Test(crawl_delay, a_robots_txt_ended_by_the_server_s_close_is_read)
{
    polite_bot_is_spaced("close");
}

Test(crawl_delay, another_agent_gets_the_star_group)
{
    start("plain");
    fetch("-", "/robots.txt", "/a", "/b", "/c");
    stat_says("crawl-delay 500 ms");
    spaced(1, 3, 0.5, "python-requests");
}

Test(crawl_delay, another_process_of_the_user_is_spaced_too)
{
    start("plain");
    fetch("polite-bot/1.0", "/robots.txt", "/a", "/b", "/c");
    /* It never reads robots.txt: the delay is the destination's. */
    fetch("polite-bot/1.0", "/d", "/e", "/f", "/g");
    spaced(4, 7, 1.0, "the second process");
}

Test(crawl_delay, a_404_robots_txt_changes_nothing)
{
    start("404");
    double t0 = h_now();
    fetch("polite-bot/1.0", "/robots.txt", "/a", "/b", "/c");
    stat_says(NULL);
    double pages = stamp(3) - stamp(1);
    /* The 404's body names polite-bot's 1 s: read, it would space the
     * three pages 2 s; half that tells them apart. */
    cr_expect_lt(pages, 0.5 * 2 * 1.0, "three pages took %.3f s after a 404",
                 pages);
    cr_log_info("404: the whole run %.3f s", h_now() - t0);
}

Test(crawl_delay, a_gzip_robots_txt_loads_zlib_into_a_program_without_it)
{
    int before, after;
    start("gzip");
    fetch_c(&before, &after, "polite-bot/1.0", "/robots.txt", "/a", "/b",
            "/c");
    cr_expect_eq(before, 0, "libz mapped before any robots.txt");
    cr_expect_eq(after, 1, "no libz mapped after a gzip robots.txt");
    stat_says("crawl-delay 1 s");
    spaced(1, 3, 1.0, "gzip, C client");
    cr_expect_eq(h_server_wait(&st, "REQ", 4, 1), 4);
}

Test(crawl_delay, a_plain_robots_txt_loads_no_zlib)
{
    int before, after;
    start("plain");
    fetch_c(&before, &after, "polite-bot/1.0", "/robots.txt", "/a", "/b",
            "/c");
    cr_expect_eq(before, 0);
    cr_expect_eq(after, 0, "libz mapped for a plain robots.txt");
    stat_says("crawl-delay 1 s");
    spaced(1, 3, 1.0, "plain, C client");
}

/* httpx over HTTP/2: GETs each path in turn on one connection as
 * User-Agent argv[1], printing each answer's HTTP version. */
static const char httpx_py[] =
    "import httpx, sys\n"
    "with httpx.Client(http1=False, http2=True, verify=False, timeout=20,\n"
    "                  headers={'User-Agent': sys.argv[1]}) as c:\n"
    "    for p in sys.argv[3:]:\n"
    "        r = c.get(sys.argv[2] + p)\n"
    "        print(r.http_version, r.status_code, p)\n";

static void fetch_h2(const struct ngx_site *s, const char *p1, const char *p2,
                     const char *p3, const char *p4)
{
    char base[64];
    snprintf(base, sizeof base, "https://%s:%d", s->addr, s->port);
    char *argv[] = {"/usr/bin/python3", "-c", (char *)httpx_py,
                    "polite-bot/1.0", base, (char *)p1, (char *)p2,
                    (char *)p3, (char *)p4, NULL};
    h_run(&r, true, 40, argv);
    cr_log_info("httpx: %s", r.out);
    cr_assert_eq(r.status, 0, "httpx: status %d\n%s", r.status, r.out);
    cr_assert_null(strstr(r.out, "HTTP/1"), "not HTTP/2:\n%s", r.out);
}

/* The longest gap between requests from..to (inclusive) of t, and the
 * shortest. */
static void gaps(const double *t, int from, int to, double *lo, double *hi)
{
    *lo = 1e9;
    *hi = 0;
    for (int i = from + 1; i <= to; i++) {
        double g = t[i] - t[i - 1];
        *lo = g < *lo ? g : *lo;
        *hi = g > *hi ? g : *hi;
    }
}

/* nginx over TLS (h2 by ALPN) serving robots.txt: `Crawl-delay: 1` for
 * polite-bot; `extra` are more directives for its server block. */
static void start_h2(struct ngx_site *site, const char *extra)
{
    if (system("/usr/bin/python3 -c 'import httpx, h2' 2>/dev/null") != 0)
        h_skip("python3-httpx or python3-h2 is not installed "
               "(apt-get install python3-httpx python3-h2)");
    *site = (struct ngx_site){.addr = "127.0.0.1", .tls = true,
                              .extra = extra};
    ngx_start(site, 1);
    static const char robots[] = "User-agent: polite-bot\nCrawl-delay: 1\n"
                                 "\nUser-agent: *\nDisallow:\n";
    char path[400];
    h_file_fill("www/robots.txt", robots, sizeof robots - 1, path,
                sizeof path);
    h_config_write(CONFIG);
}

/* Requests 4..7 of the site's log are robots.txt and three pages, after
 * a control run of four pages (0..3) with no robots.txt read: the
 * control comes at the request limit's pace (0.05 s), far under the
 * delay; the pages after robots.txt come at least the delay apart. The
 * control is held as a whole (its three gaps under half the delay's
 * three), not gap by gap: one page a loaded machine ran late must not
 * fail it, while a delay applied with no robots.txt read would still
 * put the delay between every two of its pages. */
static void paced_after_control(const struct ngx_site *site, const char *who)
{
    double t[16], lo, hi;
    ngx_settle(site, 8);
    cr_assert_eq(ngx_times(site, t, 16), 8, "eight requests logged");
    gaps(t, 0, 3, &lo, &hi);
    cr_log_info("%s control: pages %.3f to %.3f s apart", who, lo, hi);
    cr_expect_lt(t[3] - t[0], 0.5 * 3 * 1.0,
                 "%s: without robots.txt, four pages took %.3f s; the limit "
                 "alone spaces them 0.05 s, the Crawl-delay 1 s",
                 who, t[3] - t[0]);
    stat_says("crawl-delay 1 s");
    gaps(t, 5, 7, &lo, &hi);
    cr_log_info("%s: pages %.3f to %.3f s apart, Crawl-delay 1 s", who, lo,
                hi);
    /* Half the delay: a late page shortens the gap after it. */
    cr_expect_geq(lo, 0.5, "%s: pages came %.3f s apart over HTTP/2; the "
                  "Crawl-delay is 1 s", who, lo);
}

Test(crawl_delay, a_robots_txt_over_http2_spaces_the_pages)
{
    struct ngx_site site;
    start_h2(&site, NULL);
    fetch_h2(&site, "/a.txt", "/b.txt", "/c.txt", "/d.txt");
    fetch_h2(&site, "/robots.txt", "/a.txt", "/b.txt", "/c.txt");
    paced_after_control(&site, "httpx");
}

/* curl --http2 --compressed: nginx gzips robots.txt, read through zlib;
 * each run's URLs on one connection. */
static void fetch_curl(const struct ngx_site *s, const char *p1,
                       const char *p2, const char *p3, const char *p4)
{
    const char *p[] = {p1, p2, p3, p4};
    char u[4][96];
    char *argv[24];
    int k = 0;
    argv[k++] = "/usr/bin/curl";
    argv[k++] = "--http2";
    argv[k++] = "--compressed";
    argv[k++] = "-ksS";
    argv[k++] = "-A";
    argv[k++] = "polite-bot/1.0";
    argv[k++] = "-w";
    argv[k++] = "%{http_version} %{http_code}\\n";
    for (int i = 0; i < 4; i++) {
        snprintf(u[i], sizeof u[i], "https://%s:%d%s", s->addr, s->port,
                 p[i]);
        argv[k++] = "-o";
        argv[k++] = "/dev/null";
        argv[k++] = u[i];
    }
    argv[k] = NULL;
    h_run(&r, true, 40, argv);
    cr_log_info("curl: %s", r.out);
    cr_assert_eq(r.status, 0, "curl: status %d\n%s", r.status, r.out);
    cr_assert_null(strstr(r.out, "1.1 "), "not HTTP/2:\n%s", r.out);
}

Test(crawl_delay, a_gzip_robots_txt_over_http2_spaces_curl_s_pages)
{
    struct ngx_site site;
    start_h2(&site, "    gzip on;\n    gzip_types text/plain;\n"
                    "    gzip_min_length 1;\n");
    fetch_curl(&site, "/a.txt", "/b.txt", "/c.txt", "/d.txt");
    fetch_curl(&site, "/robots.txt", "/a.txt", "/b.txt", "/c.txt");
    paced_after_control(&site, "curl");
}

/* An empty robots.txt read over HTTP/2 (nginx answers a 200 with no
 * body) says no Crawl-delay, which clears the one read before it: the
 * pages after it come at the limit's pace again (SPEC §14). */
Test(crawl_delay, an_empty_robots_txt_over_http2_clears_the_delay)
{
    struct ngx_site site;
    start_h2(&site, NULL);
    fetch_h2(&site, "/robots.txt", "/a.txt", "/b.txt", "/c.txt");
    char path[400];
    h_file_fill("www/robots.txt", "", 0, path, sizeof path);
    fetch_h2(&site, "/robots.txt", "/a.txt", "/b.txt", "/c.txt");
    double t[16], lo, hi;
    ngx_settle(&site, 8);
    cr_assert_eq(ngx_times(&site, t, 16), 8, "eight requests logged");
    gaps(t, 1, 3, &lo, &hi);
    cr_log_info("pages %.3f to %.3f s apart after a Crawl-delay of 1 s", lo,
                hi);
    cr_assert_geq(lo, 0.5, "the first robots.txt was not read");
    gaps(t, 5, 7, &lo, &hi);
    cr_log_info("pages %.3f to %.3f s apart after an empty robots.txt", lo,
                hi);
    cr_expect_lt(hi, 0.5, "pages came %.3f s apart after an empty "
                 "robots.txt: its Crawl-delay of 1 s still held", hi);
}
