/* respond_h2.c — on_deny = respond over HTTP/2 (SPEC §15): a refused
 * request's stream is cut from what the client writes (http/h2cut.h) and
 * answered by a HEADERS frame of the shim's (http/h2answer.h), queued with
 * the connection's other made-up answers (respond.h) and handed to the
 * program between two of the server's frames (reqrespond.c).
 *
 * The cut works as the HTTP/1.x one does, from a write's first byte: a
 * write is planned up to the first frame of a cut stream, and a write
 * that starts with such frames takes them unsent (p->swallow), so each
 * comes to the front of a later write (the program's retry of a short
 * plaintext write, or the next piece of a TLS one). */
#include <stdlib.h>
#include <string.h>

#include "http/h2answer.h"
#include "http/h2cut.h"
#include "policy/config.h"
#include "policy/gate.h"
#include "policy/reqconn.h"
#include "policy/respond.h"
#include "util/parse.h"

#define FRAME_HEADER 9
#define TYPE_HEADERS 0x1
#define FLAG_END_HEADERS 0x04
#define FLAG_PADDED 0x08
#define FLAG_PRIORITY 0x20

/* Copies up to len bytes of the write from `off` into dst; returns how
 * many there were. */
static size_t gather(const struct iovec *iov, size_t n, size_t off,
                     uint8_t *dst, size_t len)
{
    size_t got = 0;
    for (size_t i = 0; i < n && got < len; i++) {
        if (off >= iov[i].iov_len) {
            off -= iov[i].iov_len;
            continue;
        }
        size_t k = iov[i].iov_len - off;
        if (k > len - got)
            k = len - got;
        memcpy(dst + got, (const uint8_t *)iov[i].iov_base + off, k);
        got += k;
        off = 0;
    }
    return got;
}

/* The write opens a new request with a HEADERS frame that holds its whole
 * header block, a block that leaves the HPACK table alone: the frame's
 * length (the bytes to take unsent if it is refused), else 0. */
static size_t answerable(const struct rl_reqconn *c, const struct iovec *iov,
                         size_t n, size_t allow)
{
    uint8_t h[FRAME_HEADER];
    if (gather(iov, n, 0, h, sizeof h) < sizeof h || h[3] != TYPE_HEADERS ||
        !(h[4] & FLAG_END_HEADERS))
        return 0;
    uint32_t stream = rl_h2cut_stream(h), len = rl_h2cut_len(h);
    if ((stream & 1) == 0 || stream <= c->scan.max_stream ||
        FRAME_HEADER + (size_t)len > allow)
        return 0;
    uint8_t *f = malloc(len > 0 ? len : 1);
    if (f == NULL)
        return 0;
    gather(iov, n, FRAME_HEADER, f, len);
    size_t from = 0, to = len;
    if (h[4] & FLAG_PADDED) {
        from = 1;
        to = len >= 1u + f[0] ? len - f[0] : 0;
    }
    if (h[4] & FLAG_PRIORITY)
        from += 5;
    bool ok = from <= to && rl_h2cut_block_keeps_table(f + from, to - from);
    free(f);
    return ok ? FRAME_HEADER + (size_t)len : 0;
}

bool rl_reqconn_h2_plan(struct rl_reqconn *c, const struct iovec *iov,
                        size_t n, const struct rl_reqwrite *w,
                        struct rl_reqplan *p)
{
    c->h2_lead = 0;
    size_t left = rl_h2f_left(&c->scan.h2f);
    /* (A write that goes whole cannot be cut: its streams are never.) */
    if (rl_reqscan_proto(&c->scan) != RL_HTTP_2 || left == SIZE_MAX ||
        !rl_reqwrite_cuts(w))
        return false;
    const struct rl_h2cut *k = c->h2cut;
    size_t total = p->allow, lead = 0, at = left;
    if (k != NULL && left > 0 && rl_h2cut_has(k, c->scan.h2f.stream))
        lead = left < total ? left : total;
    /* The cut frames at the start are taken; the write otherwise goes up
     * to the first cut frame after them. */
    while (k != NULL && at < total) {
        uint8_t h[FRAME_HEADER];
        if (gather(iov, n, at, h, sizeof h) < sizeof h)
            break;
        size_t end = at + FRAME_HEADER + rl_h2cut_len(h);
        if (rl_h2cut_has(k, rl_h2cut_stream(h))) {
            if (at != lead) {
                p->allow = at;
                break;
            }
            lead = end < total ? end : total;
        }
        at = end;
    }
    if (lead > 0) {
        p->act = RL_GATE_GO;
        p->swallow = lead;
        p->allow = 0;
        return true;
    }
    if (left == 0)
        c->h2_lead = (uint32_t)answerable(c, iov, n, p->allow);
    return false;
}

bool rl_reqconn_h2_each(struct rl_proc *proc, const struct rl_reqwrite *w,
                        const struct rl_req_event *first,
                        const struct rl_gate_req *q)
{
    /* (The stream's first write, its preface included, is one too.) */
    return w->pieces && first->stream_id != 0 &&
           rl_gate_request_responds(proc, q);
}

size_t rl_reqconn_h2_events(const struct rl_req_event *ev, size_t nev,
                            size_t allow)
{
    /* (One at `allow` itself ends what goes: no request starts at a cut
     * frame.) */
    while (nev > 0 && ev[nev - 1].offset > allow)
        nev--;
    return nev;
}

bool rl_reqconn_respond_h2(struct rl_reqconn *c,
                           const struct rl_gate_ticket *t, uint32_t stream,
                           struct rl_reqplan *p)
{
    if (c->h2_lead == 0)
        return false;
    if (c->h2cut == NULL && (c->h2cut = calloc(1, sizeof *c->h2cut)) == NULL)
        return false;
    if (c->made == NULL && (c->made = calloc(1, sizeof *c->made)) == NULL)
        return false;
    struct rl_respond *q = c->made;
    if (q->n >= RL_RESPOND_MAX)
        return false;
    struct rl_madeup *m = &q->q[(q->head + q->n) % RL_RESPOND_MAX];
    const struct rl_rule *by = t->respond_by;
    size_t len = rl_h2answer_format((uint8_t *)m->bytes, sizeof m->bytes,
                                    stream, by != NULL ? by->respond_status
                                                       : 429,
                                    t->respond_ns / RL_NS_PER_S);
    if (len == 0)
        return false;
    /* Streams are answered apart: no answer of the server's comes first. */
    m->len = (uint16_t)len;
    m->off = 0;
    m->after = 0;
    q->n++;
    rl_h2cut_add(c->h2cut, stream);
    p->act = RL_GATE_GO;
    p->swallow = c->h2_lead;
    p->allow = 0;
    p->wake = 0;
    return true;
}

void rl_reqconn_h2_settled(struct rl_reqconn *c, const struct rl_reqplan *p)
{
    if (p->swallow == 0 || c->h2cut == NULL)
        return;
    struct rl_http_sent gone;
    for (unsigned i = 0; i < RL_H2CUT_MAX; i++)
        if (c->h2cut->stream[i] != 0)
            (void)rl_httpconn_stream(&c->http, c->h2cut->stream[i], true,
                                     &gone);
}
