/* respscan.c — status lines, the headers that frame a body and
 * Retry-After; HTTP/2 :status through the frame splitter. */
#include "http/respscan.h"

#include <errno.h>
#include <string.h>
#include <strings.h>

enum {
    RS_DETECT, RS_OFF, RS_STATUS, RS_REASON, RS_HNAME, RS_HEND_LF, RS_HVAL,
    RS_HVAL_LF, RS_BODY, RS_CHUNKED, RS_CLOSE, RS_H2,
};
enum { HDR_OTHER, HDR_CL, HDR_TE, HDR_RA, HDR_CE };

struct ctx {
    struct rl_respscan *s;
    struct rl_resp_event *ev;
    size_t max, nev, base;
    int err;
};

void rl_respscan_init(struct rl_respscan *s, struct rl_httpconn *conn)
{
    memset(s, 0, sizeof *s);
    s->conn = conn;
}

void rl_respscan_free(struct rl_respscan *s)
{
    rl_hpack_free(s->hp);
    s->hp = NULL;
}

static struct rl_resp_event *emit(struct ctx *c, uint8_t kind, size_t off)
{
    struct rl_resp_event *e;

    c->nev++;
    if (c->ev == NULL || c->nev > c->max)
        return NULL;
    e = &c->ev[c->nev - 1];
    memset(e, 0, sizeof *e);
    e->kind = kind;
    e->offset = (uint32_t)off;
    return e;
}

static void set_proto(struct ctx *c, uint8_t proto, size_t off)
{
    struct rl_resp_event *e;

    c->s->proto = proto;
    if (proto == RL_HTTP_NONE)
        c->s->st = RS_OFF;
    e = emit(c, RL_RESP_PROTO, off);
    if (e != NULL)
        e->proto = proto;
}

static void status_event(struct ctx *c, size_t off, uint16_t status,
                         const struct rl_http_sent *sent, bool paired,
                         const char *ra, bool has_ra)
{
    struct rl_resp_event *e = emit(c, RL_RESP_STATUS, off);
    const char *name;

    if (e == NULL)
        return;
    e->status = status;
    e->paired = paired;
    e->stream_id = sent->stream_id;
    if (paired) {
        e->method = sent->method;
        name = rl_httpconn_name(c->s->conn, sent->slot, sent->gen);
        if (name != NULL)
            memcpy(e->name, name, strlen(name) + 1);
    }
    if (has_ra) {
        e->has_retry_after = true;
        memcpy(e->retry_after, ra, strlen(ra) + 1);
    }
    if (!paired || !sent->robots)
        return;
    e->robots = true;
    if (c->s->proto == RL_HTTP_2) {
        const struct rl_hpack_fields *hf = rl_hpack_fields(c->s->hp);

        e->length = c->s->hb_end ? 0 : -1;
        e->h2_skip = c->s->h2f.left;
        if (hf->coding_many || hf->coding_long)
            memcpy(e->coding, RL_RESP_CODINGS, sizeof RL_RESP_CODINGS);
        else
            memcpy(e->coding, hf->coding, strlen(hf->coding) + 1);
    } else {
        const struct rl_respscan *s = c->s;

        e->chunked = s->te_seen && s->chunked;
        e->length = !s->te_seen && s->cl_seen ? (int64_t)s->fr.cl : -1;
        if (s->ce_many)
            memcpy(e->coding, RL_RESP_CODINGS, sizeof RL_RESP_CODINGS);
        else if (s->ce_seen)
            memcpy(e->coding, s->ce, s->celen + 1u);
    }
}

static void head_begin(struct rl_respscan *s)
{
    s->st = RS_STATUS;
    s->pre = 0;
    s->status = 0;
    s->head_len = 0;
    s->fr.cl = 0;
    s->cl_seen = s->te_seen = s->chunked = s->ra_seen = false;
    s->ce_seen = s->ce_many = false;
    s->celen = 0;
    s->ralen = 0;
    s->ra[0] = '\0';
    s->hname_len = 0;
    s->hname_long = false;
}

/* The head ended at buf[i]: pair it, report it, frame its body. */
static void head_done(struct ctx *c, size_t i)
{
    struct rl_respscan *s = c->s;
    const struct rl_httpconn *hc = s->conn;
    struct rl_http_sent sent = {0};
    bool paired, interim = s->status < 200 && s->status != 101;
    bool asked = hc->fifo_len > 0 && hc->fifo[hc->fifo_head].upgrade;

    if (s->status == 101 && !asked) {
        /* A 101 the request it would answer never asked for (SPEC §12):
         * a malformed response, which changes nothing. Not an answer,
         * and the scans go on; what follows is read as what it is. */
        head_begin(s);
        return;
    }
    /* An interim response answers the request at the FIFO's head but does
     * not end it. */
    if (interim) {
        paired = s->conn->fifo_len > 0;
        if (paired)
            sent = s->conn->fifo[s->conn->fifo_head];
    } else {
        paired = rl_httpconn_pop(s->conn, &sent);
    }
    status_event(c, i + 1, s->status, &sent, paired, s->ra, s->ra_seen);
    if (s->status == 101) {
        s->conn->switched = true;
        set_proto(c, RL_HTTP_NONE, i + 1);
        return;
    }
    if (interim || s->status == 204 || s->status == 304 ||
        (paired && sent.method == RL_HTTP_M_HEAD)) {
        head_begin(s);
        return;
    }
    if (paired && sent.method == RL_HTTP_M_CONNECT && s->status < 300) {
        s->st = RS_DETECT; /* the tunnel: another stream */
        s->pre = 0;
        s->proto = RL_HTTP_UNKNOWN;
        return;
    }
    if (s->te_seen) {
        rl_chunked_init(&s->ch);
        s->st = s->chunked ? RS_CHUNKED : RS_CLOSE;
    } else if (s->cl_seen) {
        s->remain = s->fr.cl;
        s->st = RS_BODY;
        if (s->fr.cl == 0)
            head_begin(s);
    } else {
        s->st = RS_CLOSE;
    }
}

static void hname_done(struct rl_respscan *s)
{
    s->hname[s->hname_len] = '\0';
    s->hdr = HDR_OTHER;
    if (s->hname_long)
        return;
    /* By length first: most names are none of these. */
    if (s->hname_len == 14 && strcasecmp(s->hname, "content-length") == 0) {
        s->hdr = HDR_CL;
        rl_http_cl_start(&s->fr);
        s->cl_seen = true;
    } else if (s->hname_len == 17 &&
               strcasecmp(s->hname, "transfer-encoding") == 0) {
        s->hdr = HDR_TE;
        s->fr.te_len = 0;
        s->te_seen = true;
    } else if (s->hname_len == 11 &&
               strcasecmp(s->hname, "retry-after") == 0) {
        s->hdr = HDR_RA;
        s->ralen = 0;
        s->ra_seen = true;
    } else if (s->hname_len == 16 &&
               strcasecmp(s->hname, "content-encoding") == 0) {
        /* Read for robots.txt's body (SPEC §14); a second one makes a
         * list of codings. */
        s->hdr = HDR_CE;
        s->ce_many |= s->ce_seen;
        s->ce_seen = true;
        s->celen = 0;
    }
}

static bool hval_byte(struct rl_respscan *s, uint8_t b)
{
    bool ows = b == ' ' || b == '\t';

    switch (s->hdr) {
    case HDR_CL:
        return rl_http_cl_byte(&s->fr, b);
    case HDR_TE:
        rl_http_te_byte(&s->fr, b);
        return true;
    case HDR_RA:
        if (!(ows && s->ralen == 0) && s->ralen < RL_HTTP_RETRY_AFTER_MAX)
            s->ra[s->ralen++] = (char)b;
        return true;
    case HDR_CE:
        if (ows && s->celen == 0)
            return true;
        if (s->celen < RL_HTTP_CODING_MAX)
            s->ce[s->celen++] = (char)b;
        else
            s->ce_many = true; /* too long for any coding read */
        return true;
    default:
        return true;
    }
}

static void hval_done(struct rl_respscan *s)
{
    if (s->hdr == HDR_TE) {
        s->chunked = rl_http_te_chunked(&s->fr);
    } else if (s->hdr == HDR_RA) {
        while (s->ralen > 0 && (s->ra[s->ralen - 1] == ' ' ||
                                s->ra[s->ralen - 1] == '\t'))
            s->ralen--;
        s->ra[s->ralen] = '\0';
    } else if (s->hdr == HDR_CE) {
        while (s->celen > 0 && (s->ce[s->celen - 1] == ' ' ||
                                s->ce[s->celen - 1] == '\t'))
            s->celen--;
        s->ce[s->celen] = '\0';
    }
    s->hdr = HDR_OTHER;
}

/* One byte of an HTTP/1.x head. */
static void h1_byte(struct ctx *c, uint8_t b, size_t i)
{
    struct rl_respscan *s = c->s;

    if (++s->head_len > RL_HTTP_HEAD_MAX)
        goto bad;
    switch (s->st) {
    case RS_STATUS:
        /* "HTTP/1." DIGIT SP 3DIGIT, then SP reason or the line's end */
        if (s->pre < 7) {
            if ((uint8_t)"HTTP/1."[s->pre] != b)
                goto bad;
        } else if (s->pre == 7 || (s->pre >= 9 && s->pre <= 11)) {
            if (b < '0' || b > '9' || (s->pre == 9 && b == '0'))
                goto bad;
            if (s->pre >= 9)
                s->status = (uint16_t)(s->status * 10 + (b - '0'));
        } else if (s->pre == 8) {
            if (b != ' ')
                goto bad;
        } else if (b == ' ' || b == '\r') {
            s->st = RS_REASON;
        } else if (b == '\n') {
            s->st = RS_HNAME;
        } else {
            goto bad;
        }
        s->pre++;
        return;
    case RS_REASON:
        if (b == '\n')
            s->st = RS_HNAME;
        return;
    case RS_HNAME:
        if (s->hname_len == 0 && !s->hname_long) {
            if (b == '\r') {
                s->st = RS_HEND_LF;
                return;
            }
            if (b == '\n') {
                head_done(c, i);
                return;
            }
            if (b == ' ' || b == '\t') {
                s->hdr = HDR_OTHER;
                s->st = RS_HVAL;
                return;
            }
        }
        if (b == ':' && (s->hname_len > 0 || s->hname_long)) {
            hname_done(s);
            s->st = RS_HVAL;
            return;
        }
        if (!rl_http_tchar(b))
            goto bad;
        if (s->hname_len >= sizeof s->hname - 1)
            s->hname_long = true;
        else
            s->hname[s->hname_len++] = (char)b;
        return;
    case RS_HEND_LF:
        if (b != '\n')
            goto bad;
        head_done(c, i);
        return;
    case RS_HVAL:
        if (b == '\r' || b == '\n') {
            hval_done(s);
            s->hname_len = 0;
            s->hname_long = false;
            s->st = b == '\r' ? RS_HVAL_LF : RS_HNAME;
            return;
        }
        if ((b < 0x20 && b != '\t') || b == 0x7f || !hval_byte(s, b))
            goto bad;
        return;
    case RS_HVAL_LF:
        if (b != '\n')
            goto bad;
        s->st = RS_HNAME;
        return;
    default:
        goto bad;
    }
bad:
    set_proto(c, RL_HTTP_NONE, i);
}

/* HTTP/2: the server's frames. */
static bool h2_frame(void *ctx, const struct rl_h2f *f, size_t start,
                     bool here)
{
    struct ctx *c = ctx;

    (void)start;
    (void)here;
    if (f->type == RL_H2_HEADERS || f->type == RL_H2_PUSH_PROMISE) {
        c->s->hb_push = f->type == RL_H2_PUSH_PROMISE;
        /* (Its CONTINUATION frames carry no END_STREAM of their own.) */
        c->s->hb_end = f->type == RL_H2_HEADERS &&
                       (f->flags & RL_H2_END_STREAM) != 0;
    }
    return true;
}

static void h2_frag(void *ctx, const struct rl_h2f *f, const uint8_t *p,
                    size_t n, bool final)
{
    struct ctx *c = ctx;

    (void)f;
    rl_hpack_feed(c->s->hp, p, n, final);
}

static void h2_block_end(void *ctx, const struct rl_h2f *f, size_t end)
{
    struct ctx *c = ctx;
    const struct rl_hpack_fields *hf;
    struct rl_http_sent sent = {.stream_id = f->hb_stream};
    bool paired;

    if (c->s->hb_push || rl_hpack_broken(c->s->hp))
        return;
    hf = rl_hpack_fields(c->s->hp);
    if (hf->status == 0)
        return; /* trailers */
    if (hf->status == 101)
        return; /* HTTP/2 has no 101 (RFC 9113 §8.6): malformed, no answer */
    /* A final response ends the stream's wait; an interim one does not. */
    paired = rl_httpconn_stream(c->s->conn, f->hb_stream, hf->status >= 200,
                                &sent);
    status_event(c, c->base + end, (uint16_t)hf->status, &sent, paired,
                 hf->retry_after, hf->has_retry_after);
}

static const struct rl_h2f_ops h2_ops = {h2_frame, h2_frag, h2_block_end,
                                          NULL};

static void h2_start(struct ctx *c, size_t off)
{
    struct rl_respscan *s = c->s;

    if (s->hp == NULL && rl_hpack_new(&s->hp) != 0) {
        c->err = -ENOMEM;
        set_proto(c, RL_HTTP_NONE, off);
        return;
    }
    set_proto(c, RL_HTTP_2, off);
    rl_h2f_init(&s->h2f, true);
    s->st = RS_H2;
}

/* The stream's first bytes: a status line, the server's SETTINGS (HTTP/2),
 * or anything else (TLS included): not parsed. */
static size_t detect(struct ctx *c, const uint8_t *buf, size_t n, size_t i)
{
    struct rl_respscan *s = c->s;
    size_t bad, start = s->pre == 0 ? i : 0;

    if (s->pre == 0 && buf[i] == 'H') {
        set_proto(c, RL_HTTP_1, i);
        head_begin(s);
        return i;
    }
    while (i < n && s->pre < 9)
        s->det[s->pre++] = buf[i++];
    if (s->pre < 9)
        return i;
    if (s->det[3] != RL_H2_SETTINGS || (s->det[4] & 1) != 0 ||
        (s->det[5] | s->det[6] | s->det[7] | s->det[8]) != 0 ||
        (((uint32_t)s->det[0] << 16 | s->det[1] << 8 | s->det[2]) % 6) != 0) {
        set_proto(c, RL_HTTP_NONE, start);
        return n;
    }
    h2_start(c, start);
    if (s->st != RS_H2)
        return n;
    c->base = 0;
    if (rl_h2f_feed(&s->h2f, s->det, 9, &h2_ops, c, &bad) != 0)
        set_proto(c, RL_HTTP_NONE, i);
    return i;
}

/* The bytes of a reason phrase, or of a header value nothing reads, up to
 * its line's end: what one byte at a time through h1_byte would accept,
 * skipped in one loop (most of a head is such bytes). Stops where h1_byte
 * must look: the line's end, a byte a value may not hold, the head's
 * bound. */
static size_t skip_text(struct rl_respscan *s, const uint8_t *buf, size_t i,
                        size_t n)
{
    size_t j = i, room = RL_HTTP_HEAD_MAX - s->head_len;

    if (n - i < room)
        room = n - i;
    if (s->st == RS_REASON) {
        const uint8_t *lf = memchr(buf + i, '\n', room);

        j = lf != NULL ? (size_t)(lf - buf) : i + room;
    } else {
        /* CR, LF, or not HTTP: h1_byte's to say */
        j = i + rl_http_text_run(buf, i, i + room);
    }
    s->head_len += (uint32_t)(j - i);
    return j;
}

/* A status line's first 13 bytes at once ("HTTP/1.1 200 " or "... 200\r"),
 * as h1_byte takes them one at a time; false (nothing taken) for any other
 * shape, which h1_byte then judges. */
static bool status_line(struct rl_respscan *s, const uint8_t *p)
{
    if (memcmp(p, "HTTP/1.", 7) != 0 || p[7] < '0' || p[7] > '9' ||
        p[8] != ' ' || p[9] < '1' || p[9] > '9' || p[10] < '0' ||
        p[10] > '9' || p[11] < '0' || p[11] > '9' ||
        (p[12] != ' ' && p[12] != '\r'))
        return false;
    s->status = (uint16_t)((p[9] - '0') * 100 + (p[10] - '0') * 10 +
                           (p[11] - '0'));
    s->pre = 13;
    s->head_len += 13;
    s->st = RS_REASON;
    return true;
}

long rl_respscan_feed(struct rl_respscan *s, const uint8_t *buf, size_t n,
                      struct rl_resp_event *ev, size_t max)
{
    struct ctx c = {.s = s, .ev = ev, .max = max};
    size_t i = 0;

    while (i < n) {
        switch (s->st) {
        case RS_OFF:
        case RS_CLOSE:
            return (long)c.nev;
        case RS_DETECT:
            i = detect(&c, buf, n, i);
            break;
        case RS_BODY: {
            size_t take = n - i < s->remain ? n - i : (size_t)s->remain;

            s->remain -= take;
            i += take;
            if (s->remain == 0)
                head_begin(s);
            break;
        }
        case RS_CHUNKED: {
            bool done;
            long used = rl_chunked_feed(&s->ch, buf + i, n - i, &done);

            if (used < 0) {
                set_proto(&c, RL_HTTP_NONE, i);
                break;
            }
            i += (size_t)used;
            if (done)
                head_begin(s);
            break;
        }
        case RS_H2: {
            size_t bad = 0;

            c.base = i;
            if (rl_h2f_feed(&s->h2f, buf + i, n - i, &h2_ops, &c, &bad) != 0)
                set_proto(&c, RL_HTTP_NONE, i + bad);
            i = n;
            break;
        }
        default:
            if ((s->st == RS_REASON ||
                 (s->st == RS_HVAL && s->hdr == HDR_OTHER)) &&
                s->head_len < RL_HTTP_HEAD_MAX) {
                size_t j = skip_text(s, buf, i, n);

                if (j > i) {
                    i = j;
                    break;
                }
            }
            if (s->st == RS_STATUS && s->pre == 0 && n - i >= 13 &&
                s->head_len <= RL_HTTP_HEAD_MAX - 13 &&
                status_line(s, buf + i)) {
                i += 13;
                break;
            }
            if (s->st == RS_HVAL && buf[i] == '\r' && n - i >= 2 &&
                buf[i + 1] == '\n' && s->head_len <= RL_HTTP_HEAD_MAX - 2) {
                /* A value's line end at once, as its CR and LF one at a
                 * time through h1_byte: the value done, a name next. */
                hval_done(s);
                s->hname_len = 0;
                s->hname_long = false;
                s->st = RS_HNAME;
                s->head_len += 2;
                i += 2;
                break;
            }
            if (s->st == RS_HNAME && s->head_len < RL_HTTP_HEAD_MAX) {
                size_t j = rl_http_hname_run(s->hname, sizeof s->hname,
                                             &s->hname_len, s->hname_long,
                                             &s->head_len, buf, i, n);

                if (j > i) {
                    i = j;
                    break;
                }
            }
            h1_byte(&c, buf[i], i);
            i++;
            break;
        }
    }
    return c.err != 0 ? c.err : (long)c.nev;
}

bool rl_respscan_between(const struct rl_respscan *s)
{
    return ((s->st == RS_DETECT || s->st == RS_STATUS) && s->pre == 0 &&
            s->head_len == 0) ||
           s->st == RS_H2;
}

bool rl_respscan_h2_boundary(const struct rl_respscan *s)
{
    return s->st == RS_H2 && s->h2f.settings_seen && rl_h2f_left(&s->h2f) == 0;
}
