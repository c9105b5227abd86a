/* reqconn.c — see reqconn.h. */
#include "policy/reqconn.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/dests.h"
#include "policy/gate.h"
#include "policy/names.h"
#include "policy/overdue.h"
#include "policy/proc.h"
#include "policy/report.h"
#include "policy/reqheld.h"
#include "policy/respond.h"
#include "policy/robotsread.h"
#include "util/atomics.h"
#include "util/clock.h"
#include "util/declog.h"
#include "util/log.h"
#include "util/sys.h"

/* Events looked at per write: a write that starts more requests than
 * this is cut before the last one seen (plaintext), so none goes
 * uncharged; a write that goes whole counts the rest (requests_past). */
#define PLAN_EVENTS 8
/* The most events such a write has looked at one by one (552 bytes
 * each); past it every event is taken as a request. */
#define WHOLE_EVENTS 4096

void rl_reqconn_init(struct rl_reqconn *c, const void *sa, socklen_t salen)
{
    memset(c, 0, sizeof *c);
    rl_reqscan_init(&c->scan, &c->http);
    rl_respscan_init(&c->resp, &c->http);
    if (sa != NULL && salen > 0 && salen <= sizeof c->peer) {
        memcpy(&c->peer, sa, salen);
        c->salen = salen;
    }
}

void rl_reqconn_free(struct rl_reqconn *c)
{
    rl_reqscan_free(&c->scan);
    rl_respscan_free(&c->resp);
    rl_robotsread_drop(c);
    rl_respond_free(c->made);
    free(c->h2cut);
}

bool rl_reqconn_counting(const struct rl_reqconn *c)
{
    int p = rl_reqscan_proto(&c->scan);
    return p != RL_HTTP_NONE && p != RL_HTTP_TLS && !c->tls_owned;
}

static size_t iov_total(const struct iovec *iov, size_t n)
{
    size_t sum = 0;
    for (size_t i = 0; i < n; i++)
        sum = iov[i].iov_len > SIZE_MAX - sum ? SIZE_MAX : sum + iov[i].iov_len;
    return sum;
}

static bool fd_nonblocking(int fd)
{
    if (fd < 0)
        return false;
    int fl = rl_sys.fcntl(fd, F_GETFL, 0);
    return fl >= 0 && (fl & O_NONBLOCK);
}

static bool nonblocking(const struct rl_reqwrite *w)
{
    return w->nonblocking || fd_nonblocking(w->fd);
}

/* The name a request is charged to (SPEC §11): its own (Host, the
 * absolute-form target, HTTP/2 :authority), else while its head is not
 * complete (or is an HTTP/2 block a peek cannot decode) the previous
 * request's, else the TLS server name, else NULL (the connection's name).
 * A complete HTTP/1.x head that names nothing carries no hint
 * (http/reqscan.h): it goes to the server name or the connection's. */
static const char *name_of(const struct rl_reqconn *c,
                           const struct rl_req_event *e, uint16_t *port)
{
    *port = __atomic_load_n(&c->tunnel_port, __ATOMIC_RELAXED);
    if (e->name[0] != '\0' && e->name_src != RL_NAME_UNKNOWN) {
        if (e->name_src != RL_NAME_HINT && e->port != 0)
            *port = e->port;
        return e->name;
    }
    if (c->sni[0] != '\0')
        return c->sni;
    return NULL;
}

static struct rl_gate_req *ask(const struct rl_reqconn *c,
                               const struct rl_reqwrite *w,
                               const struct rl_req_event *e, uint64_t units,
                               struct rl_gate_req *q)
{
    q->call = w->call;
    q->fd = w->fd;
    q->sa = c->salen > 0 ? &c->peer : NULL;
    q->salen = c->salen;
    q->name = name_of(c, e, &q->port);
    q->method = e->method[0] != '\0' ? e->method : NULL;
    q->target = e->target[0] != '\0' ? e->target : NULL;
    q->units = units;
    q->cut = false;
    /* A plaintext HTTP/1.x request the shim can answer (SPEC §15). */
    q->respond = e->stream_id == 0 ? w->how == RL_REQ_PLAIN &&
                                         rl_reqscan_proto(&c->scan) != RL_HTTP_2
                                   : c->h2_lead > 0 && rl_reqwrite_cuts(w);
    return q;
}

/* A denial of a write that must not sleep, past max_delay: an error the
 * program gives up on at once (p->err), not a hold for the whole wait,
 * and the process's one line saying why (overdue.h). */
static bool overdue(struct rl_proc *proc, const struct rl_reqwrite *w,
                    const struct rl_gate_ticket *t,
                    const struct rl_gate_req *q, struct rl_reqplan *p)
{
    if (!(nonblocking(w) || fd_nonblocking(w->wire)) ||
        !rl_overdue(t, &p->err))
        return false;
    rl_overdue_say(proc, t, q->name, q->sa, q->salen);
    return true;
}

/* A TLS write: its k requests go together or not at all (SPEC §11). In
 * delay mode k turns one after another, each asked alone (a burst smaller
 * than k can never grant k at once, and a request that waits is not
 * denied), the write going at the last. */
static void plan_whole(struct rl_proc *proc, struct rl_reqconn *c,
                       const struct rl_reqwrite *w,
                       const struct rl_req_event *first, uint64_t k,
                       uint64_t now, struct rl_reqplan *p)
{
    struct rl_gate_ticket t;
    struct rl_gate_req q;
    ask(c, w, first, 1, &q);
    bool each = k > 1 && rl_gate_request_delays(proc, &q);
    q.units = each ? 1 : k;
    /* One HTTP/1.x request a TLS write of its own carries, its socket
     * the library's (not a memory BIO's): the shim can answer it. */
    q.respond = k == 1 && w->how == RL_REQ_PIECES && first->stream_id == 0 &&
                rl_reqscan_proto(&c->scan) != RL_HTTP_2;
    int act = RL_GATE_GO;
    uint64_t wait = 0;
    /* (Should one fail, past max_delay, the turns before it stay spent.) */
    for (uint64_t i = 0; i < (each ? k : 1) && act == RL_GATE_GO; i++) {
        act = rl_gate_request_at(proc, &t, now, &q);
        if (act == RL_GATE_GO && t.wait_ns > wait)
            wait = t.wait_ns;
    }
    if (act == RL_GATE_FAIL) {
        if (t.respond_ns != 0 && rl_reqconn_respond(c, &t, NULL, 0, 0, p))
            return;
        p->act = RL_GATE_FAIL;
        p->err = t.err;
        if (overdue(proc, w, &t, &q, p))
            return;
        /* Whatever the socket: the TLS layer may know it only by the
         * ciphertext it carried (shim/tlswrite.h). */
        if (t.retry_ns != UINT64_MAX)
            p->wake = rl_add_sat_u64(now, t.retry_ns);
        return;
    }
    p->requests = t.ncharges > 0 ? (unsigned)k : 0;
    c->charged = p->allow; /* all of them, for a retry of these bytes */
    if (wait > 0 && nonblocking(w)) {
        /* Reserved: the retry of these bytes at or after the turn goes
         * (unless a pause came meanwhile: rl_reqconn_plan asks then). */
        c->turn = rl_add_sat_u64(now, wait);
        p->act = RL_GATE_FAIL;
        p->err = EAGAIN;
        p->wake = c->turn;
        return;
    }
    if (wait > 0)
        p->wake = rl_add_sat_u64(now, wait);
}

/* A TLS write that may go in pieces (RL_REQ_PIECES), in delay mode: the
 * piece up to its second request (its frames, and any before them) goes
 * at its first request's turn; the rest is the next piece's. A request
 * charged already at the start (its turn reserved by an earlier try, or
 * a real call that failed) goes now, in the piece up to the next. false:
 * the write is planned whole (fail mode, one request, or the cut was not
 * among the events looked at). */
static bool plan_pieces(struct rl_proc *proc, struct rl_reqconn *c,
                        const struct rl_reqwrite *w,
                        const struct rl_req_event *ev, size_t nev,
                        size_t total, uint64_t now, struct rl_reqplan *p)
{
    const struct rl_req_event *first = NULL;
    bool held = false, cut = false;
    size_t end = p->allow;
    for (size_t i = 0; i < nev && !cut; i++) {
        if (ev[i].kind != RL_REQ_REQUEST)
            continue;
        if (ev[i].offset < c->charged) {
            held = true;
        } else if (held || first != NULL) {
            if (ev[i].offset == 0)
                return false; /* (begun in an earlier write, as the first) */
            end = ev[i].offset;
            cut = true;
        } else {
            first = &ev[i];
        }
    }
    if (!cut && (total > nev || !held))
        return false;
    if (held) {
        p->allow = end;
        return true;
    }
    struct rl_gate_ticket t;
    struct rl_gate_req q;
    ask(c, w, first, 1, &q);
    if (!rl_gate_request_delays(proc, &q))
        return false;
    p->allow = end;
    if (rl_gate_request_at(proc, &t, now, &q) == RL_GATE_FAIL) {
        /* As a write that goes whole is refused (plan_whole): past
         * max_delay an error at once, else held until it could go,
         * whatever the socket. */
        p->act = RL_GATE_FAIL;
        p->err = t.err;
        if (overdue(proc, w, &t, &q, p))
            return true;
        if (t.retry_ns != UINT64_MAX)
            p->wake = rl_add_sat_u64(now, t.retry_ns);
        return true;
    }
    if (t.ncharges > 0)
        p->requests = 1;
    c->charged = (uint64_t)first->offset + 1;
    rl_reqconn_sent(c, &q, first->stream_id);
    if (t.wait_ns == 0)
        return true;
    p->wake = rl_add_sat_u64(now, t.wait_ns);
    if (nonblocking(w)) {
        /* Reserved: the retry of these bytes at or after it goes. */
        c->turn = p->wake;
        p->act = RL_GATE_FAIL;
        p->err = EAGAIN;
    }
    return true;
}

/* A plaintext write: requests in order, each charged; the write is cut
 * before the first that cannot go now (or that must wait, unless it is
 * the write's first byte: then the write waits for it). Returns the
 * records (sent[]) of a request cut off that keeps its turn, else -1. */
static int plan_plain(struct rl_proc *proc, struct rl_reqconn *c,
                      const struct rl_reqwrite *w,
                      const struct rl_req_event *ev, size_t nev, uint64_t now,
                      struct rl_reqplan *p)
{
    for (size_t i = 0; i < nev; i++) {
        const struct rl_req_event *e = &ev[i];
        if (e->kind != RL_REQ_REQUEST || e->offset < c->charged)
            continue;
        if (p->wake != 0 || (i == PLAN_EVENTS - 1 && e->offset > 0)) {
            /* After a request that waits, or the last event looked at:
             * the next write starts here. */
            p->allow = e->offset;
            return -1;
        }
        struct rl_gate_ticket t;
        struct rl_gate_req q;
        ask(c, w, e, 1, &q);
        q.cut = e->offset > 0;
        int act = rl_gate_request_at(proc, &t, now, &q);
        if (act == RL_GATE_FAIL) {
            if (e->offset > 0) {
                p->allow = e->offset; /* a short write before it */
                return -1;
            }
            if (t.respond_ns != 0 && rl_reqconn_respond(c, &t, ev, nev, i, p))
                return -1;
            p->act = RL_GATE_FAIL;
            p->err = t.err;
            if (!nonblocking(w) || overdue(proc, w, &t, &q, p))
                return -1;
            if (t.retry_ns != UINT64_MAX)
                p->wake = rl_add_sat_u64(now, t.retry_ns);
            return -1;
        }
        uint8_t before = c->nsent;
        c->charged = (uint64_t)e->offset + 1;
        rl_reqconn_sent(c, &q, e->stream_id);
        if (t.wait_ns > 0 && e->offset > 0) {
            /* The bytes before it go now. It keeps the turn it was given,
             * which the write that starts with it waits for: decided
             * once, it is counted and logged once, and keeps its place. */
            c->turn = rl_add_sat_u64(now, t.wait_ns);
            p->allow = e->offset;
            return c->nsent - before;
        }
        if (t.ncharges > 0)
            p->requests++;
        if (t.wait_ns == 0)
            continue;
        if (nonblocking(w)) {
            c->turn = rl_add_sat_u64(now, t.wait_ns);
            p->act = RL_GATE_FAIL;
            p->err = EAGAIN;
            p->wake = c->turn;
            return -1;
        }
        p->wake = rl_add_sat_u64(now, t.wait_ns);
    }
    return -1;
}

/* The requests to charge among the events past the first PLAN_EVENTS of
 * a write that goes whole (`total` events in all: a TLS write of many
 * HTTP/2 streams, or of many pipelined heads), all of which go with it.
 * Peeked again into a buffer of their number; should that be too many or
 * not be had, every event past those is taken as a request (what such a
 * write carries: the other kinds come at most once or twice a write). */
static uint64_t requests_past(const struct rl_reqconn *c,
                              const struct iovec *iov, size_t n, size_t total)
{
    struct rl_req_event *all =
        total <= WHOLE_EVENTS ? malloc(total * sizeof *all) : NULL;
    if (all == NULL)
        return total - PLAN_EVENTS;
    size_t m = rl_reqscan_peekv(&c->scan, iov, n, all, total);
    uint64_t k = 0;
    for (size_t i = PLAN_EVENTS; i < m && i < total; i++)
        if (all[i].kind == RL_REQ_REQUEST && all[i].offset >= c->charged)
            k++;
    free(all);
    return k;
}

/* The k requests a TLS write charged (a turn reserved counts), all to the
 * first one's name, for their answers (respconn.c): those looked at with
 * their HTTP/2 streams, those past them (HTTP/1.x: in order; HTTP/2: their
 * streams not known, so their answers are not paired). */
static void record_whole(struct rl_reqconn *c, const struct rl_reqwrite *w,
                         const struct rl_req_event *first,
                         const struct rl_req_event *ev, size_t nev,
                         uint64_t before, uint64_t k)
{
    struct rl_gate_req q;
    ask(c, w, first, 1, &q);
    for (size_t i = 0; i < nev && k > 0; i++)
        if (ev[i].kind == RL_REQ_REQUEST && ev[i].offset >= before) {
            rl_reqconn_sent(c, &q, ev[i].stream_id);
            k--;
        }
    while (k-- > 0 && rl_reqscan_proto(&c->scan) == RL_HTTP_1)
        rl_reqconn_sent(c, &q, 0);
}

/* The requests charged at the start of these bytes (offset < c->charged)
 * were given the turn `turn`, reached at `now`: decided again, one by one
 * (rl_gate_request_again). 0: they go now; else their new turn, or
 * UINT64_MAX: refused (*t says why, *q what was asked), and no longer
 * charged: the records made for their answers (`sent`, the newest) are
 * dropped. */
/* The requests charged at the start of these bytes (offset <
 * c->charged): their count, and q naming the first (the connection's
 * name when none was looked at). */
static uint64_t charged_requests(const struct rl_reqconn *c,
                                 const struct iovec *iov, size_t n,
                                 const struct rl_reqwrite *w,
                                 struct rl_req_event ev[PLAN_EVENTS],
                                 struct rl_gate_req *q)
{
    size_t total = rl_reqscan_peekv(&c->scan, iov, n, ev, PLAN_EVENTS);
    const struct rl_req_event *first = NULL;
    uint64_t k = 0;
    for (size_t i = 0; i < total && i < PLAN_EVENTS; i++)
        if (ev[i].kind == RL_REQ_REQUEST && ev[i].offset < c->charged) {
            if (first == NULL)
                first = &ev[i];
            k++;
        }
    static const struct rl_req_event unnamed = {.kind = RL_REQ_REQUEST};
    ask(c, w, first != NULL ? first : &unnamed, 1, q);
    q->respond = false; /* decided once; at its turn it goes or fails */
    return k;
}

static uint64_t decide_again(struct rl_proc *proc, struct rl_reqconn *c,
                             const struct iovec *iov, size_t n,
                             const struct rl_reqwrite *w, uint64_t turn,
                             uint64_t now, unsigned sent,
                             struct rl_gate_ticket *t, struct rl_gate_req *q)
{
    struct rl_req_event ev[PLAN_EVENTS];
    uint64_t k = charged_requests(c, iov, n, w, ev, q), wake = 0;
    for (uint64_t i = 0; i < (k > 0 ? k : 1); i++) {
        if (rl_gate_request_again(proc, t, now, turn, q) == RL_GATE_FAIL) {
            c->charged = 0;
            c->nsent = c->nsent > sent ? (uint8_t)(c->nsent - sent) : 0;
            return UINT64_MAX;
        }
        if (t->wait_ns == 0)
            return wake; /* not paused: the others are not either */
        if (rl_add_sat_u64(now, t->wait_ns) > wake)
            wake = rl_add_sat_u64(now, t->wait_ns);
    }
    return wake;
}

void rl_reqconn_held(const struct rl_reqconn *c, const struct iovec *iov,
                     size_t n, const struct rl_reqwrite *w, uint64_t turn,
                     struct rl_reqheld *h)
{
    struct rl_req_event ev[PLAN_EVENTS];
    struct rl_gate_req q;
    uint64_t k = charged_requests(c, iov, n, w, ev, &q);
    h->turn = turn;
    h->units = k > 0 ? (uint32_t)(k < UINT32_MAX ? k : UINT32_MAX) : 1;
    h->port = q.port;
    h->named = q.name != NULL;
    h->fd = q.fd;
    h->call = q.call;
    h->salen = c->salen;
    if (c->salen > 0)
        memcpy(&h->sa, &c->peer, c->salen);
    snprintf(h->name, sizeof h->name, "%s", h->named ? q.name : "");
    snprintf(h->method, sizeof h->method, "%s", q.method ? q.method : "");
    snprintf(h->target, sizeof h->target, "%s", q.target ? q.target : "");
}

void rl_reqconn_again(struct rl_proc *proc, struct rl_reqconn *c,
                      const struct iovec *iov, size_t n,
                      const struct rl_reqwrite *w, struct rl_reqplan *p)
{
    if (p->act != RL_GATE_GO || p->wake == 0)
        return;
    uint64_t now = rl_clock_now_ns();
    if (now < p->wake)
        return; /* not yet: sleep on */
    if (!p->scanned || p->requests == 0 || !rl_reqconn_counting(c)) {
        p->wake = 0;
        return;
    }
    struct rl_gate_ticket t;
    struct rl_gate_req q;
    uint64_t wake =
        decide_again(proc, c, iov, n, w, p->wake, now, p->sent, &t, &q);
    if (wake == UINT64_MAX) {
        p->act = RL_GATE_FAIL;
        p->err = t.err;
        p->wake = 0;
        return;
    }
    p->wake = wake; /* 0: go now */
}

void rl_reqconn_plan(struct rl_proc *proc, struct rl_reqconn *c,
                     const struct iovec *iov, size_t n,
                     const struct rl_reqwrite *w, struct rl_reqplan *p)
{
    memset(p, 0, sizeof *p);
    p->act = RL_GATE_GO;
    p->allow = iov_total(iov, n);
    if (!rl_reqconn_counting(c) || p->allow == 0)
        return;
    p->scanned = true;
    uint64_t now = rl_clock_now_ns();
    uint8_t held = 0; /* records of the turn a blocking write sleeps to */
    if (c->turn != 0 && w->how == RL_REQ_PLAIN && c->charged > 1) {
        /* The rest of a write cut short before a request that keeps its
         * turn: the bytes before that request go now. */
        if (c->charged - 1 < p->allow)
            p->allow = c->charged - 1;
        return;
    }
    if (c->turn != 0) {
        /* A turn reserved by an earlier try of these bytes: at it, a
         * pause that came meanwhile holds them still (SPEC §12). */
        uint64_t again = 0;
        struct rl_gate_ticket t;
        struct rl_gate_req q;
        if (now >= c->turn)
            again = decide_again(proc, c, iov, n, w, c->turn, now,
                                 c->turn_sent, &t, &q);
        if (again == UINT64_MAX) {
            c->turn = 0;
            p->act = RL_GATE_FAIL;
            p->err = t.err;
            /* A pause that came while it waited, past max_delay. */
            if (overdue(proc, w, &t, &q, p))
                return;
            if (t.retry_ns != UINT64_MAX)
                p->wake = rl_add_sat_u64(now, t.retry_ns);
            return;
        }
        if (now < c->turn || again != 0) {
            if (again != 0)
                c->turn = again;
            if (nonblocking(w) || w->how != RL_REQ_PLAIN) {
                p->act = RL_GATE_FAIL;
                p->err = EAGAIN;
                p->wake = c->turn;
                return;
            }
            /* A blocking write sleeps to the turn, and its request is
             * decided again there (rl_reqconn_again). */
            p->wake = c->turn;
            p->requests = 1;
            held = c->turn_sent;
        }
        c->turn = 0;
    }
    uint8_t nsent = c->nsent;
    if (rl_reqconn_h2_plan(c, iov, n, w, p))
        return;
    struct rl_req_event ev[PLAN_EVENTS];
    size_t total = rl_reqscan_peekv(&c->scan, iov, n, ev, PLAN_EVENTS);
    size_t nev = total > PLAN_EVENTS ? PLAN_EVENTS : total;
    nev = rl_reqconn_h2_events(ev, nev, p->allow); /* before a cut frame */
    if (c->swallowing && rl_reqconn_swallow(c, ev, nev, p))
        return;
    const struct rl_req_event *first = NULL;
    uint64_t k = 0;
    for (size_t i = 0; i < nev; i++) {
        if (ev[i].kind == RL_REQ_PROTO && ev[i].proto == RL_HTTP_TLS &&
            w->how == RL_REQ_PLAIN)
            c->tls_seen = true;
        if (ev[i].kind == RL_REQ_TUNNEL && ev[i].name[0] != '\0' &&
            c->sni[0] == '\0') {
            /* The requests inside a tunnel are its site's. */
            memcpy(c->sni, ev[i].name, sizeof c->sni);
            __atomic_store_n(&c->tunnel_port, ev[i].port, __ATOMIC_RELAXED);
        }
        if (ev[i].kind == RL_REQ_REQUEST && ev[i].offset >= c->charged) {
            if (first == NULL)
                first = &ev[i];
            k++;
        }
    }
    if (w->how != RL_REQ_PLAIN && total > PLAN_EVENTS)
        k += requests_past(c, iov, n, total);
    if (k == 0) {
        p->sent = held;
        return;
    }
    struct rl_gate_req fq; /* HTTP/2 streams answered apart (SPEC §15) */
    bool each = w->how == RL_REQ_PLAIN ||
                rl_reqconn_h2_each(proc, w, first, ask(c, w, first, 1, &fq));
    if (each || (w->how == RL_REQ_PIECES &&
                 plan_pieces(proc, c, w, ev, nev, total, now, p))) {
        int kept = each ? plan_plain(proc, c, w, ev, nev, now, p) : -1;
        p->sent = (c->nsent > nsent ? c->nsent - nsent : 0) + held;
        c->turn_sent = (uint8_t)(kept >= 0 ? (unsigned)kept : p->sent);
        return;
    }
    /* (Requests only past those looked at: named by the connection.) */
    static const struct rl_req_event unnamed = {.kind = RL_REQ_REQUEST};
    if (first == NULL)
        first = &unnamed;
    uint64_t before = c->charged;
    plan_whole(proc, c, w, first, k, now, p);
    /* (Answered by the shim: never sent, no answer awaited.) */
    if ((p->act == RL_GATE_GO && p->swallow == 0) ||
        c->turn != 0) /* else charged when it goes */
        record_whole(c, w, first, ev, nev, before, k);
    p->sent = c->nsent > nsent ? c->nsent - nsent : 0;
    c->turn_sent = (uint8_t)p->sent;
}

void rl_reqconn_done(struct rl_reqconn *c, const struct iovec *iov, size_t n,
                     long sent, const struct rl_reqplan *p)
{
    if (!p->scanned || sent <= 0)
        return;
    bool fresh = rl_reqscan_proto(&c->scan) == RL_HTTP_UNKNOWN;
    size_t left = (size_t)sent;
    for (size_t i = 0; i < n && left > 0 && rl_reqconn_counting(c); i++) {
        size_t k = iov[i].iov_len < left ? iov[i].iov_len : left;
        rl_reqscan_commit(&c->scan, iov[i].iov_base, k, NULL, 0);
        left -= k;
    }
    rl_reqconn_h2_settled(c, p);
    rl_reqconn_gone(c);
    c->charged = c->charged > (uint64_t)sent ? c->charged - (uint64_t)sent : 0;
    if (c->charged == 0)
        c->turn = 0; /* else it is the turn of a request not sent yet */
    if (fresh && rl_reqscan_proto(&c->scan) == RL_HTTP_TLS)
        /* Its session may be known by this alone (a memory BIO's). */
        c->hello_seen = rl_tls_hello_random(iov, n, c->hello);
}
