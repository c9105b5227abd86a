/* test_h2answer.c — the HTTP/2 made-up answer (SPEC §15): one HEADERS
 * frame a client decodes to 429 + retry-after, leaving the dynamic table
 * it shares with the server as it was, so the server's later blocks still
 * decode. */
#include <criterion/criterion.h>
#include <nghttp2/nghttp2.h>
#include <string.h>

#include "http/h2answer.h"

struct seen {
    char status[8], retry[24], server[32];
    int fields;
};

/* Decodes one whole block with inf, the fields kept in *s. */
static void inflate_all(nghttp2_hd_inflater *inf, const uint8_t *p, size_t n,
                        struct seen *s)
{
    memset(s, 0, sizeof *s);
    for (;;) {
        nghttp2_nv nv;
        int flags = 0;
        ssize_t r = nghttp2_hd_inflate_hd2(inf, &nv, &flags, p, n, 1);
        cr_assert_geq(r, 0, "the block decodes");
        p += r;
        n -= (size_t)r;
        if (flags & NGHTTP2_HD_INFLATE_EMIT) {
            char *dst = NULL;
            size_t cap = 0;
            s->fields++;
            if (nv.namelen == 7 && memcmp(nv.name, ":status", 7) == 0)
                dst = s->status, cap = sizeof s->status;
            else if (nv.namelen == 11 && memcmp(nv.name, "retry-after", 11) == 0)
                dst = s->retry, cap = sizeof s->retry;
            else if (nv.namelen == 6 && memcmp(nv.name, "server", 6) == 0)
                dst = s->server, cap = sizeof s->server;
            if (dst != NULL && nv.valuelen < cap)
                memcpy(dst, nv.value, nv.valuelen);
        }
        if (flags & NGHTTP2_HD_INFLATE_FINAL) {
            nghttp2_hd_inflate_end_headers(inf);
            return;
        }
        cr_assert(n > 0 || (flags & NGHTTP2_HD_INFLATE_EMIT), "block ends");
    }
}

/* The server's block: its fields indexed into the shared table. */
static size_t server_block(nghttp2_hd_deflater *d, uint8_t *out, size_t cap)
{
    nghttp2_nv nv[] = {
        {(uint8_t *)":status", (uint8_t *)"200", 7, 3, NGHTTP2_NV_FLAG_NONE},
        {(uint8_t *)"server", (uint8_t *)"nginx/1.2", 6, 9,
         NGHTTP2_NV_FLAG_NONE},
        {(uint8_t *)"x-trace", (uint8_t *)"abcdef", 7, 6,
         NGHTTP2_NV_FLAG_NONE},
    };
    ssize_t r = nghttp2_hd_deflate_hd(d, out, cap, nv, 3);
    cr_assert_gt(r, 0);
    return (size_t)r;
}

Test(h2answer, is_one_headers_frame_ending_its_stream)
{
    uint8_t f[256];
    size_t n = rl_h2answer_format(f, sizeof f, 5, 429, 7);
    cr_assert_gt(n, 9);
    size_t len = (size_t)f[0] << 16 | (size_t)f[1] << 8 | f[2];
    cr_expect_eq(len, n - 9, "the length covers the block");
    cr_expect_eq(f[3], 0x1, "HEADERS");
    cr_expect_eq(f[4], 0x1 | 0x4, "END_STREAM | END_HEADERS");
    cr_expect_eq(f[5] << 24 | f[6] << 16 | f[7] << 8 | f[8], 5);
    /* (RFC 7541 §6.3: 001xxxxx is a table size update.) */
    cr_expect_neq(f[9] & 0xe0, 0x20, "no dynamic table size update");
}

Test(h2answer, decodes_to_its_status_and_wait_and_leaves_the_table_alone)
{
    nghttp2_hd_deflater *srv;
    nghttp2_hd_inflater *cli;
    cr_assert_eq(nghttp2_hd_deflate_new(&srv, 4096), 0);
    cr_assert_eq(nghttp2_hd_inflate_new(&cli), 0);
    uint8_t blk[256];
    struct seen s;
    size_t bn = server_block(srv, blk, sizeof blk);
    inflate_all(cli, blk, bn, &s);
    cr_assert_str_eq(s.server, "nginx/1.2");
    size_t entries = nghttp2_hd_inflate_get_num_table_entries(cli);
    size_t size = nghttp2_hd_inflate_get_dynamic_table_size(cli);
    size_t max = nghttp2_hd_inflate_get_max_dynamic_table_size(cli);

    uint8_t f[256];
    size_t n = rl_h2answer_format(f, sizeof f, 3, 429, 12);
    cr_assert_gt(n, 9);
    inflate_all(cli, f + 9, n - 9, &s);
    cr_expect_str_eq(s.status, "429");
    cr_expect_str_eq(s.retry, "12");
    cr_expect_eq(s.fields, 3, ":status, retry-after, content-length");
    cr_expect_eq(nghttp2_hd_inflate_get_num_table_entries(cli), entries);
    cr_expect_eq(nghttp2_hd_inflate_get_dynamic_table_size(cli), size);
    cr_expect_eq(nghttp2_hd_inflate_get_max_dynamic_table_size(cli), max,
                 "the table keeps its size limit");

    /* The server's next block refers to the entries it indexed: the
     * client still reads them as the server meant. */
    bn = server_block(srv, blk, sizeof blk);
    cr_expect_lt(bn, 8, "the server's block is all references");
    inflate_all(cli, blk, bn, &s);
    cr_expect_str_eq(s.status, "200");
    cr_expect_str_eq(s.server, "nginx/1.2");
    nghttp2_hd_deflate_del(srv);
    nghttp2_hd_inflate_del(cli);
}

Test(h2answer, says_503_when_asked_and_refuses_what_does_not_fit)
{
    nghttp2_hd_inflater *cli;
    cr_assert_eq(nghttp2_hd_inflate_new(&cli), 0);
    uint8_t f[256];
    struct seen s;
    size_t n = rl_h2answer_format(f, sizeof f, 1, 503, 1);
    cr_assert_gt(n, 9);
    inflate_all(cli, f + 9, n - 9, &s);
    cr_expect_str_eq(s.status, "503");
    cr_expect_str_eq(s.retry, "1");
    cr_expect_eq(rl_h2answer_format(f, 12, 1, 429, 1), 0, "too small");
    cr_expect_eq(rl_h2answer_format(f, sizeof f, 0, 429, 1), 0,
                 "stream 0 is the connection's");
    nghttp2_hd_inflate_del(cli);
}
