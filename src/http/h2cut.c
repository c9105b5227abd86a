/* h2cut.c — see h2cut.h. */
#include "http/h2cut.h"

/* An HPACK integer with an N-bit prefix (RFC 7541 §5.1) from p[*i];
 * false when it runs past the block or past 2^28. */
static bool integer(const uint8_t *p, size_t n, size_t *i, unsigned bits,
                    uint32_t *v)
{
    uint32_t mask = (1u << bits) - 1;
    if (*i >= n)
        return false;
    *v = p[(*i)++] & mask;
    if (*v < mask)
        return true;
    for (unsigned shift = 0; shift <= 21; shift += 7) {
        if (*i >= n)
            return false;
        uint8_t b = p[(*i)++];
        *v += (uint32_t)(b & 0x7f) << shift;
        if (!(b & 0x80))
            return true;
    }
    return false;
}

/* Skips a string literal (§5.2): its length, then its bytes. */
static bool string(const uint8_t *p, size_t n, size_t *i)
{
    uint32_t len;
    if (!integer(p, n, i, 7, &len) || len > n - *i)
        return false;
    *i += len;
    return true;
}

bool rl_h2cut_block_keeps_table(const uint8_t *p, size_t n)
{
    size_t i = 0;
    while (i < n) {
        uint8_t b = p[i];
        uint32_t idx;
        if (b & 0x80) { /* indexed field: reads the table only */
            if (!integer(p, n, &i, 7, &idx) || idx == 0)
                return false;
            continue;
        }
        if ((b & 0xc0) == 0x40)
            return false; /* inserts an entry */
        if ((b & 0xe0) == 0x20) {
            /* A size update within the default (nghttp2 restates its
             * size after each SETTINGS of the peer's): the server's
             * decoder, not told, keeps a table at least as large as the
             * client's, whose references stay the same. */
            if (!integer(p, n, &i, 5, &idx) || idx > RL_H2CUT_TABLE)
                return false;
            continue;
        }
        /* Without indexing (0000) or never indexed (0001): a name by
         * index or literal, then the value. */
        if (!integer(p, n, &i, 4, &idx) || (idx == 0 && !string(p, n, &i)) ||
            !string(p, n, &i))
            return false;
    }
    return true;
}

void rl_h2cut_add(struct rl_h2cut *c, uint32_t stream)
{
    if (rl_h2cut_has(c, stream))
        return;
    c->stream[c->next] = stream;
    c->next = (c->next + 1) % RL_H2CUT_MAX;
}

bool rl_h2cut_has(const struct rl_h2cut *c, uint32_t stream)
{
    for (unsigned i = 0; stream != 0 && i < RL_H2CUT_MAX; i++)
        if (c->stream[i] == stream)
            return true;
    return false;
}
