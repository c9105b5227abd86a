/* respconn.c — the responses of one connection (SPEC §12): what the
 * program receives goes through the response scanner (http/respscan.h),
 * and each final answer's status, with its Retry-After, goes to the gate
 * named as its request was charged (gate_pause.c pauses those budgets).
 *
 * The request side records each request as it is charged
 * (rl_reqconn_sent, called by reqconn.c's plans); the response side pairs
 * them with the answers: HTTP/1.x in order, HTTP/2 by stream id. What is
 * not sure is never guessed: more requests in flight than the record
 * holds, more answers in one read than one feed reports, a read missed,
 * or an HTTP/2 inflater that cannot be made turn the response side off
 * (the connection's requests are still counted; its answers no longer
 * pause anything). The program's bytes are only read.
 *
 * A request that gets no answer counts too (SPEC §14 backoff_on): the
 * server ending the stream before its answer began (reset), or its
 * answer not begun within response_timeout (timeout), noticed at the
 * connection's next request, at the stream's end, or at its close. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "http/retry_after.h"
#include "limit/adapt.h"
#include "policy/awaited.h"
#include "policy/gate.h"
#include "policy/proc.h"
#include "policy/reqconn.h"
#include "policy/respond.h"
#include "util/clock.h"
#include "policy/robotsread.h"

/* Answers looked at per feed: one read rarely holds more than one. */
#define FEED_EVENTS 8

/* The request an answer is for, taken out of the record: the oldest
 * HTTP/1.x one, or the HTTP/2 one of its stream. */
static bool take_sent(struct rl_reqconn *c, uint32_t stream_id,
                      struct rl_reqsent *out)
{
    for (unsigned i = 0; i < c->nsent; i++) {
        if (c->sent[i].stream_id != stream_id)
            continue;
        *out = c->sent[i];
        memmove(&c->sent[i], &c->sent[i + 1],
                (c->nsent - i - 1) * sizeof c->sent[0]);
        c->nsent--;
        return true;
    }
    return false;
}

void rl_reqconn_sent(struct rl_reqconn *c, const struct rl_gate_req *q,
                     uint32_t stream_id)
{
    if (c->resp_off)
        return;
    if (c->nsent >= RL_SENT_MAX && stream_id != 0) {
        /* An HTTP/2 stream never answered (reset): the oldest goes. */
        struct rl_reqsent old;
        for (unsigned i = 0; i < c->nsent; i++)
            if (c->sent[i].stream_id != 0 &&
                take_sent(c, c->sent[i].stream_id, &old))
                break;
    }
    if (c->nsent >= RL_SENT_MAX) {
        /* More HTTP/1.x requests in flight than the record holds: which
         * answer is whose is lost. */
        c->resp_off = true;
        return;
    }
    struct rl_reqsent *s = &c->sent[c->nsent++];
    s->stream_id = stream_id;
    s->late = false;
    s->gone = false;
    s->sent_ns = rl_clock_now_ns();
    s->port = q->port;
    s->gen = 0;
    if (q->name == NULL || q->name[0] == '\0')
        s->name = RL_SENT_PEER;
    else if (q->name == c->sni)
        s->name = RL_SENT_SNI;
    else
        rl_httpconn_name_ref(&c->http, q->name, &s->name, &s->gen);
}

/* The wait a Retry-After asks for (false: none, or malformed: absent). */
static bool retry_after(const struct rl_resp_event *e, uint64_t *wait_ns)
{
    /* (Which statuses obey it is the gate's: gate_pause.c.) */
    if (!e->has_retry_after ||
        (e->status != 429 && (e->status < 500 || e->status > 599)))
        return false;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    size_t n = strlen(e->retry_after);
    if (rl_retry_after_parse(e->retry_after, n, (int64_t)ts.tv_sec, wait_ns) !=
        0)
        return false;
    /* An HTTP-date names a whole second of the wall clock: the wait is to
     * it from now, not from the start of now's second. */
    if (strspn(e->retry_after, "0123456789 \t") != n)
        *wait_ns = *wait_ns > (uint64_t)ts.tv_nsec
                       ? *wait_ns - (uint64_t)ts.tv_nsec
                       : 0;
    return true;
}

/* Request s of c named as it was charged, into *q (false: its name's
 * slot was re-used: not sure whose it was). */
static bool request_of(const struct rl_reqconn *c, const struct rl_reqsent *s,
                       const struct rl_reqread *r, struct rl_gate_req *q)
{
    const char *name = NULL;
    if (s->name == RL_SENT_SNI)
        name = c->sni;
    else if (s->name != RL_SENT_PEER &&
             (name = rl_httpconn_name(&c->http, s->name, s->gen)) == NULL)
        return false;
    *q = (struct rl_gate_req){
        .call = r->call,
        .fd = r->fd,
        .sa = c->salen > 0 ? &c->peer : NULL,
        .salen = c->salen,
        .name = name,
        .port = s->port,
        .units = 1,
    };
    return true;
}

void rl_reqconn_gone(struct rl_reqconn *c)
{
    /* The records not gone are the latest. */
    uint64_t now = 0;
    for (unsigned i = c->nsent; i > 0 && !c->sent[i - 1].gone; i--) {
        if (now == 0)
            now = rl_clock_now_ns();
        c->sent[i - 1].gone = true;
        c->sent[i - 1].sent_ns = now;
    }
}

/* The requests of c waiting `limit` or longer at `now` marked late; the
 * oldest of them (NULL: none). */
static struct rl_reqsent *mark_late(struct rl_reqconn *c, uint64_t now,
                                    uint64_t limit)
{
    struct rl_reqsent *oldest = NULL;
    for (unsigned i = 0; i < c->nsent; i++) {
        struct rl_reqsent *s = &c->sent[i];
        if (s->late || !s->gone || now < s->sent_ns ||
            now - s->sent_ns < limit)
            continue;
        s->late = true;
        if (oldest == NULL || s->sent_ns < oldest->sent_ns)
            oldest = s;
    }
    return oldest;
}

/* Request s of c copied out for policy/awaited.c (false: its name's slot
 * was re-used). */
static bool copy_out(const struct rl_reqconn *c, const struct rl_reqsent *s,
                     struct rl_awaited_req *out)
{
    const char *name = "";
    if (s->name == RL_SENT_SNI)
        name = c->sni;
    else if (s->name != RL_SENT_PEER &&
             (name = rl_httpconn_name(&c->http, s->name, s->gen)) == NULL)
        return false;
    snprintf(out->name, sizeof out->name, "%s", name);
    out->port = s->port;
    out->salen = c->salen;
    if (c->salen > 0)
        memcpy(&out->peer, &c->peer, c->salen);
    out->sent_ns = s->sent_ns;
    return true;
}

bool rl_reqconn_late_take(struct rl_reqconn *c, uint64_t now, uint64_t limit,
                          struct rl_awaited_req *out)
{
    if (c->nsent == 0 || c->resp_off || limit == 0)
        return false;
    const struct rl_reqsent *s = mark_late(c, now, limit);
    return s != NULL && copy_out(c, s, out);
}

void rl_reqconn_overdue(struct rl_proc *proc, struct rl_reqconn *c,
                        const struct rl_reqread *r, uint64_t now)
{
    if (c->nsent == 0 || c->resp_off)
        return;
    uint64_t limit = rl_gate_response_timeout(proc);
    if (limit == 0)
        return;
    struct rl_reqsent *oldest = mark_late(c, now, limit);
    struct rl_gate_req q;
    if (oldest != NULL && request_of(c, oldest, r, &q))
        rl_gate_request_failed_at(proc, &q, RL_ADAPT_CAUSE_TIMEOUT,
                                  now - oldest->sent_ns, now);
}

/* The program closes c with its oldest request gone, unanswered and not
 * late yet: the destination hears of it once response_timeout has run
 * out (policy/awaited.h). */
static void orphan(struct rl_proc *proc, const struct rl_reqconn *c)
{
    const struct rl_reqsent *s = &c->sent[0];
    struct rl_awaited_req o;
    if (s->gone && !s->late && rl_gate_response_timeout(proc) > 0 &&
        copy_out(c, s, &o))
        rl_awaited_orphan(proc, &o);
}

void rl_reqconn_ended(struct rl_proc *proc, struct rl_reqconn *c,
                      const struct rl_reqread *r)
{
    /* A robots.txt framed by the server's close ends with it. */
    if (r->end == RL_READ_ENDED && !c->resp_off &&
        !__atomic_load_n(&c->resp_lost, __ATOMIC_RELAXED))
        rl_robotsread_end(proc, c, r);
    else
        rl_robotsread_drop(c);
    if (c->resp_off || __atomic_load_n(&c->resp_lost, __ATOMIC_RELAXED)) {
        c->resp_off = true;
        return;
    }
    if (c->nsent > 0) {
        uint64_t now = rl_clock_now_ns();
        rl_reqconn_overdue(proc, c, r, now);
        /* The server ended it with an answer owed and none begun: the
         * oldest request's (HTTP/1.x answers in order; HTTP/2 records
         * only requests no final answer has begun for). Once for the
         * connection, not once per request in flight. */
        struct rl_gate_req q;
        const struct rl_reqsent *s = &c->sent[0];
        if (r->end == RL_READ_ENDED && s->gone && !s->late &&
            rl_respscan_between(&c->resp) && request_of(c, s, r, &q))
            rl_gate_request_failed_at(proc, &q, RL_ADAPT_CAUSE_RESET,
                                      now - s->sent_ns, now);
        if (r->end == RL_READ_CLOSING)
            orphan(proc, c);
    }
    c->nsent = 0;
    c->resp_off = true;
}

/* buf[0..n): the bytes the answer's event e was found in (a robots.txt
 * answer's body starts in them, at e->offset). */
static void answer(struct rl_proc *proc, struct rl_reqconn *c,
                   const struct rl_resp_event *e, const struct rl_reqread *r,
                   const uint8_t *buf, size_t n)
{
    if (e->kind != RL_RESP_STATUS)
        return;
    /* An interim answer (1xx but 101: the scanner reports only a 101 a
     * request asked for) does not end its request; the answer to a
     * CONNECT opens a tunnel, which was not a request. */
    if (e->status < 200 && e->status != 101)
        return;
    if (e->stream_id == 0 && e->paired && e->method == RL_HTTP_M_CONNECT)
        return;
    struct rl_reqsent s;
    struct rl_gate_req q;
    if (!take_sent(c, e->stream_id, &s))
        return;
    /* A made-up answer queued behind it is one answer nearer. */
    rl_respond_answered(c->made);
    if (!request_of(c, &s, r, &q))
        return;
    uint64_t wait = 0;
    bool has = retry_after(e, &wait);
    rl_gate_request_outcome(proc, &q, e->status, has, wait);
    /* Its response time (SPEC §14): from its head written to this, the
     * first of its response read. */
    if (s.gone) {
        uint64_t now = rl_clock_now_ns();
        rl_gate_request_latency(proc, &q, now > s.sent_ns ? now - s.sent_ns : 0,
                                now);
    }
    /* A robots.txt read (SPEC §14): only a 200 says anything; a 404
     * changes nothing. */
    if (e->robots && e->status == 200 && e->offset <= n) {
        rl_robotsread_start(c, e, q.name, s.port);
        rl_robotsread_feed(proc, c, buf + e->offset, n - e->offset, r);
    }
}

/* The response side reads no further: a robots.txt body being read is
 * not sure either. */
static void off(struct rl_reqconn *c)
{
    c->resp_off = true;
    rl_robotsread_drop(c);
}

void rl_reqconn_received(struct rl_proc *proc, struct rl_reqconn *c,
                         const struct iovec *iov, size_t n, size_t got,
                         const struct rl_reqread *r)
{
    if (r->end != RL_READ_BYTES) {
        rl_reqconn_ended(proc, c, r);
        return;
    }
    if (c->resp_off)
        return;
    if (__atomic_load_n(&c->resp_lost, __ATOMIC_RELAXED)) {
        off(c);
        return;
    }
    for (size_t i = 0; i < n && got > 0; i++) {
        size_t len = iov[i].iov_len < got ? iov[i].iov_len : got;
        got -= len;
        if (len == 0)
            continue;
        const uint8_t *buf = iov[i].iov_base;
        /* A robots.txt body begun in an earlier read comes first. */
        rl_robotsread_feed(proc, c, buf, len, r);
        struct rl_resp_event ev[FEED_EVENTS];
        long k = rl_respscan_feed(&c->resp, buf, len, ev, FEED_EVENTS);
        if (k < 0) {
            off(c); /* no HTTP/2 inflater */
            return;
        }
        for (long j = 0; j < k && j < FEED_EVENTS; j++)
            answer(proc, c, &ev[j], r, buf, len);
        if (k > FEED_EVENTS) {
            off(c); /* answers unseen: the pairing is lost */
            return;
        }
        if (c->resp.proto == RL_HTTP_NONE) {
            off(c); /* not HTTP, or no longer: nothing to read */
            return;
        }
    }
}
