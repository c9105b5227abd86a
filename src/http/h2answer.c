/* h2answer.c — see h2answer.h. */
#include "http/h2answer.h"

#include <nghttp2/nghttp2.h>
#include <stdio.h>
#include <string.h>

#define FRAME_HEADER 9
#define TYPE_HEADERS 0x1
#define END_STREAM 0x1
#define END_HEADERS 0x4
/* The table size both ends start with (RFC 7541 §4.2): a deflater made
 * with it announces no size update. */
#define DEFAULT_TABLE 4096

static nghttp2_nv field(const char *name, const char *value)
{
    nghttp2_nv nv = {(uint8_t *)(uintptr_t)name, (uint8_t *)(uintptr_t)value,
                     strlen(name), strlen(value), NGHTTP2_NV_FLAG_NO_INDEX};
    return nv;
}

size_t rl_h2answer_format(uint8_t *buf, size_t len, uint32_t stream,
                          int status, uint64_t retry_s)
{
    char st[8], ra[24];
    snprintf(st, sizeof st, "%d", status == 503 ? 503 : 429);
    snprintf(ra, sizeof ra, "%llu", (unsigned long long)retry_s);
    nghttp2_nv nva[3] = {field(":status", st), field("retry-after", ra),
                         field("content-length", "0")};
    if (len <= FRAME_HEADER || stream == 0 || stream > 0x7fffffffu)
        return 0;
    nghttp2_hd_deflater *d = NULL;
    if (nghttp2_hd_deflate_new(&d, DEFAULT_TABLE) != 0)
        return 0;
    ssize_t k = nghttp2_hd_deflate_hd(d, buf + FRAME_HEADER,
                                      len - FRAME_HEADER, nva, 3);
    nghttp2_hd_deflate_del(d);
    /* One frame: within the smallest SETTINGS_MAX_FRAME_SIZE. */
    if (k <= 0 || k > 16384)
        return 0;
    buf[0] = (uint8_t)(k >> 16);
    buf[1] = (uint8_t)(k >> 8);
    buf[2] = (uint8_t)k;
    buf[3] = TYPE_HEADERS;
    buf[4] = END_STREAM | END_HEADERS;
    buf[5] = (uint8_t)(stream >> 24);
    buf[6] = (uint8_t)(stream >> 16);
    buf[7] = (uint8_t)(stream >> 8);
    buf[8] = (uint8_t)stream;
    return FRAME_HEADER + (size_t)k;
}
