/* http_streams.h — the test streams the http suites share: HTTP/2 frames
 * built with nghttp2's own HPACK deflater, and a request scan run over a
 * stream cut into feeds, its events put together per request. */
#ifndef RL_TEST_HTTP_STREAMS_H
#define RL_TEST_HTTP_STREAMS_H

#include <criterion/criterion.h>
#include <nghttp2/nghttp2.h>
#include <stdlib.h>
#include <string.h>

#include "http/reqscan.h"

struct buf {
    uint8_t *p;
    size_t n, cap;
};

static inline void put(struct buf *b, const void *p, size_t n)
{
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
        cr_assert_not_null(b->p);
    }
    memcpy(b->p + b->n, p, n);
    b->n += n;
}

static inline void puts_(struct buf *b, const char *s)
{
    put(b, s, strlen(s));
}

static inline void frame_hdr(struct buf *b, size_t len, uint8_t type,
                             uint8_t flags, uint32_t stream)
{
    uint8_t h[9] = {(uint8_t)(len >> 16), (uint8_t)(len >> 8), (uint8_t)len,
                    type, flags, (uint8_t)(stream >> 24),
                    (uint8_t)(stream >> 16), (uint8_t)(stream >> 8),
                    (uint8_t)stream};

    put(b, h, 9);
}

/* A header block for `nv` (name, value pairs, NULL-terminated). */
static inline size_t hpack(nghttp2_hd_deflater *d, const char *const *nv,
                           uint8_t *out, size_t cap)
{
    nghttp2_nv v[16];
    size_t n = 0;
    ssize_t r;

    for (; nv[2 * n] != NULL; n++) {
        v[n].name = (uint8_t *)nv[2 * n];
        v[n].value = (uint8_t *)nv[2 * n + 1];
        v[n].namelen = strlen(nv[2 * n]);
        v[n].valuelen = strlen(nv[2 * n + 1]);
        v[n].flags = NGHTTP2_NV_FLAG_NONE;
    }
    r = nghttp2_hd_deflate_hd(d, out, cap, v, n);
    cr_assert_gt(r, 0);
    return (size_t)r;
}

/* HTTP/2, a client's side: the preface, SETTINGS, and HEADERS built by
 * nghttp2: streams 1, 3 (padded, priority, CONTINUATION), trailers on 1,
 * stream 5 (HEAD). */
static inline void h2_stream(struct buf *b)
{
    nghttp2_hd_deflater *d;
    uint8_t blk[512];
    static const char *const r1[] = {":method", "GET", ":scheme", "https",
                                     ":authority", "h2.example", ":path",
                                     "/one", NULL};
    static const char *const r3[] = {":method", "POST", ":scheme", "https",
                                     ":authority", "h2.example:8443",
                                     ":path", "/three", NULL};
    static const char *const tr[] = {"x-checksum", "abc", NULL};
    static const char *const r5[] = {":method", "HEAD", ":scheme", "https",
                                     ":authority", "h2.example", ":path",
                                     "/one", NULL};
    static const uint8_t pad[7], prio[5] = {0, 0, 0, 0, 15};
    size_t n;

    cr_assert_eq(nghttp2_hd_deflate_new(&d, 4096), 0);
    puts_(b, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
    frame_hdr(b, 6, 4, 0, 0); /* SETTINGS */
    put(b, "\x00\x03\x00\x00\x00\x64", 6);
    frame_hdr(b, 4, 8, 0, 0); /* WINDOW_UPDATE */
    put(b, "\x00\x0f\x00\x01", 4);
    n = hpack(d, r1, blk, sizeof blk);
    frame_hdr(b, n, 1, 0x4, 1); /* HEADERS, END_HEADERS */
    put(b, blk, n);
    /* Stream 3: padded, with priority, split into a CONTINUATION; its
     * :authority comes from the dynamic table stream 1 filled. */
    n = hpack(d, r3, blk, sizeof blk);
    frame_hdr(b, 1 + 5 + 3 + 7, 1, 0x8 | 0x20, 3);
    put(b, "\x07", 1);
    put(b, prio, 5);
    put(b, blk, 3);
    put(b, pad, 7);
    frame_hdr(b, 4, 0, 0, 3); /* DATA is not allowed here ... */
    b->n -= 9;                /* ... so it is not sent */
    frame_hdr(b, n - 3, 9, 0x4, 3);
    put(b, blk + 3, n - 3);
    frame_hdr(b, 5, 0, 0, 3); /* DATA that looks like a HEADERS frame */
    put(b, "\x00\x00\x01\x01\x04", 5);
    n = hpack(d, tr, blk, sizeof blk); /* trailers on stream 1 */
    frame_hdr(b, n, 1, 0x4 | 0x1, 1);
    put(b, blk, n);
    n = hpack(d, r5, blk, sizeof blk);
    frame_hdr(b, n, 1, 0x4 | 0x1, 5);
    put(b, blk, n);
    nghttp2_hd_deflate_del(d);
}

/* One request as the events of a scan tell it, whatever the feeds. */
struct req {
    uint8_t kind, proto, name_src;
    uint16_t port;
    uint32_t stream_id;
    size_t off;   /* absolute */
    size_t feed;  /* where the feed that reported it began */
    char method[RL_HTTP_METHOD_MAX + 1];
    char target[RL_HTTP_TARGET_MAX + 1];
    char name[RL_HTTP_NAME_MAX + 1];
};

#define MAXREQ 64

/* Commits `n` bytes cut at the (sorted) positions cuts[0..ncut); returns
 * the requests, NAMED events folded into the request they name. With
 * `peek`, each feed is peeked first and must give what its commit gives,
 * names aside (HTTP/2 names are known on commit only). */
static inline size_t scan_split(const uint8_t *p, size_t n,
                                const size_t *cuts, size_t ncut,
                                struct req *out, bool peek)
{
    struct rl_httpconn conn = {0};
    struct rl_reqscan s;
    static struct rl_req_event ev[MAXREQ], pev[MAXREQ];
    size_t nout = 0, at = 0;

    rl_reqscan_init(&s, &conn);
    for (size_t c = 0; c <= ncut; c++) {
        size_t end = c < ncut ? cuts[c] : n, np = 0;
        long k;

        if (peek)
            np = rl_reqscan_peek(&s, p + at, end - at, pev, MAXREQ);
        k = rl_reqscan_commit(&s, p + at, end - at, ev, MAXREQ);
        cr_assert_geq(k, 0);
        if (peek) {
            cr_assert_eq(np, (size_t)k, "peek %zu events, commit %ld", np, k);
            for (long i = 0; i < k; i++) {
                cr_assert_eq(pev[i].kind, ev[i].kind);
                cr_assert_eq(pev[i].offset, ev[i].offset);
                cr_assert_eq(pev[i].stream_id, ev[i].stream_id);
                if (ev[i].stream_id == 0 && ev[i].kind != RL_REQ_PROTO) {
                    cr_assert_str_eq(pev[i].name, ev[i].name);
                    cr_assert_str_eq(pev[i].method, ev[i].method);
                }
            }
        }
        for (long i = 0; i < k; i++) {
            struct rl_req_event *e = &ev[i];
            struct req *r;

            cr_assert_leq(e->offset, end - at);
            if (e->kind == RL_REQ_NAMED) {
                cr_assert_gt(nout, 0);
                r = &out[nout - 1];
                cr_assert_eq(r->kind, RL_REQ_REQUEST);
            } else {
                cr_assert_lt(nout, MAXREQ);
                r = &out[nout++];
                memset(r, 0, sizeof *r);
                r->kind = e->kind;
                r->proto = e->proto;
                r->off = at + e->offset;
                r->feed = at;
                r->stream_id = e->stream_id;
            }
            if (e->kind != RL_REQ_PROTO) {
                r->name_src = e->name_src;
                r->port = e->port;
                memcpy(r->method, e->method, sizeof r->method);
                memcpy(r->target, e->target, sizeof r->target);
                memcpy(r->name, e->name, sizeof r->name);
            }
        }
        at = end;
    }
    rl_reqscan_free(&s);
    return nout;
}

static inline size_t scan_whole(const uint8_t *p, size_t n, struct req *out)
{
    return scan_split(p, n, NULL, 0, out, true);
}

/* Every cut in two, and byte by byte, gives the requests one feed gives;
 * a request is reported at its first byte or at the start of a later
 * feed. */
static inline void check_splits(const uint8_t *p, size_t n)
{
    static struct req whole[MAXREQ], part[MAXREQ];
    size_t nw = scan_whole(p, n, whole), np;
    size_t *cuts = malloc((n + 1) * sizeof *cuts);

    cr_assert_not_null(cuts);
    for (size_t mode = 0; mode <= n; mode++) {
        size_t ncut;

        if (mode < n) {
            cuts[0] = mode;
            ncut = 1;
        } else {
            for (size_t i = 0; i + 1 < n; i++)
                cuts[i] = i + 1;
            ncut = n > 0 ? n - 1 : 0;
        }
        np = scan_split(p, n, cuts, ncut, part, true);
        cr_assert_eq(np, nw, "cut %zu: %zu events, one feed %zu", mode, np,
                     nw);
        for (size_t i = 0; i < nw; i++) {
            cr_assert_eq(part[i].kind, whole[i].kind, "cut %zu ev %zu", mode,
                         i);
            cr_assert_eq(part[i].proto, whole[i].proto);
            cr_assert_eq(part[i].stream_id, whole[i].stream_id);
            cr_assert_str_eq(part[i].name, whole[i].name, "cut %zu ev %zu",
                             mode, i);
            cr_assert_eq(part[i].port, whole[i].port);
            cr_assert_str_eq(part[i].method, whole[i].method);
            cr_assert_str_eq(part[i].target, whole[i].target);
            cr_assert(part[i].off == whole[i].off ||
                          (part[i].off == part[i].feed &&
                           whole[i].off < part[i].feed),
                      "cut %zu ev %zu at %zu, one feed at %zu", mode, i,
                      part[i].off, whole[i].off);
        }
    }
    free(cuts);
}

#endif
