/* tls_client.c — N HTTP/1.1 requests on one keep-alive TLS connection,
 * written with OpenSSL (SSL_write, or SSL_write_ex with "ex"; "nb":
 * SSL_write on a non-blocking socket, retried when poll says it may;
 * "sendfile": SSL_sendfile from a file holding the head, falling back to
 * SSL_write of the same bytes when the library cannot (no kernel TLS),
 * as a program must; "zero": an SSL_write and an SSL_write_ex of 0 bytes
 * before each head; "threads": two threads writing on the one SSL*, each
 * write and its answer under the program's own lock).
 *
 * Usage: tls_client PORT N write|ex|nb|sendfile|zero|threads [SNI [nohost]]
 * Connects to 127.0.0.1:PORT (server name SNI, default "localhost"; no
 * verification; "nohost": heads without a Host header, so that the
 * server name is the requests' only name),
 * writes each GET and reads its answer (Content-Length framed) before the
 * next. Prints ok=<requests answered>; on a write that fails, also
 * fail_at=<index> ret=<return> ssl_error=<SSL_get_error> errno=<errno>
 * and stops (exit 0: the test decides). "nb" also prints
 * wakeups=<polls for writing that returned ready>; "sendfile" prints
 * sendfile_err<i>=<SSL_get_error of request i's SSL_sendfile, 0 when it
 * sent the head>; "zero" prints zero=<SSL_write's return>,
 * zero_ex=<SSL_write_ex's>. Exit 2 on a set-up failure. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
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

/* The head of request i (its answer read by read_answer). */
static int head(char *req, size_t size, int i, bool host)
{
    return snprintf(req, size,
                    "GET /r%d HTTP/1.1\r\n%s"
                    "User-Agent: tls_client\r\n\r\n",
                    i, host ? "Host: localhost\r\n" : "");
}

/* SSL_sendfile of the head from a file; SSL_write of it when the library
 * cannot send a file (no kernel TLS) but was not asked to wait. */
static int send_file(SSL *ssl, int i, const char *req, int len)
{
    FILE *f = tmpfile();
    if (f == NULL || fwrite(req, 1, (size_t)len, f) != (size_t)len ||
        fflush(f) != 0)
        return -2;
    ossl_ssize_t r = SSL_sendfile(ssl, fileno(f), 0, (size_t)len, 0);
    int e = r == len ? 0 : SSL_get_error(ssl, (int)r);
    fclose(f);
    printf("sendfile_err%d=%d\n", i, e);
    if (r == len)
        return len;
    if (e == SSL_ERROR_WANT_WRITE)
        return (int)r;
    ERR_clear_error();
    return SSL_write(ssl, req, len);
}

/* Writes request i as `mode` says and reads its answer: 0, or -1 after
 * printing why it stopped. */
static int one_request(SSL *ssl, int i, const char *mode, bool host)
{
    char req[256];
    int len = head(req, sizeof req, i, host);
    bool ex = strcmp(mode, "ex") == 0;
    int ret;
    if (ex) {
        size_t w = 0;
        ret = SSL_write_ex(ssl, req, (size_t)len, &w);
        if (ret == 1 && w != (size_t)len)
            ret = -2;
    } else if (strcmp(mode, "sendfile") == 0) {
        ret = send_file(ssl, i, req, len);
    } else {
        if (strcmp(mode, "zero") == 0) {
            size_t w = 7;
            printf("zero=%d\n", SSL_write(ssl, req, 0));
            printf("zero_ex=%d\n", SSL_write_ex(ssl, req, 0, &w));
            ERR_clear_error();
        }
        while ((ret = SSL_write(ssl, req, len)) <= 0 && retry(ssl, ret))
            ;
        if (ret > 0 && ret != len)
            ret = -2;
    }
    if (ret != (ex ? 1 : len)) {
        int e = errno;
        printf("fail_at=%d\nret=%d\nssl_error=%d\nerrno=%d\n", i, ret,
               SSL_get_error(ssl, ret), e);
        return -1;
    }
    if (read_answer(ssl) != 0) {
        printf("read_failed_at=%d\n", i);
        return -1;
    }
    return 0;
}

/* "threads": requests t, t+2, t+4, ... of n from thread t, each write
 * and its answer under one lock (OpenSSL's rule for a shared SSL*). */
struct worker {
    SSL *ssl;
    int t, n;
    bool host;
};

static pthread_mutex_t ssl_lock = PTHREAD_MUTEX_INITIALIZER;
static int threads_ok;

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    for (int i = w->t; i < w->n; i += 2) {
        pthread_mutex_lock(&ssl_lock);
        int r = one_request(w->ssl, i, "write", w->host);
        if (r == 0)
            threads_ok++;
        pthread_mutex_unlock(&ssl_lock);
        if (r != 0)
            break;
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 4 || argc > 6)
        return 2;
    const char *sni = argc > 4 ? argv[4] : "localhost";
    bool host = !(argc > 5 && strcmp(argv[5], "nohost") == 0);
    int port = atoi(argv[1]), n = atoi(argv[2]);
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
    if (strcmp(argv[3], "threads") == 0) {
        struct worker w[2] = {{ssl, 0, n, host}, {ssl, 1, n, host}};
        pthread_t th[2];
        for (int t = 0; t < 2; t++)
            pthread_create(&th[t], NULL, worker_main, &w[t]);
        for (int t = 0; t < 2; t++)
            pthread_join(th[t], NULL);
    } else {
        for (int i = 0; i < n && one_request(ssl, i, argv[3], host) == 0; i++)
            ok++;
    }
    if (nb_fd >= 0)
        printf("wakeups=%ld\n", wakeups);
    printf("ok=%d\n", ok + threads_ok);
    fflush(stdout);
    SSL_shutdown(ssl);
    SSL_free(ssl);
    close(fd);
    SSL_CTX_free(ctx);
    return 0;
}
