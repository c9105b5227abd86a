/* h2body.c — see h2body.h. */
#include "http/h2body.h"

struct ctx {
    struct rl_h2body *h;
    struct rl_robots_body *body;
};

void rl_h2body_init(struct rl_h2body *h, uint32_t stream, uint32_t skip)
{
    /* A server may push (the stream is the program's; PUSH_PROMISE is
     * allowed on it). */
    rl_h2f_init_at(&h->f, true, skip);
    h->stream = stream;
    h->done = false;
}

static bool frame(void *ctx, const struct rl_h2f *f, size_t start, bool here)
{
    struct ctx *c = ctx;

    (void)start;
    (void)here;
    if (f->type == RL_H2_RST_STREAM && f->stream == c->h->stream)
        c->h->done = true; /* cut short: the body is never closed */
    return true;
}

static void frag(void *ctx, const struct rl_h2f *f, const uint8_t *p,
                 size_t n, bool final)
{
    (void)ctx;
    (void)f;
    (void)p;
    (void)n;
    (void)final;
}

static void block_end(void *ctx, const struct rl_h2f *f, size_t end)
{
    (void)ctx;
    (void)f;
    (void)end;
}

static void data(void *ctx, const struct rl_h2f *f, const uint8_t *p,
                 size_t n, bool last)
{
    struct ctx *c = ctx;

    if (c->h->done || f->stream != c->h->stream)
        return;
    if (n > 0)
        rl_robots_body_feed(c->body, p, n);
    if (last && (f->flags & RL_H2_END_STREAM)) {
        rl_robots_body_close(c->body);
        c->h->done = true;
    }
}

static const struct rl_h2f_ops ops = {frame, frag, block_end, data};

void rl_h2body_feed(struct rl_h2body *h, const uint8_t *buf, size_t n,
                    struct rl_robots_body *body)
{
    struct ctx c = {h, body};
    size_t bad = 0;

    if (h->done)
        return;
    if (rl_h2f_feed(&h->f, buf, n, &ops, &c, &bad) != 0)
        h->done = true;
}
