/* http.c — the per-connection record the two scanners share, and the
 * byte helpers they both use. */
#include "http/http.h"

#include <string.h>

static bool referred(const struct rl_httpconn *c, uint32_t slot)
{
    for (uint32_t k = 0; k < c->fifo_len; k++)
        if (c->fifo[(c->fifo_head + k) % RL_HTTP_FIFO].slot == slot)
            return true;
    for (uint32_t k = 0; k < c->nstreams; k++)
        if (c->streams[k].slot == slot)
            return true;
    return false;
}

/* Round-robin over the slots, skipping those a waiting request names. */
static uint32_t free_slot(struct rl_httpconn *c)
{
    for (uint32_t k = 0; k < RL_HTTP_NAMES; k++) {
        uint32_t i = c->name_next++ % RL_HTTP_NAMES;

        if (!referred(c, i))
            return i;
    }
    return c->name_next++ % RL_HTTP_NAMES;
}

void rl_httpconn_name_ref(struct rl_httpconn *c, const char *name,
                          uint8_t *slot, uint16_t *gen)
{
    uint32_t i;

    for (i = 0; i < RL_HTTP_NAMES; i++) {
        if (c->name_gen[i] != 0 && strcmp(c->names[i], name) == 0) {
            *slot = (uint8_t)i;
            *gen = c->name_gen[i];
            return;
        }
    }
    i = free_slot(c);
    memcpy(c->names[i], name, strnlen(name, RL_HTTP_NAME_MAX));
    c->names[i][strnlen(name, RL_HTTP_NAME_MAX)] = '\0';
    /* Generation 0 means "never used": skip it on wrap. */
    c->name_gen[i]++;
    if (c->name_gen[i] == 0)
        c->name_gen[i] = 1;
    *slot = (uint8_t)i;
    *gen = c->name_gen[i];
}

const char *rl_httpconn_name(const struct rl_httpconn *c, uint8_t slot,
                             uint16_t gen)
{
    if (slot >= RL_HTTP_NAMES || gen == 0 || c->name_gen[slot] != gen)
        return NULL;
    return c->names[slot];
}

void rl_httpconn_push(struct rl_httpconn *c, const struct rl_http_sent *s)
{
    if (c->fifo_len >= RL_HTTP_FIFO)
        return;
    c->fifo[(c->fifo_head + c->fifo_len) % RL_HTTP_FIFO] = *s;
    c->fifo_len++;
}

bool rl_httpconn_pop(struct rl_httpconn *c, struct rl_http_sent *out)
{
    if (c->fifo_len == 0)
        return false;
    *out = c->fifo[c->fifo_head];
    c->fifo_head = (c->fifo_head + 1) % RL_HTTP_FIFO;
    c->fifo_len--;
    return true;
}

void rl_httpconn_add_stream(struct rl_httpconn *c,
                            const struct rl_http_sent *s)
{
    if (c->nstreams >= RL_HTTP_STREAMS) {
        memmove(&c->streams[0], &c->streams[1],
                (RL_HTTP_STREAMS - 1) * sizeof c->streams[0]);
        c->nstreams--;
    }
    c->streams[c->nstreams++] = *s;
}

bool rl_httpconn_stream(struct rl_httpconn *c, uint32_t stream_id,
                        bool remove, struct rl_http_sent *out)
{
    for (uint32_t i = 0; i < c->nstreams; i++) {
        if (c->streams[i].stream_id != stream_id)
            continue;
        *out = c->streams[i];
        if (remove) {
            memmove(&c->streams[i], &c->streams[i + 1],
                    (c->nstreams - i - 1) * sizeof c->streams[0]);
            c->nstreams--;
        }
        return true;
    }
    return false;
}

#define TCHAR_RANGE(a, b) [a ... b] = true
const bool rl_http_tchars[256] = {
    TCHAR_RANGE('a', 'z'), TCHAR_RANGE('A', 'Z'), TCHAR_RANGE('0', '9'),
    ['!'] = true, ['#'] = true, ['$'] = true, ['%'] = true, ['&'] = true,
    ['\''] = true, ['*'] = true, ['+'] = true, ['-'] = true, ['.'] = true,
    ['^'] = true, ['_'] = true, ['`'] = true, ['|'] = true, ['~'] = true,
};

bool rl_http_authority(const char *a, size_t n, char *name, uint16_t *port)
{
    const char *at, *end = a + n, *h, *hend, *p = NULL;
    uint32_t v = 0;
    size_t len;

    name[0] = '\0';
    *port = 0;
    at = memrchr(a, '@', n);
    h = at != NULL ? at + 1 : a;
    if (h < end && *h == '[') {
        hend = memchr(h, ']', (size_t)(end - h));
        if (hend == NULL)
            return false;
        h++; /* the name of an IPv6 literal is the address, unbracketed */
        if (hend + 1 < end) {
            if (hend[1] != ':')
                return false;
            p = hend + 2;
        }
    } else {
        hend = memchr(h, ':', (size_t)(end - h));
        if (hend != NULL)
            p = hend + 1;
        else
            hend = end;
    }
    len = (size_t)(hend - h);
    if (len == 0 || len > RL_HTTP_NAME_MAX)
        return false;
    if (p != NULL) {
        if (p == end)
            return false;
        for (; p < end; p++) {
            if (*p < '0' || *p > '9')
                return false;
            v = v * 10 + (uint32_t)(*p - '0');
            if (v > 65535)
                return false;
        }
    }
    for (size_t i = 0; i < len; i++)
        name[i] = (char)rl_http_lower((uint8_t)h[i]);
    name[len] = '\0';
    *port = (uint16_t)v;
    return true;
}
