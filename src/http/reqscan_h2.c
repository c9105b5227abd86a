/* reqscan_h2.c — what the client's HTTP/2 frames start: a HEADERS frame on
 * a new odd stream opens a request (RFC 9113 §5.1.1); its header block is
 * decoded, on commit, for :method, :path and :authority (and, for a GET
 * of /robots.txt, its user-agent: SPEC §14). Trailers and every other
 * frame are not requests. */
#include <string.h>

#include "http/reqscan_int.h"

static bool frame(void *ctx, const struct rl_h2f *f, size_t start, bool here)
{
    struct rq_ctx *c = ctx;
    struct rl_reqscan *s = c->s;
    struct rl_req_event *e;

    if (f->type != RL_H2_HEADERS)
        return true;
    if ((f->stream & 1) == 0)
        return false; /* client streams are odd */
    s->hb_new = f->stream > s->max_stream;
    if (!s->hb_new)
        return true; /* trailers */
    s->max_stream = f->stream;
    memset(&s->cur, 0, sizeof s->cur);
    c->cur_ev = (long)c->nev;
    e = rq_emit(c, RL_REQ_REQUEST, here ? c->base + start : RQ_EARLIER);
    if (e != NULL) {
        rq_fill(c, e);
        e->stream_id = f->stream;
    }
    return true;
}

static void frag(void *ctx, const struct rl_h2f *f, const uint8_t *p,
                 size_t n, bool final)
{
    struct rq_ctx *c = ctx;

    (void)f;
    /* Only a commit feeds the inflater: its table must see each block
     * exactly once. */
    if (c->commit && c->s->hp != NULL)
        rl_hpack_feed(c->s->hp, p, n, final);
}

static void block_end(void *ctx, const struct rl_h2f *f, size_t end)
{
    struct rq_ctx *c = ctx;
    struct rl_reqscan *s = c->s;
    struct rl_req_event *e;
    uint8_t src = RL_NAME_UNKNOWN;
    uint16_t port = 0;
    bool robots = false;
    char name[RL_HTTP_NAME_MAX + 1] = "";

    if (!s->hb_new)
        return;
    s->hb_new = false;
    if (c->commit && s->hp != NULL && !rl_hpack_broken(s->hp)) {
        const struct rl_hpack_fields *hf = rl_hpack_fields(s->hp);
        bool auth = hf->authority[0] != '\0';
        const char *a = auth ? hf->authority : hf->host;

        memcpy(s->cur.method, hf->method, sizeof s->cur.method);
        memcpy(s->cur.target, hf->path, sizeof s->cur.target);
        /* RFC 9309's file, exactly: a query names another resource. */
        robots = strcmp(hf->method, "GET") == 0 &&
                 strcmp(hf->path, "/robots.txt") == 0;
        if (robots) {
            size_t n = strlen(hf->ua);

            memcpy(s->conn->robots_ua, hf->ua, n + 1);
        }
        if (!(auth ? hf->authority_long : hf->host_long) &&
            rl_http_authority(a, strlen(a), name, &port))
            src = RL_NAME_AUTHORITY;
    }
    if (c->cur_ev >= 0)
        e = (size_t)c->cur_ev < c->max && c->ev != NULL ? &c->ev[c->cur_ev]
                                                        : NULL;
    else
        e = rq_emit(c, RL_REQ_NAMED, c->base + end);
    if (e != NULL) {
        rq_fill(c, e);
        e->stream_id = f->hb_stream;
        e->head_done = true;
        if (src != RL_NAME_UNKNOWN) {
            e->name_src = src;
            memcpy(e->name, name, sizeof name);
            e->port = port;
        }
    }
    if (src != RL_NAME_UNKNOWN)
        memcpy(s->last, name, sizeof name);
    if (c->commit) {
        struct rl_http_sent sent = {.stream_id = f->hb_stream,
                                    .slot = RL_HTTP_NAMES,
                                    .robots = robots};

        if (strcmp(s->cur.method, "HEAD") == 0)
            sent.method = RL_HTTP_M_HEAD;
        else if (strcmp(s->cur.method, "CONNECT") == 0)
            sent.method = RL_HTTP_M_CONNECT;
        if (src != RL_NAME_UNKNOWN)
            rl_httpconn_name_ref(s->conn, name, &sent.slot, &sent.gen);
        rl_httpconn_add_stream(s->conn, &sent);
    }
    c->cur_ev = -1;
}

static const struct rl_h2f_ops ops = {frame, frag, block_end, NULL};

size_t rq_h2(struct rq_ctx *c, const uint8_t *buf, size_t n, size_t i)
{
    size_t bad = 0;

    c->base = i;
    if (rl_h2f_feed(&c->s->h2f, buf + i, n - i, &ops, c, &bad) != 0)
        rq_none(c, i + bad);
    return n;
}
