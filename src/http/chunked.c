/* chunked.c — the chunked-coding skipper both scanners use, and the
 * reader of its data robots_body.c uses. */
#include "http/chunked.h"

#include <string.h>

#include "http/http.h"

enum { SIZE, EXT, SIZE_LF, DATA, DATA_CR, DATA_LF, TNAME, TLINE, TEND_LF };

void rl_chunked_init(struct rl_chunked *ch)
{
    memset(ch, 0, sizeof *ch);
}

static int hex(uint8_t b)
{
    if (b >= '0' && b <= '9')
        return b - '0';
    b = rl_http_lower(b);
    if (b >= 'a' && b <= 'f')
        return b - 'a' + 10;
    return -1;
}

/* One byte outside the data. Returns -1 malformed, 1 the body ended. */
static int byte(struct rl_chunked *ch, uint8_t b)
{
    int v;

    if (++ch->line > RL_HTTP_HEAD_MAX)
        return -1;
    switch (ch->st) {
    case SIZE:
        v = hex(b);
        if (v >= 0) {
            if (ch->remain >> 56)
                return -1;
            ch->remain = ch->remain * 16 + (uint64_t)v;
            ch->digits = true;
            return 0;
        }
        if (!ch->digits)
            return -1;
        if (b == ';' || b == ' ' || b == '\t') {
            ch->st = EXT;
            return 0;
        }
        if (b != '\r' && b != '\n')
            return -1;
        /* fall through */
    case EXT:
        if (b == '\r') {
            ch->st = SIZE_LF;
            return 0;
        }
        if (b != '\n')
            return (b < 0x20 && b != '\t') || b == 0x7f ? -1 : 0;
        /* fall through */
    case SIZE_LF:
        if (b != '\n')
            return -1;
        ch->line = 0;
        ch->digits = false;
        ch->st = ch->remain == 0 ? TNAME : DATA;
        return 0;
    case DATA_CR:
        if (b == '\r') {
            ch->st = DATA_LF;
            return 0;
        }
        /* fall through */
    case DATA_LF:
        if (b != '\n')
            return -1;
        ch->st = SIZE;
        ch->line = 0;
        return 0;
    case TNAME:
        if (b == '\r') {
            ch->st = TEND_LF;
            return 0;
        }
        if (b == '\n')
            return 1;
        ch->st = TLINE;
        return 0;
    case TLINE:
        if (b == '\n')
            ch->st = TNAME;
        return 0;
    default: /* TEND_LF */
        return b == '\n' ? 1 : -1;
    }
}

long rl_chunked_feed(struct rl_chunked *ch, const uint8_t *buf, size_t n,
                     bool *done)
{
    size_t i = 0;

    *done = false;
    while (i < n && !*done) {
        size_t data;
        long took = rl_chunked_data(ch, buf + i, n - i, done, &data);
        if (took < 0)
            return -1;
        i += (size_t)took; /* at least a byte: a size line's, or data */
    }
    return (long)i;
}

long rl_chunked_data(struct rl_chunked *ch, const uint8_t *buf, size_t n,
                     bool *done, size_t *data_len)
{
    size_t i = 0;

    *done = false;
    *data_len = 0;
    while (i < n) {
        if (ch->st == DATA) {
            size_t take = n - i < ch->remain ? n - i : (size_t)ch->remain;

            ch->remain -= take;
            if (ch->remain == 0)
                ch->st = DATA_CR;
            *data_len = take;
            return (long)(i + take);
        }
        switch (byte(ch, buf[i++])) {
        case 0:
            break;
        case 1:
            *done = true;
            rl_chunked_init(ch);
            return (long)i;
        default:
            return -1;
        }
    }
    return (long)i;
}
