/* reqrespond.c — a connection's side of on_deny = respond (SPEC §15):
 * a refused request's bytes taken unsent, its made-up answer queued
 * (respond.h) in the order of the server's, and handed to the reads. */
#include <string.h>

#include "model/kinds.h"
#include "policy/config.h"
#include "policy/gate.h"
#include "policy/reqconn.h"
#include "policy/respond.h"
#include "util/parse.h"

static size_t iov_total(const struct iovec *iov, size_t n)
{
    size_t sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += iov[i].iov_len;
    return sum;
}

/* Bytes of this write up to the first request at or after `from`'s
 * index (SIZE_MAX: none starts in it). */
static size_t next_request(const struct rl_req_event *ev, size_t nev,
                           size_t from)
{
    for (size_t j = from; j < nev; j++)
        if (ev[j].kind == RL_REQ_REQUEST && ev[j].offset > 0)
            return ev[j].offset;
    return SIZE_MAX;
}

bool rl_reqconn_respond(struct rl_reqconn *c, const struct rl_gate_ticket *t,
                        const struct rl_req_event *ev, size_t nev, size_t i,
                        struct rl_reqplan *p)
{
    if (ev != NULL && ev[i].stream_id != 0)
        return rl_reqconn_respond_h2(c, t, ev[i].stream_id, p);
    const struct rl_rule *by = t->respond_by;
    char rate[48] = "?";
    if (by != NULL && by->nlimits[RL_KIND_REQUEST] > 0)
        rl_config_format_rate(RL_KIND_REQUEST, &by->limits[RL_KIND_REQUEST][0],
                              rate, sizeof rate);
    /* Behind every answer owed for the requests sent before it. */
    if (!rl_respond_push(&c->made, by != NULL ? by->respond_status : 429,
                         t->respond_ns / RL_NS_PER_S,
                         by != NULL ? by->section : NULL, rate, c->nsent))
        return false;
    size_t end = next_request(ev, nev, i + 1);
    c->swallowing = end == SIZE_MAX;
    p->act = RL_GATE_GO;
    p->swallow = end == SIZE_MAX ? p->allow : end;
    p->allow = 0;
    p->wake = 0;
    return true;
}

bool rl_reqconn_swallow(struct rl_reqconn *c, const struct rl_req_event *ev,
                        size_t nev, struct rl_reqplan *p)
{
    size_t end = SIZE_MAX;
    for (size_t j = 0; j < nev && end == SIZE_MAX; j++)
        if (ev[j].kind == RL_REQ_REQUEST)
            end = ev[j].offset;
    if (end == 0) {
        c->swallowing = false; /* the next request starts the write */
        return false;
    }
    c->swallowing = end == SIZE_MAX;
    p->swallow = end == SIZE_MAX ? p->allow : end;
    p->allow = 0;
    return true;
}

/* The server's stream is between answers, or its answers are read no
 * further (then the made-up ones are not held back for them). */
static bool between(const struct rl_reqconn *c)
{
    /* HTTP/2: never inside a frame of the server's, nor before its
     * SETTINGS; where its frames are not followed, not at all. */
    if (rl_reqscan_proto(&c->scan) == RL_HTTP_2)
        return !c->resp_off && rl_respscan_h2_boundary(&c->resp);
    return c->resp_off || rl_respscan_between(&c->resp);
}

bool rl_reqconn_madeup_due(const struct rl_reqconn *c)
{
    const struct rl_respond *r = c->made;
    if (r == NULL || r->n == 0 || c->ahead > 0)
        return false;
    /* Answers owed that will never be paired are not waited for. */
    if (c->resp_off && rl_reqscan_proto(&c->scan) != RL_HTTP_2)
        return true;
    return rl_respond_due(r, between(c));
}

size_t rl_reqconn_madeup(struct rl_reqconn *c, const struct iovec *iov,
                         size_t n, bool peek, bool *left)
{
    *left = c->made != NULL && c->made->n > 0;
    if (!rl_reqconn_madeup_due(c) || iov_total(iov, n) == 0)
        return 0;
    size_t got = rl_respond_take(c->made, iov, n, !peek);
    *left = c->made->n > 0;
    return got;
}

size_t rl_reqconn_madeup_pending(const struct rl_reqconn *c)
{
    if (!rl_reqconn_madeup_due(c))
        return 0;
    const struct rl_madeup *m = &c->made->q[c->made->head];
    return (size_t)(m->len - m->off);
}
