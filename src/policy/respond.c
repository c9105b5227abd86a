/* respond.c — see respond.h. */
#include "policy/respond.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *reason_of(int status)
{
    return status == 503 ? "Service Unavailable" : "Too Many Requests";
}

size_t rl_respond_format(char *buf, size_t len, int status, uint64_t retry_s,
                         const char *section, const char *rate)
{
    /* A section's name is at most a user's (a cgroup path) and a prefix;
     * cut past that, so any name still gets its answer. */
    char body[320];
    int b = snprintf(body, sizeof body,
                     "rlshim: request limit of [%.240s] (%.32s)\n",
                     section != NULL ? section : "?",
                     rate != NULL ? rate : "?");
    if (b < 0 || (size_t)b >= sizeof body)
        return 0;
    /* Connection: keep-alive: an HTTP/1.0 client keeps the connection
     * it would keep for the server's answer. */
    int h = snprintf(buf, len,
                     "HTTP/1.1 %d %s\r\n"
                     "Retry-After: %llu\r\n"
                     "Content-Type: text/plain\r\n"
                     "Content-Length: %d\r\n"
                     "Connection: keep-alive\r\n"
                     "\r\n%s",
                     status, reason_of(status), (unsigned long long)retry_s,
                     b, body);
    if (h < 0 || (size_t)h >= len)
        return 0;
    return (size_t)h;
}

bool rl_respond_push(struct rl_respond **r, int status, uint64_t retry_s,
                     const char *section, const char *rate, unsigned after)
{
    if (*r == NULL && (*r = calloc(1, sizeof **r)) == NULL)
        return false;
    struct rl_respond *q = *r;
    if (q->n >= RL_RESPOND_MAX || after > UINT8_MAX)
        return false;
    struct rl_madeup *m = &q->q[(q->head + q->n) % RL_RESPOND_MAX];
    size_t len = rl_respond_format(m->bytes, sizeof m->bytes, status, retry_s,
                                   section, rate);
    if (len == 0)
        return false;
    m->len = (uint16_t)len;
    m->off = 0;
    m->after = (uint8_t)after;
    q->n++;
    return true;
}

void rl_respond_answered(struct rl_respond *r)
{
    if (r == NULL)
        return;
    for (unsigned i = 0; i < r->n; i++) {
        struct rl_madeup *m = &r->q[(r->head + i) % RL_RESPOND_MAX];
        if (m->after > 0)
            m->after--;
    }
}

size_t rl_respond_take(struct rl_respond *r, const struct iovec *iov,
                       size_t n, bool consume)
{
    if (r == NULL || r->n == 0)
        return 0;
    struct rl_madeup *m = &r->q[r->head];
    size_t off = m->off, got = 0;
    for (size_t i = 0; i < n && off < m->len; i++) {
        size_t k = m->len - off;
        if (k > iov[i].iov_len)
            k = iov[i].iov_len;
        memcpy(iov[i].iov_base, m->bytes + off, k);
        off += k;
        got += k;
    }
    if (!consume)
        return got;
    m->off = (uint16_t)off;
    if (m->off == m->len) {
        r->head = (r->head + 1) % RL_RESPOND_MAX;
        r->n--;
    }
    return got;
}

void rl_respond_free(struct rl_respond *r)
{
    free(r);
}
