/* h2frame.c — the frame splitter shared by both directions. */
#include "http/h2frame.h"

#include <string.h>

#define F_PADDED 0x08
#define F_PRIORITY 0x20

enum { FH, PADLEN, EXTRA, FRAG, SKIP, DATA };

static const uint8_t empty[1];

void rl_h2f_init(struct rl_h2f *f, bool push_ok)
{
    memset(f, 0, sizeof *f);
    f->push_ok = push_ok;
}

void rl_h2f_init_at(struct rl_h2f *f, bool push_ok, uint32_t skip)
{
    rl_h2f_init(f, push_ok);
    f->settings_seen = true;
    f->left = skip;
    f->st = skip > 0 ? SKIP : FH;
}

/* After a DATA frame's padding length: its payload. Returns false if the
 * padding does not fit. */
static bool data_start(struct rl_h2f *f, const struct rl_h2f_ops *ops,
                       void *ctx)
{
    if (f->padlen > f->left)
        return false;
    f->frag = f->left - f->padlen;
    f->left = f->padlen;
    f->st = DATA;
    if (f->frag == 0) {
        ops->data(ctx, f, empty, 0, true);
        f->st = f->left > 0 ? SKIP : FH;
    }
    return true;
}

/* After padding length and priority/promised id: the fragment. Returns
 * false if the padding does not fit. */
static bool frag_start(struct rl_h2f *f, const struct rl_h2f_ops *ops,
                       void *ctx, size_t i)
{
    bool end = f->flags & RL_H2_END_HEADERS;

    if (f->padlen > f->left)
        return false;
    f->frag = f->left - f->padlen;
    f->left = f->padlen;
    f->st = FRAG;
    if (f->frag == 0) {
        ops->frag(ctx, f, empty, 0, end);
        if (end) {
            ops->block_end(ctx, f, i);
            f->hb_stream = 0;
        }
        f->st = f->left > 0 ? SKIP : FH;
    }
    return true;
}

/* The extra bytes before a fragment: priority (5) or promised id (4). */
static uint32_t extra(const struct rl_h2f *f)
{
    if (f->type == RL_H2_HEADERS)
        return f->flags & F_PRIORITY ? 5u : 0u;
    if (f->type == RL_H2_PUSH_PROMISE)
        return 4u;
    return 0;
}

static bool frame_begin(struct rl_h2f *f, const struct rl_h2f_ops *ops,
                        void *ctx, size_t start, bool here, size_t i)
{
    const uint8_t *h = f->fh;
    bool block;

    f->len = (uint32_t)h[0] << 16 | (uint32_t)h[1] << 8 | h[2];
    f->type = h[3];
    f->flags = h[4];
    f->stream = ((uint32_t)h[5] << 24 | (uint32_t)h[6] << 16 |
                 (uint32_t)h[7] << 8 | h[8]) & 0x7fffffffu;
    f->left = f->len;
    f->padlen = 0;
    f->pre = 0;
    f->fhlen = 0;
    if (!f->settings_seen) {
        if (f->type != RL_H2_SETTINGS || f->stream != 0)
            return false;
        f->settings_seen = true;
    }
    if (f->hb_stream != 0 &&
        (f->type != RL_H2_CONTINUATION || f->stream != f->hb_stream))
        return false;
    block = f->type == RL_H2_HEADERS || f->type == RL_H2_CONTINUATION ||
            f->type == RL_H2_PUSH_PROMISE;
    if (block && f->stream == 0)
        return false;
    if (f->type == RL_H2_CONTINUATION && f->hb_stream == 0)
        return false;
    if (f->type == RL_H2_PUSH_PROMISE && !f->push_ok)
        return false;
    if (!ops->frame(ctx, f, start, here))
        return false;
    if (f->type == RL_H2_DATA && ops->data != NULL) {
        if (f->stream == 0)
            return false;
        if (f->flags & F_PADDED) {
            if (f->len < 1)
                return false;
            f->st = PADLEN;
            return true;
        }
        return data_start(f, ops, ctx);
    }
    if (!block) {
        f->st = f->left > 0 ? SKIP : FH;
        return true;
    }
    if (f->type == RL_H2_CONTINUATION)
        return frag_start(f, ops, ctx, i);
    if (f->len < (f->flags & F_PADDED ? 1u : 0u) + extra(f))
        return false;
    f->hb_stream = f->stream;
    if (f->flags & F_PADDED) {
        f->st = PADLEN;
        return true;
    }
    if (extra(f) > 0) {
        f->st = EXTRA;
        return true;
    }
    return frag_start(f, ops, ctx, i);
}

size_t rl_h2f_left(const struct rl_h2f *f)
{
    if (f->st == FH)
        return f->fhlen == 0 ? 0 : SIZE_MAX;
    /* A fragment's bytes are counted apart from the padding after it. */
    return f->st == FRAG || f->st == DATA ? (size_t)f->frag + f->left : f->left;
}

int rl_h2f_feed(struct rl_h2f *f, const uint8_t *buf, size_t n,
                const struct rl_h2f_ops *ops, void *ctx, size_t *bad)
{
    size_t i = 0, start = 0;
    bool here = false;

    while (i < n) {
        switch (f->st) {
        case FH:
            if (f->fhlen == 0) {
                start = i;
                here = true;
            }
            f->fh[f->fhlen++] = buf[i++];
            if (f->fhlen == 9 &&
                !frame_begin(f, ops, ctx, start, here, i)) {
                *bad = here ? start : 0;
                return -1;
            }
            break;
        case PADLEN:
            f->padlen = buf[i++];
            f->left--;
            if (f->type == RL_H2_DATA) {
                if (!data_start(f, ops, ctx))
                    goto bad;
            } else if (extra(f) > 0)
                f->st = EXTRA;
            else if (!frag_start(f, ops, ctx, i))
                goto bad;
            break;
        case EXTRA:
            i++;
            f->left--;
            if (++f->pre == extra(f) && !frag_start(f, ops, ctx, i))
                goto bad;
            break;
        case FRAG: {
            size_t take = n - i < f->frag ? n - i : f->frag;
            bool final = (f->flags & RL_H2_END_HEADERS) && take == f->frag;

            ops->frag(ctx, f, buf + i, take, final);
            f->frag -= (uint32_t)take;
            i += take;
            if (f->frag == 0) {
                if (f->flags & RL_H2_END_HEADERS) {
                    ops->block_end(ctx, f, i);
                    f->hb_stream = 0;
                }
                f->st = f->left > 0 ? SKIP : FH;
            }
            break;
        }
        case DATA: {
            size_t take = n - i < f->frag ? n - i : f->frag;

            f->frag -= (uint32_t)take;
            ops->data(ctx, f, buf + i, take, f->frag == 0);
            i += take;
            if (f->frag == 0)
                f->st = f->left > 0 ? SKIP : FH;
            break;
        }
        default: {
            size_t take = n - i < f->left ? n - i : f->left;

            f->left -= (uint32_t)take;
            i += take;
            if (f->left == 0)
                f->st = FH;
            break;
        }
        }
    }
    return 0;
bad:
    *bad = i;
    return -1;
}
