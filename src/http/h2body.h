/* h2body.h — one HTTP/2 stream's response body, taken out of the server's
 * frames into robots_body.h's reader (SPEC §14: a robots.txt fetched over
 * HTTP/2 is read as one fetched over HTTP/1.x is).
 *
 * The response scanner (respscan.h) reports the answer's HEADERS; the
 * caller starts one of these where that report's block ended, `skip`
 * bytes (the rest of that frame: its padding) before the next frame, and
 * feeds every later byte the program reads on the connection. The DATA
 * frames of `stream` go, padding stripped, into the body reader, in
 * pieces of any size; their END_STREAM ends the body (a body framed by
 * its stream, as an HTTP/1.x body framed by the close). A RST_STREAM of
 * the stream, or frames that are not HTTP/2, cut it short: the body is
 * fed no more, and is never ended, so it gives no answer.
 *
 * Nothing is counted or changed for the program: flow control is the
 * program's own. Pure like the scanners: no I/O, no clock, no allocation. */
#ifndef RL_H2BODY_H
#define RL_H2BODY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "http/h2frame.h"
#include "http/robots_body.h"

struct rl_h2body {
    struct rl_h2f f;
    uint32_t stream;
    bool done; /* ended, cut short, or not HTTP/2: nothing more is fed */
};

/* Starts reading `stream`'s DATA, `skip` bytes before the next frame. */
void rl_h2body_init(struct rl_h2body *h, uint32_t stream, uint32_t skip);

/* The next bytes the program read, buf[0..n): the stream's DATA payload
 * in them goes to `body`, and its END_STREAM closes it
 * (rl_robots_body_close). */
void rl_h2body_feed(struct rl_h2body *h, const uint8_t *buf, size_t n,
                    struct rl_robots_body *body);

/* Has the stream ended, or been cut short? */
static inline bool rl_h2body_done(const struct rl_h2body *h)
{
    return h->done;
}

#endif
