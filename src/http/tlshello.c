/* tlshello.c — see tlshello.h. */
#include "http/tlshello.h"

#include <string.h>

/* Record header (5): type 22, version 3.x, length; handshake header (4):
 * type 1, length; client_version (2); then the random. */
#define HELLO_RANDOM_AT 11u
#define HELLO_PREFIX (HELLO_RANDOM_AT + RL_TLS_RANDOM)

bool rl_tls_hello_random(const struct iovec *iov, size_t n,
                         uint8_t out[RL_TLS_RANDOM])
{
    uint8_t b[HELLO_PREFIX];
    size_t have = 0;
    for (size_t i = 0; i < n && have < sizeof b; i++) {
        size_t take = iov[i].iov_len;
        if (take > sizeof b - have)
            take = sizeof b - have;
        if (take > 0)
            memcpy(b + have, iov[i].iov_base, take);
        have += take;
    }
    if (have < sizeof b || b[0] != 22 || b[1] != 3 || b[5] != 1 ||
        b[9] != 3)
        return false;
    memcpy(out, b + HELLO_RANDOM_AT, RL_TLS_RANDOM);
    return true;
}
