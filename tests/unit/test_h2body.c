/* test_h2body.c — a robots.txt fetched over HTTP/2 (SPEC §14): the
 * request side marks the stream, the response side reports its 200 with
 * its coding, and h2body.h hands that stream's DATA, padding stripped,
 * to the robots body reader HTTP/1.x uses, whatever the reads. */
#include <zlib.h>

#include "http/h2body.h"
#include "http/respscan.h"
#include "http_streams.h"

static const char robots_txt[] = "User-agent: Slowbot\n"
                                 "Crawl-delay: 3\n"
                                 "\n"
                                 "User-agent: *\n"
                                 "Crawl-delay: 1\n";

static const struct rl_robots_zlib zlib = {inflateInit2_, inflate};

/* The client: GET /robots.txt as `ua` on stream 1, GET /page on 3. */
static void client(struct buf *b, const char *ua)
{
    nghttp2_hd_deflater *d;
    uint8_t blk[256];
    const char *const robots[] = {":method", "GET", ":scheme", "https",
                                  ":authority", "h2.example", ":path",
                                  "/robots.txt", "user-agent", ua, NULL};
    const char *const page[] = {":method", "GET", ":scheme", "https",
                                ":authority", "h2.example", ":path",
                                "/page", "user-agent", ua, NULL};
    size_t n;

    cr_assert_eq(nghttp2_hd_deflate_new(&d, 4096), 0);
    puts_(b, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
    frame_hdr(b, 0, 4, 0, 0); /* SETTINGS */
    n = hpack(d, robots, blk, sizeof blk);
    frame_hdr(b, n, 1, 0x4 | 0x1, 1);
    put(b, blk, n);
    n = hpack(d, page, blk, sizeof blk);
    frame_hdr(b, n, 1, 0x4 | 0x1, 3);
    put(b, blk, n);
    nghttp2_hd_deflate_del(d);
}

/* A DATA frame on `stream`, padded by `pad` bytes (0: not padded). */
static void data(struct buf *b, uint32_t stream, const void *p, size_t n,
                 size_t pad, bool end)
{
    static const uint8_t zeros[64];
    uint8_t flags = (uint8_t)((end ? 0x1 : 0) | (pad > 0 ? 0x8 : 0));

    frame_hdr(b, n + (pad > 0 ? 1 + pad : 0), 0, flags, stream);
    if (pad > 0) {
        uint8_t pl = (uint8_t)pad;
        put(b, &pl, 1);
    }
    put(b, p, n);
    put(b, zeros, pad);
}

/* The server: SETTINGS, the answer to stream 3 begun, stream 1's 200
 * (padded HEADERS) with `coding`, its body p[0..n) in three DATA frames
 * (the middle one padded) with stream 3's DATA between them. */
static void server(struct buf *b, const char *coding, const void *p,
                   size_t n, bool reset)
{
    nghttp2_hd_deflater *d;
    uint8_t blk[256];
    const char *const ok[] = {":status", "200", "content-encoding", coding,
                              NULL};
    const char *const ok_plain[] = {":status", "200", NULL};
    static const uint8_t pad[5];
    const uint8_t *c = p;
    size_t k;

    cr_assert_eq(nghttp2_hd_deflate_new(&d, 4096), 0);
    frame_hdr(b, 6, 4, 0, 0);
    put(b, "\x00\x05\x00\x00\x40\x00", 6);
    k = hpack(d, ok_plain, blk, sizeof blk);
    frame_hdr(b, k, 1, 0x4, 3);
    put(b, blk, k);
    k = hpack(d, coding[0] != '\0' ? ok : ok_plain, blk, sizeof blk);
    frame_hdr(b, 1 + k + sizeof pad, 1, 0x4 | 0x8, 1);
    put(b, "\x05", 1);
    put(b, blk, k);
    put(b, pad, sizeof pad);
    data(b, 1, c, n / 3, 0, false);
    data(b, 3, "User-agent: *\nCrawl-delay: 9\n", 29, 0, false);
    data(b, 1, c + n / 3, n / 3, 7, false);
    if (reset) {
        frame_hdr(b, 4, 3, 0, 1); /* RST_STREAM */
        put(b, "\x00\x00\x00\x08", 4);
    }
    data(b, 1, c + 2 * (n / 3), n - 2 * (n / 3), 0, true);
    data(b, 3, "User-agent: *\nCrawl-delay: 9\n", 29, 0, true);
    nghttp2_hd_deflate_del(d);
}

/* Scans req, then resp fed in pieces of `step` bytes; the robots.txt
 * answer's body goes from its event on through h2body. Returns the body
 * reader's state and, when read, its delay in *ns (0: none). */
static enum rl_robots_state run(const struct buf *req, const struct buf *resp,
                                size_t step, uint64_t *ns)
{
    static struct rl_robots_body body;
    struct rl_httpconn conn = {0};
    struct rl_reqscan rq;
    struct rl_respscan rs;
    struct rl_h2body h2;
    struct rl_resp_event ev[8];
    bool started = false;

    rl_reqscan_init(&rq, &conn);
    cr_assert_geq(rl_reqscan_commit(&rq, req->p, req->n, NULL, 0), 0);
    rl_respscan_init(&rs, &conn);
    for (size_t at = 0; at < resp->n; at += step) {
        size_t len = resp->n - at < step ? resp->n - at : step;
        const uint8_t *p = resp->p + at;

        if (started)
            rl_h2body_feed(&h2, p, len, &body);
        long k = rl_respscan_feed(&rs, p, len, ev, 8);
        cr_assert_geq(k, 0);
        cr_assert_leq(k, 8);
        for (long i = 0; i < k; i++) {
            const struct rl_resp_event *e = &ev[i];
            if (e->kind != RL_RESP_STATUS || !e->robots)
                continue;
            cr_assert_not(started, "one robots.txt answer");
            cr_assert_eq(e->stream_id, 1);
            cr_assert_eq(e->status, 200);
            cr_assert(e->length == -1 || e->length == 0, "length %lld",
                      (long long)e->length);
            rl_robots_body_init(&body, conn.robots_ua,
                                strlen(conn.robots_ua), false, e->length,
                                rl_robots_coding(e->coding,
                                                 strlen(e->coding)),
                                &zlib);
            rl_h2body_init(&h2, e->stream_id, e->h2_skip);
            rl_h2body_feed(&h2, p + e->offset, len - e->offset, &body);
            started = true;
        }
    }
    cr_assert(started, "the robots.txt answer is reported");
    rl_respscan_free(&rs);
    rl_reqscan_free(&rq);
    *ns = 0;
    if (rl_robots_body_state(&body) == RL_ROBOTS_READ &&
        !rl_robots_body_delay(&body, ns))
        *ns = 0;
    return rl_robots_body_state(&body);
}

static void check_every_step(const struct buf *req, const struct buf *resp,
                             enum rl_robots_state want, uint64_t want_ns)
{
    for (size_t step = 1; step <= resp->n; step++) {
        uint64_t ns;
        cr_assert_eq(run(req, resp, step, &ns), want, "step %zu", step);
        cr_assert_eq(ns, want_ns, "step %zu", step);
    }
}

Test(h2body, a_robots_txt_over_http2_is_read_at_every_cut)
{
    struct buf req = {0}, resp = {0}, req2 = {0};

    client(&req, "Slowbot/1.0");
    server(&resp, "", robots_txt, strlen(robots_txt), false);
    check_every_step(&req, &resp, RL_ROBOTS_READ, 3000000000ull);
    /* Another agent reads the `*` group, not the other stream's body. */
    client(&req2, "curl/7.88.1");
    check_every_step(&req2, &resp, RL_ROBOTS_READ, 1000000000ull);
    free(req.p);
    free(req2.p);
    free(resp.p);
}

Test(h2body, a_gzip_robots_txt_over_http2_is_inflated)
{
    struct buf req = {0}, resp = {0};
    uint8_t gz[512];
    z_stream z = {0};

    cr_assert_eq(deflateInit2(&z, 9, Z_DEFLATED, 31, 8, Z_DEFAULT_STRATEGY),
                 Z_OK);
    z.next_in = (Bytef *)robots_txt;
    z.avail_in = (uInt)strlen(robots_txt);
    z.next_out = gz;
    z.avail_out = sizeof gz;
    cr_assert_eq(deflate(&z, Z_FINISH), Z_STREAM_END);
    deflateEnd(&z);
    client(&req, "Slowbot/1.0");
    server(&resp, "gzip", gz, z.total_out, false);
    check_every_step(&req, &resp, RL_ROBOTS_READ, 3000000000ull);
    free(req.p);
    free(resp.p);
}

Test(h2body, a_stream_reset_before_its_end_gives_no_answer)
{
    struct buf req = {0}, resp = {0};

    client(&req, "Slowbot/1.0");
    server(&resp, "", robots_txt, strlen(robots_txt), true);
    check_every_step(&req, &resp, RL_ROBOTS_READING, 0);
    free(req.p);
    free(resp.p);
}

/* The server: stream 1's 200 with no body at all, its HEADERS ending the
 * stream (the block continued in a CONTINUATION, which carries no
 * END_STREAM of its own), then stream 3's answer with a body. */
static void server_empty(struct buf *b)
{
    nghttp2_hd_deflater *d;
    uint8_t blk[256];
    const char *const ok[] = {":status", "200", "content-type",
                              "text/plain", NULL};
    size_t k;

    cr_assert_eq(nghttp2_hd_deflate_new(&d, 4096), 0);
    frame_hdr(b, 0, 4, 0, 0);
    k = hpack(d, ok, blk, sizeof blk);
    frame_hdr(b, 2, 1, 0x1, 1); /* HEADERS, END_STREAM */
    put(b, blk, 2);
    frame_hdr(b, k - 2, 9, 0x4, 1); /* CONTINUATION, END_HEADERS */
    put(b, blk + 2, k - 2);
    k = hpack(d, ok, blk, sizeof blk);
    frame_hdr(b, k, 1, 0x4, 3);
    put(b, blk, k);
    data(b, 3, "User-agent: *\nCrawl-delay: 9\n", 29, 0, true);
    nghttp2_hd_deflate_del(d);
}

/* An empty robots.txt (SPEC §14): read, and it says no Crawl-delay, which
 * clears one an earlier robots.txt set. */
Test(h2body, a_200_whose_headers_end_the_stream_is_an_empty_robots_txt)
{
    struct buf req = {0}, resp = {0};

    client(&req, "Slowbot/1.0");
    server_empty(&resp);
    check_every_step(&req, &resp, RL_ROBOTS_READ, 0);
    free(req.p);
    free(resp.p);
}
