/* http.h — what the request and response scanners of one connection share.
 *
 * The scanners (reqscan.h: what the program writes; respscan.h: what it
 * reads) are pure: bytes in, events out, no I/O, no clock, no global state.
 * They meet in one struct rl_httpconn per connection, which the caller owns
 * and zeroes: the request side records, in order, which requests went out
 * (their method and name) and the response side pairs each response with
 * its request. Everything here is fixed-size: a connection that pipelines
 * deeper than RL_HTTP_FIFO or keeps more than RL_HTTP_STREAMS HTTP/2
 * streams open loses the pairing of the excess (the response's name is
 * then unknown), never memory.
 *
 * Only the request side writes the FIFO's tail and the stream table's
 * inserts; only the response side pops and removes. Neither is locked: the
 * caller feeds one connection's scanners from one thread at a time. */
#ifndef RL_HTTP_H
#define RL_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define RL_HTTP_METHOD_MAX 23u    /* a longer method token: not HTTP */
#define RL_HTTP_TARGET_MAX 256u   /* a target is cut there (SPEC §11) */
#define RL_HTTP_NAME_MAX 255u     /* a longer Host: the name is unknown */
#define RL_HTTP_HEAD_MAX 65536u   /* a longer head: not HTTP from there */
#define RL_HTTP_RETRY_AFTER_MAX 63u
/* The first bytes of a robots.txt request's User-Agent kept (SPEC §14):
 * more than the longest product token robots.h reads, so that a longer
 * one is seen to be longer. */
#define RL_HTTP_UA_MAX 72u
/* A response's Content-Encoding, kept while it is short (robots.txt's
 * body, SPEC §14): "gzip", "x-gzip", "deflate", "identity". */
#define RL_HTTP_CODING_MAX 15u
#define RL_HTTP_FIFO 16u
#define RL_HTTP_NAMES 8u
#define RL_HTTP_STREAMS 32u

/* What a byte stream turned out to be (from its first bytes). */
enum rl_http_proto {
    RL_HTTP_UNKNOWN = 0, /* not enough bytes yet */
    RL_HTTP_1 = 1,
    RL_HTTP_2 = 2,
    RL_HTTP_TLS = 3,  /* a TLS handshake record: requests the shim cannot see */
    RL_HTTP_NONE = 4, /* not HTTP (or no longer): later bytes cost nothing */
};

/* The methods whose responses are framed differently. */
enum rl_http_method {
    RL_HTTP_M_OTHER = 0,
    RL_HTTP_M_HEAD = 1,
    RL_HTTP_M_CONNECT = 2,
};

/* One request that went out, as the response side needs it. */
struct rl_http_sent {
    uint32_t stream_id; /* HTTP/2; 0 for HTTP/1.x */
    uint8_t method;     /* enum rl_http_method */
    uint8_t slot;       /* into rl_httpconn.names, or RL_HTTP_NAMES: unknown */
    uint16_t gen;       /* the slot's generation when it was recorded */
    bool upgrade;       /* HTTP/1.x: it asked to upgrade (an Upgrade header) */
    bool robots;        /* GET /robots.txt (SPEC §14) */
};

struct rl_httpconn {
    /* The few distinct names a connection's requests carry (usually one;
     * a proxy's, one per site): a slot no waiting request refers to is
     * reused first, and its generation tells a stale reference from a
     * live one. */
    char names[RL_HTTP_NAMES][RL_HTTP_NAME_MAX + 1];
    uint16_t name_gen[RL_HTTP_NAMES];
    uint32_t name_next;
    /* HTTP/1.x: requests sent and not yet answered, oldest first. */
    struct rl_http_sent fifo[RL_HTTP_FIFO];
    uint32_t fifo_head, fifo_len;
    /* HTTP/2: client streams opened and not yet answered. */
    struct rl_http_sent streams[RL_HTTP_STREAMS];
    uint32_t nstreams;
    /* Set by the response side on a 101 Switching Protocols that answers
     * a request that asked to upgrade: the request side stops at its next
     * head. */
    bool switched;
    /* The User-Agent value (its first RL_HTTP_UA_MAX bytes, leading
     * blanks skipped) of the latest GET /robots.txt the request side
     * committed: its answer's Crawl-delay is this agent's (SPEC §14). One
     * for the connection: robots.txt requests pipelined with different
     * agents on one connection read the latest's. */
    char robots_ua[RL_HTTP_UA_MAX + 1];
};

/* Records `name` (NUL-terminated, maybe "") and returns the reference for a
 * struct rl_http_sent. */
void rl_httpconn_name_ref(struct rl_httpconn *c, const char *name,
                          uint8_t *slot, uint16_t *gen);
/* The name a reference stands for, or NULL when unknown or reused. */
const char *rl_httpconn_name(const struct rl_httpconn *c, uint8_t slot,
                             uint16_t gen);

/* The FIFO (HTTP/1.x): push drops the request when full (its response will
 * be unpaired); pop returns false when empty. */
void rl_httpconn_push(struct rl_httpconn *c, const struct rl_http_sent *s);
bool rl_httpconn_pop(struct rl_httpconn *c, struct rl_http_sent *out);

/* The stream table (HTTP/2): add evicts the oldest when full; take finds
 * and removes (remove = false: finds only). */
void rl_httpconn_add_stream(struct rl_httpconn *c,
                            const struct rl_http_sent *s);
bool rl_httpconn_stream(struct rl_httpconn *c, uint32_t stream_id,
                        bool remove, struct rl_http_sent *out);

/* Byte helpers the scanners share. */
static inline uint8_t rl_http_lower(uint8_t c)
{
    return (c >= 'A' && c <= 'Z') ? (uint8_t)(c + 32) : c;
}

/* The two headers that frame an HTTP/1.x body, as their values arrive a
 * byte at a time (requests and responses frame bodies alike). */
struct rl_http_framing {
    uint64_t cl;    /* Content-Length so far */
    uint8_t digits; /* 0 before its digits, 1 in them, 2 after them */
    uint8_t te_len;
    char te[8]; /* the last non-space bytes of Transfer-Encoding */
};

/* A Content-Length value starts. */
static inline void rl_http_cl_start(struct rl_http_framing *f)
{
    f->cl = 0;
    f->digits = 0;
}

/* One byte of a Content-Length value (not CR or LF). False when the value
 * is malformed (not digits, digits after spaces, past 64 bits). */
static inline bool rl_http_cl_byte(struct rl_http_framing *f, uint8_t b)
{
    if (b == ' ' || b == '\t') {
        if (f->digits == 1)
            f->digits = 2;
        return true;
    }
    if (b < '0' || b > '9' || f->digits == 2 || f->cl > (UINT64_MAX - 9) / 10)
        return false;
    f->cl = f->cl * 10 + (uint64_t)(b - '0');
    f->digits = 1;
    return true;
}

/* One byte of a Transfer-Encoding value: only its end is kept. */
static inline void rl_http_te_byte(struct rl_http_framing *f, uint8_t b)
{
    if (b == ' ' || b == '\t')
        return;
    if (f->te_len == sizeof f->te) {
        memmove(f->te, f->te + 1, sizeof f->te - 1);
        f->te_len--;
    }
    f->te[f->te_len++] = (char)rl_http_lower(b);
}

/* Does the Transfer-Encoding seen end in "chunked" (its last coding)? */
static inline bool rl_http_te_chunked(const struct rl_http_framing *f)
{
    return f->te_len >= 7 && memcmp(f->te + f->te_len - 7, "chunked", 7) == 0 &&
           (f->te_len == 7 || f->te[f->te_len - 8] == ',');
}
/* RFC 9110 tchar: what a method token or header name is made of. A
 * table: the scanners ask it of every byte of a header name. */
extern const bool rl_http_tchars[256];
static inline bool rl_http_tchar(uint8_t c)
{
    return rl_http_tchars[c];
}

/* Has the word x a byte below `lo` (lo <= 0x80), or a DEL? Exact as a
 * yes or no (bit tricks on eight bytes at once). */
static inline bool rl_http_word_stops(uint64_t x, uint64_t lo)
{
    const uint64_t ones = 0x0101010101010101ull, highs = ones << 7;
    uint64_t del = x ^ (ones * 0x7f);
    return (((x - ones * lo) & ~x) | ((del - ones) & ~del)) & highs;
}

/* How many of buf[i..end) are bytes from `lo` up (and HTAB when `tab`),
 * but DEL: eight at a time while none of them needs a look. */
static inline size_t rl_http_byte_run(const uint8_t *buf, size_t i, size_t end,
                                      uint8_t lo, bool tab)
{
    size_t j = i;
    for (;;) {
        while (end - j >= 8) {
            uint64_t x;
            memcpy(&x, buf + j, 8);
            if (rl_http_word_stops(x, lo))
                break;
            j += 8;
        }
        size_t word = end - j < 8 ? end : j + 8;
        while (j < word) {
            uint8_t b = buf[j];
            if ((b < lo && !(tab && b == '\t')) || b == 0x7f)
                return j - i;
            j++;
        }
        if (j == end)
            return j - i;
    }
}

/* What a field value or reason phrase may hold before its line ends: no
 * control byte but HTAB, no DEL. */
static inline size_t rl_http_text_run(const uint8_t *buf, size_t i,
                                      size_t end)
{
    return rl_http_byte_run(buf, i, end, 0x20, true);
}

/* What a request target may hold: bytes above SP, no DEL. */
static inline size_t rl_http_target_run(const uint8_t *buf, size_t i,
                                        size_t end)
{
    return rl_http_byte_run(buf, i, end, 0x21, false);
}

/* How many of buf[i..n) are tchars, up to at most `cap` of them (a header
 * name's bytes, looked at in one loop). */
static inline size_t rl_http_tchar_run(const uint8_t *buf, size_t i, size_t n,
                                       size_t cap)
{
    size_t j = i, end = n - i < cap ? n : i + cap;
    while (j < end && rl_http_tchars[buf[j]])
        j++;
    return j - i;
}

/* The next bytes of a header name, in one run: what a scanner taking one
 * byte at a time would take (tchars, while the name fits name[cap] with
 * its NUL and the head stays within RL_HTTP_HEAD_MAX). Appends them to
 * name (*len bytes so far; *long_: it did not fit) and *head_len, and
 * returns where the run stopped (i: none taken). */
static inline size_t rl_http_hname_run(char *name, size_t cap, uint8_t *len,
                                       bool long_, uint32_t *head_len,
                                       const uint8_t *buf, size_t i, size_t n)
{
    size_t room = cap - 1 - *len;
    if (long_)
        return i;
    if (RL_HTTP_HEAD_MAX - *head_len < room)
        room = RL_HTTP_HEAD_MAX - *head_len;
    size_t k = rl_http_tchar_run(buf, i, n, room);
    memcpy(name + *len, buf + i, k);
    *len = (uint8_t)(*len + k);
    *head_len += (uint32_t)k;
    return i + k;
}

/* The name an authority ("host", "host:port", "[v6]:port", "user@host")
 * names: lowercased, without port or userinfo, into name[RL_HTTP_NAME_MAX
 * + 1]; *port = the port or 0. Returns false (name "") if it is empty,
 * too long or its port is not a number up to 65535. */
bool rl_http_authority(const char *a, size_t n, char *name, uint16_t *port);

#endif
