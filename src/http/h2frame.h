/* h2frame.h — HTTP/2 frames split out of one direction's byte stream
 * (RFC 9113 §4, §6), after the client preface.
 *
 * Pure and resumable: a fixed-size state, any split of the bytes. The
 * splitter checks what every frame must obey (SETTINGS first; a header
 * block's CONTINUATIONs on its stream and nothing between them; padding
 * and priority that fit) and hands the header-block fragments, without
 * padding, priority or promised stream id, to the caller's callbacks in
 * order. A caller that asks for them (a `data` callback) is handed the
 * DATA frames' payloads likewise, without padding. Everything else is
 * skipped in bulk. */
#ifndef RL_H2FRAME_H
#define RL_H2FRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RL_H2_DATA 0x0
#define RL_H2_HEADERS 0x1
#define RL_H2_RST_STREAM 0x3
#define RL_H2_SETTINGS 0x4
#define RL_H2_PUSH_PROMISE 0x5
#define RL_H2_CONTINUATION 0x9
#define RL_H2_END_STREAM 0x01
#define RL_H2_END_HEADERS 0x04

struct rl_h2f {
    uint8_t st, fhlen, type, flags, padlen, pre;
    uint8_t fh[9];
    bool settings_seen;
    bool push_ok;       /* PUSH_PROMISE is allowed (the server's side) */
    uint32_t len, left; /* the frame's payload length, bytes left */
    uint32_t stream;    /* the frame's stream */
    uint32_t hb_stream; /* the stream whose header block is open, or 0 */
    uint32_t frag;      /* fragment (or DATA payload) bytes left in this
                         * frame */
};

struct rl_h2f_ops {
    /* A frame header is complete; it began at buf[start] if `here`, else
     * in an earlier feed. Returns false if the frame is nonsense. */
    bool (*frame)(void *ctx, const struct rl_h2f *f, size_t start,
                  bool here);
    /* The next piece of the open header block; `final` ends it. */
    void (*frag)(void *ctx, const struct rl_h2f *f, const uint8_t *p,
                 size_t n, bool final);
    /* The header block of f->hb_stream ended at buf[end - 1]. */
    void (*block_end)(void *ctx, const struct rl_h2f *f, size_t end);
    /* The next piece of a DATA frame's payload on f->stream, padding
     * left out; `last` ends the frame's payload (the frame's END_STREAM
     * is in f->flags). NULL: DATA frames are skipped unread. */
    void (*data)(void *ctx, const struct rl_h2f *f, const uint8_t *p,
                 size_t n, bool last);
};

void rl_h2f_init(struct rl_h2f *f, bool push_ok);

/* Starts a splitter in the middle of a stream whose SETTINGS went by,
 * `skip` bytes before the next frame's header (the rest of a frame
 * another splitter of the same stream was in). */
void rl_h2f_init_at(struct rl_h2f *f, bool push_ok, uint32_t skip);

/* Feeds buf[0..n). Returns 0, or -1 when the stream is not HTTP/2 from
 * buf[*bad] on (the state is then spent). */
/* Bytes left of the frame under way: 0 at a frame's first byte, SIZE_MAX
 * inside a frame's header (its length not known yet). */
size_t rl_h2f_left(const struct rl_h2f *f);

int rl_h2f_feed(struct rl_h2f *f, const uint8_t *buf, size_t n,
                const struct rl_h2f_ops *ops, void *ctx, size_t *bad);

#endif
