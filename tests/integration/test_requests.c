/* The request limit on plaintext HTTP (SPEC §11), measured at the server:
 * real clients that keep one connection alive (python requests, curl and
 * wget with several URLs, aiohttp, node) are paced per request in delay
 * mode and refused per request in fail mode, against Debian's nginx; a
 * crawler behind tinyproxy is paced per site it names; and bad input
 * (junk, huge heads, bodies that look like heads, heads a byte at a time,
 * pipelined heads) is counted right with every byte delivered unchanged,
 * against a sink that parses and hashes what it got. */
#include "harness.h"
#include "hosts_ns.h"
#include "nginx_fixture.h"

static struct ngx_site ngx[3] = {
    {.addr = "127.0.0.1"}, {.addr = "127.0.0.2"}, {.addr = "127.0.0.3"}};
static struct server sink;
static struct run r;

static void setup(void)
{
    h_setup();
    ngx_start(ngx, 3);
    h_server_start(&sink, "http_heads.py");
}

static void teardown(void)
{
    ngx_stop();
    h_server_stop(&sink);
    h_teardown();
}

TestSuite(requests, .init = setup, .fini = teardown, .timeout = 60);

/* 2 requests a second, one at a time: N requests take (N-1) half-seconds
 * at least. */
static const char delay_config[] = "[default]\nrequest = 2/s\n"
                                   "request_burst = 1\non_deny = delay\n";
/* One request a minute: the first goes, every other is refused. A client
 * told ETIMEDOUT gives up on that request (EAGAIN would have curl poll
 * and retry it to its --max-time). */
static const char fail_config[] = "[rlshim]\nerrno = ETIMEDOUT\n"
                                  "[default]\nrequest = 1/min\n"
                                  "request_burst = 1\non_deny = fail\n";

#define NURLS 5

/* argv = prefix..., then each of the NURLS URLs of site 0 (with "-o per"
 * before each when not NULL). */
static char **client(char *const prefix[], const char *per)
{
    return ngx_client(&ngx[0], prefix, per, NURLS);
}

/* Paced: NURLS requests on one connection, half a second apart (see
 * ngx_check_paced); refused: only the first reaches the server. */
static void check_paced(char **argv, const char *who)
{
    ngx_check_paced(&ngx[0], delay_config, argv, NURLS, 0.5, who);
}

static void check_refused(char **argv, const char *who)
{
    ngx_check_refused(&ngx[0], fail_config, argv, 1, who);
}

static const char requests_py[] =
    "import requests, sys\n"
    "s = requests.Session()\n"
    "for u in sys.argv[1:]:\n"
    "    try:\n"
    "        s.get(u, timeout=10).content\n"
    "    except Exception as e:\n"
    "        print('error: %r' % e, file=sys.stderr)\n";

static char *const requests_argv[] = {"/usr/bin/python3", "-c",
                                      (char *)requests_py, NULL};

Test(requests, python_requests_session_is_paced_per_request)
{
    check_paced(client(requests_argv, NULL), "requests.Session");
}

Test(requests, python_requests_session_is_refused_per_request)
{
    check_refused(client(requests_argv, NULL), "requests.Session");
}

static char *const curl_argv[] = {"curl", "-sS", "--max-time", "10", NULL};

Test(requests, curl_urls_on_one_connection_are_paced)
{
    check_paced(client(curl_argv, "/dev/null"), "curl");
}

Test(requests, curl_urls_on_one_connection_are_refused)
{
    check_refused(client(curl_argv, "/dev/null"), "curl");
}

static char *const wget_argv[] = {"wget", "-q", "-t", "1", "-T", "10",
                                  "-O", "/dev/null", NULL};

Test(requests, wget_urls_are_paced)
{
    check_paced(client(wget_argv, NULL), "wget");
}

Test(requests, wget_urls_are_refused)
{
    check_refused(client(wget_argv, NULL), "wget");
}

static const char aiohttp_py[] =
    "import aiohttp, asyncio, sys\n"
    "async def main():\n"
    "    conn = aiohttp.TCPConnector(limit=1)\n"
    "    async with aiohttp.ClientSession(connector=conn) as s:\n"
    "        for u in sys.argv[1:]:\n"
    "            try:\n"
    "                async with s.get(u, timeout=aiohttp.ClientTimeout(total=10)) as r:\n"
    "                    await r.read()\n"
    "            except Exception as e:\n"
    "                print('error: %r' % e, file=sys.stderr)\n"
    "asyncio.run(main())\n";

static char *const aiohttp_argv[] = {"/usr/bin/python3", "-c",
                                     (char *)aiohttp_py, NULL};

Test(requests, aiohttp_keepalive_is_paced)
{
    check_paced(client(aiohttp_argv, NULL), "aiohttp");
}

Test(requests, aiohttp_keepalive_is_refused)
{
    check_refused(client(aiohttp_argv, NULL), "aiohttp");
}

static const char node_js[] =
    "const http = require('http');\n"
    "const agent = new http.Agent({keepAlive: true, maxSockets: 1});\n"
    "const urls = process.argv.slice(1);\n"
    "function next(i) {\n"
    "  if (i >= urls.length) { agent.destroy(); return; }\n"
    "  const req = http.get(urls[i], {agent}, (res) => {\n"
    "    res.resume(); res.on('end', () => next(i + 1));\n"
    "  });\n"
    "  req.setTimeout(10000, () => req.destroy(new Error('timeout')));\n"
    "  req.on('error', (e) => { console.error('error: ' + e); next(i + 1); });\n"
    "}\n"
    "next(0);\n";

static char *const node_argv[] = {"/usr/bin/node", "-e", (char *)node_js,
                                  NULL};

Test(requests, node_http_get_keepalive_is_paced)
{
    check_paced(client(node_argv, NULL), "node http.get");
}

Test(requests, node_http_get_keepalive_is_refused)
{
    check_refused(client(node_argv, NULL), "node http.get");
}

/* ---- Sites by name: a private hosts file (hosts_ns.h). ---- */

static void hosts_for_sites(void)
{
    ns_hosts_write("127.0.0.2 site-a.test\n127.0.0.3 site-b.test\n");
}

/* `[site:a] to = site-a.test`: site-a's requests are paced, site-b's on
 * the same run go at once. */
Test(requests, a_named_site_is_paced_and_another_is_untouched)
{
    hosts_for_sites();
    h_config_write("[site:a]\nto = site-a.test\nrequest = 2/s\n"
                   "request_burst = 1\non_deny = delay\n");
    char script[2000];
    int n = snprintf(script, sizeof script, "curl -sS --max-time 10");
    for (int i = 0; i < NURLS; i++)
        n += snprintf(script + n, sizeof script - n,
                      " -o /dev/null http://site-a.test:%d/%c.txt",
                      ngx[1].port, 'a' + i);
    n += snprintf(script + n, sizeof script - n, " && curl -sS --max-time 10");
    for (int i = 0; i < NURLS; i++)
        n += snprintf(script + n, sizeof script - n,
                      " -o /dev/null http://site-b.test:%d/%c.txt",
                      ngx[2].port, 'a' + i);
    ns_run(&r, 30, script);
    cr_assert_eq(r.status, 0, "curl: status %d\n%s", r.status, r.out);
    ngx_settle(&ngx[1], NURLS);
    ngx_settle(&ngx[2], NURLS);
    double fa, la, fb, lb;
    int na = ngx_requests(&ngx[1], &fa, &la);
    int nb = ngx_requests(&ngx[2], &fb, &lb);
    cr_expect_eq(na, NURLS, "site-a saw %d", na);
    cr_expect_eq(nb, NURLS, "site-b saw %d", nb);
    cr_expect_geq(la - fa, (NURLS - 1) * 0.5 * 0.9, "site-a: %.3f s",
                  la - fa);
    cr_expect_lt(lb - fb, (la - fa) / 2,
                 "site-b (not named) took %.3f s, site-a %.3f s", lb - fb,
                 la - fa);
}

/* A crawler behind tinyproxy: every request goes on connections to the
 * proxy, naming its site in absolute form. Under `per = destination` each
 * site has its own budget of 1/s: 3 requests to each, interleaved, take
 * about 2 s in all (each site's 3 at least 1.8 s apart); one budget for
 * the proxy would take at least 5 s. */
static const char crawler_py[] =
    "import requests, socket, sys, time\n"
    "proxy = int(sys.argv[1])\n"
    "end = time.monotonic() + 5\n"
    "while True:\n"
    "    try:\n"
    "        socket.create_connection(('127.0.0.1', proxy)).close(); break\n"
    "    except OSError:\n"
    "        if time.monotonic() > end: raise\n"
    "        time.sleep(0.05)\n"
    "s = requests.Session()\n"
    "s.proxies = {'http': 'http://127.0.0.1:%d' % proxy}\n"
    "for u in sys.argv[2:]:\n"
    "    r = s.get(u, timeout=10)\n"
    "    print(r.status_code, u)\n";

Test(requests, a_crawler_behind_a_proxy_is_paced_per_site)
{
    if (!h_have("tinyproxy"))
        h_skip("tinyproxy is not installed (apt-get install tinyproxy)");
    hosts_for_sites();
    int pport = ngx_free_port("127.0.0.1");
    char conf[300], py[300], body[600];
    snprintf(body, sizeof body,
             "Port %d\nListen 127.0.0.1\nTimeout 30\nMaxClients 20\n"
             "LogLevel Error\nLogFile \"%s/tinyproxy.log\"\n"
             "PidFile \"%s/tinyproxy.pid\"\n",
             pport, h_dir, h_dir);
    h_file_fill("tinyproxy.conf", body, strlen(body), conf, sizeof conf);
    h_file_fill("crawler.py", crawler_py, strlen(crawler_py), py, sizeof py);
    /* One request every 2 s per site: the sites' 3 each take 4 s side by
     * side, one budget for the proxy would take 10 s. */
    h_config_write("[site:every-host]\nper = destination\nrequest = 30/min\n"
                   "request_burst = 1\non_deny = delay\nmax_delay = 30s\n");
    char script[2000];
    int n = snprintf(script, sizeof script,
                     "env -u LD_PRELOAD tinyproxy -d -c '%s' "
                     ">/dev/null 2>&1 & p=$!; python3 '%s' %d",
                     conf, py, pport);
    for (int i = 0; i < 3; i++)
        n += snprintf(script + n, sizeof script - n,
                      " http://site-a.test:%d/%c.txt"
                      " http://site-b.test:%d/%c.txt",
                      ngx[1].port, 'a' + i, ngx[2].port, 'a' + i);
    snprintf(script + n, sizeof script - n, "; rc=$?; kill $p; exit $rc");
    ns_run(&r, 40, script);
    cr_assert_eq(r.status, 0, "crawler: status %d\n%s", r.status, r.out);
    ngx_settle(&ngx[1], 3);
    ngx_settle(&ngx[2], 3);
    double fa, la, fb, lb;
    int na = ngx_requests(&ngx[1], &fa, &la);
    int nb = ngx_requests(&ngx[2], &fb, &lb);
    cr_expect_eq(na, 3, "site-a saw %d", na);
    cr_expect_eq(nb, 3, "site-b saw %d", nb);
    cr_expect_geq(la - fa, 4 * 0.9, "site-a's 3 in %.3f s", la - fa);
    cr_expect_geq(lb - fb, 4 * 0.9, "site-b's 3 in %.3f s", lb - fb);
    double all = (la > lb ? la : lb) - (fa < fb ? fa : fb);
    /* Half-way from 4 s to the 10 s of one budget. */
    cr_expect_lt(all, 7.0,
                 "6 requests in %.3f s: one budget for the proxy, not one "
                 "per site (that takes 10 s)",
                 all);
}

/* ---- Bad input, against the sink (servers/http_heads.py). ---- */

/* Sends each payload file on a connection of its own (`bytes`: one send
 * per byte, TCP_NODELAY; `nb`: non-blocking, select for the rest), then a probe request on the last connection when
 * PROBE is set. Prints, per connection i: sent<i> (bytes gone), first<i>
 * (what the first send took), err<i> (errno of the send that failed, 0);
 * and probe (0 gone, else its errno). */
static const char sender_py[] =
    "import os, select, socket, sys, time\n"
    "port, mode = int(sys.argv[1]), sys.argv[2]\n"
    "s = None\n"
    "for i, path in enumerate(sys.argv[3:]):\n"
    "    data = open(path, 'rb').read()\n"
    "    s = socket.create_connection(('127.0.0.1', port))\n"
    "    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)\n"
    "    sent, first, err = 0, -1, 0\n"
    "    try:\n"
    "        if mode == 'nb': s.setblocking(False)\n"
    "        while sent < len(data):\n"
    "            try:\n"
    "                n = s.send(data[sent:sent + 1] if mode == 'bytes' else data[sent:])\n"
    "            except BlockingIOError:\n"
    "                if mode != 'nb': raise\n"
    "                select.select([], [s], [], 30); continue\n"
    "            if first < 0: first = n\n"
    "            sent += n\n"
    "    except OSError as e:\n"
    "        err = e.errno\n"
    "    print('sent%d=%d\\nfirst%d=%d\\nerr%d=%d' % (i, sent, i, first, i, err), flush=True)\n"
    "    if i < len(sys.argv) - 4:\n"
    "        time.sleep(0.1); s.close()\n"
    "if os.environ.get('PROBE'):\n"
    "    try:\n"
    "        s.send(b'GET /probe HTTP/1.1\\r\\nHost: probe\\r\\n\\r\\n'); print('probe=0')\n"
    "    except OSError as e:\n"
    "        print('probe=%d' % e.errno)\n"
    "time.sleep(0.1)\n"
    "s.close()\n";

/* Fail mode, no errno override: a denied request at offset 0 is EAGAIN. */
static void sink_config(int burst)
{
    h_config_write("[default]\nrequest = 1/min\nrequest_burst = %d\n"
                   "on_deny = fail\n",
                   burst);
}

static void send_files(const char *mode, bool probe, const char *paths[],
                       int n)
{
    char *argv[16] = {"/usr/bin/python3", "-c", (char *)sender_py};
    char port[16];
    snprintf(port, sizeof port, "%d", sink.port);
    argv[3] = port;
    argv[4] = (char *)mode;
    for (int i = 0; i < n; i++)
        argv[5 + i] = (char *)paths[i];
    argv[5 + n] = NULL;
    if (probe)
        setenv("PROBE", "1", 1);
    h_run(&r, true, 60, argv);
    unsetenv("PROBE");
    cr_assert_eq(r.status, 0, "sender: status %d\n%s", r.status, r.out);
    /* Every connection closed: its CONN line is in. */
    h_server_wait(&sink, "CONN", n, 5);
}

static long out(const char *key, int i)
{
    char k[32];
    snprintf(k, sizeof k, "%s%d", key, i);
    return h_out_long(&r, k, -2);
}

/* The i-th connection the sink saw carried exactly `len` bytes hashing as
 * the file at `path` (its first `len` bytes). */
static void expect_conn(int i, const char *path, long len)
{
    char line[512], got[80], bytes[32], want[65];
    h_server_line(&sink, "CONN", i, line, sizeof line);
    h_field(line, 1, bytes, sizeof bytes);
    h_field(line, 2, got, sizeof got);
    cr_expect_eq(atol(bytes), len, "connection %d: the sink got %s bytes, "
                 "%ld sent",
                 i, bytes, len);
    char cut[400], cmd[800];
    snprintf(cut, sizeof cut, "%s/cut.%d", h_dir, i);
    snprintf(cmd, sizeof cmd, "head -c %ld '%s' > '%s'", len, path, cut);
    cr_assert_eq(system(cmd), 0);
    h_sha256_file(cut, want);
    cr_expect_str_eq(got, want, "connection %d: bytes changed", i);
}

static const char *payload(const char *name, const char *data, size_t n)
{
    static char paths[8][300];
    static int k;
    char *p = paths[k++ % 8];
    h_file_fill(name, data, n, p, 300);
    return p;
}

Test(requests, binary_junk_is_left_alone_and_delivered_whole)
{
    sink_config(1);
    static char junk[65536];
    srand(7);
    for (size_t i = 0; i < sizeof junk; i++)
        junk[i] = (char)(rand() & 0xff);
    junk[0] = 0; /* not a method's first byte */
    const char get[] = "GET /after HTTP/1.1\r\nHost: x\r\n\r\n";
    const char *files[] = {payload("junk", junk, sizeof junk),
                           payload("get", get, strlen(get))};
    send_files("whole", true, files, 2);
    cr_expect_eq(out("err", 0), 0, "%s", r.out);
    cr_expect_eq(out("err", 1), 0, "the GET after junk: %s", r.out);
    /* The GET took the only turn: the probe is refused. */
    cr_expect_eq(h_out_long(&r, "probe", -2), EAGAIN, "%s", r.out);
    expect_conn(0, files[0], sizeof junk);
    expect_conn(1, files[1], (long)strlen(get));
    cr_expect_eq(h_server_count(&sink, "REQ"), 1, "the sink saw %d requests",
                 h_server_count(&sink, "REQ"));
}

/* A head of `total` bytes: a request line, header lines of filler (some
 * reading as request lines) and the blank line. */
static int big_head(char *head, size_t size, int total)
{
    int n = snprintf(head, size, "GET /big HTTP/1.1\r\nHost: x\r\n");
    while (n < total - 80)
        n += snprintf(head + n, size - (size_t)n,
                      "X-Fill-%05d: GET / HTTP/1.1 %030d\r\n", n, 0);
    n += snprintf(head + n, size - (size_t)n, "X-Pad: %0*d\r\n\r\n",
                  total - n - 11, 0);
    cr_assert_eq(n, total);
    return n;
}

/* A head of 64 KiB exactly (the most the scanner reads as one head,
 * RL_HTTP_HEAD_MAX): one request; the probe after it is refused. */
Test(requests, a_64_kib_header_block_is_one_request)
{
    sink_config(1);
    static char head[70000];
    int n = big_head(head, sizeof head, 65536);
    const char *files[] = {payload("big", head, (size_t)n)};
    send_files("whole", true, files, 1);
    cr_expect_eq(out("err", 0), 0, "%s", r.out);
    cr_expect_eq(out("sent", 0), n, "%s", r.out);
    cr_expect_eq(h_out_long(&r, "probe", -2), EAGAIN, "the probe: %s", r.out);
    expect_conn(0, files[0], n);
    cr_expect_eq(h_server_count(&sink, "REQ"), 1, "the sink saw %d",
                 h_server_count(&sink, "REQ"));
}

/* A head past that bound (96 KiB) is not HTTP from there on (the
 * scanner's bound, src/http/http.h), but it began as a request and is
 * charged as one: every byte of it goes unchanged, and a request on a new
 * connection is the second, refused. */
Test(requests, a_head_over_the_bound_is_charged_once_and_delivered_whole)
{
    sink_config(1);
    static char head[100000];
    int n = big_head(head, sizeof head, 96 * 1024);
    const char get[] = "GET /next HTTP/1.1\r\nHost: x\r\n\r\n";
    const char *files[] = {payload("huge-head", head, (size_t)n),
                           payload("next", get, strlen(get))};
    send_files("whole", false, files, 2);
    cr_expect_eq(out("err", 0), 0, "%s", r.out);
    cr_expect_eq(out("sent", 0), n, "%s", r.out);
    cr_expect_eq(out("err", 1), EAGAIN, "the GET after: %s", r.out);
    cr_expect_eq(out("sent", 1), 0, "%s", r.out);
    expect_conn(0, files[0], n);
    expect_conn(1, files[1], 0);
}

/* Budget 2: the chunked POST (extensions, trailers, a chunk that reads as
 * a request line) and the GET after it both go, in one write; the probe
 * is the third and is refused. */
Test(requests, chunked_body_with_extensions_and_trailers_then_a_request_is_2)
{
    sink_config(2);
    const char data[] =
        "POST /up HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
        "Trailer: X-Sum\r\n\r\n"
        "5;name=value;x=\"q\"\r\nhello\r\n"
        "12;ext\r\nGET / HTTP/1.1\r\n\r\n\r\n"
        "0;last=1\r\nX-Sum: 1\r\nX-More: GET / HTTP/1.1\r\n\r\n"
        "GET /second HTTP/1.1\r\nHost: x\r\n\r\n";
    const char *files[] = {payload("chunked", data, strlen(data))};
    send_files("whole", true, files, 1);
    cr_expect_eq(out("err", 0), 0, "%s", r.out);
    cr_expect_eq(out("sent", 0), (long)strlen(data), "%s", r.out);
    cr_expect_eq(h_out_long(&r, "probe", -2), EAGAIN, "the probe: %s", r.out);
    expect_conn(0, files[0], (long)strlen(data));
    cr_expect_eq(h_server_count(&sink, "REQ"), 2, "the sink saw %d",
                 h_server_count(&sink, "REQ"));
}

Test(requests, a_post_body_holding_a_request_line_is_1)
{
    sink_config(1);
    const char body[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n"
                        "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    char data[400];
    int n = snprintf(data, sizeof data,
                     "POST /form HTTP/1.1\r\nHost: x\r\n"
                     "Content-Length: %zu\r\n\r\n%s",
                     strlen(body), body);
    const char *files[] = {payload("post", data, (size_t)n)};
    send_files("whole", true, files, 1);
    cr_expect_eq(out("err", 0), 0, "%s", r.out);
    cr_expect_eq(out("sent", 0), n, "%s", r.out);
    cr_expect_eq(h_out_long(&r, "probe", -2), EAGAIN, "the probe: %s", r.out);
    expect_conn(0, files[0], n);
    cr_expect_eq(h_server_count(&sink, "REQ"), 1, "the sink saw %d",
                 h_server_count(&sink, "REQ"));
}

/* Content-Length 2^63 - 1: all that follows is body, the probe too (it
 * goes); a request on a new connection is the second and is refused. */
Test(requests, a_content_length_near_2_63_makes_the_rest_body)
{
    sink_config(1);
    char data[5000];
    int n = snprintf(data, sizeof data,
                     "POST /huge HTTP/1.1\r\nHost: x\r\n"
                     "Content-Length: 9223372036854775807\r\n\r\n");
    while (n < 4096)
        n += snprintf(data + n, sizeof data - n,
                      "GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    const char get[] = "GET /next HTTP/1.1\r\nHost: x\r\n\r\n";
    const char *files[] = {payload("huge", data, (size_t)n),
                           payload("next", get, strlen(get))};
    /* First a connection whose only request is the huge POST... */
    const char *one[] = {files[0]};
    send_files("whole", true, one, 1);
    cr_expect_eq(out("err", 0), 0, "%s", r.out);
    cr_expect_eq(out("sent", 0), n, "%s", r.out);
    cr_expect_eq(h_out_long(&r, "probe", -2), 0, "the probe is body: %s",
                 r.out);
    /* ...then a new connection's GET: the second request, refused. */
    const char *two[] = {files[1]};
    send_files("whole", false, two, 1);
    cr_expect_eq(out("err", 0), EAGAIN, "the GET after: %s", r.out);
    cr_expect_eq(out("sent", 0), 0, "%s", r.out);
    cr_expect_eq(h_server_count(&sink, "REQ"), 1, "the sink saw %d",
                 h_server_count(&sink, "REQ"));
    h_server_wait(&sink, "CONN", 2, 5);
    char line[512], bytes[32];
    h_server_line(&sink, "CONN", 0, line, sizeof line);
    cr_expect_eq(atol(h_field(line, 1, bytes, sizeof bytes)),
                 n + (long)strlen("GET /probe HTTP/1.1\r\nHost: probe\r\n\r\n"),
                 "the huge POST's connection: %s", line);
    h_server_line(&sink, "CONN", 1, line, sizeof line);
    cr_expect_eq(atol(h_field(line, 1, bytes, sizeof bytes)), 0,
                 "the refused GET's connection: %s", line);
}

/* Two heads a byte per send: each counted once (budget 2: every byte
 * goes, the probe is refused). */
Test(requests, heads_split_byte_by_byte_count_once_each)
{
    sink_config(2);
    const char data[] = "GET /one HTTP/1.1\r\nHost: x\r\nAccept: */*\r\n\r\n"
                        "HEAD /two HTTP/1.0\r\nHost: x\r\n\r\n";
    const char *files[] = {payload("split", data, strlen(data))};
    send_files("bytes", true, files, 1);
    cr_expect_eq(out("err", 0), 0, "%s", r.out);
    cr_expect_eq(out("sent", 0), (long)strlen(data), "%s", r.out);
    cr_expect_eq(h_out_long(&r, "probe", -2), EAGAIN, "the probe: %s", r.out);
    expect_conn(0, files[0], (long)strlen(data));
    cr_expect_eq(h_server_count(&sink, "REQ"), 2, "the sink saw %d",
                 h_server_count(&sink, "REQ"));
}

static const char pipelined[] = "GET /one HTTP/1.1\r\nHost: x\r\n\r\n"
                                "GET /two HTTP/1.1\r\nHost: x\r\n\r\n"
                                "GET /three HTTP/1.1\r\nHost: x\r\n\r\n";

Test(requests, pipelined_heads_in_one_write_count_each)
{
    sink_config(3);
    const char *files[] = {payload("pipe", pipelined, strlen(pipelined))};
    send_files("whole", true, files, 1);
    cr_expect_eq(out("first", 0), (long)strlen(pipelined), "%s", r.out);
    cr_expect_eq(h_out_long(&r, "probe", -2), EAGAIN, "the probe: %s", r.out);
    expect_conn(0, files[0], (long)strlen(pipelined));
    cr_expect_eq(h_server_count(&sink, "REQ"), 3, "the sink saw %d",
                 h_server_count(&sink, "REQ"));
}

enum { ALLOWED, DENIED, DELAYED };

/* A column (ALLOWED, DENIED, DELAYED) of `rlshim stat`'s request row, or
 * -1. */
static long stat_requests(int column)
{
    struct run s;
    h_rlshim_cmd(&s, "stat");
    cr_assert_eq(s.status, 0, "rlshim stat: %s", s.out);
    /* USER RULE LIMIT ALGORITHM ALLOWED DENIED DELAYED ... */
    for (const char *line = s.out; line != NULL && *line != '\0';) {
        char user[64], rule[64], limit[64], alg[64];
        long n[3];
        if (sscanf(line, "%63s %63s %63s %63s %ld %ld %ld", user, rule, limit,
                   alg, &n[ALLOWED], &n[DENIED], &n[DELAYED]) == 7 &&
            strcmp(limit, "request") == 0)
            return n[column];
        line = strchr(line, '\n');
        line = line != NULL ? line + 1 : NULL;
    }
    return -1;
}

/* Budget 1: the write is cut short before the second head, and the rest
 * is refused with EAGAIN; the sink has exactly the first request, and the
 * one refusal the program saw is the one counted and logged. */
Test(requests, pipelined_heads_past_the_budget_are_cut_short)
{
    char logpath[300];
    snprintf(logpath, sizeof logpath, "%s/decisions.jsonl", h_dir);
    setenv("RLSHIM_DECISION_LOG", logpath, 1);
    sink_config(1);
    const char *files[] = {payload("pipe", pipelined, strlen(pipelined))};
    send_files("whole", false, files, 1);
    unsetenv("RLSHIM_DECISION_LOG");
    int denials = h_file_lines(logpath, "\"verdict\":\"deny\"");
    cr_expect_eq(denials, 1, "%d denials logged for one EAGAIN", denials);
    long stat = stat_requests(DENIED);
    cr_expect_eq(stat, 1, "rlshim stat says %ld requests denied, not 1",
                 stat);
    long one = (long)strlen("GET /one HTTP/1.1\r\nHost: x\r\n\r\n");
    cr_expect_eq(out("first", 0), one, "the first send: %s", r.out);
    cr_expect_eq(out("sent", 0), one, "%s", r.out);
    cr_expect_eq(out("err", 0), EAGAIN, "%s", r.out);
    expect_conn(0, files[0], one);
    char line[512], target[64];
    h_server_line(&sink, "REQ", 0, line, sizeof line);
    cr_expect_str_eq(h_field(line, 3, target, sizeof target), "/one", "%s",
                     line);
    cr_expect_eq(h_server_count(&sink, "REQ"), 1, "the sink saw %d",
                 h_server_count(&sink, "REQ"));
}

/* Delay mode, a burst of 1: a write of three pipelined heads goes in three
 * pieces, each head at its own turn, and each head is decided once, the
 * turn a later head is given kept for the write that starts with it:
 * three lines in the decision log (two delayed), two delayed in `rlshim
 * stat`, the heads a period apart at the sink. A blocking and a
 * non-blocking sender. */
static void pipelined_in_delay_mode(const char *mode)
{
    char logpath[300];
    snprintf(logpath, sizeof logpath, "%s/decisions.jsonl", h_dir);
    setenv("RLSHIM_DECISION_LOG", logpath, 1);
    h_config_write("[default]\nrequest = 5/s\nrequest_burst = 1\n"
                   "on_deny = delay\n");
    const char *files[] = {payload("pipe", pipelined, strlen(pipelined))};
    send_files(mode, false, files, 1);
    unsetenv("RLSHIM_DECISION_LOG");
    cr_expect_eq(out("sent", 0), (long)strlen(pipelined), "%s", r.out);
    cr_expect_eq(out("err", 0), 0, "%s", r.out);
    expect_conn(0, files[0], (long)strlen(pipelined));
    cr_expect_eq(h_server_count(&sink, "REQ"), 3, "the sink saw %d",
                 h_server_count(&sink, "REQ"));
    double t[3];
    for (int i = 0; i < 3; i++) {
        char line[512], when[32];
        h_server_line(&sink, "REQ", i, line, sizeof line);
        t[i] = atof(h_field(line, 1, when, sizeof when));
    }
    for (int i = 1; i < 3; i++)
        cr_expect_geq(t[i] - t[i - 1], 0.8 * 0.2,
                      "heads %d and %d came %.3f s apart", i, i + 1,
                      t[i] - t[i - 1]);
    int lines = h_file_lines(logpath, "\"limit\":\"request\"");
    int delayed = h_file_lines(logpath, "\"verdict\":\"delay\"");
    cr_expect_eq(lines, 3, "%d decisions for 3 heads", lines);
    cr_expect_eq(delayed, 2, "%d delayed decisions, not 2", delayed);
    long stat = stat_requests(DELAYED);
    cr_expect_eq(stat, 2, "rlshim stat says %ld requests delayed, not 2",
                 stat);
}

Test(requests, pipelined_heads_in_delay_mode_are_each_decided_once)
{
    pipelined_in_delay_mode("whole");
}

Test(requests, pipelined_heads_in_delay_mode_non_blocking_decided_once)
{
    pipelined_in_delay_mode("nb");
}

/* The decision log has a line per request (SPEC §11): `call = request`,
 * `limit = request`, and its method and target. */
Test(requests, the_decision_log_has_each_request)
{
    char logpath[300];
    snprintf(logpath, sizeof logpath, "%s/decisions.jsonl", h_dir);
    setenv("RLSHIM_DECISION_LOG", logpath, 1);
    h_config_write("[default]\nrequest = 100/s\non_deny = delay\n");
    char **argv = client(requests_argv, NULL);
    h_run(&r, true, 30, argv);
    unsetenv("RLSHIM_DECISION_LOG");
    cr_assert_eq(r.status, 0, "status %d\n%s", r.status, r.out);
    int limits = h_file_lines(logpath, "\"limit\":\"request\"");
    cr_expect_eq(limits, NURLS, "%d lines of limit request", limits);
    int calls = h_file_lines(logpath, "\"call\":\"request\"");
    cr_expect_eq(calls, NURLS,
                 "%d lines of call request (SPEC §11), %d of call send", calls,
                 h_file_lines(logpath, "\"call\":\"send\""));
    cr_expect_eq(h_file_lines(logpath, "\"method\":\"GET\""), NURLS,
                 "method GET: not on every request's line");
    cr_expect_eq(h_file_lines(logpath, "\"target\":\"/a.txt\""), 1,
                 "no target /a.txt in the log");
}
