/* test_http_tlshello.c — the client random of a stream's ClientHello
 * (http/tlshello.h): found whole or split over iovecs, and nothing found
 * in what is not a ClientHello's first 43 bytes. */
#include <criterion/criterion.h>
#include <string.h>

#include "http/tlshello.h"

/* A record header, a ClientHello header, client_version 3.3, a random of
 * 0x40.. 0x5f, then the rest of a hello (session id length...). */
static void hello(uint8_t *b, size_t n)
{
    static const uint8_t head[] = {22, 3, 1, 0x02, 0x00, 1, 0, 1, 0xfc, 3, 3};
    memset(b, 0, n);
    memcpy(b, head, sizeof head);
    for (unsigned i = 0; i < RL_TLS_RANDOM; i++)
        b[sizeof head + i] = (uint8_t)(0x40 + i);
}

static void expect_random(const uint8_t *got)
{
    for (unsigned i = 0; i < RL_TLS_RANDOM; i++)
        cr_assert_eq(got[i], 0x40 + i, "byte %u: %#x", i, got[i]);
}

Test(http_tlshello, a_whole_hello_gives_its_random)
{
    uint8_t b[64], out[RL_TLS_RANDOM];
    hello(b, sizeof b);
    struct iovec one = {b, sizeof b};
    cr_assert(rl_tls_hello_random(&one, 1, out));
    expect_random(out);
}

Test(http_tlshello, a_hello_split_byte_by_byte_gives_its_random)
{
    uint8_t b[43], out[RL_TLS_RANDOM];
    hello(b, sizeof b);
    struct iovec v[43];
    for (unsigned i = 0; i < 43; i++)
        v[i] = (struct iovec){b + i, 1};
    cr_assert(rl_tls_hello_random(v, 43, out));
    expect_random(out);
    /* Empty iovecs in between change nothing. */
    struct iovec w[3] = {{b, 20}, {b, 0}, {b + 20, 23}};
    memset(out, 0, sizeof out);
    cr_assert(rl_tls_hello_random(w, 3, out));
    expect_random(out);
}

Test(http_tlshello, what_is_not_a_hellos_first_43_bytes_gives_nothing)
{
    uint8_t b[64], out[RL_TLS_RANDOM];
    struct iovec one = {b, 42};
    hello(b, sizeof b);
    cr_assert_not(rl_tls_hello_random(&one, 1, out), "42 bytes");
    one.iov_len = sizeof b;
    b[0] = 23; /* application data */
    cr_assert_not(rl_tls_hello_random(&one, 1, out), "not a handshake");
    hello(b, sizeof b);
    b[5] = 2; /* a ServerHello */
    cr_assert_not(rl_tls_hello_random(&one, 1, out), "not a ClientHello");
    hello(b, sizeof b);
    b[1] = 2; /* SSL 2.0 */
    cr_assert_not(rl_tls_hello_random(&one, 1, out), "not TLS");
    memcpy(b, "GET / HTTP/1.1\r\nHost: a\r\n\r\n", 27);
    cr_assert_not(rl_tls_hello_random(&one, 1, out), "HTTP");
    cr_assert_not(rl_tls_hello_random(NULL, 0, out), "no bytes");
}
