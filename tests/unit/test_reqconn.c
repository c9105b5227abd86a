/* The request layer (policy/reqconn.h): a connection's writes planned
 * against the gate, on a config loaded from a string and a state segment
 * in a temp dir. Rates are per minute, so that nothing refills while a
 * test runs (reqconn reads the real clock). */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "policy/config.h"
#include "policy/gate.h"
#include "policy/reqconn.h"
#include "gate_fixture.h"

static struct rl_reqconn conn;

static void teardown(void)
{
    rl_reqconn_free(&conn);
    fixture_state_dir_remove();
}

static void setup(void)
{
    fixture_state_dir("reqconn");
}

TestSuite(reqconn, .init = setup, .fini = teardown);

static void gate_with(const char *text)
{
    fixture_gate(&proc, "tester", text);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(80)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    rl_reqconn_init(&conn, &a, sizeof a);
}

static const struct rl_reqwrite plain = {7, "send", RL_REQ_PLAIN, true, -1};
static const struct rl_reqwrite whole = {7, "SSL_write", RL_REQ_WHOLE, true, -1};

/* Plan a write of `text` and, when it may go, send what it allows (or
 * `fail`: the real call failed and sent nothing). */
static struct rl_reqplan write_(const char *text, const struct rl_reqwrite *w,
                                bool fail)
{
    struct iovec iov = {(void *)text, strlen(text)};
    struct rl_reqplan p;
    rl_reqconn_plan(&proc, &conn, &iov, 1, w, &p);
    if (p.act == RL_GATE_GO) {
        iov.iov_len = p.allow;
        rl_reqconn_done(&conn, &iov, 1, fail ? -1 : (long)p.allow, &p);
    }
    return p;
}

#define GET(path, host) "GET " path " HTTP/1.1\r\nHost: " host "\r\n\r\n"

Test(reqconn, keep_alive_heads_are_each_a_request_and_the_one_over_is_denied)
{
    gate_with("[default]\nrequest = 2/min\nrequest_burst = 2\n");
    struct rl_reqplan p = write_(GET("/a", "h.test"), &plain, false);
    cr_assert_eq(p.act, RL_GATE_GO);
    cr_assert_eq(p.requests, 1);
    p = write_(GET("/b", "h.test"), &plain, false);
    cr_assert_eq(p.requests, 1);
    p = write_(GET("/c", "h.test"), &plain, false);
    cr_assert_eq(p.act, RL_GATE_FAIL, "the third of a burst of 2");
    cr_assert_eq(p.err, EAGAIN);
    cr_assert_gt(p.wake, 0, "a non-blocking socket is held until then");
}

Test(reqconn, a_plaintext_write_is_cut_before_the_head_that_cannot_go)
{
    gate_with("[default]\nrequest = 1/min\nrequest_burst = 1\n");
    const char *two = GET("/a", "h.test") GET("/b", "h.test");
    struct rl_reqplan p = write_(two, &plain, false);
    cr_assert_eq(p.act, RL_GATE_GO);
    cr_assert_eq(p.requests, 1);
    cr_assert_eq(p.allow, strlen(GET("/a", "h.test")),
                 "a short write up to the second head");
    p = write_(GET("/b", "h.test"), &plain, false);
    cr_assert_eq(p.act, RL_GATE_FAIL);
}

Test(reqconn, a_tls_write_goes_whole_or_not_at_all)
{
    gate_with("[default]\nrequest = 1/min\nrequest_burst = 1\n");
    const char *two = GET("/a", "h.test") GET("/b", "h.test");
    struct rl_reqplan p = write_(two, &whole, false);
    cr_assert_eq(p.act, RL_GATE_FAIL, "two requests, room for one");
    p = write_(GET("/a", "h.test"), &whole, false);
    cr_assert_eq(p.act, RL_GATE_GO, "the denied write took nothing");
    cr_assert_eq(p.requests, 1);
}

Test(reqconn, a_retried_write_is_charged_once)
{
    gate_with("[default]\nrequest = 2/min\nrequest_burst = 2\n");
    struct rl_reqplan p = write_(GET("/a", "h.test"), &whole, true);
    cr_assert_eq(p.requests, 1);
    p = write_(GET("/a", "h.test"), &whole, true);
    cr_assert_eq(p.requests, 0, "the same bytes again: the same request");
    p = write_(GET("/a", "h.test"), &whole, false);
    cr_assert_eq(p.requests, 0);
    p = write_(GET("/b", "h.test"), &whole, false);
    cr_assert_eq(p.act, RL_GATE_GO, "the second of a burst of 2");
    cr_assert_eq(p.requests, 1);
}

Test(reqconn, a_body_that_looks_like_a_head_is_not_a_request)
{
    gate_with("[default]\nrequest = 5/min\n");
    const char *post = "POST /f HTTP/1.1\r\nHost: h.test\r\n"
                       "Content-Length: 32\r\n\r\n"
                       "GET / HTTP/1.1\r\nHost: x.test\r\n\r\n";
    cr_assert_eq(strlen(post) - strlen("POST /f HTTP/1.1\r\nHost: h.test\r\n"
                                       "Content-Length: 32\r\n\r\n"),
                 32);
    struct rl_reqplan p = write_(post, &plain, false);
    cr_assert_eq(p.requests, 1);
    p = write_(GET("/g", "h.test"), &plain, false);
    cr_assert_eq(p.requests, 1, "the next head after the body counts");
}

Test(reqconn, a_request_is_charged_to_the_site_its_host_names)
{
    gate_with("[site:a]\nto = a.test\nrequest = 1/min\nrequest_burst = 1\n");
    struct rl_reqplan p = write_(GET("/1", "a.test"), &plain, false);
    cr_assert_eq(p.requests, 1);
    p = write_(GET("/2", "b.test"), &plain, false);
    cr_assert_eq(p.act, RL_GATE_GO, "b.test is no site's");
    cr_assert_eq(p.requests, 0, "no budget charged");
    p = write_(GET("/3", "a.test"), &plain, false);
    cr_assert_eq(p.act, RL_GATE_FAIL, "a.test's burst is spent");
}

Test(reqconn, a_connection_that_is_not_http_is_left_alone)
{
    gate_with("[default]\nrequest = 1/min\nrequest_burst = 1\n");
    struct rl_reqplan p = write_("\x01\x02 binary", &plain, false);
    cr_assert_eq(p.requests, 0);
    cr_assert_not(rl_reqconn_counting(&conn));
    p = write_(GET("/a", "h.test"), &plain, false);
    cr_assert_eq(p.act, RL_GATE_GO);
    cr_assert_not(p.scanned, "no further cost");
}

Test(reqconn, a_tls_record_on_a_plaintext_socket_is_seen_and_counted_as_unseen)
{
    gate_with("[default]\nrequest = 1/min\n");
    struct rl_reqplan p = write_("\x16\x03\x01\x00\x05hello", &plain, false);
    cr_assert_eq(p.requests, 0);
    cr_assert(conn.tls_seen);
    cr_assert_not(rl_reqconn_counting(&conn), "TLS: counted elsewhere");
}

Test(reqconn, the_gate_charges_units_to_the_name_a_request_gives)
{
    gate_with("[site:a]\nto = a.test\nrequest = 2/min\nrequest_burst = 2\n");
    struct rl_gate_ticket t;
    struct rl_gate_req q = {.call = "SSL_write", .fd = -1, .name = "a.test",
                            .units = 2};
    cr_assert_eq(rl_gate_request(&proc, &t, &q), RL_GATE_GO);
    cr_assert_eq(t.ncharges, 1);
    q.units = 1;
    cr_assert_eq(rl_gate_request(&proc, &t, &q), RL_GATE_FAIL);
    rl_gate_refund(&proc, &t, RL_KIND_REQUEST, 0);
    q.name = "b.test";
    cr_assert_eq(rl_gate_request(&proc, &t, &q), RL_GATE_GO);
    cr_assert_eq(t.ncharges, 0, "not a site's name: nothing charged");
}

Test(reqconn, a_head_that_starts_a_later_iovec_is_cut_at_its_own_offset)
{
    gate_with("[default]\nrequest = 1/min\nrequest_burst = 1\n");
    const char *a = GET("/a", "h.test"), *b = GET("/b", "h.test");
    struct iovec iov[2] = {{(void *)a, strlen(a)}, {(void *)b, strlen(b)}};
    struct rl_reqplan p;
    rl_reqconn_plan(&proc, &conn, iov, 2, &plain, &p);
    cr_assert_eq(p.act, RL_GATE_GO);
    cr_assert_eq(p.requests, 1);
    cr_assert_eq(p.allow, strlen(a), "writev cut before the second head");
}

Test(reqconn, a_request_to_a_destination_not_known_is_charged_where_no_to_applies)
{
    /* A TLS library writing through the program's own BIO (no fd, no
     * peer) and an HTTP/2 request whose name only its commit decodes: a
     * section without `to` still covers it; one with `to` does not. */
    gate_with("[default]\nrequest = 1/min\nrequest_burst = 1\n"
              "[site:a]\nto = a.test\nrequest = 1/min\n");
    struct rl_gate_ticket t;
    struct rl_gate_req q = {.call = "SSL_write", .fd = -1, .units = 1};
    cr_assert_eq(rl_gate_request(&proc, &t, &q), RL_GATE_GO);
    cr_assert_eq(t.ncharges, 1, "the user's rule, not the site");
    cr_assert_eq(rl_gate_request(&proc, &t, &q), RL_GATE_FAIL,
                 "its burst is 1");
}

/* A TLS write of 13 pipelined heads (more events than a plan looks at one
 * by one) is 13 requests: with a budget of 12 it does not go at all; 12
 * go, and the 13th write after them is refused. */
Test(reqconn, a_tls_write_of_more_requests_than_a_plan_looks_at_counts_them_all)
{
    gate_with("[default]\nrequest = 1/min\nrequest_burst = 12\n");
    char many[2048] = "";
    for (int i = 0; i < 13; i++)
        strcat(many, GET("/m", "h.test"));
    struct rl_reqplan p = write_(many, &whole, false);
    cr_assert_eq(p.act, RL_GATE_FAIL, "13 requests on a budget of 12");
    many[strlen(many) - strlen(GET("/m", "h.test"))] = '\0';
    p = write_(many, &whole, false);
    cr_assert_eq(p.act, RL_GATE_GO);
    cr_assert_eq(p.requests, 12);
    p = write_(GET("/n", "h.test"), &whole, false);
    cr_assert_eq(p.act, RL_GATE_FAIL, "the budget is spent");
}

/* A TLS write that may go in pieces (shim/tlswrite.c), blocking and not. */
static const struct rl_reqwrite pieces = {-1, "SSL_write", RL_REQ_PIECES,
                                          false, -1};
static const struct rl_reqwrite pieces_nb = {7, "SSL_write", RL_REQ_PIECES,
                                             true, -1};
static const char paced_min[] = "[default]\nrequest = 2/min\n"
                                "request_burst = 1\non_deny = delay\n"
                                "max_delay = 5min\n";

/* Delay mode: each piece ends where the next request starts and goes at
 * its own request's turn, one period after the one before. */
Test(reqconn, a_tls_write_of_three_requests_goes_in_three_pieces_in_delay_mode)
{
    gate_with(paced_min);
    const char *a = GET("/a", "h.test"), *b = GET("/b", "h.test");
    const char *three = GET("/a", "h.test") GET("/b", "h.test")
        GET("/c", "h.test");
    struct rl_reqplan p = write_(three, &pieces, false);
    cr_assert_eq(p.act, RL_GATE_GO);
    cr_assert_eq(p.allow, strlen(a), "the first piece: its request alone");
    cr_assert_eq(p.requests, 1);
    cr_assert_eq(p.wake, 0, "the first turn is free");
    p = write_(three + strlen(a), &pieces, false);
    cr_assert_eq(p.act, RL_GATE_GO);
    cr_assert_eq(p.allow, strlen(b));
    cr_assert_eq(p.requests, 1);
    uint64_t second = p.wake;
    cr_assert_gt(second, 0, "the second waits for its turn");
    p = write_(three + strlen(a) + strlen(b), &pieces, false);
    cr_assert_eq(p.act, RL_GATE_GO);
    cr_assert_eq(p.allow, strlen(GET("/c", "h.test")));
    cr_assert_eq(p.requests, 1);
    cr_assert_geq(p.wake, second + 29ull * 1000000000ull,
                  "the third a period after the second");
    cr_assert(rl_gate_request_delays(
        &proc, &(struct rl_gate_req){.call = "SSL_write", .units = 1}));
}

/* Fail mode: a write that may go in pieces still goes whole or not at
 * all. */
Test(reqconn, a_tls_write_that_may_go_in_pieces_goes_whole_in_fail_mode)
{
    gate_with("[default]\nrequest = 1/min\nrequest_burst = 1\n"
              "on_deny = fail\n");
    const char *two = GET("/a", "h.test") GET("/b", "h.test");
    struct rl_reqplan p = write_(two, &pieces, false);
    cr_assert_eq(p.act, RL_GATE_FAIL, "two requests, room for one");
    p = write_(two, &pieces_nb, false);
    cr_assert_eq(p.act, RL_GATE_FAIL);
    p = write_(GET("/a", "h.test"), &pieces, false);
    cr_assert_eq(p.act, RL_GATE_GO, "the denied writes took nothing");
    cr_assert_eq(p.requests, 1);
}

/* Non-blocking, delay mode: the piece whose turn is later is answered
 * EAGAIN with its turn reserved; a retry before it is held the same way,
 * charged nothing more. */
Test(reqconn, a_non_blocking_piece_whose_turn_is_later_is_reserved)
{
    gate_with(paced_min);
    const char *a = GET("/a", "h.test");
    const char *two = GET("/a", "h.test") GET("/b", "h.test");
    struct rl_reqplan p = write_(two, &pieces_nb, false);
    cr_assert_eq(p.act, RL_GATE_GO);
    cr_assert_eq(p.allow, strlen(a));
    p = write_(two + strlen(a), &pieces_nb, false);
    cr_assert_eq(p.act, RL_GATE_FAIL);
    cr_assert_eq(p.err, EAGAIN);
    uint64_t turn = p.wake;
    cr_assert_gt(turn, 0);
    p = write_(two + strlen(a), &pieces_nb, false);
    cr_assert_eq(p.act, RL_GATE_FAIL, "the retry before its turn");
    cr_assert_eq(p.wake, turn, "the same turn, not a new one");
}

/* Through a proxy (the connection's port is the proxy's): a request
 * inside a CONNECT tunnel whose Host gives no port is the site's at the
 * tunnel's port, as `to = a.test:8443` names it. */
Test(reqconn, a_request_in_a_tunnel_without_a_port_is_charged_at_the_tunnels_port)
{
    gate_with("[site:a]\nto = a.test:8443\nrequest = 1/min\n"
              "request_burst = 1\n");
    struct rl_reqplan p = write_(
        "CONNECT a.test:8443 HTTP/1.1\r\nHost: a.test:8443\r\n\r\n", &plain,
        false);
    cr_assert_eq(p.requests, 0, "a CONNECT is not a request");
    p = write_(GET("/1", "a.test"), &plain, false);
    cr_assert_eq(p.requests, 1, "not charged to a.test:8443");
    p = write_(GET("/2", "a.test"), &plain, false);
    cr_assert_eq(p.act, RL_GATE_FAIL, "a.test:8443's burst is spent");
}

/* The same for a TLS session's requests, which know the tunnel by their
 * socket's connection (shim/tlswrite.c copies its port). */
Test(reqconn, a_tls_request_without_a_port_is_charged_at_the_tunnels_port)
{
    gate_with("[site:a]\nto = a.test:8443\nrequest = 1/min\n"
              "request_burst = 1\n");
    conn.tunnel_port = 8443;
    struct rl_reqplan p = write_(GET("/1", "a.test"), &whole, false);
    cr_assert_eq(p.requests, 1, "not charged to a.test:8443");
    p = write_(GET("/2", "a.test"), &whole, false);
    cr_assert_eq(p.act, RL_GATE_FAIL, "a.test:8443's burst is spent");
}

/* A plaintext socket whose first bytes are a ClientHello keeps its client
 * random: the session that wrote it through a memory BIO claims the
 * socket by it (shim/conntab.c). */
Test(reqconn, a_stream_that_starts_with_a_client_hello_keeps_its_random)
{
    gate_with("[default]\nrequest = 1/min\n");
    unsigned char rec[5 + 4 + 2 + 32 + 8] = {0x16, 0x03, 0x01, 0x00, 46,
                                             0x01, 0x00, 0x00, 42, 0x03,
                                             0x03};
    for (int i = 0; i < 32; i++)
        rec[11 + i] = (unsigned char)(0xa0 + i);
    struct iovec iov = {rec, sizeof rec};
    struct rl_reqplan p;
    rl_reqconn_plan(&proc, &conn, &iov, 1, &plain, &p);
    cr_assert_not(conn.hello_seen, "not before it went");
    rl_reqconn_done(&conn, &iov, 1, (long)sizeof rec, &p);
    cr_assert(conn.hello_seen);
    cr_assert_eq(memcmp(conn.hello, rec + 11, 32), 0);
}

#include "policy/gate_int.h"
#include "state/store.h"

/* on_deny = respond (SPEC §15): each request answered in the process is
 * counted `responded` in the budget, and not `denied` as well, so that
 * `rlshim stat` shows each refusal once. */
Test(reqconn, a_request_answered_in_the_process_is_counted_responded)
{
    gate_with("[default]\nrequest = 1/min\nrequest_burst = 1\n"
              "on_deny = respond\n");
    struct rl_reqplan p = write_(GET("/a", "h.test"), &plain, false);
    cr_assert_eq(p.requests, 1);
    for (int i = 0; i < 2; i++) {
        p = write_(GET("/b", "h.test"), &plain, false);
        cr_assert_eq(p.act, RL_GATE_GO, "answered, not failed");
        cr_assert_eq(p.allow, 0, "nothing of it is sent");
    }
    struct budget *b = atomic_load(&rl_proc_gen(&proc)->gate.cur);
    cr_assert_not_null(b);
    rl_atomic_u64 *c = b->slot.counters;
    cr_expect_eq(rl_load_relaxed_u64(&c[RL_STORE_RESPONDED]), 2);
    cr_expect_eq(rl_load_relaxed_u64(&c[RL_KIND_REQUEST *
                                            RL_STORE_STATS_PER_KIND +
                                        RL_STAT_DENIED]),
                 0, "not denied too");
    cr_expect_eq(rl_load_relaxed_u64(&c[RL_KIND_REQUEST *
                                            RL_STORE_STATS_PER_KIND +
                                        RL_STAT_ALLOWED]),
                 1);
}

#include "http/h2cut.h"

/* One HEADERS frame (END_STREAM, END_HEADERS) of a GET on `stream`, its
 * block all static references and a literal not indexed: it leaves the
 * HPACK table alone, so a refusal may cut it (SPEC §15). */
static size_t h2_get(uint8_t *out, uint32_t stream)
{
    static const uint8_t block[] = {0x82, 0x87, 0x84, 0x01, 6,
                                    'h',  '.',  't',  'e',  's', 't'};
    uint8_t h[9] = {0, 0, sizeof block, 0x1, 0x5,
                    (uint8_t)(stream >> 24), (uint8_t)(stream >> 16),
                    (uint8_t)(stream >> 8), (uint8_t)stream};
    memcpy(out, h, 9);
    memcpy(out + 9, block, sizeof block);
    return 9 + sizeof block;
}

/* A write of n bytes planned and settled as the shim does: what goes is
 * sent, what is answered by the shim is taken unsent. */
static struct rl_reqplan write_bytes(const uint8_t *b, size_t n)
{
    struct iovec iov = {(void *)b, n};
    struct rl_reqplan p;
    rl_reqconn_plan(&proc, &conn, &iov, 1, &plain, &p);
    if (p.act == RL_GATE_GO) {
        size_t went = p.swallow > 0 ? p.swallow : p.allow;
        iov.iov_len = went;
        rl_reqconn_done(&conn, &iov, 1, (long)went, &p);
    }
    return p;
}

static bool awaited(uint32_t stream)
{
    struct rl_http_sent out;
    bool in_sent = false;
    for (unsigned i = 0; i < conn.nsent; i++)
        in_sent |= conn.sent[i].stream_id == stream;
    return in_sent && rl_httpconn_stream(&conn.http, stream, false, &out);
}

/* A long-lived HTTP/2 connection whose every request past the first is
 * refused: the refused streams, which the server never sees and never
 * answers, take no place among the streams awaiting the server's answer,
 * so the first one's answer is still paired (its 429 would pause). */
Test(reqconn, refused_h2_streams_leave_the_awaited_ones_in_place)
{
    gate_with("[default]\nrequest = 1/min\nrequest_burst = 1\n"
              "on_deny = respond\n");
    uint8_t b[128];
    static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    size_t n = sizeof preface - 1;
    memcpy(b, preface, n);
    static const uint8_t settings[9] = {0, 0, 0, 0x4, 0, 0, 0, 0, 0};
    memcpy(b + n, settings, 9);
    n += 9;
    n += h2_get(b + n, 1);
    struct rl_reqplan p = write_bytes(b, n);
    cr_assert_eq(p.act, RL_GATE_GO);
    cr_assert_eq(p.allow, n, "the first request goes");
    cr_assert(awaited(1));
    /* The server's SETTINGS: its frames are followed from here. */
    struct iovec srv = {(void *)settings, sizeof settings};
    const struct rl_reqread rd = {7, "recv", RL_READ_BYTES};
    rl_reqconn_received(&proc, &conn, &srv, 1, sizeof settings, &rd);
    unsigned refused = 0;
    for (uint32_t s = 3; s < 3 + 4 * RL_HTTP_STREAMS; s += 2) {
        p = write_bytes(b, h2_get(b, s));
        refused += p.act == RL_GATE_GO && p.swallow > 0;
        /* The program reads each made-up answer (the queue is short). */
        uint8_t got[128];
        struct iovec in = {got, sizeof got};
        bool left;
        cr_assert_gt(rl_reqconn_madeup(&conn, &in, 1, false, &left), 0);
    }
    cr_assert_eq(refused, 2 * RL_HTTP_STREAMS, "each one after is answered");
    cr_expect(awaited(1), "the first request's answer is still awaited");
    cr_expect_eq(conn.http.nstreams, 1, "%u streams awaited",
                 conn.http.nstreams);
    cr_expect_eq(conn.nsent, 1, "%u records", conn.nsent);
    /* The newest cut streams are kept, so their late frames are cut too. */
    uint32_t newest = 1 + 4 * RL_HTTP_STREAMS;
    cr_expect(rl_h2cut_has(conn.h2cut, newest));
    cr_expect(rl_h2cut_has(conn.h2cut, newest - 2 * (RL_H2CUT_MAX - 1)));
    cr_expect_not(rl_h2cut_has(conn.h2cut, newest - 2 * RL_H2CUT_MAX));
}
