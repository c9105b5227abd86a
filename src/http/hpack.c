/* hpack.c — libnghttp2's inflater, kept to the fields the scanners use. */
#include "http/hpack.h"

#include <errno.h>
#include <nghttp2/nghttp2.h>
#include <stdlib.h>
#include <string.h>

struct rl_hpack {
    nghttp2_hd_inflater *inf;
    bool broken;
    bool in_block; /* a block has begun and not ended */
    struct rl_hpack_fields f;
};

int rl_hpack_new(struct rl_hpack **out)
{
    struct rl_hpack *h = calloc(1, sizeof *h);

    *out = NULL;
    if (h == NULL)
        return -ENOMEM;
    if (nghttp2_hd_inflate_new(&h->inf) != 0) {
        free(h);
        return -ENOMEM;
    }
    /* The scanner never sees the peer's SETTINGS_HEADER_TABLE_SIZE as the
     * endpoints agree on it: accept an encoder's table up to RL_HPACK_TABLE
     * (a size update beyond the default 4096 would otherwise break the
     * decoder). A larger table than the encoder's only keeps entries the
     * encoder no longer refers to; the indices stay the same. */
    if (nghttp2_hd_inflate_change_table_size(h->inf, RL_HPACK_TABLE) != 0) {
        nghttp2_hd_inflate_del(h->inf);
        free(h);
        return -ENOMEM;
    }
    *out = h;
    return 0;
}

void rl_hpack_free(struct rl_hpack *h)
{
    if (h == NULL)
        return;
    nghttp2_hd_inflate_del(h->inf);
    free(h);
}

static bool is(const nghttp2_nv *nv, const char *name)
{
    size_t n = strlen(name);

    return nv->namelen == n && memcmp(nv->name, name, n) == 0;
}

/* Copies a value cut to cap - 1 bytes; *long_ = it was longer. */
static void keep(char *dst, size_t cap, const nghttp2_nv *nv, bool *long_)
{
    size_t n = nv->valuelen < cap - 1 ? nv->valuelen : cap - 1;

    memcpy(dst, nv->value, n);
    dst[n] = '\0';
    if (long_ != NULL)
        *long_ = nv->valuelen > n;
}

static void field(struct rl_hpack_fields *f, const nghttp2_nv *nv)
{
    /* HTTP/2 field names arrive lowercase (RFC 9113 §8.2.1). */
    if (is(nv, ":method")) {
        keep(f->method, sizeof f->method, nv, NULL);
    } else if (is(nv, ":path")) {
        keep(f->path, sizeof f->path, nv, NULL);
    } else if (is(nv, ":authority")) {
        keep(f->authority, sizeof f->authority, nv, &f->authority_long);
    } else if (is(nv, "host")) {
        keep(f->host, sizeof f->host, nv, &f->host_long);
    } else if (is(nv, ":status")) {
        if (nv->valuelen == 3 && nv->value[0] >= '1' && nv->value[0] <= '9' &&
            nv->value[1] >= '0' && nv->value[1] <= '9' &&
            nv->value[2] >= '0' && nv->value[2] <= '9')
            f->status = (nv->value[0] - '0') * 100 +
                        (nv->value[1] - '0') * 10 + (nv->value[2] - '0');
    } else if (is(nv, "user-agent")) {
        keep(f->ua, sizeof f->ua, nv, NULL);
    } else if (is(nv, "content-encoding")) {
        f->coding_many = f->coding_many || f->coding[0] != '\0';
        keep(f->coding, sizeof f->coding, nv, &f->coding_long);
    } else if (is(nv, "retry-after")) {
        keep(f->retry_after, sizeof f->retry_after, nv, NULL);
        f->has_retry_after = true;
    }
}

void rl_hpack_feed(struct rl_hpack *h, const uint8_t *p, size_t n,
                   bool final)
{
    if (!h->in_block) {
        memset(&h->f, 0, sizeof h->f);
        h->in_block = true;
    }
    if (final)
        h->in_block = false;
    if (h->broken)
        return;
    for (;;) {
        nghttp2_nv nv;
        int flags = 0;
        ssize_t rv = nghttp2_hd_inflate_hd2(h->inf, &nv, &flags, p, n,
                                            final ? 1 : 0);

        if (rv < 0) {
            h->broken = true;
            memset(&h->f, 0, sizeof h->f);
            return;
        }
        p += rv;
        n -= (size_t)rv;
        if (flags & NGHTTP2_HD_INFLATE_EMIT)
            field(&h->f, &nv);
        if (flags & NGHTTP2_HD_INFLATE_FINAL) {
            nghttp2_hd_inflate_end_headers(h->inf);
            return;
        }
        if (!(flags & NGHTTP2_HD_INFLATE_EMIT) && n == 0)
            return;
    }
}

const struct rl_hpack_fields *rl_hpack_fields(const struct rl_hpack *h)
{
    return &h->f;
}

bool rl_hpack_broken(const struct rl_hpack *h)
{
    return h->broken;
}
