/* tlshello.h — the client random of the TLS ClientHello a stream starts
 * with (SPEC §11).
 *
 * A TLS session written through a memory BIO (Twisted, for Scrapy: the
 * program moves the ciphertext to its socket itself, later, from its event
 * loop) names no socket. Its handshake's first record does, on the socket
 * that carries it, and the library knows the same 32 bytes
 * (SSL_get_client_random): they pair the session with its socket. Pure:
 * bytes in, answer out. */
#ifndef RL_HTTP_TLSHELLO_H
#define RL_HTTP_TLSHELLO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#define RL_TLS_RANDOM 32u

/* The client random into out when iov[0..n) starts with a TLS handshake
 * record holding a ClientHello (any record version, SSL 3.0 to TLS 1.3's
 * legacy 1.2) and carries at least its first 43 bytes. */
bool rl_tls_hello_random(const struct iovec *iov, size_t n,
                         uint8_t out[RL_TLS_RANDOM]);

#endif
