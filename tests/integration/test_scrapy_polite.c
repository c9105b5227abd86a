/* Scrapy under SPEC §14, measured at the server. Scrapy reads robots.txt
 * (ROBOTSTXT_OBEY) but never obeys its Crawl-delay (scrapy/scrapy#892),
 * and its AutoThrottle, off here, paces only its own process: the shim
 * does both for it. With its default User-Agent (product token `Scrapy`)
 * its pages come its group's Crawl-delay apart, and so do another
 * process's that never read robots.txt; crawling pages whose response
 * time steps 50 ms -> 400 ms -> 50 ms under `adapt = latency`, its
 * requests spread out after the first slow response and close up again
 * after recovery. Servers: robots.py (three groups; Scrapy's 1 s, `*`
 * 0.5 s) and http_status.py (/slow/MS). The same for python requests and
 * curl: suites crawl_delay and adapt. */
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

TestSuite(scrapy_polite, .init = setup, .fini = teardown, .timeout = 60);

/* argv: a JSON object of Scrapy settings, `all` (every URL at once, as
 * many in flight as Scrapy allows) or `chain` (each URL once the one
 * before was answered: their order is fixed), the URLs. Prints one line
 * per page. AutoThrottle and Scrapy's own delay are off: what spaces the
 * pages is the shim. */
static const char spider_py[] =
    "import json, sys, scrapy\n"
    "from scrapy.crawler import CrawlerProcess\n"
    "settings, order, urls = json.loads(sys.argv[1]), sys.argv[2], "
    "sys.argv[3:]\n"
    "class Pages(scrapy.Spider):\n"
    "    name = 'pages'\n"
    "    custom_settings = dict({'DOWNLOAD_DELAY': 0,\n"
    "        'AUTOTHROTTLE_ENABLED': False, 'RETRY_ENABLED': False,\n"
    "        'TELNETCONSOLE_ENABLED': False, 'LOG_LEVEL': 'ERROR',\n"
    "        'DOWNLOAD_TIMEOUT': 20}, **settings)\n"
    "    def start_requests(self):\n"
    "        for i, u in enumerate(urls if order == 'all' else urls[:1]):\n"
    "            yield scrapy.Request(u, dont_filter=True, cb_kwargs={'i': i})\n"
    "    def parse(self, response, i):\n"
    "        print('page', response.status, flush=True)\n"
    "        if order == 'chain' and i + 1 < len(urls):\n"
    "            yield scrapy.Request(urls[i + 1], dont_filter=True,\n"
    "                                 cb_kwargs={'i': i + 1})\n"
    "p = CrawlerProcess()\n"
    "p.crawl(Pages)\n"
    "p.start()\n";

#define MAX_URLS 16
static char urls[MAX_URLS][96];

/* Crawls urls[0..n) with `settings` in `order`; every page answered. */
static void scrapy(const char *settings, const char *order, int n)
{
    if (system("/usr/bin/python3 -c 'import scrapy' 2>/dev/null") != 0)
        h_skip("python3-scrapy is not installed (apt-get install "
               "python3-scrapy)");
    char py[300];
    h_file_fill("spider.py", spider_py, strlen(spider_py), py, sizeof py);
    char *argv[MAX_URLS + 6] = {"/usr/bin/python3", py, (char *)settings,
                                (char *)order};
    for (int i = 0; i < n; i++)
        argv[4 + i] = urls[i];
    argv[4 + n] = NULL;
    h_run(&r, true, 40, argv);
    cr_assert_eq(r.status, 0, "scrapy: status %d\n%s", r.status, r.out);
    int pages = 0;
    for (const char *p = r.out; (p = strstr(p, "page 200")) != NULL; p++)
        pages++;
    cr_assert_eq(pages, n, "scrapy answered %d pages of %d:\n%s", pages, n,
                 r.out);
}

/* The server's stamp (s) of its i-th request (0-based). */
static double stamp(int i)
{
    int n = h_server_wait(&st, "REQ", i + 1, 5);
    cr_assert_geq(n, i + 1, "the server saw %d requests, not %d", n, i + 1);
    return h_server_stamp(&st, i);
}

/* Requests from..to (inclusive), in the order they reached the server,
 * came at least 0.8 x `want` s apart (the server stamps a request when its
 * head arrives; a page answered late on a busy machine brings the next
 * one nearer). */
static void spaced(int from, int to, double want, const char *who)
{
    double at[MAX_URLS + 2];
    int n = 0;
    for (int i = from; i <= to && n < MAX_URLS + 2; i++) {
        double t = stamp(i);
        int j = n++;
        for (; j > 0 && at[j - 1] > t; j--)
            at[j] = at[j - 1];
        at[j] = t;
    }
    for (int i = 1; i < n; i++) {
        double g = at[i] - at[i - 1];
        cr_log_info("%s: page %d came %.3f s after the one before", who, i + 1,
                    g);
        cr_expect_geq(g, 0.8 * want,
                      "%s: page %d came %.3f s after the one before; the "
                      "Crawl-delay is %.1f s",
                      who, i + 1, g, want);
    }
}

/* The server's i-th request asked for `path` with a User-Agent whose
 * first word starts with `ua`. */
static void asked(int i, const char *path, const char *ua)
{
    char line[512], f[128], g[128];
    stamp(i);
    h_server_line(&st, "REQ", i, line, sizeof line);
    cr_expect_str_eq(h_field(line, 3, f, sizeof f), path, "request %d: %s", i,
                     line);
    cr_expect(strncmp(h_field(line, 4, g, sizeof g), ua, strlen(ua)) == 0,
              "request %d came from '%s', not %s", i, g, ua);
}

/* `rlshim stat` says `text`. */
static void stat_says(const char *text)
{
    struct run s;
    h_rlshim_cmd(&s, "stat");
    cr_assert_eq(s.status, 0, "%s", s.out);
    cr_expect_not_null(strstr(s.out, text), "stat: no '%s' in\n%s", text,
                       s.out);
}

/* ---- robots.txt's Crawl-delay ---- */

/* Twenty requests a second per destination: the limit alone never spaces
 * pages more than 0.05 s; crawl_delay = obey is the default. */
#define ROBOTS_CONFIG                                                          \
    "[site:every]\nper = destination\nrequest = 20/s\nrequest_burst = 1\n"     \
    "on_deny = delay\nmax_delay = 10s\n"

#define OBEY "{\"ROBOTSTXT_OBEY\": true}"

static void robots_start(void)
{
    h_server_start(&st, "robots.py");
    h_config_write(ROBOTS_CONFIG);
}

static void robots_urls(const char *p0, const char *p1, const char *p2,
                        const char *p3)
{
    const char *p[] = {p0, p1, p2, p3};
    for (int i = 0; i < 4; i++)
        snprintf(urls[i], sizeof urls[i], "http://127.0.0.1:%d%s", st.port,
                 p[i]);
}

/* Scrapy asks for robots.txt first and holds its pages until it has it;
 * then it sends all four at once (sixteen in flight by default): the
 * shim spaces them by the `Scrapy` group's 1 s. */
Test(scrapy_polite, scrapy_s_pages_come_its_group_s_crawl_delay_apart)
{
    robots_start();
    robots_urls("/a", "/b", "/c", "/d");
    scrapy(OBEY, "all", 4);
    asked(0, "/robots.txt", "Scrapy/");
    stat_says("crawl-delay 1 s");
    spaced(1, 4, 1.0, "scrapy");
}

/* The delay Scrapy's read set is the destination's: a python requests
 * process of the same user that never reads robots.txt is spaced by it
 * too. When requests, under its own User-Agent, reads robots.txt again,
 * the `*` group's 0.5 s is in force (requests alone:
 * crawl_delay/another_agent_gets_the_star_group). */
Test(scrapy_polite, another_process_is_spaced_by_what_scrapy_read)
{
    robots_start();
    robots_urls("/a", "", "", "");
    scrapy(OBEY, "all", 1);
    asked(0, "/robots.txt", "Scrapy/");
    static const char requests_py[] =
        "import requests, sys\n"
        "s = requests.Session()\n"
        "for p in sys.argv[2:]:\n"
        "    s.get(sys.argv[1] + p, timeout=20).content\n";
    char base[64];
    snprintf(base, sizeof base, "http://127.0.0.1:%d", st.port);
    char *plain[] = {"/usr/bin/python3", "-c", (char *)requests_py, base,
                     "/e", "/f", "/g", NULL};
    h_run(&r, true, 30, plain);
    cr_assert_eq(r.status, 0, "requests: status %d\n%s", r.status, r.out);
    asked(2, "/e", "python-requests/");
    spaced(1, 4, 1.0, "requests after scrapy");
    char *reread[] = {"/usr/bin/python3", "-c", (char *)requests_py, base,
                      "/robots.txt", "/h", "/i", "/j", NULL};
    h_run(&r, true, 30, reread);
    cr_assert_eq(r.status, 0, "requests: status %d\n%s", r.status, r.out);
    asked(5, "/robots.txt", "python-requests/");
    stat_says("crawl-delay 500 ms");
    spaced(6, 8, 0.5, "requests with its own robots.txt");
}

/* ---- latency ---- */

#define ADAPT_CONFIG                                                           \
    "[rlshim]\non_deny = delay\nmax_delay = 10s\n"                           \
    "[site:x]\nper = destination\nrequest = 20/s\nadapt = latency\n"      \
    "adapt_factor = 2\n"

#define FAST 3
#define SLOW 4
#define AFTER 6

/* One request in flight, each page asked once the one before is
 * answered: 3 pages of 50 ms, 4 of 400 ms, 6 of 50 ms again. The slow
 * phase's gaps (from the first slow page's request on) are at least
 * 0.8 x 2 x 400 ms; after recovery, the last gap is well under the slow
 * phase's least. */
Test(scrapy_polite, scrapy_follows_a_server_that_slows_and_recovers)
{
    h_config_write(ADAPT_CONFIG);
    h_server_start(&st, "http_status.py");
    int n = FAST + SLOW + AFTER;
    for (int i = 0; i < n; i++)
        snprintf(urls[i], sizeof urls[i], "http://127.0.0.1:%d/slow/%d/%d",
                 st.port, i >= FAST && i < FAST + SLOW ? 400 : 50, i);
    scrapy("{\"CONCURRENT_REQUESTS\": 1, \"ROBOTSTXT_OBEY\": false}", "chain",
           n);
    for (int i = 0; i + 1 < FAST; i++)
        cr_log_info("scrapy: fast gap %d: %.3f s", i, stamp(i + 1) - stamp(i));
    double least = 1e9;
    for (int i = FAST; i < FAST + SLOW; i++) {
        double g = stamp(i + 1) - stamp(i);
        cr_log_info("scrapy: slow gap %d: %.3f s", i, g);
        cr_expect_geq(g, 0.8 * 2 * 0.4,
                      "scrapy: page %d came %.3f s after the one a 400 ms "
                      "response answered",
                      i + 2, g);
        least = g < least ? g : least;
    }
    for (int i = FAST + SLOW; i + 1 < n; i++)
        cr_log_info("scrapy: gap %d after recovery: %.3f s", i,
                    stamp(i + 1) - stamp(i));
    double last = stamp(n - 1) - stamp(n - 2);
    cr_expect_lt(last, 0.6 * least,
                 "scrapy: after recovery the gap is %.3f s, the slow "
                 "phase's least %.3f s",
                 last, least);
}
