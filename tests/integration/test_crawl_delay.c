/* robots.txt's Crawl-delay (SPEC §14), measured at the server: python
 * requests fetches /robots.txt through the shim, then pages; the server
 * stamps each request, and the pages of that destination come at least
 * the Crawl-delay of the client's group apart (`User-agent: polite-bot`
 * 1 s, `*` 0.5 s), from this process and from another process of the
 * user that never read robots.txt. Plain, chunked, gzip and both; a 404
 * changes nothing. A C client that links no zlib reads a gzip robots.txt
 * all the same: the shim loads libz.so.1 at it, and only then (a plain
 * one loads none). `rlshim stat` shows the delay in force. The server is
 * tests/integration/servers/robots.py (RL_ROBOTS picks the answer). */
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
    char line[512], f[64];
    cr_assert_geq(h_server_wait(&st, "REQ", i + 1, 5), i + 1);
    h_server_line(&st, "REQ", i, line, sizeof line);
    return atof(h_field(line, 1, f, sizeof f));
}

/* Requests from..to (inclusive) came at least `want` s apart, each from
 * the one before (a floor with room: the server stamps on arrival). */
static void spaced(int from, int to, double want, const char *who)
{
    for (int i = from + 1; i <= to; i++) {
        double g = stamp(i) - stamp(i - 1);
        cr_log_info("%s: request %d came %.3f s after the one before", who, i,
                    g);
        cr_expect_geq(g, 0.8 * want,
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
    cr_expect_lt(pages, 0.8, "three pages took %.3f s after a 404", pages);
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
