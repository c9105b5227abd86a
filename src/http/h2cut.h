/* h2cut.h — the client's HTTP/2 frames that are not to reach the server
 * (SPEC §15, on_deny = respond): a refused request's stream is cut from
 * the client's byte stream, frame by frame, its made-up answer coming
 * from the shim.
 *
 * The server's HPACK decoder then never sees the refused request's header
 * block, so only a block that leaves the dynamic table as it was may be
 * cut: one that inserts an entry (or resizes the table) would shift every
 * later reference of the client's and break the connection. Such a
 * request is refused as under `fail`.
 *
 * Pure: no I/O, no allocation. */
#ifndef RL_H2CUT_H
#define RL_H2CUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Cut streams remembered per connection, so that the client's later
 * frames on them (a body's DATA, a RST_STREAM or WINDOW_UPDATE sent
 * before it read the made-up answer's END_STREAM) are cut too: the
 * newest are kept, a fixed ring, so a long-lived or hostile connection
 * costs no more. A frame on an older cut stream reaches the server: a
 * client sends none on a stream it has read the end of, and a server
 * that has seen a later stream open takes the older one as closed
 * (RFC 9113 §5.1.1) and ignores it or resets it; only one that has seen
 * no later stream may treat it as a frame on an idle stream and end the
 * connection. */
#define RL_H2CUT_MAX 32

struct rl_h2cut {
    uint32_t stream[RL_H2CUT_MAX]; /* a ring; 0: an empty place */
    unsigned next;
};

/* The table size both ends start with (RFC 7541 §4.2). */
#define RL_H2CUT_TABLE 4096u

/* Does the whole header block p[0..n) leave a decoder's dynamic table as
 * it was: no literal with incremental indexing, no table size update past
 * RL_H2CUT_TABLE (RFC 7541 §6)? False as well when it is malformed. (A
 * client that lowered its table in a block that went, then raised it in
 * one cut, would break the server's: no client is known to.) */
bool rl_h2cut_block_keeps_table(const uint8_t *p, size_t n);

void rl_h2cut_add(struct rl_h2cut *c, uint32_t stream);
bool rl_h2cut_has(const struct rl_h2cut *c, uint32_t stream);

/* A frame header's payload length and stream. */
static inline uint32_t rl_h2cut_len(const uint8_t h[9])
{
    return (uint32_t)h[0] << 16 | (uint32_t)h[1] << 8 | h[2];
}
static inline uint32_t rl_h2cut_stream(const uint8_t h[9])
{
    return ((uint32_t)h[5] << 24 | (uint32_t)h[6] << 16 |
            (uint32_t)h[7] << 8 | h[8]) & 0x7fffffffu;
}

#endif
