/* Byte limits with real clients in delay mode: 1 MiB at 200 KiB/s. Each
 * must take the ideal time (the payload beyond the initial burst, at the
 * rate) within 10 %, deliver exactly the payload, and not spin: its CPU
 * beyond the same client's sending the same payload unthrottled stays a
 * small share of its time. */
#include "harness.h"

#define PAYLOAD (1 << 20)
#define RATE 204800.0  /* 200 KiB/s */
#define BURST 204800.0 /* the default burst: one period's worth */

static struct server srv;
static struct run r, ctl;
static char payload[300];
static char payload_sha[65];

static void setup_with(const char *server)
{
    h_setup();
    h_server_start(&srv, server);
    static char data[PAYLOAD];
    unsigned x = 12345;
    for (int i = 0; i < PAYLOAD; i++) {
        x = x * 1103515245u + 12345u;
        data[i] = (char)(x >> 16);
    }
    h_file_fill("payload.bin", data, PAYLOAD, payload, sizeof payload);
    h_sha256_file(payload, payload_sha);
    h_config_write("[rlshim]\non_deny = delay\n"
                   "[default]\nsend_bytes = 200KiB/s\nto = 127.0.0.1:%d\n",
                   srv.port);
}

static void setup_http(void)
{
    setup_with("http_count.py");
}

static void setup_tls(void)
{
    setup_with("sink_tls.py");
}

static void setup_sink(void)
{
    setup_with("sink.py");
}

static void teardown(void)
{
    h_server_stop(&srv);
    h_teardown();
}

/* `overhead`: bytes the client sends beyond the payload (headers, TLS).
 * The time is the server's, from the body's first byte to its last: what
 * reached the wire, without the client's start-up. Then argv again, as
 * the control of the CPU it spent. */
static void check(const char *who, const char *prefix, int sha_field,
                  double overhead, char *const argv[])
{
    cr_assert_eq(r.status, 0, "%s: status %d\n%s", who, r.status, r.out);
    char line[512], f[80], g[80];
    cr_assert_eq(h_server_wait(&srv, prefix, 1, 3), 1, "%s: nothing arrived",
                 who);
    h_server_line(&srv, prefix, 0, line, sizeof line);
    cr_expect_str_eq(h_field(line, sha_field, f, sizeof f), payload_sha,
                     "%s: the server got other bytes", who);
    /* http_count.py: END METHOD BYTES SHA START; sinks: CONN FIRST LAST. */
    bool http = *prefix == '\0';
    double first = atof(h_field(line, http ? 4 : 1, f, sizeof f));
    double last = atof(h_field(line, http ? 0 : 2, g, sizeof g));
    double ideal = (PAYLOAD + overhead - BURST) / RATE;
    cr_expect(last - first > ideal * 0.9 && last - first < ideal * 1.1,
              "%s: %.2f s at the server, ideal %.2f s", who, last - first,
              ideal);
    h_run_control(&ctl, 15, argv);
    h_expect_no_spin(&r, &ctl, 0.1, who);
}

static const char *url(void)
{
    static char u[64];
    snprintf(u, sizeof u, "http://127.0.0.1:%d/", srv.port);
    return u;
}

TestSuite(bytes, .timeout = 30);

Test(bytes, curl_posts_a_mebibyte_at_the_rate, .init = setup_http,
     .fini = teardown)
{
    char data[320];
    snprintf(data, sizeof data, "@%s", payload);
    char *argv[] = {"curl",    "-sS",           "-o", "/dev/null",   "-H",
                    "Expect:", "--data-binary", data, (char *)url(), NULL};
    h_run(&r, true, 15, argv);
    check("curl", "", 3, 200, argv);
}

Test(bytes, wget_posts_a_mebibyte_at_the_rate, .init = setup_http,
     .fini = teardown)
{
    char post[320];
    snprintf(post, sizeof post, "--post-file=%s", payload);
    char *argv[] = {"wget",      "-q", "-O",          "/dev/null",
                    "--tries=1", post, (char *)url(), NULL};
    h_run(&r, true, 15, argv);
    check("wget", "", 3, 300, argv);
}

Test(bytes, python_http_client_posts_a_mebibyte_at_the_rate, .init = setup_http,
     .fini = teardown)
{
    char code[600];
    snprintf(code, sizeof code,
             "import http.client\n"
             "c = http.client.HTTPConnection('127.0.0.1', %d)\n"
             "c.request('POST', '/', open('%s', 'rb').read())\n"
             "assert c.getresponse().status == 200\n",
             srv.port, payload);
    char *argv[] = {"python3", "-c", code, NULL};
    h_run(&r, true, 15, argv);
    check("python http.client", "", 3, 200, argv);
}

Test(bytes, node_posts_a_mebibyte_at_the_rate, .init = setup_http,
     .fini = teardown)
{
    if (!h_have("node"))
        h_skip("node is not installed (make test installs nodejs)");
    char code[800];
    snprintf(code, sizeof code,
             "const d = require('fs').readFileSync('%s');"
             "const q = require('http').request({host: '127.0.0.1',"
             " port: %d, method: 'POST',"
             " headers: {'Content-Length': d.length}},"
             " res => { res.resume(); res.on('end', () => process.exit("
             "res.statusCode == 200 ? 0 : 1)); });"
             "q.on('error', e => { console.log(e); process.exit(2); });"
             "q.end(d);",
             payload, srv.port);
    char *argv[] = {"node", "-e", code, NULL};
    h_run(&r, true, 15, argv);
    check("node", "", 3, 200, argv);
}

Test(bytes, openssl_s_client_sends_a_mebibyte_at_the_rate, .init = setup_tls,
     .fini = teardown)
{
    char conn[64], cmd[600];
    snprintf(conn, sizeof conn, "127.0.0.1:%d", srv.port);
    snprintf(cmd, sizeof cmd,
             "exec openssl s_client -connect %s -quiet -no_ign_eof "
             "-nocommands < '%s'",
             conn, payload);
    char *argv[] = {"sh", "-c", cmd, NULL};
    h_run(&r, true, 15, argv);
    /* TLS records add ~2 %; the handshake a few KB. */
    check("openssl s_client", "CONN", 4, PAYLOAD * 0.02 + 3000, argv);
}

Test(bytes, python_socket_sendfile_sends_a_mebibyte_at_the_rate,
     .init = setup_sink, .fini = teardown)
{
    char code[600];
    snprintf(code, sizeof code,
             "import socket\n"
             "s = socket.create_connection(('127.0.0.1', %d))\n"
             "s.sendfile(open('%s', 'rb'))\n"
             "s.close()\n",
             srv.port, payload);
    char *argv[] = {"python3", "-c", code, NULL};
    h_run(&r, true, 15, argv);
    check("python socket.sendfile", "CONN", 4, 0, argv);
}
