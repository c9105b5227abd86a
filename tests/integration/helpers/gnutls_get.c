/* gnutls_get PORT PATH... — GETs each PATH from https://127.0.0.1:PORT on
 * one GnuTLS session (the certificate is not checked), and prints per
 * request "pending N status S": N is what gnutls_record_check_pending said
 * right after the request was written, before any read (a client that
 * asks it before waiting on the socket, as wget does, reads an answer
 * only when it is counted there), S the status read. Exits 0, or 1 on a
 * TLS or socket error. */
#include <arpa/inet.h>
#include <gnutls/gnutls.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static gnutls_session_t session;

/* One gnutls_record_recv, again while it asks to be called again. */
static ssize_t recv_some(char *buf, size_t n)
{
    ssize_t r;
    do
        r = gnutls_record_recv(session, buf, n);
    while (r == GNUTLS_E_AGAIN || r == GNUTLS_E_INTERRUPTED);
    if (r < 0)
        fprintf(stderr, "gnutls_get: %s\n", gnutls_strerror((int)r));
    return r;
}

/* Read until buf holds a head and its Content-Length body; the status. */
static int read_answer(void)
{
    static char buf[65536];
    size_t n = 0;
    char *end = NULL;
    while ((end = strstr(buf, "\r\n\r\n")) == NULL) {
        ssize_t r = recv_some(buf + n, sizeof buf - 1 - n);
        if (r <= 0)
            return -1;
        n += (size_t)r;
        buf[n] = '\0';
    }
    int status = atoi(buf + 9);
    const char *cl = strcasestr(buf, "content-length:");
    size_t want = (size_t)(end + 4 - buf) + (cl ? (size_t)atol(cl + 15) : 0);
    while (n < want) {
        ssize_t r = recv_some(buf + n, sizeof buf - 1 - n);
        if (r <= 0)
            return -1;
        n += (size_t)r;
    }
    memset(buf, 0, n + 1);
    return status;
}

int main(int argc, char **argv)
{
    if (argc < 3)
        return 2;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)atoi(argv[1]))};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0)
        return 1;
    gnutls_certificate_credentials_t cred;
    gnutls_certificate_allocate_credentials(&cred);
    gnutls_init(&session, GNUTLS_CLIENT);
    gnutls_set_default_priority(session);
    gnutls_credentials_set(session, GNUTLS_CRD_CERTIFICATE, cred);
    gnutls_transport_set_int(session, fd);
    int r;
    do
        r = gnutls_handshake(session);
    while (r < 0 && !gnutls_error_is_fatal(r));
    if (r < 0)
        return 1;
    for (int i = 2; i < argc; i++) {
        char req[512];
        int len = snprintf(req, sizeof req,
                           "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
                           argv[i]);
        if (gnutls_record_send(session, req, (size_t)len) != len)
            return 1;
        size_t pending = gnutls_record_check_pending(session);
        int status = read_answer();
        printf("pending %zu status %d\n", pending, status);
        if (status < 0)
            return 1;
    }
    gnutls_bye(session, GNUTLS_SHUT_WR);
    gnutls_deinit(session);
    gnutls_certificate_free_credentials(cred);
    close(fd);
    return 0;
}
