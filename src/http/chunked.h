/* chunked.h — skipping a body in chunked coding (RFC 9112 §7.1):
 * size [; extensions] CRLF, data CRLF, ..., 0 CRLF, trailer fields, CRLF.
 * Pure and resumable (any split); data is skipped in bulk; each size or
 * trailer line is bounded by RL_HTTP_HEAD_MAX. */
#ifndef RL_CHUNKED_H
#define RL_CHUNKED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct rl_chunked {
    uint8_t st;
    bool digits;    /* a hex digit of the size seen */
    uint32_t line;  /* bytes of the current size line or of the trailers */
    uint64_t remain;
};

void rl_chunked_init(struct rl_chunked *ch);

/* Feeds buf[0..n): returns how many bytes belong to the body (all n, or
 * fewer when it ended: *done is then true), or -1 if it is malformed. */
long rl_chunked_feed(struct rl_chunked *ch, const uint8_t *buf, size_t n,
                     bool *done);

/* Like rl_chunked_feed, but stops after the first run of data in
 * buf[0..n), for a reader of the body's content: returns how many bytes
 * it took (or -1 if malformed), the last *data_len of them being data
 * (0: none). Call again on the rest while it takes some and !*done. */
long rl_chunked_data(struct rl_chunked *ch, const uint8_t *buf, size_t n,
                     bool *done, size_t *data_len);

#endif
