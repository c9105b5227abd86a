/* test_robots.c — a robots.txt's Crawl-delay for a User-Agent (SPEC §14,
 * RFC 9309 §2.2.1), as robots.h reads it; the body around it is
 * test_robots_body.c's. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/robots.h"

#define MS 1000000ull
#define SEC 1000000000ull
#define NONE UINT64_MAX

static const char *const scrapy = "Scrapy/2.8 (+https://scrapy.org)";
static const char *const requests = "python-requests/2.28.1";
static const char *const curl = "curl/7.88.1";

static const char two_groups[] = "User-agent: Scrapy\n"
                                 "Crawl-delay: 5\n"
                                 "\n"
                                 "User-agent: python-requests\n"
                                 "Crawl-delay: 0.5\n"
                                 "Disallow: /private\n"
                                 "\n"
                                 "User-agent: *\n"
                                 "Crawl-delay: 10\n";

/* The delay (NONE for none) of txt[0..n) fed in pieces cut at `cuts`
 * (ascending, ending with n). */
static uint64_t delay_cut(const char *ua, const char *txt, size_t n,
                          const size_t *cuts, size_t ncuts)
{
    struct rl_robots r;
    size_t at = 0;
    uint64_t ns;

    rl_robots_init(&r, ua, ua ? strlen(ua) : 0);
    for (size_t k = 0; k < ncuts; k++) {
        rl_robots_feed(&r, (const uint8_t *)txt + at, cuts[k] - at);
        at = cuts[k];
    }
    cr_assert_eq(at, n);
    rl_robots_finish(&r);
    return rl_robots_delay(&r, &ns) ? ns : NONE;
}

static uint64_t delay_n(const char *ua, const char *txt, size_t n)
{
    return delay_cut(ua, txt, n, &n, 1);
}

static uint64_t delay(const char *ua, const char *txt)
{
    return delay_n(ua, txt, strlen(txt));
}

Test(robots, two_groups_give_each_user_agent_its_own_delay)
{
    cr_assert_eq(delay(scrapy, two_groups), 5 * SEC);
    cr_assert_eq(delay(requests, two_groups), 500 * MS);
    cr_assert_eq(delay(curl, two_groups), 10 * SEC);
}

Test(robots, the_star_group_applies_when_no_group_names_the_token)
{
    static const char txt[] = "User-agent: Googlebot\nCrawl-delay: 1\n"
                              "User-agent: *\nCrawl-delay: 3\n";

    cr_assert_eq(delay(scrapy, txt), 3 * SEC);
    cr_assert_eq(delay(NULL, txt), 3 * SEC);
    cr_assert_eq(delay("", txt), 3 * SEC);
    cr_assert_eq(delay(scrapy, "User-agent: Googlebot\nCrawl-delay: 1\n"),
                 NONE);
    cr_assert_eq(delay(scrapy, ""), NONE);
}

Test(robots, names_and_keys_match_without_regard_to_case)
{
    static const char txt[] = "USER-AGENT: sCRAPY\nCRAWL-DELAY: 2\n"
                              "user-agent: PYTHON-REQUESTS/9\ncrawl-delay: 4\n";

    cr_assert_eq(delay(scrapy, txt), 2 * SEC);
    cr_assert_eq(delay(requests, txt), 4 * SEC);
    cr_assert_eq(delay("scrapy", txt), 2 * SEC);
}

Test(robots, a_name_must_match_the_whole_token)
{
    static const char txt[] = "User-agent: Scrap\nCrawl-delay: 2\n"
                              "User-agent: Scrapybot\nCrawl-delay: 3\n"
                              "User-agent: python\nCrawl-delay: 4\n";

    cr_assert_eq(delay(scrapy, txt), NONE);
    cr_assert_eq(delay(requests, txt), NONE);
}

Test(robots, comments_are_not_part_of_lines)
{
    static const char txt[] = "# User-agent: Scrapy\n"
                              "User-agent: Scrapy # our crawler\n"
                              "Crawl-delay: 7 # seconds\n"
                              "#Crawl-delay: 1\n";

    cr_assert_eq(delay(scrapy, txt), 7 * SEC);
    cr_assert_eq(delay(scrapy, "User-agent: *\nCrawl-delay: # 5\n"), NONE);
}

Test(robots, cr_lf_and_crlf_line_ends_read_alike)
{
    cr_assert_eq(delay(scrapy, "User-agent: Scrapy\r\nCrawl-delay: 6\r\n"),
                 6 * SEC);
    cr_assert_eq(delay(scrapy, "User-agent: Scrapy\rCrawl-delay: 6\r"),
                 6 * SEC);
    cr_assert_eq(delay(scrapy, "User-agent: Scrapy\n\rCrawl-delay: 6"),
                 6 * SEC);
    cr_assert_eq(delay(scrapy, "  User-agent:\tScrapy  \r\n\t Crawl-delay"
                               " :  6\t \r\n"),
                 6 * SEC);
}

Test(robots, a_bom_is_skipped_at_the_start_only)
{
    cr_assert_eq(delay(scrapy, "\xef\xbb\xbfUser-agent: Scrapy\n"
                               "Crawl-delay: 8\n"),
                 8 * SEC);
    cr_assert_eq(delay(scrapy, "\xef\xbb\xbf\nUser-agent: Scrapy\n"
                               "Crawl-delay: 8\n"),
                 8 * SEC);
    cr_assert_eq(delay(scrapy, "User-agent: Scrapy\n"
                               "\xef\xbb\xbf"
                               "Crawl-delay: 8\n"),
                 NONE);
}

Test(robots, matching_groups_merge_and_the_first_delay_wins)
{
    static const char txt[] = "User-agent: Scrapy\nDisallow: /a\n"
                              "User-agent: *\nCrawl-delay: 9\n"
                              "User-agent: Scrapy\nCrawl-delay: 3\n"
                              "User-agent: scrapy\nCrawl-delay: 1\n";
    static const char shared[] = "User-agent: Googlebot\n"
                                 "User-agent: Scrapy\n"
                                 "User-agent: *\n"
                                 "Crawl-delay: 2\n"
                                 "Crawl-delay: 12\n";
    static const char stars[] = "User-agent: *\nDisallow: /x\n"
                                "User-agent: Googlebot\nCrawl-delay: 1\n"
                                "User-agent: *\nCrawl-delay: 4\n";

    cr_assert_eq(delay(scrapy, txt), 3 * SEC);
    cr_assert_eq(delay(curl, txt), 9 * SEC);
    cr_assert_eq(delay(scrapy, shared), 2 * SEC);
    cr_assert_eq(delay(curl, shared), 2 * SEC);
    cr_assert_eq(delay(curl, stars), 4 * SEC);
}

Test(robots, a_group_naming_the_token_hides_the_star_delay)
{
    static const char txt[] = "User-agent: *\nCrawl-delay: 10\n"
                              "User-agent: Scrapy\nDisallow:\n";

    cr_assert_eq(delay(scrapy, txt), NONE);
    cr_assert_eq(delay(requests, txt), 10 * SEC);
    /* User-agent lines with no record after them make no group. */
    cr_assert_eq(delay(scrapy, "User-agent: *\nCrawl-delay: 10\n"
                               "User-agent: Scrapy\n"),
                 10 * SEC);
}

Test(robots, a_rule_ends_the_run_of_user_agent_lines)
{
    static const char txt[] = "User-agent: Googlebot\nCrawl-delay: 1\n"
                              "User-agent: Scrapy\nCrawl-delay: 5\n";
    static const char sitemap[] = "User-agent: Googlebot\n"
                                  "Sitemap: https://example.com/s.xml\n"
                                  "User-agent: Scrapy\nCrawl-delay: 5\n";

    cr_assert_eq(delay("Googlebot", txt), 1 * SEC);
    cr_assert_eq(delay(scrapy, txt), 5 * SEC);
    cr_assert_eq(delay("Googlebot", sitemap), 5 * SEC);
    cr_assert_eq(delay(scrapy, "Crawl-delay: 5\nUser-agent: Scrapy\n"
                               "Disallow: /\n"),
                 NONE);
}

Test(robots, a_line_longer_than_the_buffer_is_skipped_whole)
{
    size_t pad = RL_ROBOTS_LINE_MAX + 40;
    char *txt = malloc(pad + 200);
    size_t n = 0;

    cr_assert_not_null(txt);
    n += (size_t)sprintf(txt + n, "User-agent: Scrapy\nCrawl-delay: ");
    memset(txt + n, '9', pad);
    n += pad;
    n += (size_t)sprintf(txt + n, "\nCrawl-delay: 2\n");
    cr_assert_eq(delay_n(scrapy, txt, n), 2 * SEC);

    /* A long line whose tail looks like a record is not read either. */
    n = (size_t)sprintf(txt, "User-agent: Scrapy\n#");
    memset(txt + n, ' ', pad);
    n += pad;
    n += (size_t)sprintf(txt + n, "Crawl-delay: 3\nCrawl-delay: 4");
    cr_assert_eq(delay_n(scrapy, txt, n), 4 * SEC);

    /* A line of exactly the buffer's size is read. */
    n = (size_t)sprintf(txt, "User-agent: Scrapy\n");
    size_t start = n;
    n += (size_t)sprintf(txt + n, "Crawl-delay: 3");
    memset(txt + n, ' ', RL_ROBOTS_LINE_MAX - (n - start));
    n = start + RL_ROBOTS_LINE_MAX;
    txt[n++] = '\n';
    cr_assert_eq(delay_n(scrapy, txt, n), 3 * SEC);
    free(txt);
}

static uint64_t value(const char *v)
{
    char txt[128];

    snprintf(txt, sizeof txt, "User-agent: *\nCrawl-delay: %s\n", v);
    return delay(curl, txt);
}

Test(robots, values_are_decimal_seconds)
{
    cr_assert_eq(value("5"), 5 * SEC);
    cr_assert_eq(value("0.5"), 500 * MS);
    cr_assert_eq(value("10."), 10 * SEC);
    cr_assert_eq(value(".25"), 250 * MS);
    cr_assert_eq(value("007"), 7 * SEC);
    cr_assert_eq(value("0"), 0);
    cr_assert_eq(value("1.0000000019"), SEC + 1);
}

Test(robots, a_value_with_junk_is_ignored)
{
    static const char *const bad[] = {"5s",    "5 seconds", "-1",  "+1",
                                      "1e3",   "0x10",      "",    ".",
                                      "1.2.3", "5 6",       "1,5", "five"};

    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        cr_assert_eq(value(bad[i]), NONE, "%s", bad[i]);
    /* The first valid one counts: a malformed one does not take its place. */
    cr_assert_eq(delay(curl, "User-agent: *\nCrawl-delay: 5s\n"
                             "Crawl-delay: 6\n"),
                 6 * SEC);
}

Test(robots, a_huge_value_is_clamped)
{
    cr_assert_eq(value("86400"), RL_ROBOTS_DELAY_MAX_NS);
    cr_assert_eq(value("86399.5"), RL_ROBOTS_DELAY_MAX_NS - 500 * MS);
    cr_assert_eq(value("1000000"), RL_ROBOTS_DELAY_MAX_NS);
    cr_assert_eq(value("99999999999999999999999999999999.9"),
                 RL_ROBOTS_DELAY_MAX_NS);
}

Test(robots, a_too_long_product_token_matches_only_the_star_group)
{
    char ua[RL_ROBOTS_TOKEN_MAX + 2], fits[RL_ROBOTS_TOKEN_MAX + 1];
    char txt[3 * RL_ROBOTS_TOKEN_MAX + 128];

    memset(ua, 'a', sizeof ua - 1);
    ua[sizeof ua - 1] = '\0';
    memcpy(fits, ua, RL_ROBOTS_TOKEN_MAX);
    fits[RL_ROBOTS_TOKEN_MAX] = '\0';
    snprintf(txt, sizeof txt,
             "User-agent: %s\nCrawl-delay: 1\n"
             "User-agent: %s\nCrawl-delay: 3\n"
             "User-agent: *\nCrawl-delay: 2\n",
             fits, ua);
    cr_assert_eq(delay(ua, txt), 2 * SEC);
    cr_assert_eq(delay(fits, txt), 1 * SEC);
}

Test(robots, the_last_line_needs_no_line_end)
{
    cr_assert_eq(delay(scrapy, "User-agent: Scrapy\nCrawl-delay: 5"), 5 * SEC);
}

/* Everything at once, for the split tests. */
static const char mixed[] = "\xef\xbb\xbf# robots\r\n"
                            "User-agent: Googlebot\r\n"
                            "Disallow: /g\r\n"
                            "user-agent: SCRAPY/1.0 # ours\r"
                            "User-agent: *\n"
                            "Crawl-delay: 5s\n"
                            "Crawl-delay: 2.5\r\n"
                            "User-agent: python-requests\n"
                            "crawl-delay: 7.\n"
                            "Sitemap: https://example.com/sitemap.xml\n"
                            "User-agent: scrapy\n"
                            "Crawl-delay: 1";

Test(robots, the_answer_is_the_same_wherever_the_body_is_cut)
{
    size_t n = sizeof mixed - 1;
    const char *uas[] = {scrapy, requests, curl};
    const uint64_t want[] = {2500 * MS, 7 * SEC, 2500 * MS};

    for (size_t u = 0; u < 3; u++) {
        cr_assert_eq(delay_n(uas[u], mixed, n), want[u]);
        for (size_t i = 0; i <= n; i++) {
            for (size_t j = i; j <= n; j++) {
                size_t cuts[] = {i, j, n};

                cr_assert_eq(delay_cut(uas[u], mixed, n, cuts, 3), want[u],
                             "cut at %zu and %zu", i, j);
            }
        }
        size_t bytes[sizeof mixed];

        for (size_t i = 0; i < n; i++)
            bytes[i] = i + 1;
        cr_assert_eq(delay_cut(uas[u], mixed, n, bytes, n), want[u]);
    }
}

/* A robots.txt of `size` bytes of comment lines, then `tail`. */
static char *padded(size_t size, const char *tail, size_t *n)
{
    size_t t = strlen(tail);
    char *txt = malloc(size + t);

    cr_assert_not_null(txt);
    for (size_t i = 0; i < size; i++)
        txt[i] = i % 64 == 63 || i + 1 == size ? '\n' : '#';
    memcpy(txt + size, tail, t);
    *n = size + t;
    return txt;
}

Test(robots, only_the_first_64_kib_are_read)
{
    size_t n;
    char *txt;

    txt = padded(RL_ROBOTS_BODY_MAX - 40,
                 "User-agent: *\nCrawl-delay: 3\n"
                 "User-agent: Scrapy\n"
                 "Crawl-delay: 9\n",
                 &n);
    cr_assert_eq(delay_n(scrapy, txt, n), 3 * SEC);
    free(txt);
    /* The line the cap cuts (`Crawl-delay: 3` of `Crawl-delay: 30`) is not
     * read; one that ends right at the cap is. */
    txt =
        padded(RL_ROBOTS_BODY_MAX - 28, "User-agent: *\nCrawl-delay: 30\n", &n);
    cr_assert_eq(delay_n(curl, txt, n), NONE);
    free(txt);
    txt = padded(RL_ROBOTS_BODY_MAX - 28, "User-agent: *\nCrawl-delay: 3", &n);
    cr_assert_eq(n, RL_ROBOTS_BODY_MAX);
    cr_assert_eq(delay_n(curl, txt, n), 3 * SEC);
    free(txt);
}
