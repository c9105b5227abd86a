/* reqscan.h — the requests in what a program writes on one connection.
 *
 * The client→server byte stream of one TCP connection (or the plaintext of
 * one TLS session) goes in; events come out: where each HTTP request starts
 * and the name it is charged to (SPEC §11), where a CONNECT opens a tunnel,
 * and what the stream turned out to be (HTTP/1.x, HTTP/2, TLS, not HTTP).
 * No I/O, no clock, no global state; the state is a fixed-size struct, and
 * the only allocation is the HPACK inflater of an HTTP/2 connection, made
 * once, at its preface, by rl_reqscan_commit.
 *
 * A write is scanned twice: rl_reqscan_peek says what the bytes would start
 * (before the caller charges them; it changes nothing), then
 * rl_reqscan_commit takes the k bytes the kernel accepted (a write may be
 * short) and moves the state on. Peeking the same bytes again gives the
 * same events; committing bytes in any split gives the events one commit
 * of them all would have given, each at its offset in its own feed.
 *
 * A request is reported in the feed that carries its first byte, at its
 * offset there, with its name if its head is complete within that feed.
 * Otherwise the name is unknown and the event carries the name of the
 * connection's previous request as a hint; when the head completes in a
 * later feed, an RL_REQ_NAMED event says the name. Two exceptions, both
 * for bytes a caller cannot judge yet: the first request of a stream is
 * reported when its request line (up to " HTTP/1.x\r\n") is complete, and a
 * method that begins like "CONNECT" when it departs from it; their offset
 * is then 0 if they began in an earlier feed. HTTP/2 names come from the
 * HPACK-coded header block, which only a commit decodes (its dynamic table
 * must see every block once, in order): a peek reports an HTTP/2 request's
 * name as unknown (with the hint), its commit as known.
 *
 * An HTTP/1.x event with head_done and a name_src of RL_NAME_UNKNOWN is
 * a head that names nothing (no Host, a Host over RL_HTTP_NAME_MAX bytes
 * or that is not an authority): it never carries the hint, and the hint
 * of a later head is then "" (SPEC §11: such a request is charged by the
 * TLS server name or the connection's name, never by an earlier
 * request's name). An HTTP/2 request in a peek has head_done with the
 * hint: its name is in a block only a commit decodes.
 *
 * Every struct here is of a fixed size (sizeof tells); a peek copies the
 * state, struct rl_reqscan, once.
 *
 * Bounded: a head over RL_HTTP_HEAD_MAX bytes, a malformed request line,
 * header or chunk size, or a nonsense HTTP/2 frame makes the stream
 * RL_HTTP_NONE from there on (one branch per later feed). */
#ifndef RL_REQSCAN_H
#define RL_REQSCAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "http/chunked.h"
#include "http/h2frame.h"
#include "http/hpack.h"
#include "http/http.h"

enum rl_req_kind {
    RL_REQ_PROTO = 1,   /* the stream is now `proto` (from `offset` on) */
    RL_REQ_REQUEST = 2, /* a request starts at `offset` */
    RL_REQ_TUNNEL = 3,  /* a CONNECT head starting at `offset` names a
                         * tunnel (`name`, `port`); the bytes after it are
                         * sniffed again */
    RL_REQ_NAMED = 4,   /* the head of a request reported in an earlier
                         * feed ended at `offset`: here is its name */
};

enum rl_req_name_src {
    RL_NAME_UNKNOWN = 0, /* `name` is "" */
    RL_NAME_HINT = 1,    /* not known yet; `name` is the previous request's */
    RL_NAME_HOST = 2,    /* the Host header */
    RL_NAME_TARGET = 3,  /* the authority of an absolute-form target */
    RL_NAME_AUTHORITY = 4, /* HTTP/2 :authority (or host) */
};

struct rl_req_event {
    uint8_t kind;     /* enum rl_req_kind */
    uint8_t proto;    /* RL_REQ_PROTO: enum rl_http_proto */
    uint8_t name_src; /* enum rl_req_name_src */
    bool head_done;   /* the head (and so method, target) is complete */
    uint32_t offset;  /* into the fed buffer */
    uint32_t stream_id; /* HTTP/2; 0 for HTTP/1.x */
    uint16_t port;      /* 0 if the name gave none */
    char method[RL_HTTP_METHOD_MAX + 1]; /* as far as seen in this feed */
    char target[RL_HTTP_TARGET_MAX + 1]; /* cut at RL_HTTP_TARGET_MAX */
    char name[RL_HTTP_NAME_MAX + 1];     /* lowercased, no port */
};

/* The request being parsed: what an event is filled from. */
struct rl_req_cur {
    char method[RL_HTTP_METHOD_MAX + 1];
    char target[RL_HTTP_TARGET_MAX + 1];
    char host[RL_HTTP_NAME_MAX + 1];
    char tname[RL_HTTP_NAME_MAX + 1]; /* from an absolute-form target */
    uint16_t hport, tport;
    uint16_t mlen, tlen, hlen;
    bool host_ok, tname_ok, abs;
    bool upgrade; /* an Upgrade header: a 101 may answer it */
    /* GET /robots.txt (SPEC §14): only then is its User-Agent kept. */
    bool robots;
    uint8_t ualen;
    char ua[RL_HTTP_UA_MAX + 1];
};

struct rl_reqscan {
    struct rl_httpconn *conn; /* shared with the response side */
    struct rl_hpack *hp;      /* HTTP/2: this direction's decoder */
    uint8_t proto;            /* enum rl_http_proto */
    uint8_t st;               /* the parser's state (reqscan.c) */
    bool first;               /* no request seen since (re)detection */
    bool reported;            /* the current request has had its event */
    bool chunked, cl_seen, te_seen;
    bool hname_long;
    uint8_t hname_len;
    uint8_t hdr;      /* which header's value is being read */
    uint8_t pre;      /* bytes of the HTTP/2 preface, TLS record or
                       * " HTTP/1." matched */
    char hname[24];
    uint32_t head_len;
    uint64_t remain;  /* Content-Length bytes left */
    struct rl_chunked ch;
    struct rl_http_framing fr; /* Content-Length, Transfer-Encoding */
    struct rl_req_cur cur;
    char last[RL_HTTP_NAME_MAX + 1]; /* the previous request's name */
    /* HTTP/2 */
    struct rl_h2f h2f;
    uint32_t max_stream; /* the highest stream the client opened */
    bool hb_new;         /* the open header block opened a request */
};

/* Starts a connection's client→server scan. `conn` (zeroed by the caller)
 * is shared with the response side and must outlive the scanner. */
void rl_reqscan_init(struct rl_reqscan *s, struct rl_httpconn *conn);

/* Frees the HTTP/2 inflater, if any. The state may be re-initialised. */
void rl_reqscan_free(struct rl_reqscan *s);

/* What buf[0..n) would start, without changing anything: fills up to `max`
 * events in order and returns how many there are in all (more than `max`:
 * the rest were left out). */
size_t rl_reqscan_peek(const struct rl_reqscan *s, const uint8_t *buf,
                       size_t n, struct rl_req_event *ev, size_t max);

/* rl_reqscan_peek of the concatenation of iov[0..n) (one copy of the
 * state for all), each event's offset counted from the first byte of
 * iov[0]. A request reported at offset 0 of a later segment (it began in
 * an earlier one, or an earlier write) keeps offset 0. At most 4 GiB are
 * looked at. */
size_t rl_reqscan_peekv(const struct rl_reqscan *s, const struct iovec *iov,
                        size_t n, struct rl_req_event *ev, size_t max);

/* Takes buf[0..k), the bytes that went: records the requests in the
 * connection (for the response side), decodes HTTP/2 header blocks, and
 * fills events as rl_reqscan_peek would (ev may be NULL). Returns the
 * number of events, or -ENOMEM if an HTTP/2 inflater could not be made
 * (the stream is then RL_HTTP_NONE). */
long rl_reqscan_commit(struct rl_reqscan *s, const uint8_t *buf, size_t k,
                       struct rl_req_event *ev, size_t max);

/* What the stream is so far (enum rl_http_proto). */
static inline int rl_reqscan_proto(const struct rl_reqscan *s)
{
    return s->proto;
}

#endif
