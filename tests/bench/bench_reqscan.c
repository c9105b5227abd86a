/* bench_reqscan.c — CPU ns per request of the request scanner
 * (src/http/reqscan.h), beside one system call measured in the same run.
 *
 * What a counted write costs the scanner: a peek of its bytes (before the
 * gate decides), then their commit (after the call). Cases, each request
 * one write as curl makes them: HTTP/1.1 keep-alive GET heads (curl's
 * head, 87 bytes); HTTP/2 HEADERS frames on a connection (the HPACK block
 * decoded at commit, as the scanner does); and a 100 MB body framed by
 * Content-Length in 64 KiB writes (ns per MiB: a body is arithmetic).
 * The yardstick is write(2) of the same head to /dev/null, the cheapest
 * system call that could carry it. Rounds alternate between the cases and
 * each figure is the median over rounds (a burst of load from elsewhere
 * moves one round, not a case); CPU time of this thread.
 *
 * The bar: a request (the worse of HTTP/1.1 and HTTP/2) is scanned in at
 * most half that system call.
 *
 * Usage: bench_reqscan [ROUNDS]; exit status 0 unless the benchmark could
 * not run (the bar is reported, not enforced: the machine is shared). */
#include <fcntl.h>
#include <nghttp2/nghttp2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cpu_stats.h"
#include "http/reqscan.h"

#define MAX_ROUNDS 99
#define NREQ 20000
#define BODY (100u * 1000u * 1000u)
#define CHUNK (64u * 1024u)

static const char head[] = "GET /page HTTP/1.1\r\nHost: example.test\r\n"
                           "User-Agent: curl/7.88.1\r\nAccept: */*\r\n\r\n";


/* One write: peek, then commit all of it. Returns the requests peeked. */
static size_t one_write(struct rl_reqscan *s, const uint8_t *buf, size_t n)
{
    struct rl_req_event ev[8];
    struct iovec iov = {(void *)buf, n};
    size_t k = rl_reqscan_peekv(s, &iov, 1, ev, 8);
    if (rl_reqscan_commit(s, buf, n, NULL, 0) < 0)
        return 0;
    return k;
}

/* ns per request of NREQ heads, each its own write; 0 if miscounted. */
static double h1_round(void)
{
    struct rl_httpconn conn;
    struct rl_reqscan s;
    memset(&conn, 0, sizeof conn);
    rl_reqscan_init(&s, &conn);
    size_t len = strlen(head), events = 0;
    double t = cpu_ns();
    for (int i = 0; i < NREQ; i++)
        events += one_write(&s, (const uint8_t *)head, len);
    t = cpu_ns() - t;
    rl_reqscan_free(&s);
    /* The first write also reports the stream's protocol. */
    return events == NREQ + 1 ? t / NREQ : 0;
}

/* The HTTP/2 connection: its preface and SETTINGS, then NREQ HEADERS
 * frames (a GET each, coded by one HPACK deflater in order). */
static uint8_t *h2_buf;
static size_t h2_len, h2_first, h2_frame[NREQ + 1];

static int h2_prepare(void)
{
    nghttp2_hd_deflater *def;
    if (nghttp2_hd_deflate_new(&def, 4096) != 0)
        return -1;
    size_t cap = 64 + (size_t)NREQ * 128;
    h2_buf = malloc(cap);
    if (h2_buf == NULL)
        return -1;
    static const uint8_t preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    memcpy(h2_buf, preface, 24);
    static const uint8_t settings[9] = {0, 0, 0, 4, 0, 0, 0, 0, 0};
    memcpy(h2_buf + 24, settings, 9);
    size_t pos = h2_first = 33;
    for (int i = 0; i < NREQ; i++) {
        char path[32];
        snprintf(path, sizeof path, "/page/%d", i);
        nghttp2_nv nv[] = {
            {(uint8_t *)":method", (uint8_t *)"GET", 7, 3, 0},
            {(uint8_t *)":scheme", (uint8_t *)"https", 7, 5, 0},
            {(uint8_t *)":authority", (uint8_t *)"example.test", 10, 12, 0},
            {(uint8_t *)":path", (uint8_t *)path, 5, strlen(path), 0},
            {(uint8_t *)"user-agent", (uint8_t *)"curl/7.88.1", 10, 11, 0},
            {(uint8_t *)"accept", (uint8_t *)"*/*", 6, 3, 0},
        };
        ssize_t n = nghttp2_hd_deflate_hd(def, h2_buf + pos + 9,
                                          cap - pos - 9, nv, 6);
        if (n < 0)
            return -1;
        uint32_t sid = 2u * (uint32_t)i + 1;
        uint8_t *f = h2_buf + pos;
        f[0] = (uint8_t)(n >> 16);
        f[1] = (uint8_t)(n >> 8);
        f[2] = (uint8_t)n;
        f[3] = 1;           /* HEADERS */
        f[4] = 0x4 | 0x1;   /* END_HEADERS, END_STREAM */
        f[5] = (uint8_t)(sid >> 24);
        f[6] = (uint8_t)(sid >> 16);
        f[7] = (uint8_t)(sid >> 8);
        f[8] = (uint8_t)sid;
        h2_frame[i] = pos;
        pos += 9 + (size_t)n;
    }
    h2_frame[NREQ] = pos;
    h2_len = pos;
    nghttp2_hd_deflate_del(def);
    return 0;
}

static double h2_round(void)
{
    struct rl_httpconn conn;
    struct rl_reqscan s;
    memset(&conn, 0, sizeof conn);
    rl_reqscan_init(&s, &conn);
    one_write(&s, h2_buf, h2_first); /* the preface: no request */
    size_t events = 0;
    double t = cpu_ns();
    for (int i = 0; i < NREQ; i++)
        events += one_write(&s, h2_buf + h2_frame[i],
                            h2_frame[i + 1] - h2_frame[i]);
    t = cpu_ns() - t;
    rl_reqscan_free(&s);
    return events == NREQ ? t / NREQ : 0;
}

/* ns per MiB of a Content-Length body in CHUNK writes. */
static double body_round(const uint8_t *chunk)
{
    static const char post[] = "POST /up HTTP/1.1\r\nHost: example.test\r\n"
                               "Content-Length: 100000000\r\n\r\n";
    struct rl_httpconn conn;
    struct rl_reqscan s;
    memset(&conn, 0, sizeof conn);
    rl_reqscan_init(&s, &conn);
    one_write(&s, (const uint8_t *)post, strlen(post));
    size_t events = 0;
    double t = cpu_ns();
    for (size_t done = 0; done < BODY; done += CHUNK)
        events += one_write(&s, chunk, BODY - done < CHUNK ? BODY - done
                                                           : CHUNK);
    t = cpu_ns() - t;
    rl_reqscan_free(&s);
    return events == 0 ? t / ((double)BODY / (1024.0 * 1024.0)) : 0;
}

/* ns per write(2) of the head to /dev/null. */
static double write_round(int fd)
{
    size_t len = strlen(head);
    double t = cpu_ns();
    for (int i = 0; i < NREQ; i++)
        if (write(fd, head, len) != (ssize_t)len)
            return 0;
    return (cpu_ns() - t) / NREQ;
}

int main(int argc, char **argv)
{
    unsigned rounds = argc > 1 ? (unsigned)atoi(argv[1]) : 11;
    if (rounds < 1 || rounds > MAX_ROUNDS) {
        fprintf(stderr, "bench_reqscan: usage: bench_reqscan [ROUNDS<=%d]\n",
                MAX_ROUNDS);
        return 2;
    }
    int null = open("/dev/null", O_WRONLY);
    uint8_t *chunk = calloc(1, CHUNK);
    if (null < 0 || chunk == NULL || h2_prepare() != 0) {
        fprintf(stderr, "bench_reqscan: cannot prepare\n");
        return 1;
    }
    static double h1[MAX_ROUNDS], h2[MAX_ROUNDS], body[MAX_ROUNDS],
        sys[MAX_ROUNDS];
    for (unsigned r = 0; r < rounds; r++) {
        h1[r] = h1_round();
        h2[r] = h2_round();
        body[r] = body_round(chunk);
        sys[r] = write_round(null);
        if (h1[r] == 0 || h2[r] == 0 || body[r] == 0 || sys[r] == 0) {
            fprintf(stderr, "bench_reqscan: a round miscounted or failed\n");
            return 1;
        }
    }
    double a = median_of(h1, rounds), b = median_of(h2, rounds),
           c = median_of(body, rounds), w = median_of(sys, rounds);
    printf("request scanner: CPU ns per request (peek + commit of each "
           "write), median of %u rounds of %d\n",
           rounds, NREQ);
    printf("%-44s %10.1f ns\n", "HTTP/1.1 GET head (80 B), one write each", a);
    printf("%-44s %10.1f ns\n", "HTTP/2 HEADERS frame (HPACK decoded)", b);
    printf("%-44s %10.1f ns per MiB\n", "Content-Length body, 64 KiB writes",
           c);
    printf("%-44s %10.1f ns\n", "write(2) of the head to /dev/null", w);
    double worst = a > b ? a : b;
    printf("bar: request scanner, ns per request / one write(2) of it: %.2f "
           "(target <= 0.5): %s\n",
           worst / w, worst <= 0.5 * w ? "met" : "NOT MET");
    free(chunk);
    free(h2_buf);
    close(null);
    return 0;
}
