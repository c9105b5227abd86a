/* h2answer.h — the HTTP/2 form of a made-up answer (SPEC §15, on_deny =
 * respond): one HEADERS frame on the refused request's stream, flags
 * END_STREAM | END_HEADERS, carrying
 *
 *     :status 429 (or 503), retry-after N, content-length 0
 *
 * No body: a DATA frame would spend flow-control window the server never
 * granted (and its WINDOW_UPDATE would reach a server that sent nothing).
 *
 * The client decodes the block with the dynamic table it shares with the
 * server, so the block must leave that table as it was: libnghttp2's
 * deflater at the default table size (a smaller one announces a table
 * size update first, which would shrink the client's table) and every
 * field flagged never-indexed (nothing is inserted). The deflater starts
 * empty each time, so the block refers to no dynamic entry either.
 *
 * Pure: no I/O, no clock; one short-lived deflater per call. */
#ifndef RL_H2ANSWER_H
#define RL_H2ANSWER_H

#include <stddef.h>
#include <stdint.h>

/* The frame answering `stream` with `status`, asking the client to wait
 * retry_s seconds, written to buf. Returns its length, 0 when it does not
 * fit in len or the deflater could not be had. */
size_t rl_h2answer_format(uint8_t *buf, size_t len, uint32_t stream,
                          int status, uint64_t retry_s);

#endif
