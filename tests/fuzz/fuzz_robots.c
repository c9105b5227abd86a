/* fuzz_robots.c — libFuzzer target for the robots.txt reader and the body
 * reader around it.
 *
 * Input: a flags byte, a seed byte for where the pieces are cut, then the
 * bytes. Flags: bits 0-1 the User-Agent; bits 2-4 all set, the text
 * repeated past the 64 KiB cap (one input in eight: it is slow). The bytes
 * are read twice as a robots.txt (in one piece and in pieces), then as a
 * body (sized, gzip; below the cap also chunked in random chunk sizes, raw
 * deflate, zlib deflate), then raw as a chunked, gzip and deflate body,
 * whole and in pieces.
 * Invariants: no crash or leak; the answer does not depend on where the
 * pieces are cut; a sized, chunked or compressed body of the text gives
 * the answer the text gives; a delay is within its clamp; a body of bytes
 * that are not what they claim gives the same state and answer however it
 * is cut. A violated invariant aborts. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "http/robots.h"
#include "http/robots_body.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c)                                                               \
    do {                                                                       \
        if (!(c)) {                                                            \
            fprintf(stderr, "fuzz_robots: %s:%d: %s\n", __FILE__, __LINE__,    \
                    #c);                                                       \
            abort();                                                           \
        }                                                                      \
    } while (0)

#define NONE UINT64_MAX

static const char *const agents[4] = {"Scrapy/2.8 (+https://scrapy.org)",
                                      "python-requests/2.28.1", "curl/7.88.1",
                                      ""};

static uint64_t rng;

static size_t next_cut(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return 1 + (size_t)(rng % 97);
}

static uint64_t text_delay(const char *ua, const uint8_t *p, size_t n,
                           bool whole)
{
    struct rl_robots r;
    uint64_t ns;

    rl_robots_init(&r, ua, strlen(ua));
    for (size_t at = 0; at < n;) {
        size_t k = whole ? n : next_cut();

        if (k > n - at)
            k = n - at;
        rl_robots_feed(&r, p + at, k);
        at += k;
    }
    rl_robots_finish(&r);
    if (!rl_robots_delay(&r, &ns))
        return NONE;
    CHECK(ns <= RL_ROBOTS_DELAY_MAX_NS);
    return ns;
}

static struct rl_robots_body body;
/* The fuzzer links zlib itself; the shim loads it (policy/zlibload.h). */
static const struct rl_robots_zlib zlib = {inflateInit2_, inflate};

struct got {
    enum rl_robots_state state;
    uint64_t ns;
};

/* p[0..n) as a body, whole or in pieces, then the connection closed. */
static struct got body_delay(const char *ua, bool chunked, int64_t length,
                             enum rl_robots_coding coding, const uint8_t *p,
                             size_t n, bool whole)
{
    struct got g;
    uint64_t ns;

    rl_robots_body_init(&body, ua, strlen(ua), chunked, length, coding,
                        &zlib);
    for (size_t at = 0; at < n;) {
        size_t k = whole ? n : next_cut();

        if (k > n - at)
            k = n - at;
        rl_robots_body_feed(&body, p + at, k);
        at += k;
    }
    CHECK(body.arena_used <= sizeof body.arena);
    CHECK(body.z.total_out <= RL_ROBOTS_BODY_MAX + 1024u);
    rl_robots_body_close(&body);
    g.state = rl_robots_body_state(&body);
    g.ns = rl_robots_body_delay(&body, &ns) ? ns : NONE;
    CHECK(g.state == RL_ROBOTS_READ || g.ns == NONE);
    return g;
}

static uint8_t *chunk(const uint8_t *p, size_t n, size_t *out_n)
{
    uint8_t *out = malloc(n * 6 + 16);
    size_t at = 0;

    CHECK(out != NULL);
    for (size_t i = 0; i < n;) {
        size_t k = next_cut();

        if (k > n - i)
            k = n - i;
        at += (size_t)sprintf((char *)out + at, "%zx\r\n", k);
        memcpy(out + at, p + i, k);
        at += k;
        i += k;
        memcpy(out + at, "\r\n", 2);
        at += 2;
    }
    memcpy(out + at, "0\r\n\r\n", 5);
    *out_n = at + 5;
    return out;
}

static uint8_t *squeeze(int wbits, const uint8_t *p, size_t n, size_t *out_n)
{
    z_stream z;
    uint8_t *out;
    size_t cap;

    memset(&z, 0, sizeof z);
    /* The fastest level and least memory: what is tested is the reader. */
    CHECK(deflateInit2(&z, 1, Z_DEFLATED, wbits, 1, Z_DEFAULT_STRATEGY) ==
          Z_OK);
    cap = deflateBound(&z, n) + 64;
    out = malloc(cap);
    CHECK(out != NULL);
    z.next_in = (Bytef *)(uintptr_t)p;
    z.avail_in = (uInt)n;
    z.next_out = out;
    z.avail_out = (uInt)cap;
    CHECK(deflate(&z, Z_FINISH) == Z_STREAM_END);
    *out_n = z.total_out;
    deflateEnd(&z);
    return out;
}

static void same_as_text(const char *ua, uint64_t want, bool chunked,
                         int64_t length, enum rl_robots_coding coding,
                         const uint8_t *p, size_t n)
{
    struct got a = body_delay(ua, chunked, length, coding, p, n, true);
    struct got b = body_delay(ua, chunked, length, coding, p, n, false);

    CHECK(a.state == RL_ROBOTS_READ && b.state == RL_ROBOTS_READ);
    CHECK(a.ns == want && b.ns == want);
}

/* Bytes that claim a framing or coding they may not have. */
static void same_either_way(const char *ua, bool chunked,
                            enum rl_robots_coding coding, const uint8_t *p,
                            size_t n)
{
    struct got a = body_delay(ua, chunked, -1, coding, p, n, true);
    struct got b = body_delay(ua, chunked, -1, coding, p, n, false);

    CHECK(a.state == b.state && a.ns == b.ns);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *ua;
    uint8_t *text, *enc;
    size_t n, en;
    uint64_t want;
    bool repeated;

    if (size < 2)
        return 0;
    ua = agents[data[0] & 3];
    rng = 0x9e3779b97f4a7c15ull ^ data[1];
    data += 2;
    size -= 2;

    /* Past the cap, the text is read as text and as gzip only: each pass
     * is slow, and the other codings' cuts are tried below the cap. */
    repeated = (data[-2] & 0x1c) == 0x1c && size > 0;
    n = repeated ? size * (RL_ROBOTS_BODY_MAX / size + 2) : size;
    text = malloc(n + 1);
    CHECK(text != NULL);
    for (size_t at = 0; at < n; at += size)
        memcpy(text + at, data, size);

    want = text_delay(ua, text, n, true);
    CHECK(text_delay(ua, text, n, false) == want);
    same_as_text(ua, want, false, (int64_t)n, RL_ROBOTS_IDENTITY, text, n);
    enc = squeeze(16 + 9, text, n, &en);
    same_as_text(ua, want, false, (int64_t)en, RL_ROBOTS_GZIP, enc, en);
    free(enc);
    if (repeated) {
        free(text);
        return 0;
    }
    enc = chunk(text, n, &en);
    same_as_text(ua, want, true, -1, RL_ROBOTS_IDENTITY, enc, en);
    free(enc);
    enc = squeeze(9, text, n, &en);
    same_as_text(ua, want, false, -1, RL_ROBOTS_DEFLATE, enc, en);
    free(enc);
    enc = squeeze(-9, text, n, &en);
    same_as_text(ua, want, false, (int64_t)en, RL_ROBOTS_DEFLATE, enc, en);
    free(enc);
    free(text);

    same_either_way(ua, true, RL_ROBOTS_IDENTITY, data, size);
    same_either_way(ua, false, RL_ROBOTS_GZIP, data, size);
    same_either_way(ua, false, RL_ROBOTS_DEFLATE, data, size);
    same_either_way(ua, true, RL_ROBOTS_GZIP, data, size);
    return 0;
}
