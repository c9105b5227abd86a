/* reqscan.c — the client→server scanner: detection, HTTP/1.x heads and
 * bodies; HTTP/2 framing is in reqscan_h2.c.
 *
 * A request head's parts are reqhead.c's.
 *
 * One byte-at-a-time state machine whose whole state is struct rl_reqscan,
 * so that a peek runs it on a copy and a split feed resumes exactly where
 * the last one stopped; bodies are skipped in bulk. */
#include "http/reqscan.h"

#include <errno.h>
#include <string.h>
#include <strings.h>

#include "http/reqscan_int.h"

static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
#define PREFACE_LEN 24u
static const char connect_m[] = "CONNECT";

void rl_reqscan_init(struct rl_reqscan *s, struct rl_httpconn *conn)
{
    memset(s, 0, sizeof *s);
    s->conn = conn;
    s->st = ST_DETECT;
    s->first = true;
}

void rl_reqscan_free(struct rl_reqscan *s)
{
    rl_hpack_free(s->hp);
    s->hp = NULL;
}

struct rl_req_event *rq_emit(struct rq_ctx *c, uint8_t kind, size_t off)
{
    struct rl_req_event *e;

    c->nev++;
    if (c->ev == NULL || c->nev > c->max)
        return NULL;
    e = &c->ev[c->nev - 1];
    memset(e, 0, sizeof *e);
    e->kind = kind;
    e->offset = off == RQ_EARLIER ? 0 : (uint32_t)(off + c->seg);
    return e;
}

void rq_none(struct rq_ctx *c, size_t off)
{
    struct rl_req_event *e;

    c->s->st = ST_OFF;
    c->s->proto = RL_HTTP_NONE;
    e = rq_emit(c, RL_REQ_PROTO, off);
    if (e != NULL)
        e->proto = RL_HTTP_NONE;
}

static void set_proto(struct rq_ctx *c, uint8_t proto, size_t off)
{
    struct rl_req_event *e;

    if (c->s->proto == proto)
        return;
    c->s->proto = proto;
    e = rq_emit(c, RL_REQ_PROTO, off);
    if (e != NULL)
        e->proto = proto;
}

struct rl_req_event *rq_cur_event(struct rq_ctx *c)
{
    if (c->cur_ev < 0 || (size_t)c->cur_ev >= c->max || c->ev == NULL)
        return NULL;
    return &c->ev[c->cur_ev];
}

void rq_fill(struct rq_ctx *c, struct rl_req_event *e)
{
    const struct rl_req_cur *r = &c->s->cur;

    memcpy(e->method, r->method, sizeof e->method);
    memcpy(e->target, r->target, sizeof e->target);
    if (e->name_src == RL_NAME_UNKNOWN && c->s->last[0] != '\0') {
        e->name_src = RL_NAME_HINT;
        memcpy(e->name, c->s->last, sizeof e->name);
    }
}

/* The current request's event, at its first byte (or 0 if that was in an
 * earlier feed). */
static void report(struct rq_ctx *c)
{
    struct rl_req_event *e;

    c->s->reported = true;
    c->cur_ev = (long)c->nev;
    e = rq_emit(c, RL_REQ_REQUEST, c->start_here ? c->start : RQ_EARLIER);
    if (e != NULL)
        rq_fill(c, e);
}

static void begin_request(struct rq_ctx *c, size_t i)
{
    struct rl_reqscan *s = c->s;

    memset(&s->cur, 0, sizeof s->cur);
    s->reported = false;
    s->head_len = 0;
    s->fr.cl = 0;
    s->cl_seen = s->te_seen = s->chunked = false;
    c->start = i;
    c->start_here = true;
    c->cur_ev = -1;
    s->st = ST_METHOD;
}

static void detect(struct rq_ctx *c, uint8_t b, size_t i)
{
    struct rl_reqscan *s = c->s;

    if (s->pre == 0 && s->st == ST_DETECT) {
        c->start = i;
        c->start_here = true;
        if (b == 0x16) {
            s->pre = 1;
            s->st = ST_TLS;
            return;
        }
        if (b == 'P') {
            s->pre = 1;
            s->st = ST_PREFACE;
            return;
        }
        begin_request(c, i);
        rq_h1_byte(c, b, i);
        return;
    }
    if (s->st == ST_TLS) {
        if (s->pre == 1 && b == 0x03) {
            s->pre = 2;
        } else if (s->pre == 2 && b <= 0x04) {
            set_proto(c, RL_HTTP_TLS, c->start_here ? c->start : RQ_EARLIER);
            s->st = ST_OFF;
        } else {
            rq_none(c, i);
        }
        return;
    }
    /* ST_PREFACE */
    if ((uint8_t)preface[s->pre] == b) {
        if (++s->pre == PREFACE_LEN) {
            set_proto(c, RL_HTTP_2, c->start_here ? c->start : RQ_EARLIER);
            if (c->commit && s->hp == NULL && rl_hpack_new(&s->hp) != 0) {
                c->err = -ENOMEM;
                rq_none(c, i + 1);
                return;
            }
            s->st = ST_H2;
            rl_h2f_init(&s->h2f, false);
        }
        return;
    }
    {
        /* Not the preface after all: its first bytes begin an HTTP/1.x
         * request line, wherever they were fed. */
        size_t k = s->pre, st = c->start;
        bool here = c->start_here;

        s->pre = 0;
        begin_request(c, i);
        c->start = st;
        c->start_here = here;
        for (size_t j = 0; j < k && s->st != ST_OFF; j++)
            rq_h1_byte(c, (uint8_t)preface[j], i);
        if (s->st != ST_OFF)
            rq_h1_byte(c, b, i);
    }
}

void rq_h1_byte(struct rq_ctx *c, uint8_t b, size_t i)
{
    struct rl_reqscan *s = c->s;
    struct rl_req_cur *r = &s->cur;

    /* Between requests the previous head's length no longer counts: the
     * byte that starts the next head starts its count (begin_request). */
    if (s->st != ST_IDLE && ++s->head_len > RL_HTTP_HEAD_MAX) {
        rq_none(c, i);
        return;
    }
    switch (s->st) {
    case ST_IDLE:
        /* Between requests: empty lines are tolerated (RFC 9112 §2.2). */
        if (b == '\r' || b == '\n')
            return;
        if (s->conn->switched) {
            rq_none(c, i);
            return;
        }
        begin_request(c, i);
        s->head_len = 1;
        /* fall through */
    case ST_METHOD:
        if (b == ' ' && r->mlen > 0) {
            r->method[r->mlen] = '\0';
            if (!s->first && !s->reported && !rq_is_method(r, "CONNECT"))
                report(c);
            s->st = ST_TARGET;
            return;
        }
        if (!rl_http_tchar(b) || r->mlen >= RL_HTTP_METHOD_MAX) {
            rq_none(c, i);
            return;
        }
        if (!s->first && !s->reported &&
            (r->mlen >= sizeof connect_m - 1 || connect_m[r->mlen] != b)) {
            r->method[r->mlen++] = (char)b;
            r->method[r->mlen] = '\0';
            report(c);
            return;
        }
        r->method[r->mlen++] = (char)b;
        r->method[r->mlen] = '\0';
        return;
    case ST_TARGET:
        if (b == ' ' && r->tlen > 0) {
            rq_target_done(s);
            s->st = ST_VER;
            s->pre = 0;
            return;
        }
        if (b <= 0x20 || b == 0x7f) {
            rq_none(c, i);
            return;
        }
        if (r->tlen < RL_HTTP_TARGET_MAX) {
            r->target[r->tlen] = (char)b;
            r->target[r->tlen + 1] = '\0';
        }
        if (r->tlen < UINT16_MAX)
            r->tlen++;
        return;
    case ST_VER:
        if (s->pre < 7) {
            if ((uint8_t)"HTTP/1."[s->pre] != b) {
                rq_none(c, i);
                return;
            }
            s->pre++;
            return;
        }
        if (s->pre == 7 && b >= '0' && b <= '9') {
            s->pre = 8;
            return;
        }
        if (s->pre == 8 && b == '\r') {
            s->pre = 9;
            return;
        }
        if (s->pre >= 8 && b == '\n') {
            if (s->first) {
                set_proto(c, RL_HTTP_1, c->start_here ? c->start : RQ_EARLIER);
                if (!rq_is_method(r, "CONNECT"))
                    report(c);
            }
            s->st = ST_HNAME;
            s->hname_len = 0;
            s->hname_long = false;
            return;
        }
        rq_none(c, i);
        return;
    case ST_HNAME:
        if (s->hname_len == 0 && !s->hname_long) {
            if (b == '\r') {
                s->st = ST_HEND_LF;
                return;
            }
            if (b == '\n') {
                rq_head_done(c, i);
                return;
            }
            if (b == ' ' || b == '\t') {
                /* obs-fold: more of the previous value; ignored */
                s->hdr = HDR_OTHER;
                s->st = ST_HVAL;
                return;
            }
        }
        if (b == ':' && (s->hname_len > 0 || s->hname_long)) {
            rq_hname_done(s);
            s->st = ST_HVAL;
            return;
        }
        if (!rl_http_tchar(b)) {
            rq_none(c, i);
            return;
        }
        if (s->hname_len >= sizeof s->hname - 1)
            s->hname_long = true;
        else
            s->hname[s->hname_len++] = (char)b;
        return;
    case ST_HEND_LF:
        if (b != '\n') {
            rq_none(c, i);
            return;
        }
        rq_head_done(c, i);
        return;
    case ST_HVAL:
        if (b == '\r' || b == '\n') {
            rq_hval_done(s);
            s->hname_len = 0;
            s->hname_long = false;
            s->st = b == '\r' ? ST_HVAL_LF : ST_HNAME;
            return;
        }
        if ((b < 0x20 && b != '\t') || b == 0x7f || !rq_hval_byte(s, b))
            rq_none(c, i);
        return;
    case ST_HVAL_LF:
        if (b != '\n') {
            rq_none(c, i);
            return;
        }
        s->st = ST_HNAME;
        return;
    default:
        rq_none(c, i);
        return;
    }
}

/* Where a run from buf[i] must stop: the feed's end, or the head's bound. */
static size_t head_end(const struct rl_reqscan *s, size_t i, size_t n)
{
    size_t room = RL_HTTP_HEAD_MAX - s->head_len;
    return n - i < room ? n : i + room;
}

/* A request target's bytes up to its end, in one run: bytes above SP but
 * DEL (what rq_h1_byte would take one at a time), kept up to
 * RL_HTTP_TARGET_MAX. */
static size_t target_run(struct rl_reqscan *s, const uint8_t *buf, size_t i,
                         size_t n)
{
    struct rl_req_cur *r = &s->cur;
    size_t k = rl_http_target_run(buf, i, head_end(s, i, n)), j = i + k;
    if (r->tlen < RL_HTTP_TARGET_MAX) {
        size_t keep = RL_HTTP_TARGET_MAX - r->tlen < k
                          ? RL_HTTP_TARGET_MAX - r->tlen
                          : k;
        memcpy(r->target + r->tlen, buf + i, keep);
        r->target[r->tlen + keep] = '\0';
    }
    r->tlen = (uint16_t)((size_t)(UINT16_MAX - r->tlen) < k ? UINT16_MAX
                                                          : r->tlen + k);
    s->head_len += (uint32_t)k;
    return j;
}

/* The Host value's bytes up to its line's end, as rq_hval_byte takes them
 * one at a time: leading blanks skipped, kept while they fit (a longer
 * name is no name). */
static size_t host_run(struct rl_reqscan *s, const uint8_t *buf, size_t i,
                       size_t n)
{
    struct rl_req_cur *r = &s->cur;
    size_t j = i + rl_http_text_run(buf, i, head_end(s, i, n)), from = i;
    if (r->hlen == 0)
        while (from < j && (buf[from] == ' ' || buf[from] == '\t'))
            from++;
    size_t k = j - from, room = sizeof r->host - 1 - r->hlen;
    if (k > room) {
        k = room;
        r->host_ok = false;
    }
    memcpy(r->host + r->hlen, buf + from, k);
    r->hlen = (uint16_t)(r->hlen + k);
    s->head_len += (uint32_t)(j - i);
    return j;
}

/* Bytes of a head taken in one run where one byte at a time through
 * rq_h1_byte would only go on (most of a head is such bytes): returns
 * where the run stopped (i: none; rq_h1_byte then takes the byte). */
static size_t head_run(struct rq_ctx *c, const uint8_t *buf, size_t i,
                       size_t n)
{
    struct rl_reqscan *s = c->s;
    size_t j;

    if (s->head_len >= RL_HTTP_HEAD_MAX)
        return i;
    switch (s->st) {
    case ST_TARGET:
        return target_run(s, buf, i, n);
    case ST_HNAME:
        return rl_http_hname_run(s->hname, sizeof s->hname, &s->hname_len,
                                 s->hname_long, &s->head_len, buf, i, n);
    case ST_VER:
        if (s->pre == 0 && n - i >= 10 &&
            s->head_len <= RL_HTTP_HEAD_MAX - 9 &&
            memcmp(buf + i, "HTTP/1.", 7) == 0 && buf[i + 7] >= '0' &&
            buf[i + 7] <= '9' && buf[i + 8] == '\r') {
            /* The version and its CR at once; the LF ends the line
             * through rq_h1_byte. */
            s->pre = 9;
            s->head_len += 9;
            return i + 9;
        }
        return i;
    case ST_HVAL:
        if (s->hdr == HDR_OTHER) {
            /* A value nobody reads (User-Agent, Cookie ...). */
            j = i + rl_http_text_run(buf, i, n);
            if (j - i > RL_HTTP_HEAD_MAX - s->head_len) {
                rq_none(c, i + (RL_HTTP_HEAD_MAX - s->head_len));
                return i;
            }
            s->head_len += (uint32_t)(j - i);
            if (j > i)
                return j;
        }
        if (buf[i] == '\r' && n - i >= 2 && buf[i + 1] == '\n' &&
            s->head_len <= RL_HTTP_HEAD_MAX - 2) {
            /* A value's line end at once, as its CR and LF one at a
             * time through rq_h1_byte: the value done, a name next. */
            rq_hval_done(s);
            s->hname_len = 0;
            s->hname_long = false;
            s->st = ST_HNAME;
            s->head_len += 2;
            return i + 2;
        }
        return s->hdr == HDR_HOST ? host_run(s, buf, i, n) : i;
    default:
        return i;
    }
}

static long scan(struct rq_ctx *c, const uint8_t *buf, size_t n)
{
    struct rl_reqscan *s = c->s;
    size_t i = 0;

    c->start = 0;
    c->start_here = false;
    c->cur_ev = -1;
    while (i < n) {
        switch (s->st) {
        case ST_OFF:
            return (long)c->nev;
        case ST_DETECT:
        case ST_TLS:
        case ST_PREFACE:
            detect(c, buf[i], i);
            i++;
            break;
        case ST_BODY: {
            size_t take = n - i < s->remain ? n - i : (size_t)s->remain;

            s->remain -= take;
            i += take;
            if (s->remain == 0)
                s->st = ST_IDLE;
            break;
        }
        case ST_CHUNKED: {
            bool done;
            long used = rl_chunked_feed(&s->ch, buf + i, n - i, &done);

            if (used < 0) {
                rq_none(c, i);
                return c->err != 0 ? c->err : (long)c->nev;
            }
            i += (size_t)used;
            if (done)
                s->st = ST_IDLE;
            break;
        }
        case ST_H2:
            i = rq_h2(c, buf, n, i);
            break;
        default: {
            size_t j = head_run(c, buf, i, n);

            if (j > i || s->st == ST_OFF) {
                i = j;
                break;
            }
            rq_h1_byte(c, buf[i], i);
            i++;
            break;
        }
        }
    }
    return c->err != 0 ? c->err : (long)c->nev;
}

size_t rl_reqscan_peek(const struct rl_reqscan *s, const uint8_t *buf,
                       size_t n, struct rl_req_event *ev, size_t max)
{
    struct rl_reqscan copy;
    struct rq_ctx c = {.s = &copy, .ev = ev, .max = max};

    if (s->st == ST_OFF)
        return 0;
    copy = *s;
    scan(&c, buf, n);
    return c.nev;
}

long rl_reqscan_commit(struct rl_reqscan *s, const uint8_t *buf, size_t k,
                       struct rl_req_event *ev, size_t max)
{
    struct rq_ctx c = {.s = s, .commit = true, .ev = ev, .max = max};

    if (s->st == ST_OFF)
        return 0;
    return scan(&c, buf, k);
}

size_t rl_reqscan_peekv(const struct rl_reqscan *s, const struct iovec *iov,
                        size_t n, struct rl_req_event *ev, size_t max)
{
    struct rl_reqscan copy;
    size_t total = 0, base = 0;

    if (s->st == ST_OFF)
        return 0;
    copy = *s;
    for (size_t i = 0; i < n && copy.st != ST_OFF; i++) {
        size_t len = iov[i].iov_len;
        struct rq_ctx c = {.s = &copy,
                           .ev = ev != NULL && total < max ? ev + total : NULL,
                           .max = total < max ? max - total : 0};

        if (len > UINT32_MAX - base)
            len = UINT32_MAX - base; /* offsets are 32-bit: the rest unseen */
        c.seg = base;
        scan(&c, iov[i].iov_base, len);
        total += c.nev;
        base += len;
        if (len < iov[i].iov_len)
            break;
    }
    return total;
}
