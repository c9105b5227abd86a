/* respscan.h — the responses in what a program reads on one connection.
 *
 * The server→client byte stream of the connection whose requests
 * reqscan.h counts: each response's status and raw Retry-After (SPEC §12),
 * paired with the request it answers through the connection's shared
 * struct rl_httpconn. HTTP/1.x responses answer the requests in order;
 * a response to HEAD, and a 1xx, 204 or 304, has no body; other bodies are
 * skipped by Content-Length, chunked coding or read-until-close (after
 * which nothing more is parsed); 101 Switching Protocols ends the scan
 * when it answers a request that asked to upgrade (an Upgrade header),
 * and is skipped as malformed otherwise (no event, nothing paired); a 2xx
 * to CONNECT opens a tunnel whose bytes are sniffed again. HTTP/2:
 * HEADERS frames of the server carry :status, decoded with this
 * direction's own HPACK inflater (PUSH_PROMISE blocks are decoded for the
 * table's sake); each client stream's response is paired by stream id.
 *
 * Pure like reqscan.h: bytes in, events out, a fixed-size state, the one
 * allocation an HTTP/2 connection's inflater. There is no peek: what was
 * received is received. */
#ifndef RL_RESPSCAN_H
#define RL_RESPSCAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "http/chunked.h"
#include "http/h2frame.h"
#include "http/hpack.h"
#include "http/http.h"

enum rl_resp_kind {
    RL_RESP_PROTO = 1,  /* the stream is now `proto` from `offset` on */
    RL_RESP_STATUS = 2, /* a response's head ended just before `offset` */
};

struct rl_resp_event {
    uint8_t kind;   /* enum rl_resp_kind */
    uint8_t proto;  /* RL_RESP_PROTO: enum rl_http_proto */
    uint8_t method; /* of the request it answers: enum rl_http_method */
    bool paired;    /* the request it answers is known (name may be "") */
    bool has_retry_after;
    uint16_t status;
    uint32_t offset;
    uint32_t stream_id; /* HTTP/2; 0 for HTTP/1.x */
    char retry_after[RL_HTTP_RETRY_AFTER_MAX + 1]; /* raw, trimmed */
    char name[RL_HTTP_NAME_MAX + 1]; /* the request's name, "" unknown */
    /* It answers GET /robots.txt (SPEC §14): how its body, from `offset`
     * on, is framed and coded, for http/robots_body.h. HTTP/2: the body
     * is its stream's DATA, framed by the stream's end (length -1; 0
     * when the HEADERS frame ended the stream: no DATA comes), the next
     * frame `h2_skip` bytes after `offset` (http/h2body.h). */
    bool robots;
    bool chunked;   /* chunked; else `length` bytes */
    int64_t length; /* -1: until the connection (HTTP/2: stream) ends */
    uint32_t h2_skip;
    /* Content-Encoding, trimmed ("": none); several, or a value longer
     * than RL_HTTP_CODING_MAX, is RL_RESP_CODINGS. */
    char coding[RL_HTTP_CODING_MAX + 1];
};
#define RL_RESP_CODINGS "," /* a list: no coding robots_body.h reads */

struct rl_respscan {
    struct rl_httpconn *conn;
    struct rl_hpack *hp;
    uint8_t proto, st, pre, hdr, hname_len, ralen;
    bool hname_long, chunked, te_seen, cl_seen, ra_seen, hb_push;
    /* HTTP/2: the open header block's HEADERS frame ended its stream (an
     * answer with no body: an empty robots.txt is one). */
    bool hb_end;
    bool ce_seen, ce_many;
    uint8_t celen;
    char ce[RL_HTTP_CODING_MAX + 1];
    uint16_t status;
    char hname[24];
    char ra[RL_HTTP_RETRY_AFTER_MAX + 1];
    uint8_t det[9];
    uint32_t head_len;
    struct rl_http_framing fr;
    uint64_t remain;
    struct rl_chunked ch;
    struct rl_h2f h2f;
};

/* Starts the scan of the responses of `conn`'s requests. */
void rl_respscan_init(struct rl_respscan *s, struct rl_httpconn *conn);
void rl_respscan_free(struct rl_respscan *s);

/* Takes buf[0..n), what the program received. Fills up to `max` events (ev
 * may be NULL) and returns how many there are in all, or -ENOMEM if an
 * HTTP/2 inflater could not be made (the stream is then RL_HTTP_NONE). */
long rl_respscan_feed(struct rl_respscan *s, const uint8_t *buf, size_t n,
                      struct rl_resp_event *ev, size_t max);

/* Is no response part-read: an HTTP/1.x stream between two responses
 * (or before the first), or an HTTP/2 one (whose answers are per stream)?
 * False once the stream is not HTTP, or while one response is part-read
 * (its body read until the close included). */
bool rl_respscan_between(const struct rl_respscan *s);

/* Is an HTTP/2 stream, its SETTINGS read, between two of the server's
 * frames (where a frame of the shim's own may go)? */
bool rl_respscan_h2_boundary(const struct rl_respscan *s);

#endif
