/* Host names in `to` (SPEC §1, §4): real clients resolve names that a
 * private hosts file maps to loopback addresses (a private mount
 * namespace: the host's /etc/hosts is not touched), and only the named
 * site is throttled, measured at the servers. */
#include "harness.h"
#include "hosts_ns.h"

static struct server sa, sb;

static void setup(void)
{
    h_setup();
    ns_hosts_write("127.0.0.2 site-a.test\n"
                   "127.0.0.3 site-b.test WWW.Site-B.test\n");
    ns_server_start(&sa, "127.0.0.2");
    ns_server_start(&sb, "127.0.0.3");
}

static void teardown(void)
{
    h_server_stop(&sa);
    h_server_stop(&sb);
    h_teardown();
}

static struct run r;

static void run_ns(const char *script)
{
    ns_run(&r, 20, script);
}

TestSuite(names, .init = setup, .fini = teardown, .timeout = 60);

static void five(const char *fmt_one, const char *host, int port)
{
    char one[400], script[2400];
    snprintf(one, sizeof one, fmt_one, host, port);
    snprintf(script, sizeof script, "for i in 1 2 3 4 5; do %s; done; echo done",
             one);
    run_ns(script);
    cr_assert_eq(r.status, 0, "script: status %d: %s", r.status, r.out);
}

/* Five requests to each site under `to = site-a.test` (2/min, sliding
 * window: a minute, so that a client slowed by a sanitizer or a loaded
 * machine still makes its five inside one window): site-a sees exactly
 * 2, site-b all 5. */
static void check_client(const char *fmt_one)
{
    h_config_write("[default]\n"
                   "algorithm = sliding_window\n"
                   "connect = 2/min\n"
                   "to = Site-A.test.\n");
    double t0 = h_now();
    five(fmt_one, "site-a.test", sa.port);
    double span = h_now() - t0;
    cr_assert_lt(span, 60.0, "5 requests took %.2f s: inconclusive", span);
    five(fmt_one, "site-b.test", sb.port);
    usleep(200 * 1000);
    cr_expect_eq(h_server_count(&sa, ""), 2, "site-a.test saw %d",
                 h_server_count(&sa, ""));
    cr_expect_eq(h_server_wait(&sb, "", 5, 2), 5, "site-b.test saw %d",
                 h_server_count(&sb, ""));
}

Test(names, curl_throttles_the_named_site_only)
{
    check_client("curl -sS -o /dev/null --max-time 3 http://%s:%d/ 2>/dev/null");
}

Test(names, wget_throttles_the_named_site_only)
{
    check_client("wget -q -t 1 -T 3 -O /dev/null http://%s:%d/");
}

Test(names, python_throttles_the_named_site_only)
{
    h_config_write("[default]\n"
                   "algorithm = sliding_window\n"
                   "connect = 2/min\n"
                   "to = site-a.test\n");
    char script[1200];
    snprintf(script, sizeof script,
             "python3 -c '\n"
             "import urllib.request, sys\n"
             "for host, port in ((\"site-a.test\", %d), (\"site-b.test\", %d)):\n"
             "    for i in range(5):\n"
             "        try:\n"
             "            urllib.request.urlopen(\"http://%%s:%%d/\" %% (host, port), timeout=3).read()\n"
             "        except OSError:\n"
             "            pass\n"
             "print(\"done\")'",
             sa.port, sb.port);
    double t0 = h_now();
    run_ns(script);
    cr_assert_eq(r.status, 0, "python: status %d: %s", r.status, r.out);
    cr_assert_lt(h_now() - t0, 60.0, "inconclusive: took %.2f s", h_now() - t0);
    usleep(200 * 1000);
    cr_expect_eq(h_server_count(&sa, ""), 2, "site-a.test saw %d",
                 h_server_count(&sa, ""));
    cr_expect_eq(h_server_count(&sb, ""), 5, "site-b.test saw %d",
                 h_server_count(&sb, ""));
}

Test(names, a_name_below_matches_and_the_apex_does_not)
{
    h_config_write("[default]\n"
                   "algorithm = sliding_window\n"
                   "connect = 1/min\n"
                   "to = *.site-b.test\n");
    /* www.site-b.test and site-b.test share an address: the name the
     * program resolved decides. */
    five("curl -sS -o /dev/null --max-time 3 http://%s:%d/ 2>/dev/null",
         "www.site-b.test", sb.port);
    five("curl -sS -o /dev/null --max-time 3 http://%s:%d/ 2>/dev/null",
         "site-b.test", sb.port);
    usleep(200 * 1000);
    cr_expect_eq(h_server_count(&sb, ""), 6, "site-b saw %d (1 + 5)",
                 h_server_count(&sb, ""));
}

Test(names, an_address_never_resolved_is_not_a_name)
{
    h_config_write("[default]\n"
                   "algorithm = sliding_window\n"
                   "connect = 1/s\n"
                   "to = site-a.test\n");
    five("curl -sS -o /dev/null --max-time 3 http://%s:%d/ 2>/dev/null",
         "127.0.0.2", sa.port);
    usleep(200 * 1000);
    cr_expect_eq(h_server_count(&sa, ""), 5, "site-a saw %d",
                 h_server_count(&sa, ""));
}

/* A numeric host handed to the resolver is a resolution (SPEC §1): python
 * resolves every host, literals included (socket.create_connection), so
 * after http://localhost/ its http://127.0.0.1/ goes by the literal, not
 * by the name 127.0.0.1 last resolved from; and localhost is the name
 * again after. A site of `to = localhost` (1/min, fail) lets 1 of the 5
 * fetches by name through and all 3 by literal: the server sees 4. */
Test(names, a_literal_after_a_name_is_charged_by_the_literal)
{
    struct server lo;
    ns_server_start(&lo, "127.0.0.1");
    h_config_write("[site:local]\n"
                   "to = localhost\n"
                   "algorithm = sliding_window\n"
                   "connect = 1/min\n"
                   "errno = ECONNREFUSED\n");
    char script[1400];
    snprintf(script, sizeof script,
             "python3 -c '\n"
             "import urllib.request\n"
             "got = {}\n"
             "for host, n in ((\"localhost\", 3), (\"127.0.0.1\", 3), "
             "(\"localhost\", 2)):\n"
             "    for i in range(n):\n"
             "        try:\n"
             "            urllib.request.urlopen(\"http://%%s:%d/\" %% host, "
             "timeout=3).read()\n"
             "            got[host] = got.get(host, 0) + 1\n"
             "        except OSError:\n"
             "            pass\n"
             "print(\"byname=%%d\" %% got.get(\"localhost\", 0))\n"
             "print(\"byliteral=%%d\" %% got.get(\"127.0.0.1\", 0))'",
             lo.port);
    double t0 = h_now();
    run_ns(script);
    double span = h_now() - t0;
    usleep(200 * 1000);
    int seen = h_server_count(&lo, "");
    h_server_stop(&lo);
    cr_assert_eq(r.status, 0, "python: status %d: %s", r.status, r.out);
    cr_assert_lt(span, 60.0, "inconclusive: took %.2f s", span);
    cr_expect_eq(h_out_long(&r, "byname", -1), 1, "%s", r.out);
    cr_expect_eq(h_out_long(&r, "byliteral", -1), 3, "%s", r.out);
    cr_expect_eq(seen, 4, "the server saw %d (1 by name + 3 by literal)",
                 seen);
}
