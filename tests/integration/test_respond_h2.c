/* on_deny = respond over HTTP/2 (SPEC §15), measured at the server: httpx
 * with h2 opens several streams at once on one connection; with one
 * request a minute the first stream is answered by the server and every
 * other by the shim's own HEADERS frame (429 with retry-after), cut from
 * what reaches the server, which counts exactly the request it granted.
 * The connection stays usable: a later request on it gets its 429
 * cleanly, and the server's HPACK and frames never break (no protocol
 * error on either side). The server is servers/h2c_count.py (python3-h2,
 * HTTP/2 without TLS, prior knowledge). */
#include "harness.h"

static struct server st, tls;
static struct run r;

static void setup(void)
{
    h_setup();
    h_server_start(&st, "h2c_count.py");
    setenv("RL_TLS", "1", 1);
    h_server_start(&tls, "h2c_count.py");
    unsetenv("RL_TLS");
}

static void teardown(void)
{
    h_server_stop(&st);
    h_server_stop(&tls);
    h_teardown();
}

TestSuite(respond_h2, .init = setup, .fini = teardown, .timeout = 60);

#define ONE_A_MINUTE "[default]\nrequest = 1/min\non_deny = respond\n"

/* Three requests at once on one HTTP/2 connection, then a fourth on it:
 * each one's status, Retry-After and HTTP version. One path for all, so
 * that the later header blocks refer to the first one's table entries
 * and change nothing in the table (SPEC §15: a block that does is
 * refused as under fail). */
static const char httpx_py[] =
    "import asyncio, httpx, sys, time\n"
    "async def main(u):\n"
    "    async with httpx.AsyncClient(http1=False, http2=True, verify=False,\n"
    "                                 timeout=20) as c:\n"
    "        t = time.monotonic()\n"
    "        rs = await asyncio.gather(*[c.get(u) for _ in range(3)])\n"
    "        rs.append(await c.get(u))\n"
    "        print('took %.2f' % (time.monotonic() - t))\n"
    "        for r in rs:\n"
    "            print(r.http_version, r.status_code,\n"
    "                  r.headers.get('retry-after', '-'), repr(r.text))\n"
    "asyncio.run(main(sys.argv[1]))\n";

/* How many times needle is in s. */
static int times(const char *s, const char *needle)
{
    int n = 0;
    for (const char *p = strstr(s, needle); p != NULL;
         p = strstr(p + 1, needle))
        n++;
    return n;
}

static void need_httpx(void)
{
    if (system("/usr/bin/python3 -c 'import httpx, h2' 2>/dev/null") != 0)
        h_skip("python3-httpx or python3-h2 is not installed "
               "(apt-get install python3-httpx python3-h2)");
}

/* Runs httpx on `url` (the server s) and checks what it saw and what
 * reached s. */
static void check_httpx(struct server *s, const char *scheme)
{
    need_httpx();
    h_config_write(ONE_A_MINUTE);
    char u[160];
    snprintf(u, sizeof u, "%s://127.0.0.1:%d/same", scheme, s->port);
    char *argv[] = {"/usr/bin/python3", "-c", (char *)httpx_py, u, NULL};
    h_run(&r, true, 40, argv);
    cr_log_info("httpx %s: %s", scheme, r.out);
    cr_assert_eq(r.status, 0, "httpx: status %d\n%s", r.status, r.out);
    cr_expect_eq(times(r.out, "HTTP/2 200 - 'ok\\n'"), 1,
                 "one stream answered by the server:\n%s", r.out);
    cr_expect_eq(times(r.out, "HTTP/2 429 60 ''"), 3,
                 "every other stream, and the later request, 429 with "
                 "retry-after 60:\n%s", r.out);
    h_server_wait(s, "REQ", 2, 1);
    cr_expect_eq(h_server_count(s, "REQ"), 1,
                 "the server got %d requests, not 1",
                 h_server_count(s, "REQ"));
    cr_expect_eq(h_server_count(s, "CONN"), 1, "one connection");
    cr_expect_eq(h_server_count(s, "ERR"), 0,
                 "the server saw no protocol error");
}

Test(respond_h2, httpx_over_tls_streams_on_one_connection_get_200_and_429s)
{
    check_httpx(&tls, "https");
}

Test(respond_h2, httpx_h2c_streams_on_one_connection_get_200_and_429s)
{
    check_httpx(&st, "http");
}

/* curl (libssl, nghttp2) over TLS, three URLs on one connection: nghttp2
 * never indexes :path and restates its table size after the server's
 * SETTINGS, and both blocks are cut cleanly. */
Test(respond_h2, curl_http2_urls_get_200_429_429_on_one_connection)
{
    if (!h_have("curl"))
        h_skip("no curl");
    h_config_write(ONE_A_MINUTE);
    char u[3][160];
    for (int i = 0; i < 3; i++)
        snprintf(u[i], sizeof u[i], "https://127.0.0.1:%d/%c", tls.port,
                 'a' + i);
    char *argv[] = {"curl", "-sSk", "--http2", "--max-time", "20", "-w",
                    "%{http_code} %{num_connects} %{http_version}\\n",
                    u[0], "-o", "/dev/null", u[1], "-o", "/dev/null",
                    u[2], "-o", "/dev/null", NULL};
    h_run(&r, true, 30, argv);
    cr_log_info("curl: %s", r.out);
    cr_assert_eq(r.status, 0, "curl: status %d\n%s", r.status, r.out);
    cr_expect_str_eq(r.out, "200 1 2\n429 0 2\n429 0 2\n");
    h_server_wait(&tls, "REQ", 2, 1);
    cr_expect_eq(h_server_count(&tls, "REQ"), 1,
                 "the server got %d requests, not 1",
                 h_server_count(&tls, "REQ"));
    cr_expect_eq(h_server_count(&tls, "ERR"), 0, "no protocol error");
}
