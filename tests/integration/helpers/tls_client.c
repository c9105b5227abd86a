/* tls_client.c — N HTTP/1.1 requests on one keep-alive TLS connection,
 * written with OpenSSL (SSL_write, or SSL_write_ex with "ex"; "nb":
 * SSL_write on a non-blocking socket, retried when poll says it may).
 *
 * Usage: tls_client PORT N write|ex|nb [SNI [nohost]]
 * Connects to 127.0.0.1:PORT (server name SNI, default "localhost"; no
 * verification; "nohost": heads without a Host header, so that the
 * server name is the requests' only name),
 * writes each GET and reads its answer (Content-Length framed) before the
 * next. Prints ok=<requests answered>; on a write that fails, also
 * fail_at=<index> ret=<return> ssl_error=<SSL_get_error> errno=<errno>
 * and stops (exit 0: the test decides). "nb" also prints
 * wakeups=<polls for writing that returned ready>. Exit 2 on a set-up
 * failure. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int nb_fd = -1; /* the socket, once non-blocking */
static long wakeups;

/* A non-blocking call that asked to be retried: wait as it asked. */
static bool retry(SSL *ssl, int ret)
{
    if (nb_fd < 0)
        return false;
    int e = SSL_get_error(ssl, ret);
    if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE)
        return false;
    struct pollfd p = {nb_fd, e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, 0};
    int r = poll(&p, 1, 5000);
    if (r > 0 && e == SSL_ERROR_WANT_WRITE)
        wakeups++;
    return r > 0;
}

/* Reads one answer: its head, then Content-Length bytes. */
static int read_answer(SSL *ssl)
{
    char buf[4096];
    size_t have = 0;
    char *end = NULL;
    while (end == NULL) {
        if (have == sizeof buf - 1)
            return -1;
        int r = SSL_read(ssl, buf + have, (int)(sizeof buf - 1 - have));
        if (r <= 0 && retry(ssl, r))
            continue;
        if (r <= 0)
            return -1;
        have += (size_t)r;
        buf[have] = '\0';
        end = strstr(buf, "\r\n\r\n");
    }
    const char *cl = strcasestr(buf, "Content-Length:");
    long body = cl != NULL ? strtol(cl + 15, NULL, 10) : 0;
    long got = (long)(have - (size_t)(end + 4 - buf));
    while (got < body) {
        int r = SSL_read(ssl, buf, sizeof buf);
        if (r <= 0 && retry(ssl, r))
            continue;
        if (r <= 0)
            return -1;
        got += r;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 4 || argc > 6)
        return 2;
    const char *sni = argc > 4 ? argv[4] : "localhost";
    bool host = !(argc > 5 && strcmp(argv[5], "nohost") == 0);
    int port = atoi(argv[1]), n = atoi(argv[2]);
    int ex = strcmp(argv[3], "ex") == 0;
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    if (ctx == NULL)
        return 2;
    SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0)
        return 2;
    SSL *ssl = SSL_new(ctx);
    SSL_set_fd(ssl, fd);
    SSL_set_tlsext_host_name(ssl, sni);
    if (SSL_connect(ssl) != 1) {
        ERR_print_errors_fp(stderr);
        return 2;
    }
    if (strcmp(argv[3], "nb") == 0) {
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
        nb_fd = fd;
    }
    int ok = 0;
    for (int i = 0; i < n; i++) {
        char req[256];
        int len = snprintf(req, sizeof req,
                           "GET /r%d HTTP/1.1\r\n%s"
                           "User-Agent: tls_client\r\n\r\n",
                           i, host ? "Host: localhost\r\n" : "");
        int ret;
        if (ex) {
            size_t w = 0;
            ret = SSL_write_ex(ssl, req, (size_t)len, &w);
            if (ret == 1 && w != (size_t)len)
                ret = -2;
        } else {
            while ((ret = SSL_write(ssl, req, len)) <= 0 && retry(ssl, ret))
                ;
            if (ret > 0 && ret != len)
                ret = -2;
        }
        if (ret != (ex ? 1 : len)) {
            int e = errno;
            printf("fail_at=%d\nret=%d\nssl_error=%d\nerrno=%d\n", i, ret,
                   SSL_get_error(ssl, ret), e);
            break;
        }
        if (read_answer(ssl) != 0) {
            printf("read_failed_at=%d\n", i);
            break;
        }
        ok++;
    }
    if (nb_fd >= 0)
        printf("wakeups=%ld\n", wakeups);
    printf("ok=%d\n", ok);
    fflush(stdout);
    SSL_shutdown(ssl);
    SSL_free(ssl);
    close(fd);
    SSL_CTX_free(ctx);
    return 0;
}
