/* bench_respconn — ns per response read on a counted connection (SPEC
 * §12), in one run, rounds alternating, medians compared:
 *
 *   parse    the response scanner alone (http/respscan.h): a 200 head as
 *            nginx writes it (8 headers) and its 3-byte body, paired with
 *            a request recorded in the connection's FIFO;
 *   outcome  what a receive hook does with it (rl_reqconn_received): the
 *            parse, the pairing with the request as it was charged, and
 *            the gate's look-up of that request's budgets (a 200 ends a
 *            backoff), under a request limit that never binds.
 *
 * Each response is one read, as a client reads them. The requests are
 * planned between timed stretches (not counted). Exit status 1 only when
 * a response was not seen. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "http/respscan.h"
#include "policy/config.h"
#include "policy/gate.h"
#include "policy/identity.h"
#include "policy/proc.h"
#include "policy/reqconn.h"
#include "util/clock.h"

/* The process state this bench decides through. */
static struct rl_proc proc;

#define ROUNDS 11
#define BATCHES 2000
#define DEPTH 16 /* requests in flight per batch: the FIFO's depth */

static const char response[] =
    "HTTP/1.1 200 OK\r\n"
    "Server: nginx/1.22.1\r\n"
    "Date: Thu, 03 Dec 2026 18:08:58 GMT\r\n"
    "Content-Type: text/plain\r\n"
    "Content-Length: 3\r\n"
    "Last-Modified: Thu, 03 Dec 2026 18:08:43 GMT\r\n"
    "Connection: keep-alive\r\n"
    "ETag: \"6b11b02b-3\"\r\n"
    "Accept-Ranges: bytes\r\n"
    "\r\n"
    "ok\n";

static const char request[] = "GET /s.txt HTTP/1.1\r\nHost: a.test\r\n"
                              "User-Agent: bench\r\n\r\n";

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* ns per response, the scanner alone. */
static double round_parse(struct rl_respscan *s, struct rl_httpconn *hc)
{
    uint64_t spent = 0;
    struct rl_resp_event ev[4];
    for (int b = 0; b < BATCHES; b++) {
        for (int i = 0; i < DEPTH; i++) {
            struct rl_http_sent sent = {.slot = RL_HTTP_NAMES};
            rl_httpconn_push(hc, &sent);
        }
        uint64_t t0 = rl_clock_now_ns();
        for (int i = 0; i < DEPTH; i++)
            /* One status (the first feed says the protocol too). */
            if (rl_respscan_feed(s, (const uint8_t *)response,
                                 sizeof response - 1, ev, 4) < 1 ||
                s->conn->fifo_len != (uint32_t)(DEPTH - 1 - i))
                exit(1);
        spent += rl_clock_now_ns() - t0;
    }
    return (double)spent / (BATCHES * DEPTH);
}

/* ns per response, as a receive hook reads it. */
static double round_outcome(struct rl_reqconn *c)
{
    static const struct rl_reqwrite w = {-1, "send", RL_REQ_PLAIN, false};
    const struct rl_reqread r = {-1, "recv"};
    struct iovec req = {(void *)request, sizeof request - 1};
    struct iovec resp = {(void *)response, sizeof response - 1};
    uint64_t spent = 0;
    for (int b = 0; b < BATCHES; b++) {
        for (int i = 0; i < DEPTH; i++) {
            struct rl_reqplan p;
            rl_reqconn_plan(&proc, c, &req, 1, &w, &p);
            if (p.act != RL_GATE_GO || p.requests != 1)
                exit(1);
            rl_reqconn_done(c, &req, 1, (long)req.iov_len, &p);
        }
        uint64_t t0 = rl_clock_now_ns();
        for (int i = 0; i < DEPTH; i++)
            rl_reqconn_received(&proc, c, &resp, 1, resp.iov_len, &r);
        spent += rl_clock_now_ns() - t0;
        if (c->nsent != 0 || c->resp_off)
            exit(1); /* a response not paired */
    }
    return (double)spent / (BATCHES * DEPTH);
}

int main(void)
{
    char dir[] = "/tmp/rlshim-bench-resp-XXXXXX";
    if (mkdtemp(dir) == NULL)
        return 1;
    setenv("RLSHIM_STATE_DIR", dir, 1);
    struct rl_config *cfg = NULL;
    struct rl_diag diag = {0};
    if (rl_config_load_string("[default]\nrequest = 1000000000/s\n"
                              "request_burst = 1000000000\n",
                              "bench.ini", &cfg, &diag) != 0)
        return 1;
    struct rl_identity id = {.has_key = true, .uid = (uint32_t)getuid()};
    snprintf(id.key, sizeof id.key, "bench");
    char why[256] = "";
    if (rl_gate_init(&proc, cfg, &id, why, sizeof why) != 0) {
        fprintf(stderr, "bench_respconn: %s\n", why);
        return 1;
    }
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(80)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    static struct rl_reqconn c;
    rl_reqconn_init(&c, &a, sizeof a);
    static struct rl_httpconn hc;
    static struct rl_respscan s;
    rl_respscan_init(&s, &hc);
    double parse[ROUNDS], outcome[ROUNDS];
    for (int i = 0; i < ROUNDS; i++) {
        parse[i] = round_parse(&s, &hc);
        outcome[i] = round_outcome(&c);
    }
    qsort(parse, ROUNDS, sizeof parse[0], cmp);
    qsort(outcome, ROUNDS, sizeof outcome[0], cmp);
    printf("responses: %zu-byte 200 (head and body) in one read each, "
           "medians of %d rounds of %d\n",
           sizeof response - 1, ROUNDS, BATCHES * DEPTH);
    printf("  parse (respscan)                       %7.1f ns per response\n",
           parse[ROUNDS / 2]);
    printf("  parse + pairing + the gate's look-up   %7.1f ns per response\n",
           outcome[ROUNDS / 2]);
    rl_reqconn_free(&c);
    rl_respscan_free(&s);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : 1;
}
