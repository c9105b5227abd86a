/* hpack.h — one direction's HPACK header blocks, decoded by libnghttp2.
 *
 * An HTTP/2 direction's blocks share one dynamic table, so every block of
 * the direction is fed here once, in order, in as many pieces as it comes.
 * Only the fields the scanners need are kept (fixed-size, cut where they
 * are long); a block that fails to decode breaks the decoder for the rest
 * of the connection (its later names are unknown), never the caller. */
#ifndef RL_HPACK_H
#define RL_HPACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "http/http.h"

/* The largest dynamic table an encoder may use (a browser's 64 KiB). */
#define RL_HPACK_TABLE 65536u

struct rl_hpack_fields {
    char method[RL_HTTP_METHOD_MAX + 1];
    char path[RL_HTTP_TARGET_MAX + 1];
    char authority[RL_HTTP_NAME_MAX + 8]; /* room for ":port" */
    char host[RL_HTTP_NAME_MAX + 8];
    char retry_after[RL_HTTP_RETRY_AFTER_MAX + 1];
    /* robots.txt's (SPEC §14): the request's User-Agent (cut), the
     * response's Content-Encoding (cut: coding_long says so). */
    char ua[RL_HTTP_UA_MAX + 1];
    char coding[RL_HTTP_CODING_MAX + 1];
    int status;       /* :status, or 0 */
    bool has_retry_after;
    bool coding_long, coding_many; /* coding_many: more than one field */
    bool authority_long, host_long;
};

struct rl_hpack;

/* Allocates a decoder (the one allocation of an HTTP/2 connection's
 * direction). Returns 0 or -ENOMEM. */
int rl_hpack_new(struct rl_hpack **out);
void rl_hpack_free(struct rl_hpack *h);

/* Feeds the next piece of the current block; `final`: it ends the block.
 * The fields of the block so far are in *rl_hpack_fields(h) until the
 * first piece of the next block clears them. */
void rl_hpack_feed(struct rl_hpack *h, const uint8_t *p, size_t n,
                   bool final);
const struct rl_hpack_fields *rl_hpack_fields(const struct rl_hpack *h);
/* True once a block failed to decode: the table is lost for good. */
bool rl_hpack_broken(const struct rl_hpack *h);

#endif
