/* The request entry (policy/decide_request.h): one question per write,
 * whatever carries it, decided without a socket: what the carrier can be
 * asked is a table of fakes here. Rates are per minute, so that nothing
 * refills while a test runs. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>

#include "policy/decide_request.h"
#include "policy/gate.h"
#include "gate_fixture.h"

static struct rl_reqconn *conn;

/* What the fake carrier answers, and how often it was asked. */
static struct {
    bool nonblocking, tls_visible, tls_bind, membio, no_peer;
    int kernel_says, wire;
    unsigned peers, looks;
} fake;

static bool fake_nonblocking(int fd, int flags)
{
    (void)fd;
    return fake.nonblocking || (flags & MSG_DONTWAIT);
}

static int fake_kernel_says(int fd)
{
    (void)fd;
    return fake.kernel_says;
}

static const struct sockaddr *fake_peer(int fd, struct sockaddr_storage *ss,
                                        socklen_t *len)
{
    (void)fd;
    fake.peers++;
    if (fake.no_peer)
        return NULL;
    struct sockaddr_in *a = (struct sockaddr_in *)ss;
    memset(ss, 0, sizeof *ss);
    a->sin_family = AF_INET;
    a->sin_port = htons(443);
    inet_pton(AF_INET, "127.0.0.1", &a->sin_addr);
    *len = sizeof *a;
    return (const struct sockaddr *)ss;
}

static uint16_t fake_tunnel_port(int fd)
{
    (void)fd;
    return 0;
}

static bool fake_tls_visible(void)
{
    return fake.tls_visible;
}

static bool fake_tls_bind(int fd)
{
    (void)fd;
    return fake.tls_bind;
}

static int fake_wire(void *ctx, bool look, bool *membio)
{
    (void)ctx;
    if (look)
        fake.looks++;
    *membio = fake.membio;
    return fake.wire;
}

static const struct rl_request_probe probe = {
    fake_nonblocking, fake_kernel_says, fake_peer, fake_tunnel_port,
    fake_tls_visible, fake_tls_bind, fake_wire,
};

static void teardown(void)
{
    rl_request_conn_free(conn);
    conn = NULL;
    fixture_state_dir_remove();
}

static void setup(void)
{
    fixture_state_dir("decide_request");
    memset(&fake, 0, sizeof fake);
    fake.wire = -1;
}

TestSuite(decide_request, .init = setup, .fini = teardown);

static void gate_with(const char *text)
{
    fixture_gate(&proc, "tester", text);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(80)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    conn = rl_request_conn_new((const struct sockaddr *)&a, sizeof a);
    cr_assert_not_null(conn);
}

static struct iovec one;

static struct rl_request_question plain(const char *text, int flags)
{
    one = (struct iovec){(void *)text, strlen(text)};
    return (struct rl_request_question){
        .call = "send", .carrier = RL_CARRY_PLAIN, .fd = 7, .flags = flags,
        .iov = &one, .n = 1, .probe = &probe};
}

static struct rl_request_question tls(const char *text, int fd,
                                      const char *sni)
{
    one = (struct iovec){(void *)text, strlen(text)};
    return (struct rl_request_question){
        .call = "SSL_write", .carrier = RL_CARRY_TLS, .fd = fd,
        .how = RL_REQ_WHOLE, .iov = &one, .n = 1, .sni = sni,
        .probe = &probe};
}

/* Decide q and, when it goes, settle what it allows. */
static struct rl_request_answer write_(const struct rl_request_question *q)
{
    struct rl_request_answer a;
    rl_decide_request(&proc, conn, q, &a);
    if (a.act == RL_GATE_GO)
        rl_settle_request(&proc, conn, q, &a, (long)a.allow);
    return a;
}

#define GET(path, host) "GET " path " HTTP/1.1\r\nHost: " host "\r\n\r\n"

Test(decide_request, a_plain_send_is_cut_before_the_head_that_cannot_go)
{
    gate_with("[default]\nrequest = 1/min\nrequest_burst = 1\n");
    const char *two = GET("/a", "h.test") GET("/b", "h.test");
    struct rl_request_question q = plain(two, MSG_DONTWAIT);
    struct rl_request_answer a = write_(&q);
    cr_assert_eq(a.act, RL_GATE_GO);
    cr_assert_eq(a.allow, strlen(GET("/a", "h.test")));
    cr_assert_eq(a.hide, -1);
    q = plain(GET("/b", "h.test"), MSG_DONTWAIT);
    a = write_(&q);
    cr_assert_eq(a.act, RL_GATE_FAIL);
    cr_assert_eq(a.err, EAGAIN);
    cr_assert_eq(a.hide, 7, "held, so hidden from the wait calls");
}

Test(decide_request, a_denied_send_on_a_socket_that_hung_up_goes_to_the_kernel)
{
    gate_with("[default]\nrequest = 1/min\nrequest_burst = 1\n");
    struct rl_request_question q = plain(GET("/a", "h.test"), MSG_DONTWAIT);
    cr_assert_eq(write_(&q).act, RL_GATE_GO);
    fake.kernel_says = -1;
    q = plain(GET("/b", "h.test"), MSG_DONTWAIT);
    struct rl_request_answer a = write_(&q);
    cr_assert_eq(a.act, RL_REQUEST_KERNEL);
    cr_assert_eq(a.hide, -1, "nothing held");
}

Test(decide_request, bytes_not_seen_end_the_count_of_a_plain_socket)
{
    gate_with("[default]\nrequest = 1/min\n");
    struct rl_request_question q = plain(GET("/a", "h.test"), 0);
    q.iov = NULL;
    struct rl_request_answer a = write_(&q);
    cr_assert_eq(a.act, RL_REQUEST_PASS);
    cr_assert(a.forget);
}

Test(decide_request, tls_on_a_plain_socket_no_library_wrote_is_let_go)
{
    gate_with("[default]\nrequest = 1/min\n");
    struct rl_request_question q = plain("\x16\x03\x01\x00\x05hello", 0);
    struct rl_request_answer a;
    rl_decide_request(&proc, conn, &q, &a);
    cr_assert_eq(a.act, RL_GATE_GO);
    cr_assert(rl_settle_request(&proc, conn, &q, &a, (long)a.allow),
              "no TLS library to count it: the socket is let go");
}

Test(decide_request, ciphertext_a_tls_write_names_is_that_sessions)
{
    gate_with("[default]\nrequest = 1/min\n");
    fake.tls_visible = true;
    struct rl_request_question q = plain("\x16\x03\x01\x00\x05hello", 0);
    struct rl_request_answer a;
    rl_decide_request(&proc, conn, &q, &a);
    cr_assert_not(rl_settle_request(&proc, conn, &q, &a, (long)a.allow),
                  "its session may yet be found here");
    fake.tls_bind = true;
    a = write_(&q);
    cr_assert_eq(a.act, RL_REQUEST_CIPHER);
    cr_assert(a.forget, "the TLS layer counts it from now on");
    cr_assert_not(a.paced);
}

Test(decide_request, a_tls_write_without_a_socket_is_decided_by_its_name)
{
    gate_with("[default]\nrequest = 1/min\nrequest_burst = 1\n"
              "on_deny = fail\n");
    struct rl_request_question q = tls(GET("/a", "h.test"), -1, "h.test");
    struct rl_request_answer a = write_(&q);
    cr_assert_eq(a.act, RL_GATE_GO);
    cr_assert_eq(a.sock, -1);
    cr_assert_eq(fake.looks, 1, "its socket looked for");
    cr_assert_eq(fake.peers, 0, "no socket: no address asked");
    q = tls(GET("/b", "h.test"), -1, NULL);
    a = write_(&q);
    cr_assert_eq(a.act, RL_GATE_FAIL);
    cr_assert_eq(a.hide, -1, "no socket to hold");
}

Test(decide_request, a_tls_sockets_address_is_asked_once)
{
    gate_with("[default]\nrequest = 10/min\n");
    rl_request_conn_free(conn);
    conn = rl_request_conn_new(NULL, 0);
    struct rl_request_question q = tls(GET("/a", "h.test"), -1, "");
    struct rl_request_answer a = write_(&q);
    cr_assert_eq(fake.peers, 0);
    fake.wire = 9; /* its ciphertext named its socket meanwhile */
    q = tls(GET("/b", "h.test"), -1, NULL);
    a = write_(&q);
    cr_assert_eq(a.act, RL_GATE_GO);
    cr_assert_eq(a.sock, 9);
    cr_assert_eq(fake.peers, 1);
    q = tls(GET("/c", "h.test"), -1, NULL);
    write_(&q);
    cr_assert_eq(fake.peers, 1, "known: not asked again");
}

Test(decide_request, a_socket_without_a_peer_is_asked_once)
{
    gate_with("[default]\nrequest = 10/min\n");
    rl_request_conn_free(conn);
    conn = rl_request_conn_new(NULL, 0);
    fake.no_peer = true;
    for (int i = 0; i < 3; i++) {
        struct rl_request_question q = tls(GET("/a", "h.test"), 7,
                                           i == 0 ? "" : NULL);
        cr_assert_eq(write_(&q).act, RL_GATE_GO);
    }
    cr_assert_eq(fake.peers, 1, "asked once, not at every write");
}

Test(decide_request, a_memory_bios_later_turn_is_held_on_its_socket)
{
    gate_with("[default]\nrequest = 2/min\nrequest_burst = 1\n"
              "on_deny = delay\nmax_delay = 5min\n");
    fake.membio = true;
    fake.wire = 9;
    fake.nonblocking = true;
    struct rl_request_question q = tls(GET("/a", "h.test"), -1, "");
    struct rl_request_answer a = write_(&q);
    cr_assert_eq(a.act, RL_GATE_GO);
    cr_assert_eq(a.hide, -1);
    q = tls(GET("/b", "h.test"), -1, NULL);
    a = write_(&q);
    cr_assert_eq(a.act, RL_GATE_GO, "into the BIO now");
    cr_assert_eq(a.wake, 0, "a memory BIO's write does not sleep");
    cr_assert_eq(a.hide, 9, "its socket held to the turn");
    cr_assert_eq(a.after, 0);
}

Test(decide_request, a_second_write_on_a_session_at_once_is_not_scanned)
{
    gate_with("[default]\nrequest = 1/min\nrequest_burst = 1\n"
              "on_deny = fail\n");
    struct rl_request_question q = tls(GET("/a", "h.test"), 7, "");
    struct rl_request_answer a, b;
    rl_decide_request(&proc, conn, &q, &a);
    cr_assert_eq(a.act, RL_GATE_GO);
    rl_decide_request(&proc, conn, &q, &b);
    cr_assert_eq(b.act, RL_REQUEST_PASS, "another write is in progress");
    rl_settle_request(&proc, conn, &q, &a, (long)a.allow);
}
