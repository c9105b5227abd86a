/* fuzz_http.c — libFuzzer target for the request and response scanners.
 *
 * Input: two bytes (big-endian) giving the length of the client's bytes,
 * the client's bytes, then the server's. The client's bytes are scanned
 * twice, in one commit and in feeds of pseudo-random sizes, each feed
 * peeked first (and peeked again: a peek changes nothing); the server's
 * bytes likewise, each scan against its own copy of the connection.
 * Invariants: no crash or leak; every offset within its feed; a peek
 * gives what its commit gives; the requests, folded per request, are the
 * same for every split; a write cut at a request's offset commits exactly
 * the requests the peek put before it; responses are the same for every
 * split. A robots.txt answer's body is read as the shim reads it
 * (policy/robotsread.c: HTTP/1.x bytes after the head, HTTP/2 DATA of
 * its stream through h2body.h), with the same outcome for every split.
 * A violated invariant aborts. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zlib.h>

#include "http/h2body.h"
#include "http/reqscan.h"
#include "http/respscan.h"
#include "http/retry_after.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAXEV 64
#define CHECK(c)                                                           \
    do {                                                                   \
        if (!(c)) {                                                        \
            fprintf(stderr, "fuzz_http: %s:%d: %s\n", __FILE__, __LINE__,  \
                    #c);                                                   \
            abort();                                                       \
        }                                                                  \
    } while (0)

struct folded {
    uint8_t kind, proto;
    uint32_t stream_id;
    char name[RL_HTTP_NAME_MAX + 1];
    char method[RL_HTTP_METHOD_MAX + 1];
};

static uint64_t rng;

static size_t next_cut(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return 1 + (size_t)(rng % 37);
}

/* Scans the client's bytes in feeds (one if `whole`); returns the folded
 * requests (at most MAXEV; the count in all). */
static size_t scan_req(const uint8_t *p, size_t n, bool whole,
                       struct folded *out, struct rl_httpconn *conn)
{
    static struct rl_req_event ev[MAXEV], pev[MAXEV], pev2[MAXEV];
    struct rl_reqscan s;
    size_t at = 0, nout = 0;

    rl_reqscan_init(&s, conn);
    while (at < n || (at == 0 && n == 0)) {
        size_t len = whole ? n - at : next_cut(), np, np2;
        long k;

        if (len > n - at)
            len = n - at;
        np = rl_reqscan_peek(&s, p + at, len, pev, MAXEV);
        np2 = rl_reqscan_peek(&s, p + at, len, pev2, MAXEV);
        CHECK(np == np2);
        k = rl_reqscan_commit(&s, p + at, len, ev, MAXEV);
        CHECK(k >= 0 && (size_t)k == np);
        for (size_t i = 0; i < np && i < MAXEV; i++) {
            CHECK(pev[i].kind == ev[i].kind && pev[i].kind == pev2[i].kind);
            CHECK(pev[i].offset == ev[i].offset);
            CHECK(pev[i].offset <= len);
            CHECK(pev[i].stream_id == ev[i].stream_id);
            CHECK(memcmp(&pev[i], &pev2[i], sizeof pev[i]) == 0);
            if (ev[i].stream_id == 0 && ev[i].kind != RL_REQ_PROTO)
                CHECK(strcmp(pev[i].name, ev[i].name) == 0);
        }
        for (size_t i = 0; i < (size_t)k && i < MAXEV; i++) {
            struct folded *f;

            if (ev[i].kind == RL_REQ_NAMED) {
                CHECK(nout > 0);
                f = &out[(nout - 1) % MAXEV];
                CHECK(f->kind == RL_REQ_REQUEST);
            } else {
                f = &out[nout++ % MAXEV];
                memset(f, 0, sizeof *f);
                f->kind = ev[i].kind;
                f->proto = ev[i].proto;
                f->stream_id = ev[i].stream_id;
            }
            memcpy(f->name, ev[i].name, sizeof f->name);
            memcpy(f->method, ev[i].method, sizeof f->method);
        }
        at += len;
        if (n == 0 || (size_t)k > MAXEV)
            break;
    }
    rl_reqscan_free(&s);
    return nout;
}

/* A write cut at a request's offset commits the requests before it. */
static void short_write(const uint8_t *p, size_t n)
{
    static struct rl_req_event pev[MAXEV], ev[MAXEV];
    struct rl_httpconn conn = {0};
    struct rl_reqscan s;
    size_t np, want = 0, cut = 0, nreq = 0;
    long k;

    rl_reqscan_init(&s, &conn);
    np = rl_reqscan_peek(&s, p, n, pev, MAXEV);
    if (np > MAXEV)
        np = MAXEV;
    for (size_t i = 0; i < np; i++)
        if (pev[i].kind == RL_REQ_REQUEST)
            nreq++;
    if (nreq > 0) {
        size_t pick = next_cut() % nreq, j = 0;

        for (size_t i = 0; i < np; i++) {
            if (pev[i].kind != RL_REQ_REQUEST)
                continue;
            if (j++ == pick) {
                cut = pev[i].offset;
                break;
            }
            want++;
        }
        k = rl_reqscan_commit(&s, p, cut, ev, MAXEV);
        CHECK(k >= 0 && k <= MAXEV);
        j = 0;
        for (long i = 0; i < k; i++) {
            if (ev[i].kind != RL_REQ_REQUEST)
                continue;
            j++;
        }
        CHECK(j == want);
    }
    rl_reqscan_free(&s);
}

struct rfold {
    uint8_t kind, proto;
    uint16_t status;
    uint32_t stream_id;
    char ra[RL_HTTP_RETRY_AFTER_MAX + 1];
    char name[RL_HTTP_NAME_MAX + 1];
};

/* What the robots.txt bodies of a scan gave: how many were read, and
 * their delays summed. */
struct robots_out {
    unsigned read;
    uint64_t ns;
};

static const struct rl_robots_zlib zlib = {inflateInit2_, inflate};
static struct rl_robots_body body;
static struct rl_h2body h2body;
static bool body_going, body_h2;

/* The body going takes buf[0..n); one that ended is counted. */
static void body_feed(const uint8_t *buf, size_t n, struct robots_out *ro)
{
    uint64_t ns;

    if (!body_going)
        return;
    if (body_h2)
        rl_h2body_feed(&h2body, buf, n, &body);
    else
        rl_robots_body_feed(&body, buf, n);
    if (rl_robots_body_state(&body) == RL_ROBOTS_READING &&
        !(body_h2 && rl_h2body_done(&h2body)))
        return;
    body_going = false;
    if (rl_robots_body_state(&body) != RL_ROBOTS_READ)
        return;
    ro->read++;
    if (rl_robots_body_delay(&body, &ns))
        ro->ns += ns;
}

static void body_start(const struct rl_resp_event *e,
                       const struct rl_httpconn *conn)
{
    const char *ua = conn->robots_ua;

    rl_robots_body_init(&body, ua, strnlen(ua, RL_HTTP_UA_MAX), e->chunked,
                        e->length,
                        rl_robots_coding(e->coding, strlen(e->coding)),
                        &zlib);
    body_h2 = e->stream_id != 0;
    if (body_h2)
        rl_h2body_init(&h2body, e->stream_id, e->h2_skip);
    body_going = true;
}

static size_t scan_resp(const uint8_t *p, size_t n, bool whole,
                        struct rl_httpconn *conn, struct rfold *out,
                        struct robots_out *ro)
{
    static struct rl_resp_event ev[MAXEV];
    struct rl_respscan s;
    size_t at = 0, nout = 0;

    body_going = false;
    memset(ro, 0, sizeof *ro);

    rl_respscan_init(&s, conn);
    while (at < n) {
        size_t len = whole ? n - at : next_cut();
        long k;

        if (len > n - at)
            len = n - at;
        body_feed(p + at, len, ro);
        k = rl_respscan_feed(&s, p + at, len, ev, MAXEV);
        CHECK(k >= 0);
        for (long i = 0; i < k && i < MAXEV; i++) {
            struct rfold *f = &out[nout++ % MAXEV];
            uint64_t ns;

            CHECK(ev[i].offset <= len);
            f->kind = ev[i].kind;
            f->proto = ev[i].proto;
            f->status = ev[i].status;
            f->stream_id = ev[i].stream_id;
            memcpy(f->ra, ev[i].retry_after, sizeof f->ra);
            memcpy(f->name, ev[i].name, sizeof f->name);
            if (ev[i].has_retry_after)
                (void)rl_retry_after_parse(f->ra, strlen(f->ra),
                                           1767225600, &ns);
            if (ev[i].kind == RL_RESP_STATUS && ev[i].robots &&
                ev[i].status == 200) {
                body_start(&ev[i], conn);
                body_feed(p + at + ev[i].offset, len - ev[i].offset, ro);
            }
        }
        at += len;
        if (k > MAXEV)
            break;
    }
    rl_respscan_free(&s);
    return nout;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct folded a[MAXEV], b[MAXEV];
    static struct rfold ra[MAXEV], rb[MAXEV];
    struct robots_out oa, ob;
    struct rl_httpconn ca = {0}, cb = {0}, cc;
    size_t nreq, na, nb;
    uint64_t ns;

    if (size < 2)
        return 0;
    nreq = ((size_t)data[0] << 8 | data[1]) % (size - 1);
    data += 2;
    size -= 2;
    rng = 0x9e3779b97f4a7c15ull ^ size ^ (size > 0 ? data[0] : 0);

    na = scan_req(data, nreq, true, a, &ca);
    nb = scan_req(data, nreq, false, b, &cb);
    if (na <= MAXEV && nb <= MAXEV) {
        CHECK(na == nb);
        for (size_t i = 0; i < na; i++) {
            CHECK(a[i].kind == b[i].kind && a[i].proto == b[i].proto);
            CHECK(a[i].stream_id == b[i].stream_id);
            CHECK(strcmp(a[i].name, b[i].name) == 0);
            CHECK(strcmp(a[i].method, b[i].method) == 0);
        }
    }
    short_write(data, nreq);

    /* The responses, against the same record of requests. */
    cc = ca;
    na = scan_resp(data + nreq, size - nreq, true, &ca, ra, &oa);
    nb = scan_resp(data + nreq, size - nreq, false, &cc, rb, &ob);
    if (na <= MAXEV && nb <= MAXEV) {
        CHECK(na == nb);
        CHECK(oa.read == ob.read && oa.ns == ob.ns);
        for (size_t i = 0; i < na; i++) {
            CHECK(ra[i].kind == rb[i].kind && ra[i].status == rb[i].status);
            CHECK(ra[i].proto == rb[i].proto);
            CHECK(ra[i].stream_id == rb[i].stream_id);
            CHECK(strcmp(ra[i].ra, rb[i].ra) == 0);
            CHECK(strcmp(ra[i].name, rb[i].name) == 0);
        }
    }
    (void)rl_retry_after_parse((const char *)data, size < 64 ? size : 64,
                               (int64_t)rng % 4000000000ll, &ns);
    return 0;
}
