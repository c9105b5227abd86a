/* test_http_respscan.c — responses paired with the requests the request
 * side counted (SPEC §12): bodies by their framing, HEAD/1xx/204/304
 * without one, 101 and CONNECT; HTTP/2 :status by stream. Every response
 * stream is also fed cut at every byte and byte by byte. */
#include <stdio.h>

#include "http_streams.h"
#include "http/respscan.h"

#define S(lit) (const uint8_t *)(lit), sizeof(lit) - 1
#define MAXEV 32

struct resp {
    uint8_t kind, proto, method;
    bool paired, has_ra;
    uint16_t status;
    uint32_t stream_id;
    size_t off, feed;
    char ra[RL_HTTP_RETRY_AFTER_MAX + 1];
    char name[RL_HTTP_NAME_MAX + 1];
};

static struct resp out[MAXEV];

/* Commits `req` on a fresh connection, then feeds `resp` cut at cuts[];
 * returns the events with absolute offsets. */
static size_t run(const uint8_t *req, size_t nreq, const uint8_t *resp,
                  size_t n, const size_t *cuts, size_t ncut,
                  struct rl_httpconn *connp)
{
    struct rl_httpconn conn = {0};
    struct rl_reqscan rq;
    struct rl_respscan rs;
    static struct rl_resp_event ev[MAXEV];
    size_t at = 0, nout = 0;

    rl_reqscan_init(&rq, &conn);
    cr_assert_geq(rl_reqscan_commit(&rq, req, nreq, NULL, 0), 0);
    rl_respscan_init(&rs, &conn);
    for (size_t c = 0; c <= ncut; c++) {
        size_t end = c < ncut ? cuts[c] : n;
        long k = rl_respscan_feed(&rs, resp + at, end - at, ev, MAXEV);

        cr_assert_geq(k, 0);
        cr_assert_leq(k, MAXEV);
        for (long i = 0; i < k; i++) {
            struct resp *o = &out[nout++];

            cr_assert_leq(ev[i].offset, end - at);
            o->kind = ev[i].kind;
            o->proto = ev[i].proto;
            o->method = ev[i].method;
            o->paired = ev[i].paired;
            o->has_ra = ev[i].has_retry_after;
            o->status = ev[i].status;
            o->stream_id = ev[i].stream_id;
            o->off = at + ev[i].offset;
            o->feed = at;
            memcpy(o->ra, ev[i].retry_after, sizeof o->ra);
            memcpy(o->name, ev[i].name, sizeof o->name);
        }
        at = end;
    }
    if (connp != NULL)
        *connp = conn;
    rl_respscan_free(&rs);
    rl_reqscan_free(&rq);
    return nout;
}

static void check_resp_splits(const uint8_t *req, size_t nreq, const uint8_t *p,
                         size_t n)
{
    static struct resp whole[MAXEV];
    size_t nw = run(req, nreq, p, n, NULL, 0, NULL);
    size_t *cuts = malloc((n + 1) * sizeof *cuts);

    memcpy(whole, out, sizeof whole);
    for (size_t mode = 0; mode <= n; mode++) {
        size_t ncut, np;

        if (mode < n) {
            cuts[0] = mode;
            ncut = 1;
        } else {
            for (size_t i = 0; i + 1 < n; i++)
                cuts[i] = i + 1;
            ncut = n > 0 ? n - 1 : 0;
        }
        np = run(req, nreq, p, n, cuts, ncut, NULL);
        cr_assert_eq(np, nw, "cut %zu: %zu events, not %zu", mode, np, nw);
        for (size_t i = 0; i < nw; i++) {
            cr_assert_eq(out[i].kind, whole[i].kind, "cut %zu ev %zu", mode,
                         i);
            cr_assert_eq(out[i].status, whole[i].status);
            /* A stream found to be what it is reports it where it began, or
             * at the feed that found it. */
            cr_assert(out[i].off == whole[i].off ||
                          (out[i].kind == RL_RESP_PROTO &&
                           out[i].off == out[i].feed &&
                           whole[i].off < out[i].feed),
                      "cut %zu ev %zu", mode, i);
            cr_assert_str_eq(out[i].name, whole[i].name);
            cr_assert_str_eq(out[i].ra, whole[i].ra);
            cr_assert_eq(out[i].stream_id, whole[i].stream_id);
        }
    }
    memcpy(out, whole, sizeof whole);
    free(cuts);
}

static void status(const struct resp *r, uint16_t st, const char *name)
{
    cr_assert_eq(r->kind, RL_RESP_STATUS);
    cr_assert_eq(r->status, st, "status %u, not %u", r->status, st);
    cr_assert(r->paired);
    cr_assert_str_eq(r->name, name);
}

Test(http_respscan, responses_pair_in_order_and_framing_skips_bodies)
{
    static const char req[] =
        "GET /1 HTTP/1.1\r\nHost: a.example\r\n\r\n"
        "HEAD /2 HTTP/1.1\r\nHost: b.example\r\n\r\n"
        "GET /3 HTTP/1.1\r\nHost: c.example\r\n\r\n"
        "DELETE /4 HTTP/1.1\r\nHost: d.example\r\n\r\n"
        "GET /5 HTTP/1.1\r\nHost: e.example\r\n\r\n"
        "GET /6 HTTP/1.1\r\nHost: f.example\r\n\r\n";
    /* Bodies that look like status lines are never read as heads. */
    static const char resp[] =
        "HTTP/1.1 200 OK\r\nContent-Length: 26\r\n\r\n"
        "HTTP/1.1 429 Slow down\r\n\r\n"
        "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n" /* HEAD: no body */
        "HTTP/1.1 103 Early Hints\r\nLink: </s.css>\r\n\r\n"
        "HTTP/1.1 429 Too Many Requests\r\nRetry-After:  120 \r\n"
        "Transfer-Encoding: chunked\r\n\r\n"
        "19;ext=1\r\nHTTP/1.1 503 Nope\r\n\r\nxxxx\r\n"
        "0\r\nX-T: HTTP/1.1 200 OK\r\n\r\n"
        "HTTP/1.1 204 No Content\r\n\r\n"
        "HTTP/1.1 304 Not Modified\r\nContent-Length: 50\r\n\r\n"
        "HTTP/1.0 503 Service Unavailable\r\nretry-after: Sun, 06 Nov 1994 "
        "08:49:37 GMT\r\n\r\nHTTP/1.1 200 OK\r\n\r\n";

    /* Six names on one connection (a proxy's): each response keeps its
     * request's. */
    cr_assert_eq(run(S(req), S(resp), NULL, 0, NULL), 8);
    cr_assert_eq(out[0].kind, RL_RESP_PROTO);
    cr_assert_eq(out[0].proto, RL_HTTP_1);
    status(&out[1], 200, "a.example");
    status(&out[2], 200, "b.example");
    cr_assert_eq(out[2].method, RL_HTTP_M_HEAD);
    status(&out[3], 103, "c.example");
    status(&out[4], 429, "c.example");
    cr_assert(out[4].has_ra);
    cr_assert_str_eq(out[4].ra, "120");
    status(&out[5], 204, "d.example");
    cr_assert_not(out[5].has_ra);
    status(&out[6], 304, "e.example");
    status(&out[7], 503, "f.example");
    cr_assert_str_eq(out[7].ra, "Sun, 06 Nov 1994 08:49:37 GMT");
    /* read-until-close: the last "response" is body */
    cr_assert_eq(out[7].off, strstr(resp, "GMT\r\n\r\n") - resp + 7);
    check_resp_splits(S(req), S(resp));
}

Test(http_respscan, a_response_without_its_request_is_unpaired)
{
    static const char resp[] = "HTTP/1.1 429 x\r\nContent-Length: 0\r\n\r\n";

    cr_assert_eq(run(S(""), S(resp), NULL, 0, NULL), 2);
    cr_assert_eq(out[1].status, 429);
    cr_assert_not(out[1].paired);
    cr_assert_str_eq(out[1].name, "");
}

Test(http_respscan, switching_protocols_ends_both_scans)
{
    static const char req[] = "GET /ws HTTP/1.1\r\nHost: w.example\r\n"
                              "Upgrade: websocket\r\n\r\n";
    static const char resp[] = "HTTP/1.1 101 Switching Protocols\r\n"
                               "Upgrade: websocket\r\n\r\n\x81\x05hello";
    struct rl_httpconn conn;
    struct rl_reqscan rq;
    struct rl_req_event ev[4];

    cr_assert_eq(run(S(req), S(resp), NULL, 0, &conn), 3);
    status(&out[1], 101, "w.example");
    cr_assert_eq(out[2].kind, RL_RESP_PROTO);
    cr_assert_eq(out[2].proto, RL_HTTP_NONE);
    cr_assert(conn.switched);
    check_resp_splits(S(req), S(resp));
    /* The request side, past its head, stops at the next bytes. */
    conn.fifo_len = 0;
    rl_reqscan_init(&rq, &conn);
    cr_assert_eq(rl_reqscan_commit(&rq, S(req), ev, 4), 2);
    cr_assert_eq(rl_reqscan_commit(&rq, S("GET / HTTP/1.1\r\n\r\n"), ev, 4),
                 1);
    cr_assert_eq(ev[0].kind, RL_REQ_PROTO);
    cr_assert_eq(ev[0].proto, RL_HTTP_NONE);
}

/* A 101 to a request that did not ask to upgrade (no Upgrade header), or
 * to no request at all, is a malformed response (SPEC §12): no event,
 * the request still waits for its answer, and both scans go on. */
Test(http_respscan, a_101_nobody_asked_for_changes_nothing)
{
    static const char req[] = "GET /1 HTTP/1.1\r\nHost: a.example\r\n"
                              "Connection: upgrade\r\n\r\n"
                              "GET /2 HTTP/1.1\r\nHost: b.example\r\n\r\n";
    static const char resp[] = "HTTP/1.1 101 Switching Protocols\r\n"
                               "Upgrade: websocket\r\n\r\n"
                               "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
                               "HTTP/1.1 101 Switching Protocols\r\n\r\n"
                               "HTTP/1.1 429 Slow\r\nRetry-After: 5\r\n"
                               "Content-Length: 0\r\n\r\n"
                               "HTTP/1.1 101 Switching Protocols\r\n\r\n"
                               "HTTP/1.1 200 OK\r\n\r\n";
    struct rl_httpconn conn;
    struct rl_reqscan rq;
    struct rl_req_event ev[4];

    cr_assert_eq(run(S(req), S(resp), NULL, 0, &conn), 4);
    cr_assert_eq(out[0].proto, RL_HTTP_1);
    status(&out[1], 200, "a.example");
    status(&out[2], 429, "b.example");
    cr_assert_str_eq(out[2].ra, "5");
    /* The third 101 answers nothing (both requests are answered); the
     * 200 after it is unpaired, and read-until-close: the scan goes on
     * to its end. */
    cr_assert_eq(out[3].kind, RL_RESP_STATUS);
    cr_assert_eq(out[3].status, 200);
    cr_assert_not(out[3].paired);
    cr_assert_not(conn.switched);
    check_resp_splits(S(req), S(resp));
    /* The request side goes on counting the connection's requests. */
    rl_reqscan_init(&rq, &conn);
    cr_assert_eq(rl_reqscan_commit(&rq, S(req), ev, 4), 3);
    cr_assert_eq(rl_reqscan_commit(&rq, S("GET /3 HTTP/1.1\r\n\r\n"), ev, 4),
                 1);
    cr_assert_eq(ev[0].kind, RL_REQ_REQUEST);
    rl_reqscan_free(&rq);
}

/* HTTP/2 has no 101 (RFC 9113 §8.6): a :status 101 is malformed and does
 * not end its stream's wait; the stream's real answer is paired. */
Test(http_respscan, an_http2_101_is_no_answer)
{
    struct buf req = {0}, resp = {0};
    struct rl_httpconn conn;
    nghttp2_hd_deflater *d;
    uint8_t blk[128];
    static const char *const sw[] = {":status", "101", NULL};
    static const char *const slow[] = {":status", "429", "retry-after", "7",
                                       NULL};
    size_t n;

    h2_stream(&req);
    cr_assert_eq(nghttp2_hd_deflate_new(&d, 4096), 0);
    frame_hdr(&resp, 0, 4, 0, 0); /* SETTINGS */
    n = hpack(d, sw, blk, sizeof blk);
    frame_hdr(&resp, n, 1, 0x4, 1);
    put(&resp, blk, n);
    n = hpack(d, slow, blk, sizeof blk);
    frame_hdr(&resp, n, 1, 0x5, 1);
    put(&resp, blk, n);
    nghttp2_hd_deflate_del(d);
    cr_assert_eq(run(req.p, req.n, resp.p, resp.n, NULL, 0, &conn), 2);
    cr_assert_eq(out[0].proto, RL_HTTP_2);
    status(&out[1], 429, "h2.example");
    cr_assert_eq(out[1].stream_id, 1);
    cr_assert_str_eq(out[1].ra, "7");
    cr_assert_not(conn.switched);
    check_resp_splits(req.p, req.n, resp.p, resp.n);
    free(req.p);
    free(resp.p);
}

Test(http_respscan, a_2xx_to_connect_opens_a_tunnel_sniffed_again)
{
    static const char req[] = "CONNECT t.example:443 HTTP/1.1\r\n\r\n";
    static const char tls[] = "HTTP/1.1 200 Connection established\r\n\r\n"
                              "\x16\x03\x03\x00\x7a\x02\x00\x00\x76";
    static const char plain[] = "HTTP/1.1 200 OK\r\n\r\n"
                                "HTTP/1.1 503 x\r\nContent-Length: 0\r\n\r\n";
    static const char req2[] = "CONNECT t.example:80 HTTP/1.1\r\n\r\n"
                               "GET / HTTP/1.1\r\nHost: t.example\r\n\r\n";

    cr_assert_eq(run(S(req), S(tls), NULL, 0, NULL), 3);
    status(&out[1], 200, "t.example");
    cr_assert_eq(out[1].method, RL_HTTP_M_CONNECT);
    cr_assert_eq(out[2].proto, RL_HTTP_NONE);
    check_resp_splits(S(req), S(tls));
    cr_assert_eq(run(S(req2), S(plain), NULL, 0, NULL), 4);
    cr_assert_eq(out[2].kind, RL_RESP_PROTO);
    cr_assert_eq(out[2].proto, RL_HTTP_1);
    status(&out[3], 503, "t.example");
    check_resp_splits(S(req2), S(plain));
}

Test(http_respscan, garbage_instead_of_a_status_line_stops_the_scan)
{
    static const char resp[] = "HTTP/1.1 20 OK\r\n\r\nHTTP/1.1 429 x\r\n\r\n";

    cr_assert_eq(run(S("GET / HTTP/1.1\r\n\r\n"), S(resp), NULL, 0, NULL), 2);
    cr_assert_eq(out[1].proto, RL_HTTP_NONE);
}

/* The server's side of h2_stream's streams 1, 3, 5. */
static void h2_responses(struct buf *b)
{
    nghttp2_hd_deflater *d;
    uint8_t blk[512];
    static const char *const ok[] = {":status", "200", "content-type",
                                     "text/html", NULL};
    static const char *const push[] = {":method", "GET", ":path", "/p.css",
                                       ":authority", "h2.example",
                                       ":scheme", "https", NULL};
    static const char *const slow[] = {":status", "429", "retry-after",
                                       "30", NULL};
    static const char *const early[] = {":status", "103", NULL};
    static const char *const busy[] = {":status", "503", NULL};
    static const char *const tr[] = {"grpc-status", "0", NULL};
    size_t n;

    cr_assert_eq(nghttp2_hd_deflate_new(&d, 4096), 0);
    frame_hdr(b, 12, 4, 0, 0);
    put(b, "\x00\x03\x00\x00\x00\x64\x00\x04\x00\x01\x00\x00", 12);
    frame_hdr(b, 0, 4, 1, 0); /* SETTINGS ACK */
    n = hpack(d, ok, blk, sizeof blk);
    frame_hdr(b, n, 1, 0x4, 1);
    put(b, blk, n);
    n = hpack(d, push, blk, sizeof blk); /* PUSH_PROMISE 2 on stream 1 */
    frame_hdr(b, 4 + n, 5, 0x4, 1);
    put(b, "\x00\x00\x00\x02", 4);
    put(b, blk, n);
    frame_hdr(b, 3, 0, 0, 1);
    put(b, "abc", 3);
    n = hpack(d, tr, blk, sizeof blk);
    frame_hdr(b, n, 1, 0x5, 1); /* trailers: no :status */
    put(b, blk, n);
    n = hpack(d, early, blk, sizeof blk);
    frame_hdr(b, n, 1, 0x4, 5);
    put(b, blk, n);
    n = hpack(d, slow, blk, sizeof blk); /* padded, then a CONTINUATION */
    frame_hdr(b, 1 + 2 + 4, 1, 0x8, 3);
    put(b, "\x04", 1);
    put(b, blk, 2);
    put(b, "\0\0\0\0", 4);
    frame_hdr(b, n - 2, 9, 0x4, 3);
    put(b, blk + 2, n - 2);
    n = hpack(d, busy, blk, sizeof blk);
    frame_hdr(b, n, 1, 0x5, 5);
    put(b, blk, n);
    nghttp2_hd_deflate_del(d);
}

Test(http_respscan, http2_statuses_pair_by_stream)
{
    struct buf req = {0}, resp = {0};
    struct rl_httpconn conn;

    h2_stream(&req);
    h2_responses(&resp);
    cr_assert_eq(run(req.p, req.n, resp.p, resp.n, NULL, 0, &conn), 5);
    cr_assert_eq(out[0].proto, RL_HTTP_2);
    status(&out[1], 200, "h2.example");
    cr_assert_eq(out[1].stream_id, 1);
    status(&out[2], 103, "h2.example");
    cr_assert_eq(out[2].stream_id, 5);
    status(&out[3], 429, "h2.example");
    cr_assert_eq(out[3].stream_id, 3);
    cr_assert_str_eq(out[3].ra, "30");
    status(&out[4], 503, "h2.example");
    cr_assert_eq(out[4].method, RL_HTTP_M_HEAD);
    cr_assert_eq(conn.nstreams, 0);
    check_resp_splits(req.p, req.n, resp.p, resp.n);
    free(req.p);
    free(resp.p);
}

Test(http_respscan, tls_from_the_server_is_not_parsed)
{
    static const char resp[] = "\x16\x03\x03\x00\x7a\x02\x00\x00\x76\x03";

    cr_assert_eq(run(S(""), S(resp), NULL, 0, NULL), 1);
    cr_assert_eq(out[0].proto, RL_HTTP_NONE);
    cr_assert_eq(out[0].off, 0);
    check_resp_splits(S(""), S(resp));
}

Test(http_respscan, pipelining_deeper_than_the_fifo_leaves_the_excess_unpaired)
{
    struct buf req = {0}, resp = {0};
    char line[96];
    size_t n;

    for (int i = 0; i < (int)RL_HTTP_FIFO + 4; i++) {
        snprintf(line, sizeof line, "GET /%d HTTP/1.1\r\nHost: s%d\r\n\r\n",
                 i, i % 3);
        puts_(&req, line);
        puts_(&resp, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
    }
    n = run(req.p, req.n, resp.p, resp.n, NULL, 0, NULL);
    cr_assert_eq(n, 1 + RL_HTTP_FIFO + 4);
    for (size_t i = 1; i < n; i++) {
        cr_assert_eq(out[i].status, 200);
        cr_assert_eq(out[i].paired, i <= RL_HTTP_FIFO, "response %zu", i);
        if (out[i].paired) {
            snprintf(line, sizeof line, "s%zu", (i - 1) % 3);
            cr_assert_str_eq(out[i].name, line);
        }
    }
    free(req.p);
    free(resp.p);
}
