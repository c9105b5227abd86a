/* robots_body.c — de-chunk, inflate and cap a robots.txt body. */
#include "http/robots_body.h"

#include <string.h>

#include "http/http.h"

/* Decoded bytes handed on per inflate call: small, it is on the stack of
 * whatever receive hook feeds the body. */
#define OUT_STEP 1024u
/* The most input one inflate call is given (avail_in is an unsigned int). */
#define IN_STEP (1u << 30)

enum rl_robots_coding rl_robots_coding(const char *v, size_t n)
{
    static const struct {
        const char *name;
        enum rl_robots_coding coding;
    } known[] = {{"identity", RL_ROBOTS_IDENTITY},
                 {"gzip", RL_ROBOTS_GZIP},
                 {"x-gzip", RL_ROBOTS_GZIP},
                 {"deflate", RL_ROBOTS_DEFLATE}};

    while (n > 0 && (*v == ' ' || *v == '\t')) {
        v++;
        n--;
    }
    while (n > 0 && (v[n - 1] == ' ' || v[n - 1] == '\t'))
        n--;
    if (n == 0)
        return RL_ROBOTS_IDENTITY;
    for (size_t k = 0; k < sizeof known / sizeof known[0]; k++) {
        size_t len = strlen(known[k].name), i = 0;

        if (len != n)
            continue;
        while (i < n && rl_http_lower((uint8_t)v[i]) == known[k].name[i])
            i++;
        if (i == n)
            return known[k].coding;
    }
    return RL_ROBOTS_UNREADABLE;
}

/* zlib's allocator: a bump arena in the struct, never freed piecemeal. */
static voidpf arena_alloc(voidpf opaque, uInt items, uInt size)
{
    struct rl_robots_body *b = opaque;
    size_t want = ((size_t)items * size + 15u) & ~(size_t)15u;

    if (want > sizeof b->arena - b->arena_used)
        return Z_NULL;
    b->arena_used += want;
    return b->arena + b->arena_used - want;
}

static void arena_free(voidpf opaque, voidpf p)
{
    (void)opaque;
    (void)p;
}

/* Decoded text for the reader: the cap ends the reading. */
static void text(struct rl_robots_body *b, const uint8_t *p, size_t n)
{
    if (!rl_robots_feed(&b->robots, p, n))
        b->state = RL_ROBOTS_READ;
}

/* A zlib header (RFC 1950 §2.2): deflate, a window of at most 32 KiB, and
 * the check bits. Without one, a `deflate` body is raw deflate. */
static bool zlib_header(const uint8_t h[2])
{
    return (h[0] & 0x0f) == 8 && (h[0] >> 4) <= 7 &&
           ((unsigned)h[0] << 8 | h[1]) % 31 == 0;
}

static bool start_inflate(struct rl_robots_body *b)
{
    int bits = b->coding == RL_ROBOTS_GZIP ? 15 + 16
               : zlib_header(b->zhead)     ? 15
                                           : -15;

    b->z.zalloc = arena_alloc;
    b->z.zfree = arena_free;
    b->z.opaque = b;
    /* What the inflateInit2 macro would pass: this header's version and
     * z_stream's size, which the library checks against its own. */
    b->z_started = b->zlib->init2(&b->z, bits, ZLIB_VERSION,
                                  (int)sizeof(z_stream)) == Z_OK;
    return b->z_started;
}

/* Inflates p[0..n) into the reader, until the input is used, the stream
 * ends or the cap is reached; work beyond the cap is never done. */
static void inflate_some(struct rl_robots_body *b, const uint8_t *p, size_t n)
{
    uint8_t out[OUT_STEP];

    b->z.next_in = (Bytef *)(uintptr_t)p;
    b->z.avail_in = (uInt)n;
    while (b->state == RL_ROBOTS_READING) {
        uInt in_before = b->z.avail_in;
        size_t got;
        int rc;

        b->z.next_out = out;
        b->z.avail_out = sizeof out;
        rc = b->zlib->inflate(&b->z, Z_NO_FLUSH);
        got = sizeof out - b->z.avail_out;
        if (got > 0)
            text(b, out, got);
        if (b->state != RL_ROBOTS_READING)
            return;
        if (rc == Z_STREAM_END) {
            /* What follows the compressed stream is not text. */
            rl_robots_finish(&b->robots);
            b->state = RL_ROBOTS_READ;
            return;
        }
        if ((rc != Z_OK && rc != Z_BUF_ERROR) ||
            (got == 0 && b->z.avail_in == in_before && in_before > 0)) {
            b->state = RL_ROBOTS_FAILED;
            return;
        }
        if (b->z.avail_in == 0 && got < sizeof out)
            return;
    }
}

static void compressed(struct rl_robots_body *b, const uint8_t *p, size_t n)
{
    if (!b->z_started) {
        if (b->coding == RL_ROBOTS_DEFLATE) {
            while (n > 0 && b->zhead_len < 2) {
                b->zhead[b->zhead_len++] = *p++;
                n--;
            }
            if (b->zhead_len < 2)
                return;
        }
        if (!start_inflate(b)) {
            b->state = RL_ROBOTS_FAILED;
            return;
        }
        if (b->coding == RL_ROBOTS_DEFLATE)
            inflate_some(b, b->zhead, 2);
    }
    while (n > 0 && b->state == RL_ROBOTS_READING) {
        size_t step = n < IN_STEP ? n : IN_STEP;

        inflate_some(b, p, step);
        p += step;
        n -= step;
    }
}

/* Body content (after de-chunking) p[0..n). */
static void content(struct rl_robots_body *b, const uint8_t *p, size_t n)
{
    if (n == 0 || b->state != RL_ROBOTS_READING)
        return;
    b->raw += n;
    if (b->coding == RL_ROBOTS_IDENTITY)
        text(b, p, n);
    else
        compressed(b, p, n);
}

/* The body's framing ended. */
static void body_end(struct rl_robots_body *b)
{
    if (b->state != RL_ROBOTS_READING)
        return;
    if (b->coding != RL_ROBOTS_IDENTITY && b->raw > 0) {
        /* A compressed stream that did not end was cut short. */
        b->state = RL_ROBOTS_FAILED;
        return;
    }
    rl_robots_finish(&b->robots);
    b->state = RL_ROBOTS_READ;
}

void rl_robots_body_init(struct rl_robots_body *b, const char *ua,
                         size_t ua_len, bool chunked, int64_t length,
                         enum rl_robots_coding coding,
                         const struct rl_robots_zlib *zlib)
{
    memset(b, 0, offsetof(struct rl_robots_body, arena));
    if (coding != RL_ROBOTS_IDENTITY && zlib == NULL)
        coding = RL_ROBOTS_UNREADABLE;
    rl_robots_init(&b->robots, ua, ua_len);
    rl_chunked_init(&b->ch);
    b->coding = (uint8_t)coding;
    b->zlib = zlib;
    b->chunked = chunked;
    b->sized = !chunked && length >= 0;
    b->remain = b->sized ? (uint64_t)length : 0;
    b->state =
        coding == RL_ROBOTS_UNREADABLE ? RL_ROBOTS_FAILED : RL_ROBOTS_READING;
    if (b->sized && b->remain == 0)
        body_end(b);
}

void rl_robots_body_feed(struct rl_robots_body *b, const uint8_t *buf, size_t n)
{
    while (n > 0 && b->state == RL_ROBOTS_READING) {
        if (b->chunked) {
            size_t data;
            bool done;
            long used = rl_chunked_data(&b->ch, buf, n, &done, &data);

            if (used < 0) {
                b->state = RL_ROBOTS_FAILED;
                return;
            }
            content(b, buf + (size_t)used - data, data);
            buf += used;
            n -= (size_t)used;
            if (done)
                body_end(b);
        } else if (b->sized) {
            size_t take = n < b->remain ? n : (size_t)b->remain;

            content(b, buf, take);
            b->remain -= take;
            n = 0;
            if (b->remain == 0)
                body_end(b);
        } else {
            content(b, buf, n);
            n = 0;
        }
    }
}

void rl_robots_body_close(struct rl_robots_body *b)
{
    if (b->state != RL_ROBOTS_READING)
        return;
    if (b->chunked || b->sized)
        b->state = RL_ROBOTS_FAILED;
    else
        body_end(b);
}

enum rl_robots_state rl_robots_body_state(const struct rl_robots_body *b)
{
    return (enum rl_robots_state)b->state;
}

bool rl_robots_body_delay(const struct rl_robots_body *b, uint64_t *ns)
{
    *ns = 0;
    return b->state == RL_ROBOTS_READ && rl_robots_delay(&b->robots, ns);
}
