/* test_h2cut.c — which HTTP/2 header blocks may be cut from what reaches
 * the server (SPEC §15): only those that leave the HPACK table as it was,
 * and the streams cut, kept by the connection. */
#include <criterion/criterion.h>
#include <nghttp2/nghttp2.h>
#include <string.h>

#include "http/h2cut.h"

static size_t block(nghttp2_hd_deflater *d, uint8_t flags, const char *path,
                    const char *ua, uint8_t *out, size_t cap)
{
    nghttp2_nv nv[] = {
        {(uint8_t *)":method", (uint8_t *)"GET", 7, 3, flags},
        {(uint8_t *)":path", (uint8_t *)path, 5, strlen(path), flags},
        {(uint8_t *)"user-agent", (uint8_t *)ua, 10, strlen(ua), flags},
    };
    ssize_t r = nghttp2_hd_deflate_hd(d, out, cap, nv, 3);
    cr_assert_gt(r, 0);
    return (size_t)r;
}

Test(h2cut, a_block_that_indexes_cannot_be_cut_one_that_refers_can)
{
    nghttp2_hd_deflater *d;
    cr_assert_eq(nghttp2_hd_deflate_new(&d, 4096), 0);
    uint8_t b[256];
    size_t n = block(d, NGHTTP2_NV_FLAG_NONE, "/same", "ua/1", b, sizeof b);
    cr_expect_not(rl_h2cut_block_keeps_table(b, n), "the first inserts");
    n = block(d, NGHTTP2_NV_FLAG_NONE, "/same", "ua/1", b, sizeof b);
    cr_expect(rl_h2cut_block_keeps_table(b, n), "the same again refers");
    /* (nghttp2 never indexes :path: curl's requests differ in it alone.) */
    n = block(d, NGHTTP2_NV_FLAG_NONE, "/other", "ua/1", b, sizeof b);
    cr_expect(rl_h2cut_block_keeps_table(b, n), "a new path alone");
    n = block(d, NGHTTP2_NV_FLAG_NONE, "/same", "ua/2", b, sizeof b);
    cr_expect_not(rl_h2cut_block_keeps_table(b, n), "a new agent inserts");
    n = block(d, NGHTTP2_NV_FLAG_NO_INDEX, "/never", "ua/3", b, sizeof b);
    cr_expect(rl_h2cut_block_keeps_table(b, n), "never indexed");
    cr_expect_not(rl_h2cut_block_keeps_table(b, n - 1), "cut short");
    cr_assert_eq(nghttp2_hd_deflate_change_table_size(d, 4096), 0);
    n = block(d, NGHTTP2_NV_FLAG_NO_INDEX, "/never", "ua/3", b, sizeof b);
    cr_expect_eq(b[0] & 0xe0, 0x20, "nghttp2 restates its table size");
    cr_expect(rl_h2cut_block_keeps_table(b, n), "a size update to 4096");
    nghttp2_hd_deflate_del(d);
    cr_assert_eq(nghttp2_hd_deflate_new(&d, 8192), 0);
    cr_assert_eq(nghttp2_hd_deflate_change_table_size(d, 8192), 0);
    n = block(d, NGHTTP2_NV_FLAG_NO_INDEX, "/never", "ua/3", b, sizeof b);
    cr_expect_not(rl_h2cut_block_keeps_table(b, n), "a larger table");
    nghttp2_hd_deflate_del(d);
    static const uint8_t index0[] = {0x80};
    cr_expect_not(rl_h2cut_block_keeps_table(index0, 1), "index 0");
    cr_expect(rl_h2cut_block_keeps_table(b, 0), "an empty block");
}

Test(h2cut, keeps_the_newest_streams_cut)
{
    struct rl_h2cut c;
    memset(&c, 0, sizeof c);
    cr_expect_not(rl_h2cut_has(&c, 0), "stream 0 is never cut");
    for (uint32_t s = 1; s < 2 * RL_H2CUT_MAX + 2; s += 2)
        rl_h2cut_add(&c, s);
    rl_h2cut_add(&c, 2 * RL_H2CUT_MAX + 1); /* again: no new place */
    cr_expect_not(rl_h2cut_has(&c, 1), "the oldest gave its place");
    cr_expect(rl_h2cut_has(&c, 3));
    cr_expect(rl_h2cut_has(&c, 2 * RL_H2CUT_MAX + 1));
    cr_expect_not(rl_h2cut_has(&c, 2));
}
