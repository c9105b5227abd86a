/* A request whose head names nothing (SPEC §11): no Host, or a Host over
 * 255 bytes. It is charged by the TLS server name, else by the
 * connection's name, never by the name of the request before it on the
 * same keep-alive connection. Two sites with budgets of their own: the
 * named site lets one request through, the catch-all one more; the
 * second request of the connection goes only if it is charged to the
 * site of the connection's name (counted at the server, and its `site`
 * and `dest` read in the decision log). The server is
 * tests/integration/servers/http_status.py, plaintext and TLS. */
#include "harness.h"

static struct server st;
static struct run r;
static char dlog[300];

static void setup(void)
{
    h_setup();
    snprintf(dlog, sizeof dlog, "%s/decisions.jsonl", h_dir);
}

static void teardown(void)
{
    h_server_stop(&st);
    h_teardown();
}

TestSuite(nameless, .init = setup, .fini = teardown, .timeout = 60);

/* One request a minute per site, a burst of one, fail mode: a second
 * request charged to a site already used is refused, with ETIMEDOUT (the
 * client's socket has a timeout, so it is non-blocking: EAGAIN would have
 * python poll until its timeout). `sni.test` names the TLS server name's
 * own site. */
static const char config[] = "[rlshim]\nerrno = ETIMEDOUT\n"
                             "[site:named]\nto = named.test\n"
                             "request = 1/min\nrequest_burst = 1\n"
                             "on_deny = fail\n"
                             "[site:sni]\nto = sni.test\n"
                             "request = 1/min\nrequest_burst = 1\n"
                             "on_deny = fail\n"
                             "[site:every-host]\n"
                             "request = 1/min\nrequest_burst = 1\n"
                             "on_deny = fail\n";

/* One connection (TLS with server name argv[3] when it is not "-"): GET
 * /one with Host named.test, then GET /two with the head argv[2] names
 * ("none": no Host; "long": a Host of 300 bytes; "http10": HTTP/1.0
 * without Host). Each answer is read before the next request. Prints
 * "one=0" / "two=0" when sent, else the errno. */
static const char client_py[] =
    "import socket, ssl, sys\n"
    "port, kind, sni = int(sys.argv[1]), sys.argv[2], sys.argv[3]\n"
    "s = socket.create_connection(('127.0.0.1', port), timeout=10)\n"
    "if sni != '-':\n"
    "    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)\n"
    "    ctx.check_hostname = False\n"
    "    ctx.verify_mode = ssl.CERT_NONE\n"
    "    s = ctx.wrap_socket(s, server_hostname=sni)\n"
    "def answer():\n"
    "    buf = b''\n"
    "    while b'\\r\\n\\r\\n' not in buf:\n"
    "        buf += s.recv(4096)\n"
    "    head, body = buf.split(b'\\r\\n\\r\\n', 1)\n"
    "    n = [int(l.split(b':')[1]) for l in head.split(b'\\r\\n')\n"
    "         if l.lower().startswith(b'content-length:')][0]\n"
    "    while len(body) < n:\n"
    "        body += s.recv(4096)\n"
    "def send(key, data):\n"
    "    try:\n"
    "        s.sendall(data)\n"
    "    except OSError as e:\n"
    "        print('%s=%d' % (key, e.errno or -1), flush=True)\n"
    "        return False\n"
    "    print('%s=0' % key, flush=True)\n"
    "    return True\n"
    "if send('one', b'GET /one HTTP/1.1\\r\\nHost: named.test\\r\\n\\r\\n'):\n"
    "    answer()\n"
    "    two = {'none': b'GET /two HTTP/1.1\\r\\nAccept: */*\\r\\n\\r\\n',\n"
    "           'http10': b'GET /two HTTP/1.0\\r\\n\\r\\n',\n"
    "           'long': b'GET /two HTTP/1.1\\r\\nHost: ' + b'a' * 300 +\n"
    "                   b'.test\\r\\n\\r\\n'}[kind]\n"
    "    if send('two', two):\n"
    "        answer()\n"
    "s.close()\n";

static void run_client(const char *kind, const char *sni)
{
    char port[16];
    snprintf(port, sizeof port, "%d", st.port);
    char *argv[] = {"/usr/bin/python3", "-c", (char *)client_py, port,
                    (char *)kind,       (char *)sni,           NULL};
    h_config_write(config);
    setenv("RLSHIM_DECISION_LOG", dlog, 1);
    h_run(&r, true, 30, argv);
    unsetenv("RLSHIM_DECISION_LOG");
    cr_assert_eq(r.status, 0, "client: status %d\n%s", r.status, r.out);
}

/* Both requests reached the server; the second was charged to site
 * `site` (the decision log's line of its request: `want_dest` its name). */
static void expect_second_charged_to(const char *site, const char *want_dest,
                                     const char *who)
{
    cr_expect_eq(h_out_long(&r, "one", -2), 0, "%s: the first: %s", who,
                 r.out);
    cr_expect_eq(h_out_long(&r, "two", -2), 0,
                 "%s: the second request was refused (errno %ld): charged "
                 "to the first one's site, not its own\n%s",
                 who, h_out_long(&r, "two", -2), r.out);
    int n = h_server_wait(&st, "REQ", 2, 5);
    cr_expect_eq(n, 2, "%s: the server saw %d requests", who, n);
    char needle[200];
    /* The first request's line, then the second's. */
    cr_expect_eq(h_file_lines(dlog, "\"site\":\"named\""), 1,
                 "%s: %d lines of site named (one request named it)", who,
                 h_file_lines(dlog, "\"site\":\"named\""));
    snprintf(needle, sizeof needle, "\"site\":\"%s\"", site);
    cr_expect_eq(h_file_lines(dlog, needle), 1, "%s: %d lines of %s", who,
                 h_file_lines(dlog, needle), needle);
    snprintf(needle, sizeof needle, "\"dest\":{\"name\":\"%s\"", want_dest);
    cr_expect_eq(h_file_lines(dlog, needle), 1, "%s: %d lines of %s", who,
                 h_file_lines(dlog, needle), needle);
    cr_expect_eq(h_file_lines(dlog, "\"verdict\":\"deny\""), 0,
                 "%s: a request was denied", who);
}

Test(nameless, a_request_without_host_is_charged_to_the_connections_name)
{
    h_server_start(&st, "http_status.py");
    run_client("none", "-");
    expect_second_charged_to("every-host", "127.0.0.1", "no Host");
}

Test(nameless, an_http10_request_without_host_is_charged_to_the_connections_name)
{
    h_server_start(&st, "http_status.py");
    run_client("http10", "-");
    expect_second_charged_to("every-host", "127.0.0.1", "HTTP/1.0");
}

Test(nameless, a_host_over_255_bytes_is_no_name)
{
    h_server_start(&st, "http_status.py");
    run_client("long", "-");
    expect_second_charged_to("every-host", "127.0.0.1", "a 305-byte Host");
}

Test(nameless, under_tls_a_request_without_host_is_charged_to_the_server_name)
{
    setenv("RL_TLS", "1", 1);
    h_server_start(&st, "http_status.py");
    unsetenv("RL_TLS");
    run_client("none", "sni.test");
    expect_second_charged_to("sni", "sni.test", "TLS, no Host");
}
