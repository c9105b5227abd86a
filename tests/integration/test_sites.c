/* [site:LABEL] sections (SPEC §3): a call is charged to the user's rule
 * (when its `to` covers it) and to the first site in file order that
 * covers it; both must allow; a denial by either gives the other back its
 * unit; each user has a budget of its own of every site. curl in a
 * private mount namespace resolves test names to loopback servers, and
 * the servers count what arrived. */
#include "harness.h"
#include "hosts_ns.h"

static struct server fast, slow, other;
static struct run r;

static void setup(void)
{
    h_setup();
    ns_hosts_write("127.0.0.2 fast.test\n127.0.0.3 slow.test\n"
                   "127.0.0.4 other.test\n");
    ns_server_start(&fast, "127.0.0.2");
    ns_server_start(&slow, "127.0.0.3");
    ns_server_start(&other, "127.0.0.4");
}

static void teardown(void)
{
    h_server_stop(&fast);
    h_server_stop(&slow);
    h_server_stop(&other);
    h_teardown();
}

TestSuite(sites, .init = setup, .fini = teardown, .timeout = 60);

/* `n` curls to http://HOST:PORT/ in one shell loop, with RLSHIM_KEY=key
 * (NULL: none). */
static const char *gets(char *buf, size_t len, const char *key,
                        const char *host, int port, int n)
{
    snprintf(buf, len,
             "i=0; while [ $i -lt %d ]; do i=$((i+1)); %s%s curl -sS -o "
             "/dev/null --max-time 3 http://%s:%d/ 2>/dev/null; done; ",
             n, key ? "RLSHIM_KEY=" : "", key ? key : "", host, port);
    return buf;
}

static void crawl(const char *script)
{
    char all[2000];
    snprintf(all, sizeof all, "%s true", script); /* curl's own status is
                                                     not the test's */
    double t0 = h_now();
    ns_run(&r, 30, all);
    cr_assert_eq(r.status, 0, "crawl: status %d", r.status);
    double span = h_now() - t0;
    cr_assert_lt(span, 60.0, "the crawl took %.2f s: inconclusive", span);
    usleep(200 * 1000);
}

Test(sites, a_site_override_before_the_catch_all_gets_its_own_rate)
{
    h_config_write("[site:fast]\n"
                   "to = fast.test\n"
                   "algorithm = sliding_window\n"
                   "connect = 6/min\n"
                   "[site:every]\n"
                   "algorithm = sliding_window\n"
                   "connect = 2/min\n");
    char a[300], b[300], c[300], script[1000];
    snprintf(script, sizeof script, "%s%s%s", gets(a, sizeof a, NULL, "fast.test", fast.port, 8),
             gets(b, sizeof b, NULL, "slow.test", slow.port, 3),
             gets(c, sizeof c, NULL, "other.test", other.port, 3));
    crawl(script);
    cr_expect_eq(h_server_count(&fast, ""), 6, "fast.test saw %d",
                 h_server_count(&fast, ""));
    /* One budget for every other destination (per = user). */
    cr_expect_eq(h_server_count(&slow, "") + h_server_count(&other, ""), 2,
                 "slow.test saw %d, other.test %d", h_server_count(&slow, ""),
                 h_server_count(&other, ""));
    cr_expect_eq(h_server_count(&slow, ""), 2);
}

Test(sites, the_users_rule_and_the_site_must_both_allow)
{
    h_config_write("[default]\n"
                   "algorithm = sliding_window\n"
                   "connect = 2/min\n"
                   "to = fast.test\n"
                   "[site:every]\n"
                   "algorithm = sliding_window\n"
                   "connect = 4/min\n");
    char a[300], b[300], script[700];
    /* fast.test: the rule allows 2 of 5; the 3 it denies give the site its
     * units back, so slow.test (outside the rule) still gets 2 of 5: the
     * site's 4 minus fast.test's 2. */
    snprintf(script, sizeof script, "%s%s",
             gets(a, sizeof a, NULL, "fast.test", fast.port, 5),
             gets(b, sizeof b, NULL, "slow.test", slow.port, 5));
    crawl(script);
    cr_expect_eq(h_server_count(&fast, ""), 2, "fast.test saw %d",
                 h_server_count(&fast, ""));
    cr_expect_eq(h_server_count(&slow, ""), 2, "slow.test saw %d",
                 h_server_count(&slow, ""));
}

Test(sites, a_denial_by_the_site_gives_the_rule_its_unit_back)
{
    h_config_write("[default]\n"
                   "algorithm = sliding_window\n"
                   "connect = 4/min\n"
                   "[site:slow]\n"
                   "to = slow.test\n"
                   "algorithm = sliding_window\n"
                   "connect = 1/min\n");
    char a[300], b[300], script[700];
    /* slow.test: the site allows 1 of 5; the rule keeps 3 for fast.test. */
    snprintf(script, sizeof script, "%s%s",
             gets(a, sizeof a, NULL, "slow.test", slow.port, 5),
             gets(b, sizeof b, NULL, "fast.test", fast.port, 5));
    crawl(script);
    cr_expect_eq(h_server_count(&slow, ""), 1, "slow.test saw %d",
                 h_server_count(&slow, ""));
    cr_expect_eq(h_server_count(&fast, ""), 3, "fast.test saw %d",
                 h_server_count(&fast, ""));
}

Test(sites, each_user_has_a_budget_of_its_own_of_a_site)
{
    h_config_write("[site:every]\n"
                   "algorithm = sliding_window\n"
                   "connect = 2/min\n");
    char a[300], b[300], script[700];
    snprintf(script, sizeof script, "%s%s",
             gets(a, sizeof a, "alice", "slow.test", slow.port, 4),
             gets(b, sizeof b, "bob", "slow.test", slow.port, 4));
    crawl(script);
    cr_expect_eq(h_server_count(&slow, ""), 4, "slow.test saw %d (2 + 2)",
                 h_server_count(&slow, ""));
}
