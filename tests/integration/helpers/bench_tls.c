/* bench_tls.c — N HTTP/1.1 GET heads written with SSL_write on one TLS
 * session, each drained at once by a server session in the same process
 * (a BIO pair: no socket, no system call), for tests/bench/tls_overhead.py:
 * what the TLS hook adds to one SSL_write, in instructions (callgrind's
 * inclusive count of measured_ssl_write) and in wall time.
 *
 * Usage: bench_tls CERT KEY N
 * Prints ns=<wall ns per write and its drain>; exit 2 on a set-up
 * failure. */
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char head[] = "GET /page HTTP/1.1\r\nHost: example.test\r\n"
                           "User-Agent: curl/7.88.1\r\nAccept: */*\r\n\r\n";

/* Its own function: callgrind counts it inclusively, apart from the loop. */
__attribute__((noinline)) static int measured_ssl_write(SSL *c, int len)
{
    return SSL_write(c, head, len);
}

static void drain(SSL *s)
{
    char buf[512];
    while (SSL_read(s, buf, sizeof buf) > 0)
        ;
}

/* Both ends' handshake steps until both are done. */
static int handshake(SSL *c, SSL *s)
{
    for (int i = 0; i < 100; i++) {
        int rc = SSL_do_handshake(c), rs = SSL_do_handshake(s);
        if (rc == 1 && rs == 1)
            return 0;
    }
    return -1;
}

int main(int argc, char **argv)
{
    if (argc != 4)
        return 2;
    long n = atol(argv[3]);
    SSL_CTX *cctx = SSL_CTX_new(TLS_client_method());
    SSL_CTX *sctx = SSL_CTX_new(TLS_server_method());
    if (cctx == NULL || sctx == NULL ||
        SSL_CTX_use_certificate_file(sctx, argv[1], SSL_FILETYPE_PEM) != 1 ||
        SSL_CTX_use_PrivateKey_file(sctx, argv[2], SSL_FILETYPE_PEM) != 1) {
        ERR_print_errors_fp(stderr);
        return 2;
    }
    SSL *c = SSL_new(cctx), *s = SSL_new(sctx);
    BIO *bc, *bs;
    if (c == NULL || s == NULL || BIO_new_bio_pair(&bc, 1 << 16, &bs, 1 << 16) != 1)
        return 2;
    SSL_set_bio(c, bc, bc);
    SSL_set_bio(s, bs, bs);
    SSL_set_connect_state(c);
    SSL_set_accept_state(s);
    SSL_set_tlsext_host_name(c, "example.test");
    if (handshake(c, s) != 0) {
        ERR_print_errors_fp(stderr);
        return 2;
    }
    int len = (int)strlen(head);
    /* Warm-up elsewhere: the first write's set-up (the real function's
     * look-up, the config, the budgets) is not the call's cost. */
    for (int i = 0; i < 3; i++) {
        if (SSL_write(c, head, len) != len)
            return 2;
        drain(s);
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (long i = 0; i < n; i++) {
        if (measured_ssl_write(c, len) != len) {
            fprintf(stderr, "bench_tls: write %ld failed\n", i);
            return 2;
        }
        drain(s);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double ns = (double)(t1.tv_sec - t0.tv_sec) * 1e9 +
                (double)(t1.tv_nsec - t0.tv_nsec);
    printf("ns=%.1f\n", ns / (double)n);
    SSL_free(c);
    SSL_free(s);
    SSL_CTX_free(cctx);
    SSL_CTX_free(sctx);
    return 0;
}
