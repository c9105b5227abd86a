/* reqhead.c — one HTTP/1.x request head, as the scanner (reqscan.c) meets
 * it byte by byte: its method and target, its header names and values
 * (Host, Content-Length, Transfer-Encoding), and at its end the name its
 * request is charged to and how its body is delimited. */
#include <string.h>
#include <strings.h>

#include "http/reqscan.h"
#include "http/reqscan_int.h"

/* The name of the finished head: the authority of an absolute-form target
 * wins over Host (a proxy request names its site there). */
static void head_name(struct rl_reqscan *s, uint8_t *src, char *name,
                      uint16_t *port)
{
    const struct rl_req_cur *r = &s->cur;

    *src = RL_NAME_UNKNOWN;
    name[0] = '\0';
    *port = 0;
    if (r->abs) {
        if (r->tname_ok) {
            *src = RL_NAME_TARGET;
            memcpy(name, r->tname, RL_HTTP_NAME_MAX + 1);
            *port = r->tport;
        }
        return;
    }
    if (r->host_ok && rl_http_authority(r->host, r->hlen, name, port))
        *src = RL_NAME_HOST;
}

bool rq_is_method(const struct rl_req_cur *r, const char *m)
{
    return strcmp(r->method, m) == 0;
}

/* Is path p[0..n) robots.txt's, exactly (SPEC §14)? RFC 9309 puts the
 * file at "/robots.txt": a query names another resource, not it. */
static bool robots_path(const char *p, size_t n)
{
    return n == 11 && memcmp(p, "/robots.txt", 11) == 0;
}

/* The request line's target is complete: an absolute-form target (or a
 * CONNECT's authority-form) carries the name; GET /robots.txt is marked. */
void rq_target_done(struct rl_reqscan *s)
{
    struct rl_req_cur *r = &s->cur;
    const char *t = r->target, *a, *e;
    /* tlen counts the whole target; target[] keeps its first
     * RL_HTTP_TARGET_MAX bytes, and only those are read. */
    bool cut = r->tlen >= RL_HTTP_TARGET_MAX;
    size_t n = cut ? RL_HTTP_TARGET_MAX : r->tlen;
    bool get = r->mlen == 3 && rq_is_method(r, "GET");

    if (rq_is_method(r, "CONNECT")) {
        r->abs = true;
        r->tname_ok = !cut && rl_http_authority(t, n, r->tname, &r->tport);
        return;
    }
    uint16_t scheme_port;
    if (n >= 7 && strncasecmp(t, "http://", 7) == 0) {
        a = t + 7;
        scheme_port = 80;
    } else if (n >= 8 && strncasecmp(t, "https://", 8) == 0) {
        a = t + 8;
        scheme_port = 443;
    } else {
        r->robots = get && robots_path(t, n);
        return;
    }
    r->abs = true;
    e = a;
    while (e < t + n && *e != '/' && *e != '?' && *e != '#')
        e++;
    r->robots = get && !cut && robots_path(e, (size_t)(t + n - e));
    /* An authority cut by the target's cap is not a name. */
    if (e == t + n && cut)
        return;
    r->tname_ok = rl_http_authority(a, (size_t)(e - a), r->tname, &r->tport);
    /* Its site's port, not the proxy's the connection went to. */
    if (r->tname_ok && r->tport == 0)
        r->tport = scheme_port;
}

/* The head ended at buf[i] (inclusive). */
void rq_head_done(struct rq_ctx *c, size_t i)
{
    struct rl_reqscan *s = c->s;
    struct rl_req_event *e;
    uint8_t src;
    uint16_t port;
    char name[RL_HTTP_NAME_MAX + 1] =
        ""; /* all of it: events are copied whole */
    bool tunnel = rq_is_method(&s->cur, "CONNECT");

    head_name(s, &src, name, &port);
    /* The hint for a later head not yet complete is this head's name, ""
     * when it named nothing. */
    if (!tunnel)
        memcpy(s->last, name, sizeof name);
    if (tunnel) {
        e = rq_emit(c, RL_REQ_TUNNEL, c->start_here ? c->start : RQ_EARLIER);
    } else if (c->cur_ev >= 0) {
        e = rq_cur_event(c);
    } else {
        e = rq_emit(c, RL_REQ_NAMED, i + 1);
    }
    if (e != NULL) {
        rq_fill(c, e);
        e->head_done = true;
        /* A complete head that names nothing says so: the hint (an
         * earlier request's name) was only a guess while it was not
         * complete (SPEC §11: never charged by an earlier request's
         * name). */
        e->name_src = src;
        memcpy(e->name, name, sizeof name);
        e->port = port;
    }
    if (c->commit) {
        struct rl_http_sent sent = {0};

        sent.method = tunnel                          ? RL_HTTP_M_CONNECT
                      : rq_is_method(&s->cur, "HEAD") ? RL_HTTP_M_HEAD
                                                      : RL_HTTP_M_OTHER;
        sent.slot = RL_HTTP_NAMES;
        sent.upgrade = s->cur.upgrade;
        sent.robots = s->cur.robots;
        if (s->cur.robots) {
            memcpy(s->conn->robots_ua, s->cur.ua, s->cur.ualen);
            s->conn->robots_ua[s->cur.ualen] = '\0';
        }
        if (src != RL_NAME_UNKNOWN)
            rl_httpconn_name_ref(s->conn, name, &sent.slot, &sent.gen);
        rl_httpconn_push(s->conn, &sent);
    }
    c->cur_ev = -1;
    s->first = false;
    if (tunnel) {
        /* The tunnel's bytes are another stream: sniff them afresh. */
        s->st = ST_DETECT;
        s->first = true;
        s->pre = 0;
        s->proto = RL_HTTP_UNKNOWN;
    } else if (s->te_seen) {
        if (!s->chunked) {
            rq_none(c, i + 1); /* a request body without a length */
            return;
        }
        s->st = ST_CHUNKED;
        rl_chunked_init(&s->ch);
    } else if (s->fr.cl > 0) {
        s->st = ST_BODY;
        s->remain = s->fr.cl;
    } else {
        s->st = ST_IDLE;
    }
}

void rq_hname_done(struct rl_reqscan *s)
{
    s->hname[s->hname_len] = '\0';
    s->hdr = HDR_OTHER;
    if (s->hname_long)
        return;
    /* By length first: most names are none of these. */
    if (s->hname_len == 4 && strcasecmp(s->hname, "host") == 0) {
        s->hdr = HDR_HOST;
        s->cur.hlen = 0;
        s->cur.host_ok = true;
    } else if (s->hname_len == 14 &&
               strcasecmp(s->hname, "content-length") == 0) {
        s->hdr = HDR_CL;
        rl_http_cl_start(&s->fr);
        s->cl_seen = true;
    } else if (s->hname_len == 17 &&
               strcasecmp(s->hname, "transfer-encoding") == 0) {
        s->hdr = HDR_TE;
        s->fr.te_len = 0;
        s->te_seen = true;
    } else if (s->hname_len == 7 && strcasecmp(s->hname, "upgrade") == 0) {
        s->cur.upgrade = true;
    } else if (s->cur.robots && s->hname_len == 10 &&
               strcasecmp(s->hname, "user-agent") == 0) {
        s->hdr = HDR_UA; /* robots.txt's group is this agent's (SPEC §14) */
        s->cur.ualen = 0;
    }
}

/* One value byte (not CR or LF). Returns false if the head is malformed. */
bool rq_hval_byte(struct rl_reqscan *s, uint8_t b)
{
    bool ows = b == ' ' || b == '\t';

    switch (s->hdr) {
    case HDR_HOST:
        if (ows && s->cur.hlen == 0)
            return true;
        if (s->cur.hlen >= sizeof s->cur.host - 1)
            s->cur.host_ok = false;
        else
            s->cur.host[s->cur.hlen++] = (char)b;
        return true;
    case HDR_CL:
        return rl_http_cl_byte(&s->fr, b);
    case HDR_TE:
        rl_http_te_byte(&s->fr, b);
        return true;
    case HDR_UA:
        if (!(ows && s->cur.ualen == 0) && s->cur.ualen < RL_HTTP_UA_MAX)
            s->cur.ua[s->cur.ualen++] = (char)b;
        return true;
    default:
        return true;
    }
}

void rq_hval_done(struct rl_reqscan *s)
{
    if (s->hdr == HDR_HOST) {
        while (s->cur.hlen > 0 && (s->cur.host[s->cur.hlen - 1] == ' ' ||
                                   s->cur.host[s->cur.hlen - 1] == '\t'))
            s->cur.hlen--;
        s->cur.host[s->cur.hlen] = '\0';
    } else if (s->hdr == HDR_TE) {
        s->chunked = rl_http_te_chunked(&s->fr);
    }
    s->hdr = HDR_OTHER;
}
