/* More real clients under on_deny = respond (SPEC §15), each counted at
 * the server (servers/http_status.py, which stamps each request's head):
 * wget over GnuTLS (keep-alive: 200, then its "ERROR 429"), a GnuTLS
 * client that asks gnutls_record_check_pending before it reads (the
 * made-up answer is counted there), curl --retry (it honours
 * Retry-After: every URL 200 in the end, at the limit's pace), aiohttp
 * (200 then 429) and Scrapy (its RetryMiddleware retries a 429: the crawl
 * completes, every page 200, paced). The suite `respond` has the
 * others. */
#include "harness.h"

static struct server st;
static struct run r;

static void setup(void)
{
    h_setup();
    /* wget (GnuTLS) and curl (OpenSSL) speak TLS to it. */
    setenv("RL_TLS", "1", 1);
    h_server_start(&st, "http_status.py");
    unsetenv("RL_TLS");
}

static void teardown(void)
{
    h_server_stop(&st);
    h_teardown();
}

TestSuite(respond_clients, .init = setup, .fini = teardown, .timeout = 90);

#define ONE_A_MINUTE "[default]\nrequest = 1/min\non_deny = respond\n"

static char *url(const char *scheme, const char *path)
{
    static char u[8][160];
    static int k;
    char *p = u[k++ % 8];
    snprintf(p, 160, "%s://127.0.0.1:%d%s", scheme, st.port, path);
    return p;
}

/* The same server in plaintext: python's asyncio (aiohttp) and Twisted
 * (Scrapy) write TLS through a memory BIO, whose request the shim does
 * not answer (it fails as under fail, one line on stderr says so). */
static void plaintext_server(void)
{
    h_server_stop(&st);
    h_server_start(&st, "http_status.py");
}

/* Requests the server got, once it has had a moment for a late one. */
static int server_got(int at_least)
{
    h_server_wait(&st, "REQ", at_least + 1, 1);
    return h_server_count(&st, "REQ");
}

/* How many times `what` is in s. */
static int count_of(const char *s, const char *what)
{
    int n = 0;
    for (const char *p = s; (p = strstr(p, what)) != NULL; p += strlen(what))
        n++;
    return n;
}

/* wget links GnuTLS: gnutls_record_send's request is taken, and
 * gnutls_record_recv reads the 429 on the connection it keeps. */
Test(respond_clients, wget_over_gnutls_reads_429_on_its_kept_connection)
{
    if (!h_have("wget"))
        h_skip("no wget");
    h_config_write(ONE_A_MINUTE);
    char *argv[] = {"wget", "--no-check-certificate", "-O", "/dev/null", "-o",
                    "/dev/stdout", url("https", "/a"), url("https", "/b"),
                    url("https", "/c"), NULL};
    h_run(&r, true, 30, argv);
    cr_log_info("wget: %s", r.out);
    cr_expect_eq(r.status, 8, "wget: status %d (8: the server said an "
                              "error)\n%s", r.status, r.out);
    cr_expect_eq(count_of(r.out, "awaiting response... 200 OK"), 1, "%s",
                 r.out);
    cr_expect_eq(count_of(r.out, "ERROR 429: Too Many Requests."), 2, "%s",
                 r.out);
    cr_expect_eq(count_of(r.out, "Reusing existing connection"), 2,
                 "one connection:\n%s", r.out);
    int got = server_got(1);
    cr_expect_eq(got, 1, "the server got %d requests, not 1", got);
}

/* A GnuTLS client that asks gnutls_record_check_pending right after its
 * write, before any read: the made-up answer is counted there. */
Test(respond_clients, gnutls_check_pending_counts_a_made_up_answer)
{
    h_config_write(ONE_A_MINUTE);
    char bin[300], port[16];
    snprintf(port, sizeof port, "%d", st.port);
    char *argv[] = {(char *)h_helper("gnutls_get", bin, sizeof bin), port,
                    "/a", "/b", NULL};
    h_run(&r, true, 30, argv);
    cr_assert_eq(r.status, 0, "gnutls_get: status %d\n%s", r.status, r.out);
    cr_log_info("gnutls_get: %s", r.out);
    unsigned long p1 = 0, p2 = 0;
    int s1 = 0, s2 = 0;
    cr_assert_eq(sscanf(r.out, "pending %lu status %d\npending %lu status %d",
                        &p1, &s1, &p2, &s2),
                 4, "%s", r.out);
    cr_expect_eq(s1, 200);
    cr_expect_eq(s2, 429);
    cr_expect_gt(p2, 100, "a whole made-up answer is pending: %lu", p2);
    int got = server_got(1);
    cr_expect_eq(got, 1, "the server got %d requests, not 1", got);
}

/* curl --retry honours a 429's Retry-After: both URLs 200 in the end,
 * the second sent when the budget grants it (2 s after the first). */
Test(respond_clients, curl_retry_honours_retry_after_and_both_get_200)
{
    if (!h_have("curl"))
        h_skip("no curl");
    h_config_write("[default]\nrequest = 30/min\nrequest_burst = 1\n"
                   "on_deny = respond\n");
    /* Files, not /dev/null: curl truncates its output before a retry. */
    char out_a[300], out_b[300];
    snprintf(out_a, sizeof out_a, "%s/a.out", h_dir);
    snprintf(out_b, sizeof out_b, "%s/b.out", h_dir);
    char *argv[] = {"curl", "-sk", "--retry", "3", "-w", "%{http_code}\\n",
                    url("https", "/a"), "-o", out_a, url("https", "/b"),
                    "-o", out_b, NULL};
    char logpath[300];
    snprintf(logpath, sizeof logpath, "%s/decisions.jsonl", h_dir);
    setenv("RLSHIM_DECISION_LOG", logpath, 1);
    h_run(&r, true, 30, argv);
    unsetenv("RLSHIM_DECISION_LOG");
    cr_assert_eq(r.status, 0, "curl: status %d\n%s", r.status, r.out);
    cr_expect_str_eq(r.out, "200\n200\n");
    /* It waited as told: one 429, and its one retry was granted. */
    int answered = h_file_lines(logpath, "\"verdict\":\"respond\"");
    cr_expect_eq(answered, 1, "%d made-up 429s, not 1", answered);
    int got = server_got(2);
    cr_expect_eq(got, 2, "the server got %d requests, not 2", got);
    double ratio = (h_server_stamp(&st, 1) - h_server_stamp(&st, 0)) / 2.0;
    cr_log_info("curl --retry: second arrival %.3f of the interval", ratio);
    cr_expect_geq(ratio, 0.9, "the retry came %.3f of the interval after "
                              "the first",
                  ratio);
    cr_expect_lt(ratio, 4.0, "the retry: %.3f intervals late", ratio);
}

/* aiohttp (its own HTTP/1.1 parser, keep-alive): 200, then the 429. */
static const char aiohttp_py[] =
    "import aiohttp, asyncio, sys\n"
    "async def main():\n"
    "    codes = []\n"
    "    async with aiohttp.ClientSession() as s:\n"
    "        for u in sys.argv[1:]:\n"
    "            async with s.get(u) as r:\n"
    "                await r.read()\n"
    "                codes.append(r.status)\n"
    "                if r.status != 200:\n"
    "                    print('retry-after', r.headers.get('Retry-After'))\n"
    "    print('codes', codes)\n"
    "asyncio.run(main())\n";

Test(respond_clients, aiohttp_sees_200_then_429)
{
    plaintext_server();
    h_config_write(ONE_A_MINUTE);
    char *argv[] = {"/usr/bin/python3", "-c", (char *)aiohttp_py,
                    url("http", "/a"), url("http", "/b"), NULL};
    h_run(&r, true, 30, argv);
    cr_assert_eq(r.status, 0, "aiohttp: status %d\n%s", r.status, r.out);
    cr_log_info("aiohttp: %s", r.out);
    cr_expect(strstr(r.out, "codes [200, 429]") != NULL, "%s", r.out);
    cr_expect(strstr(r.out, "retry-after 60\n") != NULL, "%s", r.out);
    int got = server_got(1);
    cr_expect_eq(got, 1, "the server got %d requests, not 1", got);
}

/* Scrapy's RetryMiddleware retries a 429 (after its download delay): the
 * crawl completes, every page 200, the server's arrivals at the limit's
 * pace (one every 0.5 s), one per page. */
static const char scrapy_py[] =
    "import scrapy, sys\n"
    "from scrapy.crawler import CrawlerProcess\n"
    "codes = []\n"
    "class S(scrapy.Spider):\n"
    "    name = 's'\n"
    "    start_urls = sys.argv[1:]\n"
    "    def parse(self, response):\n"
    "        codes.append(response.status)\n"
    "p = CrawlerProcess(settings={'RETRY_HTTP_CODES': [429],\n"
    "    'RETRY_TIMES': 20, 'DOWNLOAD_DELAY': 0.2,\n"
    "    'RANDOMIZE_DOWNLOAD_DELAY': False, 'CONCURRENT_REQUESTS': 1,\n"
    "    'LOG_LEVEL': 'ERROR', 'TELNETCONSOLE_ENABLED': False,\n"
    "    'ROBOTSTXT_OBEY': False})\n"
    "p.crawl(S)\n"
    "p.start()\n"
    "print('codes', sorted(codes))\n";

Test(respond_clients, scrapy_retries_each_429_and_the_crawl_completes_paced)
{
    if (access("/usr/lib/python3/dist-packages/scrapy/__init__.py", R_OK) != 0)
        h_skip("no python3-scrapy");
    plaintext_server();
    h_config_write("[default]\nrequest = 2/s\nrequest_burst = 1\n"
                   "on_deny = respond\n");
    char logpath[300];
    snprintf(logpath, sizeof logpath, "%s/decisions.jsonl", h_dir);
    setenv("RLSHIM_DECISION_LOG", logpath, 1);
    char *argv[] = {"/usr/bin/python3", "-c", (char *)scrapy_py,
                    url("http", "/p1"), url("http", "/p2"), url("http", "/p3"),
                    url("http", "/p4"), NULL};
    h_run(&r, true, 60, argv);
    unsetenv("RLSHIM_DECISION_LOG");
    cr_assert_eq(r.status, 0, "scrapy: status %d\n%s", r.status, r.out);
    cr_log_info("scrapy: %s", r.out);
    cr_expect(strstr(r.out, "codes [200, 200, 200, 200]") != NULL, "%s",
              r.out);
    /* Its retries met made-up 429s (else this proves nothing). */
    int answered = h_file_lines(logpath, "\"verdict\":\"respond\"");
    cr_log_info("scrapy: %d requests answered 429 in the process", answered);
    cr_expect_geq(answered, 1, "no 429 was made up");
    int got = server_got(4);
    cr_expect_eq(got, 4, "the server got %d requests, not one a page", got);
    for (int i = 1; i < got && i < 4; i++) {
        double ratio =
            (h_server_stamp(&st, i) - h_server_stamp(&st, i - 1)) / 0.5;
        cr_log_info("arrival %d: %.3f of the interval", i, ratio);
        cr_expect_geq(ratio, 0.9, "arrival %d came %.3f of the interval "
                                  "after the one before",
                      i, ratio);
    }
}
