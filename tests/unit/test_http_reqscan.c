/* test_http_reqscan.c — the requests in a client's byte stream (SPEC §11):
 * exact events for hand-written streams, each also fed cut at every byte
 * and byte by byte (check_splits), peeked before each commit. */
#include <stdio.h>
#include <string.h>

#include "http_streams.h"

#define S(lit) (const uint8_t *)(lit), sizeof(lit) - 1

static struct req r[MAXREQ];

static void expect(const struct req *e, uint8_t kind, size_t off,
                   const char *name, uint16_t port)
{
    cr_assert_eq(e->kind, kind, "kind %d, not %d", e->kind, kind);
    cr_assert_eq(e->off, off, "offset %zu, not %zu", e->off, off);
    if (name != NULL) {
        cr_assert_str_eq(e->name, name);
        cr_assert_eq(e->port, port);
    }
}

static void expect_proto(const struct req *e, uint8_t proto, size_t off)
{
    cr_assert_eq(e->kind, RL_REQ_PROTO);
    cr_assert_eq(e->proto, proto, "proto %d, not %d", e->proto, proto);
    cr_assert_eq(e->off, off);
}

Test(http_reqscan, one_get_names_its_host_without_port_lowercased)
{
    static const char s[] = "GET /a?b HTTP/1.1\r\nHost: WWW.Example.COM:8080"
                            "\r\nAccept: */*\r\n\r\n";

    cr_assert_eq(scan_whole(S(s), r), 2);
    expect_proto(&r[0], RL_HTTP_1, 0);
    expect(&r[1], RL_REQ_REQUEST, 0, "www.example.com", 8080);
    cr_assert_eq(r[1].name_src, RL_NAME_HOST);
    cr_assert_str_eq(r[1].method, "GET");
    cr_assert_str_eq(r[1].target, "/a?b");
    check_splits(S(s));
}

Test(http_reqscan, pipelined_heads_each_count_and_bodies_never_do)
{
    /* The bodies hold text that looks like request lines. */
    static const char s[] =
        "POST /up HTTP/1.1\r\nHost: a.example\r\nContent-Length: 36\r\n\r\n"
        "GET /evil HTTP/1.1\r\nHost: evil\r\n\r\n\r\n"
        "PUT /c HTTP/1.1\r\nHost: b.example\r\nExpect: 100-continue\r\n"
        "Transfer-Encoding: gzip, chunked\r\n\r\n"
        "1a;name=\"v\";x\r\nGET /in-chunk HTTP/1.1\r\n\r\n\r\n"
        "0\r\nX-Trailer: GET / HTTP/1.1\r\n\r\n"
        "\r\nHEAD /d HTTP/1.0\r\nhost:c.example\r\n\r\n"
        "DELETE /e HTTP/1.1\r\nHost: d.example\r\n\r\n";

    cr_assert_eq(scan_whole(S(s), r), 5);
    expect_proto(&r[0], RL_HTTP_1, 0);
    expect(&r[1], RL_REQ_REQUEST, 0, "a.example", 0);
    expect(&r[2], RL_REQ_REQUEST, strstr(s, "PUT") - s, "b.example", 0);
    expect(&r[3], RL_REQ_REQUEST, strstr(s, "HEAD") - s, "c.example", 0);
    cr_assert_str_eq(r[3].method, "HEAD");
    expect(&r[4], RL_REQ_REQUEST, strstr(s, "DELETE") - s, "d.example", 0);
    check_splits(S(s));
}

/* A proxy's request names its site and the site's port: the target's,
 * else its scheme's (never the proxy's, where the connection went: a `to`
 * with a port matches the site's). */
Test(http_reqscan, an_absolute_form_target_wins_over_host)
{
    static const char s[] =
        "GET http://Site.Example:8080/x HTTP/1.1\r\nHost: proxy\r\n\r\n"
        "GET https://other.example/y HTTP/1.1\r\nHost: proxy\r\n\r\n"
        "GET http://third.example?q HTTP/1.1\r\nHost: proxy\r\n\r\n";

    cr_assert_eq(scan_whole(S(s), r), 4);
    expect(&r[1], RL_REQ_REQUEST, 0, "site.example", 8080);
    cr_assert_eq(r[1].name_src, RL_NAME_TARGET);
    expect(&r[2], RL_REQ_REQUEST, strstr(s, "GET https") - s,
           "other.example", 443);
    expect(&r[3], RL_REQ_REQUEST, strstr(s, "GET http://third") - s,
           "third.example", 80);
    check_splits(S(s));
}

/* An absolute-form target whose authority runs past the kept 256 bytes
 * names nothing, and nothing past them is read (the scanner read up to
 * the target's whole length from its 257-byte copy: ASan, and the HTTP
 * fuzzer, saw it). A CONNECT's likewise. */
Test(http_reqscan, an_authority_past_the_targets_cap_is_no_name)
{
    static char s[16384];
    int n = snprintf(s, sizeof s, "GET http://");
    memset(s + n, 'a', 6000);
    n += 6000;
    n += snprintf(s + n, sizeof s - (size_t)n,
                  " HTTP/1.1\r\nHost: proxy.example\r\n\r\nCONNECT ");
    memset(s + n, 'b', 6000);
    n += 6000;
    n += snprintf(s + n, sizeof s - (size_t)n, ":443 HTTP/1.1\r\n\r\n");

    cr_assert_eq(scan_whole((const uint8_t *)s, (size_t)n, r), 3);
    cr_assert_eq(r[1].kind, RL_REQ_REQUEST);
    cr_expect_neq(r[1].name_src, RL_NAME_TARGET, "a cut authority named it");
    cr_expect_neq(r[2].name_src, RL_NAME_TARGET, "a cut CONNECT named it");
    check_splits((const uint8_t *)s, (size_t)n);
}

Test(http_reqscan, connect_names_a_tunnel_and_tls_inside_it_is_reported)
{
    static const char s[] = "CONNECT a.example:443 HTTP/1.1\r\n"
                            "Host: a.example:443\r\n\r\n"
                            "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03";
    size_t tls = strstr(s, "\x16") - s;

    cr_assert_eq(scan_whole(S(s), r), 3);
    expect_proto(&r[0], RL_HTTP_1, 0);
    expect(&r[1], RL_REQ_TUNNEL, 0, "a.example", 443);
    expect_proto(&r[2], RL_HTTP_TLS, tls);
    check_splits(S(s));
}

Test(http_reqscan, connect_then_plaintext_http_counts_the_requests_inside)
{
    static const char s[] = "CONNECT b.example:80 HTTP/1.1\r\n\r\n"
                            "GET / HTTP/1.1\r\nHost: b.example\r\n\r\n"
                            "CONNECT c.example:80 HTTP/1.1\r\n\r\n";
    size_t get = strstr(s, "GET") - s;

    cr_assert_eq(scan_whole(S(s), r), 5);
    expect(&r[1], RL_REQ_TUNNEL, 0, "b.example", 80);
    /* The tunnel's bytes are sniffed again. */
    expect_proto(&r[2], RL_HTTP_1, get);
    expect(&r[3], RL_REQ_REQUEST, get, "b.example", 0);
    expect(&r[4], RL_REQ_TUNNEL, strstr(s, "CONNECT c") - s, "c.example",
           80);
    check_splits(S(s));
}

Test(http_reqscan, tls_first_bytes_are_reported_and_nothing_after)
{
    static const char s[] = "\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03"
                            "GET / HTTP/1.1\r\n\r\n";

    cr_assert_eq(scan_whole(S(s), r), 1);
    expect_proto(&r[0], RL_HTTP_TLS, 0);
    check_splits(S(s));
}

Test(http_reqscan, first_bytes_that_are_not_http_cost_nothing_after)
{
    static const char s[] = "SSH-2.0-OpenSSH_9.2p1 Debian\r\n"
                            "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    static const char t[] = "\x16\x02\x00GET / HTTP/1.1\r\n\r\n";
    struct rl_httpconn conn = {0};
    struct rl_reqscan sc;
    struct rl_req_event ev[4];

    cr_assert_eq(scan_whole(S(s), r), 1);
    expect_proto(&r[0], RL_HTTP_NONE, strstr(s, "\r\n") - s);
    check_splits(S(s));
    cr_assert_eq(scan_whole(S(t), r), 1);
    expect_proto(&r[0], RL_HTTP_NONE, 1);
    rl_reqscan_init(&sc, &conn);
    cr_assert_eq(rl_reqscan_commit(&sc, S(s), ev, 4), 1);
    cr_assert_eq(rl_reqscan_proto(&sc), RL_HTTP_NONE);
    cr_assert_eq(rl_reqscan_peek(&sc, S("GET / HTTP/1.1\r\n\r\n"), ev, 4), 0);
    cr_assert_eq(rl_reqscan_commit(&sc, S("GET / HTTP/1.1\r\n\r\n"), ev, 4),
                 0);
}

Test(http_reqscan, a_head_over_64k_is_not_http_from_there)
{
    size_t n = 70000;
    char *s = malloc(n);
    struct buf b = {0};

    cr_assert_not_null(s);
    memset(s, 'a', n);
    puts_(&b, "GET / HTTP/1.1\r\nX-Big: ");
    put(&b, s, n);
    puts_(&b, "\r\n\r\nGET / HTTP/1.1\r\n\r\n");
    cr_assert_eq(scan_whole(b.p, b.n, r), 3);
    expect(&r[1], RL_REQ_REQUEST, 0, "", 0);
    cr_assert_eq(r[2].proto, RL_HTTP_NONE);
    cr_assert_eq(r[2].off, RL_HTTP_HEAD_MAX);
    free(s);
    free(b.p);
}

Test(http_reqscan, a_head_split_across_writes_is_one_request_named_later)
{
    static const char s[] = "GET /1 HTTP/1.1\r\nHost: one.example\r\n\r\n"
                            "GET /2 HTTP/1.1\r\nHost: two.example\r\n\r\n";
    size_t second = strstr(s, "GET /2") - s, cut = second + 20;
    struct rl_httpconn conn = {0};
    struct rl_reqscan sc;
    struct rl_req_event ev[8];

    rl_reqscan_init(&sc, &conn);
    cr_assert_eq(rl_reqscan_commit(&sc, S(s) - (sizeof s - 1 - cut), ev, 8),
                 3);
    /* The second head started in this write; its Host is in the next. */
    cr_assert_eq(ev[2].kind, RL_REQ_REQUEST);
    cr_assert_eq(ev[2].offset, second);
    cr_assert_eq(ev[2].name_src, RL_NAME_HINT);
    cr_assert_str_eq(ev[2].name, "one.example");
    cr_assert_not(ev[2].head_done);
    cr_assert_eq(rl_reqscan_peek(&sc, (const uint8_t *)s + cut,
                                 sizeof s - 1 - cut, ev, 8),
                 1);
    cr_assert_eq(ev[0].kind, RL_REQ_NAMED);
    cr_assert_str_eq(ev[0].name, "two.example");
    cr_assert_eq(ev[0].offset, sizeof s - 1 - cut);
    cr_assert_eq(conn.fifo_len, 1, "peek recorded nothing");
    cr_assert_eq(rl_reqscan_commit(&sc, (const uint8_t *)s + cut,
                                   sizeof s - 1 - cut, ev, 8),
                 1);
    cr_assert_eq(conn.fifo_len, 2);
}

/* A complete head that names nothing (no Host; a Host over 255 bytes)
 * carries no name, not the previous request's as a hint (SPEC §11): the
 * caller charges it by the server name or the connection's. A head still
 * incomplete after it gets "" as its hint. */
Test(http_reqscan, a_complete_head_without_a_name_carries_no_hint)
{
    char s[1200];
    int n = snprintf(s, sizeof s,
                     "GET /1 HTTP/1.1\r\nHost: one.example\r\n\r\n"
                     "GET /2 HTTP/1.1\r\nAccept: */*\r\n\r\n"
                     "GET /3 HTTP/1.0\r\n\r\n"
                     "GET /4 HTTP/1.1\r\nHost: four.example\r\n\r\n"
                     "GET /5 HTTP/1.1\r\nHost: %0300d.example\r\n\r\n"
                     "GET /6 HTTP/1.1\r\n",
                     0);
    struct rl_httpconn conn = {0};
    struct rl_reqscan sc;
    struct rl_req_event ev[16];
    static const char *const want[] = {"one.example", "", "", "four.example",
                                       ""};

    rl_reqscan_init(&sc, &conn);
    cr_assert_eq(rl_reqscan_peek(&sc, (const uint8_t *)s, (size_t)n, ev, 16),
                 7);
    for (int i = 0; i < 5; i++) {
        const struct rl_req_event *e = &ev[1 + i];

        cr_assert_eq(e->kind, RL_REQ_REQUEST);
        cr_assert(e->head_done, "request %d", i + 1);
        cr_assert_str_eq(e->name, want[i], "request %d: '%s'", i + 1, e->name);
        cr_assert_eq(e->name_src,
                     want[i][0] != '\0' ? RL_NAME_HOST : RL_NAME_UNKNOWN,
                     "request %d: name_src %d", i + 1, e->name_src);
    }
    /* The sixth's head is not complete: the fifth named nothing. */
    cr_assert_not(ev[6].head_done);
    cr_assert_eq(ev[6].name_src, RL_NAME_UNKNOWN);
    cr_assert_str_eq(ev[6].name, "");
    /* Committed byte by byte: the same names, each in its NAMED event. */
    char got[8][RL_HTTP_NAME_MAX + 1];
    int k = 0;
    for (int i = 0; i < n; i++) {
        long m = rl_reqscan_commit(&sc, (const uint8_t *)s + i, 1, ev, 16);
        for (long j = 0; j < m; j++)
            if (ev[j].head_done && k < 8)
                memcpy(got[k++], ev[j].name, sizeof got[0]);
    }
    cr_assert_eq(k, 5);
    for (int i = 0; i < 5; i++)
        cr_assert_str_eq(got[i], want[i], "request %d, byte by byte", i + 1);
    rl_reqscan_free(&sc);
}

Test(http_reqscan, peek_says_where_each_head_starts_and_changes_nothing)
{
    static const char s[] = "GET /1 HTTP/1.1\r\nHost: a\r\n\r\n"
                            "GET /2 HTTP/1.1\r\nHost: b\r\n\r\n"
                            "GET /3 HTTP/1.1\r\nHost: c\r\n\r\n";
    struct rl_httpconn conn = {0};
    struct rl_reqscan sc;
    struct rl_req_event ev[8], ev2[8];
    size_t second = strstr(s, "GET /2") - s;

    rl_reqscan_init(&sc, &conn);
    cr_assert_eq(rl_reqscan_peek(&sc, S(s), ev, 8), 4);
    cr_assert_eq(rl_reqscan_peek(&sc, S(s), ev2, 8), 4);
    for (int i = 0; i < 4; i++) {
        cr_assert_eq(ev[i].kind, ev2[i].kind);
        cr_assert_eq(ev[i].offset, ev2[i].offset);
        cr_assert_str_eq(ev[i].name, ev2[i].name);
    }
    cr_assert_eq(ev[2].offset, second);
    cr_assert_str_eq(ev[3].name, "c");
    /* Only events up to `max` are filled; all are counted. */
    cr_assert_eq(rl_reqscan_peek(&sc, S(s), ev2, 2), 4);
    /* The kernel took the first head only: a short write. */
    cr_assert_eq(rl_reqscan_commit(&sc, S(s) - (sizeof s - 1 - second), ev2,
                                   8),
                 2);
    cr_assert_eq(rl_reqscan_commit(&sc, (const uint8_t *)s + second,
                                   sizeof s - 1 - second, ev2, 8),
                 2);
    cr_assert_eq(ev2[0].offset, 0);
    cr_assert_str_eq(ev2[0].name, "b");
    cr_assert_eq(conn.fifo_len, 3);
}

Test(http_reqscan, a_method_that_begins_like_connect_counts_where_it_departs)
{
    static const char s[] = "GET / HTTP/1.1\r\nHost: a\r\n\r\n"
                            "COPY /x HTTP/1.1\r\nHost: a\r\n\r\n";
    size_t copy = strstr(s, "COPY") - s;
    struct rl_httpconn conn = {0};
    struct rl_reqscan sc;
    struct rl_req_event ev[8];

    rl_reqscan_init(&sc, &conn);
    /* "CO" could still be CONNECT: not yet a request. */
    cr_assert_eq(rl_reqscan_commit(&sc, S(s) - (sizeof s - 1 - copy - 2), ev,
                                   8),
                 2);
    cr_assert_eq(rl_reqscan_commit(&sc, (const uint8_t *)s + copy + 2,
                                   sizeof s - 1 - copy - 2, ev, 8),
                 1);
    cr_assert_eq(ev[0].kind, RL_REQ_REQUEST);
    cr_assert_eq(ev[0].offset, 0);
    cr_assert_str_eq(ev[0].method, "COPY");
    check_splits(S(s));
}

Test(http_reqscan, http2_streams_count_once_each_named_by_authority)
{
    struct buf b = {0};
    size_t hdr1;

    h2_stream(&b);
    hdr1 = 24 + 15 + 13;
    cr_assert_eq(scan_whole(b.p, b.n, r), 4);
    expect_proto(&r[0], RL_HTTP_2, 0);
    expect(&r[1], RL_REQ_REQUEST, hdr1, "h2.example", 0);
    cr_assert_eq(r[1].stream_id, 1);
    cr_assert_eq(r[1].name_src, RL_NAME_AUTHORITY);
    cr_assert_str_eq(r[1].method, "GET");
    cr_assert_str_eq(r[1].target, "/one");
    cr_assert_eq(r[2].stream_id, 3);
    cr_assert_str_eq(r[2].name, "h2.example");
    cr_assert_eq(r[2].port, 8443);
    cr_assert_str_eq(r[2].method, "POST");
    cr_assert_eq(r[3].stream_id, 5);
    cr_assert_str_eq(r[3].method, "HEAD");
    check_splits(b.p, b.n);
    free(b.p);
}

Test(http_reqscan, http2_peek_knows_the_streams_and_commit_their_names)
{
    struct buf b = {0};
    struct rl_httpconn conn = {0};
    struct rl_reqscan sc;
    struct rl_req_event ev[8];
    struct rl_http_sent st;

    h2_stream(&b);
    rl_reqscan_init(&sc, &conn);
    cr_assert_eq(rl_reqscan_peek(&sc, b.p, b.n, ev, 8), 4);
    cr_assert_eq(ev[1].stream_id, 1);
    cr_assert_eq(ev[1].name_src, RL_NAME_UNKNOWN);
    cr_assert_eq(conn.nstreams, 0);
    cr_assert_eq(rl_reqscan_commit(&sc, b.p, b.n, ev, 8), 4);
    cr_assert_eq(ev[1].name_src, RL_NAME_AUTHORITY);
    cr_assert_eq(conn.nstreams, 3);
    cr_assert(rl_httpconn_stream(&conn, 5, false, &st));
    cr_assert_eq(st.method, RL_HTTP_M_HEAD);
    cr_assert_str_eq(rl_httpconn_name(&conn, st.slot, st.gen), "h2.example");
    rl_reqscan_free(&sc);
    free(b.p);
}

Test(http_reqscan, http2_an_encoder_table_larger_than_the_default_decodes)
{
    struct buf b = {0};
    nghttp2_hd_deflater *d;
    uint8_t blk[512];
    static const char *const r1[] = {":method", "GET", ":scheme", "https",
                                     ":authority", "big.example", ":path",
                                     "/", NULL};
    size_t n;

    /* As after a server's SETTINGS_HEADER_TABLE_SIZE of 65536: the first
     * block starts with a dynamic table size update to it. */
    cr_assert_eq(nghttp2_hd_deflate_new(&d, 65536), 0);
    cr_assert_eq(nghttp2_hd_deflate_change_table_size(d, 65536), 0);
    puts_(&b, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
    frame_hdr(&b, 0, 4, 0, 0);
    for (uint32_t id = 1; id <= 3; id += 2) {
        n = hpack(d, r1, blk, sizeof blk);
        frame_hdr(&b, n, 1, 0x4 | 0x1, id);
        put(&b, blk, n);
    }
    nghttp2_hd_deflate_del(d);
    cr_assert_eq(scan_whole(b.p, b.n, r), 3);
    cr_assert_eq(r[1].name_src, RL_NAME_AUTHORITY);
    cr_assert_str_eq(r[1].name, "big.example");
    cr_assert_eq(r[2].name_src, RL_NAME_AUTHORITY);
    cr_assert_str_eq(r[2].name, "big.example");
    free(b.p);
}

Test(http_reqscan, http2_nonsense_frames_end_the_scan)
{
    struct buf b = {0};

    puts_(&b, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
    frame_hdr(&b, 0, 1, 0x4, 1); /* HEADERS before SETTINGS */
    cr_assert_eq(scan_whole(b.p, b.n, r), 2);
    expect_proto(&r[1], RL_HTTP_NONE, 24);
    b.n = 24;
    frame_hdr(&b, 0, 4, 0, 0);
    frame_hdr(&b, 0, 1, 0x4, 2); /* an even stream: the server's */
    cr_assert_eq(scan_whole(b.p, b.n, r), 2);
    expect_proto(&r[1], RL_HTTP_NONE, 33);
    free(b.p);
}

Test(http_reqscan, a_preface_that_is_not_one_is_an_http1_line)
{
    static const char s[] = "PRI / HTTP/1.1\r\nHost: p\r\n\r\n"
                            "PUT / HTTP/1.1\r\nHost: q\r\n\r\n";

    cr_assert_eq(scan_whole(S(s), r), 3);
    expect(&r[1], RL_REQ_REQUEST, 0, "p", 0);
    cr_assert_str_eq(r[1].method, "PRI");
    expect(&r[2], RL_REQ_REQUEST, strstr(s, "PUT") - s, "q", 0);
    check_splits(S(s));
}

Test(http_reqscan, a_head_of_the_largest_size_leaves_the_next_head_counted)
{
    /* A head of exactly RL_HTTP_HEAD_MAX bytes, then a small one: the
     * second's first byte starts a count of its own (it used to be
     * counted against the first, which turned the stream off). */
    static const char pre[] = "GET /big HTTP/1.1\r\nHost: a.example\r\nX: ";
    static const char next[] = "GET /small HTTP/1.1\r\nHost: a.example\r\n\r\n";
    size_t n = RL_HTTP_HEAD_MAX + sizeof next - 1;
    uint8_t *buf = malloc(n);
    cr_assert_not_null(buf);
    memcpy(buf, pre, sizeof pre - 1);
    memset(buf + sizeof pre - 1, 'v', RL_HTTP_HEAD_MAX - (sizeof pre - 1) - 4);
    memcpy(buf + RL_HTTP_HEAD_MAX - 4, "\r\n\r\n", 4);
    memcpy(buf + RL_HTTP_HEAD_MAX, next, sizeof next - 1);
    cr_assert_eq(scan_whole(buf, n, r), 3);
    expect(&r[1], RL_REQ_REQUEST, 0, "a.example", 0);
    expect(&r[2], RL_REQ_REQUEST, RL_HTTP_HEAD_MAX, "a.example", 0);
    free(buf);
}

/* What the scanner takes in runs (a target, header names, a Host value
 * with blanks and tabs before and after, a value's CR LF) names the
 * request as byte by byte does (check_splits feeds it cut at every byte),
 * and a Host longer than a name can be names nothing. */
Test(http_reqscan, runs_of_a_head_name_it_as_its_bytes_one_at_a_time_do)
{
    static const char s[] = "PUT /a/b/c/d/e/f/g/h/i?x=1&y=2 HTTP/1.0\r\n"
                            "X-A-Very-Long-Header-Name-Indeed: v\t1\r\n"
                            "hOsT: \t Site.Example:8443 \t\r\n"
                            "Content-Length: 3\r\n\r\nabc"
                            "GET / HTTP/1.1\r\nHost: two.example\r\n\r\n";

    cr_assert_eq(scan_whole(S(s), r), 3);
    expect(&r[1], RL_REQ_REQUEST, 0, "site.example", 8443);
    cr_assert_str_eq(r[1].method, "PUT");
    cr_assert_str_eq(r[1].target, "/a/b/c/d/e/f/g/h/i?x=1&y=2");
    expect(&r[2], RL_REQ_REQUEST, strstr(s, "GET /") - s, "two.example", 0);
    check_splits(S(s));

    char big[600];
    int n = snprintf(big, sizeof big, "GET / HTTP/1.1\r\nHost: ");
    memset(big + n, 'h', 300);
    n += 300;
    n += snprintf(big + n, sizeof big - (size_t)n, ".example\r\n\r\n");
    cr_assert_eq(scan_whole((const uint8_t *)big, (size_t)n, r), 2);
    cr_assert_eq(r[1].kind, RL_REQ_REQUEST);
    cr_assert_neq(r[1].name_src, RL_NAME_HOST, "a 308-byte Host named it");
    check_splits((const uint8_t *)big, (size_t)n);
}
