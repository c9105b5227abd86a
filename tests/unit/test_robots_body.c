/* test_robots_body.c — a robots.txt body as it passes: sized, until close,
 * chunked; identity, gzip, deflate; the 64 KiB cap on what is inflated. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "http/robots_body.h"

#define MS 1000000ull
#define SEC 1000000000ull

static const char *const scrapy = "Scrapy/2.8 (+https://scrapy.org)";
static const char *const requests = "python-requests/2.28.1";
static const char *const curl = "curl/7.88.1";

static const char two_groups[] = "User-agent: Scrapy\r\n"
                                 "Crawl-delay: 5\r\n"
                                 "User-agent: python-requests\r\n"
                                 "Crawl-delay: 0.5\r\n"
                                 "User-agent: *\r\n"
                                 "Crawl-delay: 10\r\n";

/* This binary links zlib; the shim loads it (policy/zlibload.h). */
static const struct rl_robots_zlib zlib = {inflateInit2_, inflate};

struct out {
    enum rl_robots_state state;
    bool has;
    uint64_t ns;
};

/* p[0..n) as a body of the given framing and coding, fed in two pieces
 * cut at `cut`; closed after if `close`. */
static struct out read_body(const char *ua, bool chunked, int64_t length,
                            enum rl_robots_coding coding, const void *p,
                            size_t n, size_t cut, bool close)
{
    struct rl_robots_body *b = malloc(sizeof *b);
    struct out o;

    cr_assert_not_null(b);
    rl_robots_body_init(b, ua, strlen(ua), chunked, length, coding, &zlib);
    rl_robots_body_feed(b, p, cut);
    rl_robots_body_feed(b, (const uint8_t *)p + cut, n - cut);
    if (close)
        rl_robots_body_close(b);
    o.state = rl_robots_body_state(b);
    o.has = rl_robots_body_delay(b, &o.ns);
    free(b);
    return o;
}

static struct out read_whole(const char *ua, bool chunked, int64_t length,
                             enum rl_robots_coding coding, const void *p,
                             size_t n)
{
    return read_body(ua, chunked, length, coding, p, n, n, false);
}

/* txt[0..n) compressed with zlib's window bits `wbits` (31 gzip, 15 zlib,
 * -15 raw deflate); the length in *out_n. */
static uint8_t *squeeze(int wbits, const void *txt, size_t n, size_t *out_n)
{
    z_stream z;
    uint8_t *out;

    memset(&z, 0, sizeof z);
    cr_assert_eq(deflateInit2(&z, 9, Z_DEFLATED, wbits, 9, Z_DEFAULT_STRATEGY),
                 Z_OK);
    size_t cap = deflateBound(&z, n) + 64;
    out = malloc(cap);
    cr_assert_not_null(out);
    z.next_in = (Bytef *)(uintptr_t)txt;
    z.avail_in = (uInt)n;
    z.next_out = out;
    z.avail_out = (uInt)cap;
    cr_assert_eq(deflate(&z, Z_FINISH), Z_STREAM_END);
    *out_n = z.total_out;
    deflateEnd(&z);
    return out;
}

/* txt[0..n) in chunks of `size` bytes, with an extension and a trailer. */
static char *chunk(const char *txt, size_t n, size_t size, size_t *out_n)
{
    char *out = malloc(n * 8 + 64);
    size_t at = 0;

    cr_assert_not_null(out);
    for (size_t i = 0; i < n; i += size) {
        size_t k = n - i < size ? n - i : size;

        at += (size_t)sprintf(out + at, "%zx;x=y\r\n", k);
        memcpy(out + at, txt + i, k);
        at += k;
        at += (size_t)sprintf(out + at, "\r\n");
    }
    at += (size_t)sprintf(out + at, "0\r\nX-Trailer: 1\r\n\r\n");
    *out_n = at;
    return out;
}

Test(robots, content_encoding_values_name_their_coding)
{
    cr_assert_eq(rl_robots_coding("", 0), RL_ROBOTS_IDENTITY);
    cr_assert_eq(rl_robots_coding(" identity ", 10), RL_ROBOTS_IDENTITY);
    cr_assert_eq(rl_robots_coding("gzip", 4), RL_ROBOTS_GZIP);
    cr_assert_eq(rl_robots_coding("X-GZip", 6), RL_ROBOTS_GZIP);
    cr_assert_eq(rl_robots_coding("\tDeflate", 8), RL_ROBOTS_DEFLATE);
    cr_assert_eq(rl_robots_coding("br", 2), RL_ROBOTS_UNREADABLE);
    cr_assert_eq(rl_robots_coding("gzip, br", 8), RL_ROBOTS_UNREADABLE);
    cr_assert_eq(rl_robots_coding("gzipx", 5), RL_ROBOTS_UNREADABLE);
}

Test(robots, a_sized_body_is_read_when_its_length_is_reached)
{
    size_t n = sizeof two_groups - 1;
    char txt[sizeof two_groups + 32];
    struct out o;

    /* What follows the body (the next response) is not read. */
    snprintf(txt, sizeof txt, "%sCrawl-delay: 1\n", two_groups);
    o = read_whole(scrapy, false, (int64_t)n, RL_ROBOTS_IDENTITY, txt,
                   strlen(txt));
    cr_assert_eq(o.state, RL_ROBOTS_READ);
    cr_assert(o.has);
    cr_assert_eq(o.ns, 5 * SEC);
    o = read_whole(requests, false, (int64_t)n, RL_ROBOTS_IDENTITY, txt, n - 1);
    cr_assert_eq(o.state, RL_ROBOTS_READING);
    cr_assert_not(o.has);
    o = read_body(requests, false, (int64_t)n, RL_ROBOTS_IDENTITY, txt, n - 1,
                  n - 1, true);
    cr_assert_eq(o.state, RL_ROBOTS_FAILED);
}

Test(robots, a_body_until_close_is_read_at_close)
{
    size_t n = sizeof two_groups - 1;
    struct out o;

    o = read_whole(curl, false, -1, RL_ROBOTS_IDENTITY, two_groups, n);
    cr_assert_eq(o.state, RL_ROBOTS_READING);
    o = read_body(curl, false, -1, RL_ROBOTS_IDENTITY, two_groups, n, 3, true);
    cr_assert_eq(o.state, RL_ROBOTS_READ);
    cr_assert_eq(o.ns, 10 * SEC);
}

Test(robots, an_empty_body_gives_no_delay)
{
    struct out o;

    o = read_whole(scrapy, false, 0, RL_ROBOTS_IDENTITY, "", 0);
    cr_assert_eq(o.state, RL_ROBOTS_READ);
    cr_assert_not(o.has);
    o = read_whole(scrapy, false, 0, RL_ROBOTS_GZIP, "", 0);
    cr_assert_eq(o.state, RL_ROBOTS_READ);
    cr_assert_not(o.has);
    o = read_whole(scrapy, true, -1, RL_ROBOTS_IDENTITY, "0\r\n\r\n", 5);
    cr_assert_eq(o.state, RL_ROBOTS_READ);
    cr_assert_not(o.has);
    o = read_body(scrapy, false, -1, RL_ROBOTS_DEFLATE, "", 0, 0, true);
    cr_assert_eq(o.state, RL_ROBOTS_READ);
    cr_assert_not(o.has);
}

Test(robots, a_chunked_body_is_read_at_every_cut)
{
    size_t n;
    char *body = chunk(two_groups, sizeof two_groups - 1, 7, &n);

    for (size_t cut = 0; cut <= n; cut++) {
        struct out o = read_body(requests, true, 3, RL_ROBOTS_IDENTITY, body, n,
                                 cut, false);

        cr_assert_eq(o.state, RL_ROBOTS_READ, "cut at %zu", cut);
        cr_assert_eq(o.ns, 500 * MS, "cut at %zu", cut);
    }
    free(body);
    cr_assert_eq(
        read_whole(curl, true, -1, RL_ROBOTS_IDENTITY, "2\r\nabc\r\n", 8).state,
        RL_ROBOTS_FAILED);
    cr_assert_eq(
        read_body(curl, true, -1, RL_ROBOTS_IDENTITY, "5\r\nab", 5, 5, true)
            .state,
        RL_ROBOTS_FAILED);
}

Test(robots, a_gzip_body_is_read_at_every_cut)
{
    size_t n;
    uint8_t *gz = squeeze(31, two_groups, sizeof two_groups - 1, &n);

    for (size_t cut = 0; cut <= n; cut++) {
        struct out o = read_body(scrapy, false, (int64_t)n, RL_ROBOTS_GZIP, gz,
                                 n, cut, false);

        cr_assert_eq(o.state, RL_ROBOTS_READ, "cut at %zu", cut);
        cr_assert_eq(o.ns, 5 * SEC, "cut at %zu", cut);
    }
    /* Read until close: the stream's own end is the body's. */
    struct out o = read_whole(curl, false, -1, RL_ROBOTS_GZIP, gz, n);

    cr_assert_eq(o.state, RL_ROBOTS_READ);
    cr_assert_eq(o.ns, 10 * SEC);
    free(gz);
}

Test(robots, a_deflate_body_is_read_wrapped_or_raw)
{
    for (int wbits = -15; wbits <= 15; wbits += 30) {
        size_t n;
        uint8_t *z = squeeze(wbits, two_groups, sizeof two_groups - 1, &n);

        for (size_t cut = 0; cut <= n; cut++) {
            struct out o = read_body(requests, false, (int64_t)n,
                                     RL_ROBOTS_DEFLATE, z, n, cut, false);

            cr_assert_eq(o.state, RL_ROBOTS_READ, "bits %d cut %zu", wbits,
                         cut);
            cr_assert_eq(o.ns, 500 * MS, "bits %d cut %zu", wbits, cut);
        }
        free(z);
    }
}

Test(robots, a_gzip_body_in_chunks_is_read)
{
    size_t gn, n;
    uint8_t *gz = squeeze(31, two_groups, sizeof two_groups - 1, &gn);
    char *body = chunk((const char *)gz, gn, 5, &n);

    for (size_t cut = 0; cut <= n; cut++) {
        struct out o =
            read_body(requests, true, -1, RL_ROBOTS_GZIP, body, n, cut, false);

        cr_assert_eq(o.state, RL_ROBOTS_READ, "cut at %zu", cut);
        cr_assert_eq(o.ns, 500 * MS, "cut at %zu", cut);
    }
    free(body);
    free(gz);
}

Test(robots, a_bad_or_cut_compressed_body_gives_nothing)
{
    size_t n;
    uint8_t *gz = squeeze(31, two_groups, sizeof two_groups - 1, &n);
    struct out o;

    o = read_whole(scrapy, false, (int64_t)n - 4, RL_ROBOTS_GZIP, gz, n - 4);
    cr_assert_eq(o.state, RL_ROBOTS_FAILED);
    cr_assert_not(o.has);
    gz[n / 2] ^= 0x55;
    gz[n / 2 + 1] ^= 0xaa;
    o = read_whole(scrapy, false, (int64_t)n, RL_ROBOTS_GZIP, gz, n);
    cr_assert_eq(o.state, RL_ROBOTS_FAILED);
    free(gz);
    o = read_whole(scrapy, false, 12, RL_ROBOTS_GZIP, two_groups, 12);
    cr_assert_eq(o.state, RL_ROBOTS_FAILED);
    o = read_whole(scrapy, false, 2, RL_ROBOTS_UNREADABLE, "ab", 2);
    cr_assert_eq(o.state, RL_ROBOTS_FAILED);
}

Test(robots, a_compressed_body_without_zlib_is_unreadable)
{
    size_t n;
    uint8_t *gz = squeeze(31, two_groups, sizeof two_groups - 1, &n);
    struct rl_robots_body *b = malloc(sizeof *b);
    uint64_t ns;

    cr_assert_not_null(b);
    for (int c = RL_ROBOTS_GZIP; c <= RL_ROBOTS_DEFLATE; c++) {
        rl_robots_body_init(b, curl, strlen(curl), false, (int64_t)n,
                            (enum rl_robots_coding)c, NULL);
        cr_assert_eq(rl_robots_body_state(b), RL_ROBOTS_FAILED, "coding %d",
                     c);
        rl_robots_body_feed(b, gz, n);
        cr_assert_not(rl_robots_body_delay(b, &ns), "coding %d", c);
    }
    /* Identity needs no zlib. */
    rl_robots_body_init(b, curl, strlen(curl), false,
                        (int64_t)sizeof two_groups - 1, RL_ROBOTS_IDENTITY,
                        NULL);
    rl_robots_body_feed(b, (const uint8_t *)two_groups,
                        sizeof two_groups - 1);
    cr_assert(rl_robots_body_delay(b, &ns));
    cr_assert_eq(ns, 10 * SEC);
    free(b);
    free(gz);
}

/* A gzip bomb: `size` bytes of comment lines after `head`, then `tail`. */
static uint8_t *bomb(const char *head, size_t size, const char *tail,
                     size_t *out_n)
{
    size_t h = strlen(head), t = strlen(tail);
    char *txt = malloc(h + size + t);
    uint8_t *gz;

    cr_assert_not_null(txt);
    memcpy(txt, head, h);
    for (size_t i = 0; i < size; i++)
        txt[h + i] = i % 128 == 127 ? '\n' : '#';
    memcpy(txt + h + size, tail, t);
    gz = squeeze(31, txt, h + size + t, out_n);
    free(txt);
    return gz;
}

Test(robots, a_gzip_bomb_is_inflated_no_further_than_the_cap)
{
    size_t n;
    uint8_t *gz = bomb("User-agent: *\nCrawl-delay: 4\n", 64u << 20,
                       "Crawl-delay: 1\n", &n);
    struct rl_robots_body *b = malloc(sizeof *b);
    uint64_t ns;

    cr_assert_not_null(b);
    rl_robots_body_init(b, curl, strlen(curl), false, (int64_t)n,
                        RL_ROBOTS_GZIP, &zlib);
    rl_robots_body_feed(b, gz, n);
    cr_assert_eq(rl_robots_body_state(b), RL_ROBOTS_READ);
    cr_assert(rl_robots_body_delay(b, &ns));
    cr_assert_eq(ns, 4 * SEC);
    /* Inflate stopped within a step of the cap, long before the input
     * ran out. */
    cr_assert_leq(b->z.total_out, RL_ROBOTS_BODY_MAX + 1024u);
    cr_assert_lt(b->z.total_in, n / 16, "%lu of %zu", b->z.total_in, n);
    free(b);
    free(gz);

    /* A delay past the cap is not read. */
    gz = bomb("User-agent: *\n", 1u << 20, "Crawl-delay: 1\n", &n);
    struct out o = read_whole(curl, false, (int64_t)n, RL_ROBOTS_GZIP, gz, n);
    cr_assert_eq(o.state, RL_ROBOTS_READ);
    cr_assert_not(o.has);
    free(gz);
}
