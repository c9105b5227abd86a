/* Crawlers over TLS (SPEC §11), measured at the server: Scrapy (Twisted
 * writes its TLS through pyOpenSSL into a memory BIO) fetching two sites
 * with CONCURRENT_REQUESTS_PER_DOMAIN = 8, one site under a request
 * limit and the other untouched; and node's `https`, whose OpenSSL the
 * NodeSource build carries inside itself: the TLS the shim cannot see,
 * said once and counted. The sites are names in a private hosts file
 * (hosts_ns.h) served by nginx with TLS (nginx_fixture.h). */
#include "harness.h"
#include "hosts_ns.h"
#include "nginx_fixture.h"

static struct ngx_site ngx[2] = {{.addr = "127.0.0.2", .tls = true},
                                 {.addr = "127.0.0.3", .tls = true}};
static struct run r;

static void setup(void)
{
    h_setup();
    ngx_start(ngx, 2);
    ns_hosts_write("127.0.0.2 site-a.test\n127.0.0.3 site-b.test\n");
}

static void teardown(void)
{
    ngx_stop();
    h_teardown();
}

TestSuite(crawlers, .init = setup, .fini = teardown, .timeout = 60);

#define PAGES 6

/* ---- Scrapy ---- */

static const char spider_py[] =
    "import sys, scrapy\n"
    "from scrapy.crawler import CrawlerProcess\n"
    "class Pages(scrapy.Spider):\n"
    "    name = 'pages'\n"
    "    custom_settings = {'CONCURRENT_REQUESTS_PER_DOMAIN': 8,\n"
    "        'CONCURRENT_REQUESTS': 16, 'DOWNLOAD_DELAY': 0,\n"
    "        'ROBOTSTXT_OBEY': False, 'RETRY_ENABLED': False,\n"
    "        'TELNETCONSOLE_ENABLED': False, 'LOG_LEVEL': 'ERROR',\n"
    "        'DOWNLOAD_TIMEOUT': 30}\n"
    "    def start_requests(self):\n"
    "        for u in sys.argv[1:]:\n"
    "            yield scrapy.Request(u, dont_filter=True)\n"
    "    def parse(self, response):\n"
    "        print('page', response.status, flush=True)\n"
    "p = CrawlerProcess()\n"
    "p.crawl(Pages)\n"
    "p.start()\n";

/* PAGES pages of each site, interleaved, in one crawl. */
static void crawl(const char *config)
{
    if (system("/usr/bin/python3 -c 'import scrapy' 2>/dev/null") != 0)
        h_skip("python3-scrapy is not installed (apt-get install "
               "python3-scrapy)");
    char py[300];
    h_file_fill("spider.py", spider_py, strlen(spider_py), py, sizeof py);
    h_config_write("%s", config);
    char script[2000];
    int n = snprintf(script, sizeof script, "/usr/bin/python3 '%s'", py);
    for (int i = 0; i < PAGES; i++)
        n += snprintf(script + n, sizeof script - n,
                      " https://site-a.test:%d/%c.txt?%d"
                      " https://site-b.test:%d/%c.txt?%d",
                      ngx[0].port, 'a' + i % 5, i, ngx[1].port, 'a' + i % 5,
                      i);
    ns_run(&r, 50, script);
    cr_assert_eq(r.status, 0, "scrapy: status %d\n%s", r.status, r.out);
    /* Every page of site-b goes, in either mode: its log has them all
     * once nginx has written them. */
    ngx_settle(&ngx[1], PAGES);
}

/* Fail mode: of site-a's pages only the first reaches its server (the
 * others' SSL_write is refused: Twisted drops those connections and
 * Scrapy reports them), and every page of site-b arrives. */
Test(crawlers, scrapy_over_tls_is_refused_per_site)
{
    crawl("[site:a]\nto = site-a.test\nrequest = 1/min\nrequest_burst = 1\n"
          "on_deny = fail\n");
    double fa, la, fb, lb;
    ngx_settle(&ngx[0], 1);
    int na = ngx_requests(&ngx[0], &fa, &la);
    int nb = ngx_requests(&ngx[1], &fb, &lb);
    cr_expect_eq(na, 1, "site-a's server saw %d pages, not 1", na);
    cr_expect_eq(nb, PAGES, "site-b's server saw %d pages, not %d", nb, PAGES);
    /* A refused write's socket is not held (Twisted would wait for it to
     * flush before closing the connection, until its download timeout of
     * 30 s): half of that, room for Scrapy's start on a slow machine. */
    cr_expect_lt(r.wall, 0.5 * 30,
                 "the crawl took %.1f s: it waited for its download "
                 "timeout (30 s)",
                 r.wall);
}

/* Delay mode: site-a's requests are charged one per turn, 0.5 s apart,
 * to site-a (the decision log: each request's name is the server name
 * Twisted gives OpenSSL, and its Host), and nothing of site-b is charged.
 * At the servers: site-a's pages arrive 0.5 s apart, and site-b's, in the
 * same crawl, all at once. Twisted writes into a memory BIO and sends the
 * ciphertext from its reactor later: the shim finds the socket by its
 * handshake's client random, and holds that socket, not the reactor,
 * until each request's turn. */
Test(crawlers, scrapy_over_tls_is_charged_per_request_to_its_site)
{
    char logpath[300];
    snprintf(logpath, sizeof logpath, "%s/decisions.jsonl", h_dir);
    setenv("RLSHIM_DECISION_LOG", logpath, 1);
    crawl("[site:a]\nto = site-a.test\nrequest = 2/s\nrequest_burst = 1\n"
          "on_deny = delay\n");
    unsetenv("RLSHIM_DECISION_LOG");
    double fa, la, fb, lb;
    ngx_settle(&ngx[0], PAGES);
    cr_expect_eq(ngx_requests(&ngx[0], &fa, &la), PAGES);
    cr_expect_eq(ngx_requests(&ngx[1], &fb, &lb), PAGES);
    cr_expect_eq(h_file_lines(logpath, "\"call\":\"request\""), PAGES,
                 "%d requests charged, not site-a's %d",
                 h_file_lines(logpath, "\"call\":\"request\""), PAGES);
    cr_expect_eq(h_file_lines(logpath, "\"name\":\"site-a.test\""), PAGES,
                 "site-a's requests are charged to its name");
    /* The turns: the k-th request's wait ends (k-1) halves after the
     * first's (mono_ns + wait_ns), not before and not a turn late (a
     * request charged twice). */
    char cmd[600];
    snprintf(cmd, sizeof cmd,
             "grep '\"call\":\"request\"' '%s' | sed 's/.*\"mono_ns\":"
             "\\([0-9]*\\).*\"wait_ns\":\\([0-9]*\\).*/\\1 \\2/' | "
             "awk '{printf \"%%.6f\\n\", ($1 + $2) / 1e9}' | sort -n",
             logpath);
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p);
    double turn[PAGES];
    int k = 0;
    while (k < PAGES && fscanf(p, "%lf", &turn[k]) == 1) {
        double t = turn[k] - turn[0];
        cr_expect(t > k * 0.5 - 0.002 && t < k * 0.5 + 0.5 * 0.5,
                  "request %d's turn at +%.3f s, not +%.1f s", k, t, k * 0.5);
        k++;
    }
    pclose(p);
    cr_expect_eq(k, PAGES, "%d turns read from the decision log", k);
    /* At the server (stamps in ms, of the wall clock; a page is logged
     * when answered): no page before its turn. The i-th page to arrive
     * is held to the i-th turn, not to the page before it, whose stamp a
     * busy machine may make late. */
    struct timespec mono, wall;
    clock_gettime(CLOCK_MONOTONIC, &mono);
    clock_gettime(CLOCK_REALTIME, &wall);
    double wall_minus_mono = (double)(wall.tv_sec - mono.tv_sec) +
                             (double)(wall.tv_nsec - mono.tv_nsec) / 1e9;
    double at[PAGES];
    int n = ngx_times(&ngx[0], at, PAGES);
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && at[j] < at[j - 1]; j--) {
            double x = at[j];
            at[j] = at[j - 1];
            at[j - 1] = x;
        }
    for (int i = 0; i < n && i < k; i++)
        cr_expect_geq(at[i] - (turn[i] + wall_minus_mono), -0.002,
                      "site-a's page %d reached its server %.3f s before "
                      "its turn",
                      i + 1, turn[i] + wall_minus_mono - at[i]);
    cr_expect_geq(la - fa, (PAGES - 1) * 0.5 * 0.9,
                  "site-a's %d pages in %.3f s at its server", PAGES, la - fa);
    /* Site-b waits for none of site-a's turns: its pages all arrive in a
     * small part of site-a's span. */
    cr_expect_lt(lb - fb, (la - fa) / 4,
                 "site-b's pages took %.3f s at its server (site-a's %.3f s): "
                 "held by site-a's turns",
                 lb - fb, la - fa);
    cr_log_info("scrapy: site-a's %d pages in %.3f s at its server, "
                "site-b's in %.3f s",
                PAGES, la - fa, lb - fb);
}

/* ---- node https: TLS the shim cannot see ---- */

static const char node_https_js[] =
    "const https = require('https');\n"
    "const agent = new https.Agent({keepAlive: true, maxSockets: 1,\n"
    "                               rejectUnauthorized: false});\n"
    "const urls = process.argv.slice(1);\n"
    "function next(i) {\n"
    "  if (i >= urls.length) { agent.destroy(); return; }\n"
    "  https.get(urls[i], {agent}, (res) => {\n"
    "    res.resume(); res.on('end', () => next(i + 1));\n"
    "  }).on('error', (e) => { console.error('error: ' + e); next(i + 1); });\n"
    "}\n"
    "next(0);\n";

/* This node links no libssl (ldd): its requests cannot be counted. The
 * process says so once, naming the destination; the exit report and
 * `rlshim stat` count the connection; its requests go unpaced (with a
 * `connect` limit beside `request` its connections would still be
 * paced). Its plaintext HTTP requests are counted: suite requests,
 * node_http_get_keepalive_is_paced. */
Test(crawlers, node_https_is_said_not_counted)
{
    if (system("ldd /usr/bin/node 2>/dev/null | grep -q libssl") == 0)
        h_skip("this node links libssl: its requests are seen (the test is "
               "for a node with OpenSSL built in)");
    /* Counted, the 3 requests would take 2 turns: 4 s at 30/min. */
    h_config_write("[rlshim]\nreport = yes\n[default]\nrequest = 30/min\n"
                   "request_burst = 1\non_deny = delay\n");
    char u[3][96];
    for (int i = 0; i < 3; i++)
        snprintf(u[i], sizeof u[i], "https://127.0.0.2:%d/%c.txt",
                 ngx[0].port, 'a' + i);
    char *argv[] = {"/usr/bin/node", "-e", (char *)node_https_js, u[0], u[1],
                    u[2], NULL};
    h_run(&r, true, 30, argv);
    cr_assert_eq(r.status, 0, "node: status %d", r.status);
    ngx_settle(&ngx[0], 3);
    double first, last;
    cr_expect_eq(ngx_requests(&ngx[0], &first, &last), 3);
    cr_expect_lt(last - first, 0.5 * 4, "3 requests in %.3f s: counted?",
                 last - first);
    char errlog[300], line[200];
    snprintf(errlog, sizeof errlog, "%s/stderr.log", h_dir);
    snprintf(line, sizeof line,
             "rlshim: requests to 127.0.0.2:%d are not counted: TLS the "
             "shim cannot see",
             ngx[0].port);
    cr_expect_eq(h_file_lines(errlog, line), 1, "the line, once: %s", line);
    cr_expect_eq(h_file_lines(errlog, "1 TLS connections: requests not "
                                      "counted"),
                 1, "the exit report counts the connection");
    struct run s;
    h_rlshim_cmd(&s, "stat");
    cr_expect_eq(s.status, 0, "rlshim stat: status %d", s.status);
    cr_expect_not_null(strstr(s.out, "TLS connections not counted: 1"),
                       "rlshim stat:\n%s", s.out);
}
