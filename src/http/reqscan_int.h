/* reqscan_int.h — what reqscan.c and reqscan_h2.c share: the parser's
 * states and one feed's context (the part of a scan that is not state:
 * where the events go, where this feed's request began). */
#ifndef RL_REQSCAN_INT_H
#define RL_REQSCAN_INT_H

#include "http/reqscan.h"

enum {
    ST_DETECT, ST_TLS, ST_PREFACE, ST_OFF,
    /* HTTP/1.x head */
    ST_IDLE, ST_METHOD, ST_TARGET, ST_VER, ST_HNAME, ST_HEND_LF, ST_HVAL,
    ST_HVAL_LF, ST_BODY, ST_CHUNKED,
    ST_H2,
};

struct rq_ctx {
    struct rl_reqscan *s; /* the real state (commit) or a copy (peek) */
    bool commit;
    struct rl_req_event *ev;
    size_t max, nev;
    long cur_ev;     /* the current request's event index, -1: not here */
    size_t start;    /* where the current request (or frame) began ... */
    bool start_here; /* ... if that was in this feed */
    size_t base;     /* where the HTTP/2 frames of this feed began */
    size_t seg;      /* added to every event's offset (rl_reqscan_peekv:
                        where this segment starts in the write) */
    int err;
};

/* The offset of an event whose first byte was in an earlier feed. */
#define RQ_EARLIER SIZE_MAX

struct rl_req_event *rq_emit(struct rq_ctx *c, uint8_t kind, size_t off);
void rq_fill(struct rq_ctx *c, struct rl_req_event *e);
void rq_none(struct rq_ctx *c, size_t off);
void rq_h1_byte(struct rq_ctx *c, uint8_t b, size_t i);
/* The event of the current request, if it is in this feed's array. */
struct rl_req_event *rq_cur_event(struct rq_ctx *c);

/* The header a value belongs to (struct rl_reqscan's hdr). */
enum { HDR_OTHER, HDR_HOST, HDR_CL, HDR_TE, HDR_UA };

/* One request head (reqhead.c): is its method m; its target is complete;
 * the head is complete at byte i (its name, its body's framing); a header
 * name is complete; one byte of a header value (false: the head is
 * malformed); the value is complete. */
bool rq_is_method(const struct rl_req_cur *r, const char *m);
void rq_target_done(struct rl_reqscan *s);
void rq_head_done(struct rq_ctx *c, size_t i);
void rq_hname_done(struct rl_reqscan *s);
bool rq_hval_byte(struct rl_reqscan *s, uint8_t b);
void rq_hval_done(struct rl_reqscan *s);
/* Scans HTTP/2 frames from buf[i]; returns where it stopped (n, or where
 * the stream stopped being HTTP/2). */
size_t rq_h2(struct rq_ctx *c, const uint8_t *buf, size_t n, size_t i);

#endif
