/* robots_body.h — a robots.txt response's body, decoded as it passes, into
 * robots.h's reader (SPEC §14).
 *
 * The caller has read the head of a `200` answer to `GET /robots.txt` and
 * says how its body is framed (chunked, a Content-Length, or until the
 * connection closes) and coded (Content-Encoding identity, gzip or
 * deflate, through zlib's inflate); it then feeds the body's bytes as the
 * program reads them, in pieces of any size. At most RL_ROBOTS_BODY_MAX
 * decoded bytes are read: the inflate stops there, so a small body that
 * inflates without end costs no more than the cap.
 *
 * Pure like the scanners: no I/O, no clock, no global state. zlib's
 * functions come from the caller (the shim loads libz.so.1 only when a
 * compressed body comes, policy/zlibload.h); <zlib.h> gives their types.
 * zlib's memory is an arena inside the struct (zlib is given its own
 * allocator), so the struct must not be moved or copied once started and
 * needs no freeing: inflateEnd is never wanted. */
#ifndef RL_ROBOTS_BODY_H
#define RL_ROBOTS_BODY_H

#include <stdalign.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <zlib.h>

#include "http/chunked.h"
#include "http/robots.h"

/* Holds inflate's state and its 32 KiB window, with room to spare. */
#define RL_ROBOTS_ZARENA (48u * 1024u)

/* The zlib functions an inflate calls, typed by <zlib.h>'s prototypes so
 * that a changed one fails the build. init2 is what the inflateInit2 macro
 * expands to. */
struct rl_robots_zlib {
    __typeof__(&inflateInit2_) init2;
    __typeof__(&inflate) inflate;
};

enum rl_robots_coding {
    RL_ROBOTS_IDENTITY = 0,
    RL_ROBOTS_GZIP = 1,
    RL_ROBOTS_DEFLATE = 2,   /* zlib-wrapped (RFC 9110) or, as some send, raw */
    RL_ROBOTS_UNREADABLE = 3 /* br, zstd, compress, several codings: not read */
};

enum rl_robots_state {
    RL_ROBOTS_READING = 0, /* more of the body is wanted */
    RL_ROBOTS_READ = 1,    /* the body ended, or the cap: the answer is final */
    RL_ROBOTS_FAILED = 2,  /* bad framing or coding, or cut short: no answer */
};

struct rl_robots_body {
    struct rl_robots robots;
    struct rl_chunked ch;
    const struct rl_robots_zlib *zlib; /* NULL: no compressed body is read */
    z_stream z;
    uint64_t remain; /* a sized body's bytes still to come */
    uint64_t raw;    /* body content bytes taken (before decoding) */
    uint8_t coding;  /* enum rl_robots_coding */
    uint8_t state;   /* enum rl_robots_state */
    bool chunked, sized;
    bool z_started;              /* inflateInit2 done */
    uint8_t zhead[2], zhead_len; /* deflate: the bytes that tell the wrapper */
    size_t arena_used;
    alignas(16) unsigned char arena[RL_ROBOTS_ZARENA];
};

/* The coding a Content-Encoding value v[0..n) names: empty or `identity`
 * is RL_ROBOTS_IDENTITY; `gzip`, `x-gzip` and `deflate` (any case,
 * surrounding spaces) theirs; anything else, a list included, unreadable. */
enum rl_robots_coding rl_robots_coding(const char *v, size_t n);

/* Starts reading a body for the request's User-Agent value ua[0..ua_len):
 * chunked, else `length` bytes (negative: until the connection closes),
 * in `coding`, gzip and deflate inflated by `zlib` (kept, not copied). An
 * unreadable coding fails at once, and so does a compressed one without
 * zlib (NULL). */
void rl_robots_body_init(struct rl_robots_body *b, const char *ua,
                         size_t ua_len, bool chunked, int64_t length,
                         enum rl_robots_coding coding,
                         const struct rl_robots_zlib *zlib);

/* Takes the next bytes buf[0..n) after the head; bytes after the body's
 * end (or once the state is not RL_ROBOTS_READING) are ignored. */
void rl_robots_body_feed(struct rl_robots_body *b, const uint8_t *buf,
                         size_t n);

/* The connection ended: a body read until close is complete; any other
 * still being read was cut short. */
void rl_robots_body_close(struct rl_robots_body *b);

enum rl_robots_state rl_robots_body_state(const struct rl_robots_body *b);

/* The answer once the state is RL_ROBOTS_READ: stores the Crawl-delay in
 * nanoseconds and returns true, or returns false (none, or not read). */
bool rl_robots_body_delay(const struct rl_robots_body *b, uint64_t *ns);

#endif
