/* The gateway in the process (SPEC §15, on_deny = respond), measured at
 * the server: a request over its budget is not sent, and the real client
 * reads a made-up 429 with Retry-After on the same connection, which
 * stays usable. python requests (no retries: [200, 429, 429], the server
 * gets one), curl keep-alive on one connection, urllib3's Retry that
 * honours Retry-After (every page 200, the server's arrivals at the
 * limit's pace), pipelined requests answered in order behind a slow
 * answer, and `rlshim verify --obeyed-retry-after` passing for the
 * retrying client and failing for one that asks again at once. The
 * server is servers/http_status.py, which stamps each request's head. */
#include "harness.h"

static struct server st;
static struct run r, v;
static char logpath[300];

static void setup(void)
{
    h_setup();
    h_server_start(&st, "http_status.py");
    snprintf(logpath, sizeof logpath, "%s/decisions.jsonl", h_dir);
    setenv("RLSHIM_DECISION_LOG", logpath, 1);
}

static void teardown(void)
{
    unsetenv("RLSHIM_DECISION_LOG");
    h_server_stop(&st);
    h_teardown();
}

TestSuite(respond, .init = setup, .fini = teardown, .timeout = 60);

#define ONE_A_MINUTE "[default]\nrequest = 1/min\non_deny = respond\n"

static char url_buf[4][160];

static char *url(const char *path)
{
    static int k;
    char *u = url_buf[k++ % 4];
    snprintf(u, 160, "http://127.0.0.1:%d%s", st.port, path);
    return u;
}

/* Requests the server got, once it has had a moment for a late one. */
static int server_got(int at_least)
{
    h_server_wait(&st, "REQ", at_least + 1, 1);
    return h_server_count(&st, "REQ");
}

/* `rlshim verify LOG --obeyed-retry-after` into v; its exit status. */
static int verify_obeyed(void)
{
    char bin[300];
    snprintf(bin, sizeof bin, "%s/rlshim", h_env("RLSHIM_BUILD"));
    char *argv[] = {bin, "verify", logpath, "--obeyed-retry-after", NULL};
    h_run(&v, false, 20, argv);
    return v.status;
}

/* GETs each URL on one session, no retries: the codes, then each
 * non-200's Retry-After and body. */
static const char plain_py[] =
    "import requests, sys\n"
    "s = requests.Session()\n"
    "codes = []\n"
    "for u in sys.argv[1:]:\n"
    "    r = s.get(u, timeout=20)\n"
    "    codes.append(r.status_code)\n"
    "    if r.status_code != 200:\n"
    "        print('retry-after', r.headers.get('Retry-After'))\n"
    "        print('body', repr(r.text))\n"
    "print('codes', codes)\n";

Test(respond, requests_without_retries_sees_200_429_429_and_one_request_goes)
{
    h_config_write(ONE_A_MINUTE);
    char *argv[] = {"/usr/bin/python3", "-c", (char *)plain_py, url("/a"),
                    url("/b"), url("/c"), NULL};
    h_run(&r, true, 30, argv);
    cr_assert_eq(r.status, 0, "python: status %d\n%s", r.status, r.out);
    cr_log_info("requests: %s", r.out);
    cr_expect(strstr(r.out, "codes [200, 429, 429]") != NULL,
              "requests saw:\n%s", r.out);
    cr_expect(strstr(r.out, "retry-after 60\n") != NULL,
              "a whole minute's Retry-After:\n%s", r.out);
    cr_expect(strstr(r.out,
                     "rlshim: request limit of [default] (1/min)\\n") != NULL,
              "the body names the limit:\n%s", r.out);
    cr_expect_eq(server_got(1), 1, "the server got %d requests, not 1",
                 h_server_count(&st, "REQ"));
    /* It asked again at once, told to wait a minute. */
    cr_expect_eq(verify_obeyed(), 1, "verify passed a client that asked "
                                     "again at once:\n%s", v.out);
    cr_expect(strstr(v.out, "FAIL") != NULL, "%s", v.out);
}

Test(respond, curl_keepalive_gets_200_429_429_on_one_connection)
{
    if (!h_have("curl"))
        h_skip("no curl");
    h_config_write(ONE_A_MINUTE);
    char *argv[] = {"curl", "-s", "-w", "%{http_code} %{num_connects}\\n",
                    url("/a"), "-o", "/dev/null", url("/b"), "-o",
                    "/dev/null", url("/c"), "-o", "/dev/null", NULL};
    h_run(&r, true, 30, argv);
    cr_assert_eq(r.status, 0, "curl: status %d\n%s", r.status, r.out);
    cr_log_info("curl: %s", r.out);
    /* num_connects 0: the connection of the first was used again. */
    cr_expect_str_eq(r.out, "200 1\n429 0\n429 0\n");
    cr_expect_eq(server_got(1), 1, "the server got %d requests, not 1",
                 h_server_count(&st, "REQ"));
}

/* `rlshim stat`'s request row: ALLOWED, DENIED, then RESPONDED (its last
 * column) into n[0..2]; false when there is none. */
static bool stat_request_row(long n[3])
{
    struct run s;
    h_rlshim_cmd(&s, "stat");
    cr_assert_eq(s.status, 0, "rlshim stat: %s", s.out);
    cr_log_info("rlshim stat:\n%s", s.out);
    for (const char *line = s.out; line != NULL && *line != '\0';) {
        char lim[64], resp[32];
        if (sscanf(line, "%*s %*s %63s %*s %ld %ld %*s %*s %*s %31s", lim,
                   &n[0], &n[1], resp) == 4 &&
            strcmp(lim, "request") == 0) {
            n[2] = atol(resp);
            return true;
        }
        line = strchr(line, '\n');
        line = line != NULL ? line + 1 : NULL;
    }
    return false;
}

/* Each 429 curl read is counted once, as `responded` (not `denied` too),
 * in `rlshim stat` and in the exit report; the server got the rest. */
Test(respond, stat_and_the_report_count_each_answer_responded)
{
    if (!h_have("curl"))
        h_skip("no curl");
    h_config_write("[rlshim]\nreport = yes\n" ONE_A_MINUTE);
    char *argv[] = {"curl", "-s", "-w", "%{http_code}\\n", url("/a"), "-o",
                    "/dev/null", url("/b"), "-o", "/dev/null", url("/c"),
                    "-o", "/dev/null", url("/d"), "-o", "/dev/null", NULL};
    h_run(&r, true, 30, argv);
    cr_assert_eq(r.status, 0, "curl: status %d\n%s", r.status, r.out);
    cr_expect_str_eq(r.out, "200\n429\n429\n429\n");
    int got = server_got(1);
    cr_expect_eq(got, 1, "the server got %d requests, not 1", got);
    long n[3] = {-1, -1, -1};
    cr_assert(stat_request_row(n), "no request row in rlshim stat");
    cr_expect_eq(n[0], got, "allowed %ld: the server got %d", n[0], got);
    cr_expect_eq(n[1], 0, "denied %ld: a 429 is not counted twice", n[1]);
    cr_expect_eq(n[2], 3, "responded %ld, not the 3 curl read", n[2]);
    char errlog[300];
    snprintf(errlog, sizeof errlog, "%s/stderr.log", h_dir);
    cr_expect_eq(h_file_lines(errlog, "request seen 4, allowed 1, denied 0, "
                                      "delayed 0, responded 3"),
                 1, "the exit report says it");
}

/* urllib3's Retry that honours Retry-After: every page 200. */
static const char retry_py[] =
    "import requests, sys\n"
    "from urllib3.util.retry import Retry\n"
    "from requests.adapters import HTTPAdapter\n"
    "s = requests.Session()\n"
    "rt = Retry(total=20, status_forcelist=[429], backoff_factor=0,\n"
    "           respect_retry_after_header=True, allowed_methods=None)\n"
    "s.mount('http://', HTTPAdapter(max_retries=rt))\n"
    "codes = [s.get(u, timeout=20).status_code for u in sys.argv[1:]]\n"
    "print('codes', codes)\n";

Test(respond, urllib3_retry_honours_retry_after_at_the_limits_pace)
{
    /* One request every 2 s: the Retry-After it is told is 1 or 2 s. */
    h_config_write("[default]\nrequest = 30/min\nrequest_burst = 1\n"
                   "on_deny = respond\n");
    char *argv[] = {"/usr/bin/python3", "-c", (char *)retry_py, url("/a"),
                    url("/b"), url("/c"), url("/d"), NULL};
    h_run(&r, true, 40, argv);
    cr_assert_eq(r.status, 0, "python: status %d\n%s", r.status, r.out);
    cr_expect(strstr(r.out, "codes [200, 200, 200, 200]") != NULL,
              "the retrying client saw:\n%s", r.out);
    cr_assert_eq(server_got(4), 4, "the server got %d requests, not 4",
                 h_server_count(&st, "REQ"));
    /* Each arrival at least the limit's interval after the one before
     * (as a ratio to it; a slow machine only spaces them more), and not
     * three times that. */
    for (int i = 1; i < 4; i++) {
        double ratio =
            (h_server_stamp(&st, i) - h_server_stamp(&st, i - 1)) / 2.0;
        cr_log_info("arrival %d: %.3f of the interval", i, ratio);
        cr_expect_geq(ratio, 0.95, "arrival %d came %.3f of the interval "
                                   "after the one before", i, ratio);
        cr_expect_lt(ratio, 3.0, "arrival %d: %.3f intervals late", i, ratio);
    }
    cr_expect_eq(verify_obeyed(), 0, "verify failed a client that waited "
                                     "as told:\n%s", v.out);
    cr_expect(strstr(v.out, "made up by the shim") != NULL, "%s", v.out);
}

/* Three requests in one write on one socket, the first answered slowly;
 * the answers' status codes in the order read. */
static const char pipeline_py[] =
    "import socket, sys\n"
    "port = int(sys.argv[1])\n"
    "s = socket.create_connection(('127.0.0.1', port))\n"
    "req = lambda p: ('GET %s HTTP/1.1\\r\\nHost: 127.0.0.1\\r\\n\\r\\n' "
    "% p).encode()\n"
    "s.sendall(req('/slow/300') + req('/p2') + req('/p3'))\n"
    "buf, codes = b'', []\n"
    "while len(codes) < 3:\n"
    "    while b'\\r\\n\\r\\n' not in buf:\n"
    "        d = s.recv(65536)\n"
    "        if not d: raise SystemExit('closed after %r' % codes)\n"
    "        buf += d\n"
    "    head, buf = buf.split(b'\\r\\n\\r\\n', 1)\n"
    "    codes.append(int(head.split()[1]))\n"
    "    n = [int(l.split(b':')[1]) for l in head.split(b'\\r\\n')\n"
    "         if l.lower().startswith(b'content-length:')][0]\n"
    "    while len(buf) < n:\n"
    "        buf += s.recv(65536)\n"
    "    buf = buf[n:]\n"
    "print('codes', codes)\n";

Test(respond, pipelined_requests_are_answered_in_order)
{
    h_config_write(ONE_A_MINUTE);
    char port[16];
    snprintf(port, sizeof port, "%d", st.port);
    char *argv[] = {"/usr/bin/python3", "-c", (char *)pipeline_py, port,
                    NULL};
    h_run(&r, true, 30, argv);
    cr_assert_eq(r.status, 0, "python: status %d\n%s", r.status, r.out);
    /* The slow answer first, though the 429s were ready long before. */
    cr_expect(strstr(r.out, "codes [200, 429, 429]") != NULL,
              "pipelined answers read:\n%s", r.out);
    cr_expect_eq(server_got(1), 1, "the server got %d requests, not 1",
                 h_server_count(&st, "REQ"));
}

/* The same through OpenSSL (SSL_write taken, SSL_read_ex answered):
 * python requests and curl -k against the server over TLS. */
static struct server sts;

static void start_tls(void)
{
    setenv("RL_TLS", "1", 1);
    h_server_start(&sts, "http_status.py");
    unsetenv("RL_TLS");
}

static char *tls_url(const char *path)
{
    static char u[4][160];
    static int k;
    char *p = u[k++ % 4];
    snprintf(p, 160, "https://127.0.0.1:%d%s", sts.port, path);
    return p;
}

static const char tls_py[] =
    "import requests, sys, urllib3\n"
    "urllib3.disable_warnings()\n"
    "s = requests.Session()\n"
    "codes = []\n"
    "for u in sys.argv[1:]:\n"
    "    r = s.get(u, timeout=20, verify=False)\n"
    "    codes.append(r.status_code)\n"
    "    if r.status_code != 200:\n"
    "        print('retry-after', r.headers.get('Retry-After'))\n"
    "print('codes', codes)\n";

Test(respond, over_tls_requests_and_curl_see_200_then_429)
{
    start_tls();
    h_config_write(ONE_A_MINUTE);
    char *argv[] = {"/usr/bin/python3", "-c", (char *)tls_py,
                    tls_url("/a"), tls_url("/b"), NULL};
    h_run(&r, true, 30, argv);
    cr_assert_eq(r.status, 0, "python: status %d\n%s", r.status, r.out);
    cr_expect(strstr(r.out, "codes [200, 429]") != NULL,
              "requests over TLS saw:\n%s", r.out);
    cr_expect(strstr(r.out, "retry-after 60\n") != NULL, "%s", r.out);
    if (h_have("curl")) {
        /* A new budget: the state dir's, reset by a fresh config hash. */
        h_config_write("[default]\nrequest = 60/h\nrequest_burst = 1\n"
                       "on_deny = respond\n");
        char *cargv[] = {"curl", "-sk", "-w",
                         "%{http_code} %{num_connects}\\n", tls_url("/c"),
                         "-o", "/dev/null", tls_url("/d"), "-o",
                         "/dev/null", NULL};
        h_run(&r, true, 30, cargv);
        cr_assert_eq(r.status, 0, "curl: status %d\n%s", r.status, r.out);
        cr_expect_str_eq(r.out, "200 1\n429 0\n");
    }
    int n = h_server_wait(&sts, "REQ", 3, 1);
    cr_expect_eq(n, 2, "the TLS server got %d requests, not 2 (one each)", n);
    h_server_stop(&sts);
}

/* An asyncio streams client (its loop waits in epoll_wait): three GETs on
 * one keep-alive connection, each given 20 s; the codes, each non-200's
 * Retry-After, and the seconds the three took. */
static const char asyncio_py[] =
    "import asyncio, sys, time\n"
    "async def get(rd, wr, path):\n"
    "    wr.write(('GET %s HTTP/1.1\\r\\nHost: 127.0.0.1\\r\\n\\r\\n'\n"
    "              % path).encode())\n"
    "    await wr.drain()\n"
    "    head = (await rd.readuntil(b'\\r\\n\\r\\n')).decode()\n"
    "    lines = head.split('\\r\\n')\n"
    "    hdr = dict(l.lower().split(': ', 1) for l in lines[1:] if l)\n"
    "    await rd.readexactly(int(hdr['content-length']))\n"
    "    return int(lines[0].split()[1]), hdr.get('retry-after')\n"
    "async def main(port):\n"
    "    t0 = time.monotonic()\n"
    "    rd, wr = await asyncio.open_connection('127.0.0.1', port)\n"
    "    codes = []\n"
    "    for p in ('/a', '/b', '/c'):\n"
    "        code, ra = await asyncio.wait_for(get(rd, wr, p), 20)\n"
    "        codes.append(code)\n"
    "        if code != 200:\n"
    "            print('retry-after', ra)\n"
    "    wr.close()\n"
    "    print('codes', codes)\n"
    "    print('elapsed %.3f' % (time.monotonic() - t0))\n"
    "asyncio.run(main(int(sys.argv[1])))\n";

/* The number the client printed after `word` and a space; -1 if none. */
static double printed(const char *out, const char *word)
{
    const char *p = strstr(out, word);
    return p == NULL || p[strlen(word)] != ' ' ? -1 : atof(p + strlen(word));
}

Test(respond, asyncio_over_epoll_sees_200_429_429_without_hanging)
{
    char port[16];
    snprintf(port, sizeof port, "%d", st.port);
    char *argv[] = {"/usr/bin/python3", "-c", (char *)asyncio_py, port,
                    NULL};
    h_config_write(ONE_A_MINUTE);
    h_run(&r, true, 45, argv);
    cr_log_info("asyncio: %s", r.out);
    /* A hang is asyncio's TimeoutError after 20 s: status 1. */
    cr_assert_eq(r.status, 0, "asyncio: status %d\n%s", r.status, r.out);
    cr_expect(strstr(r.out, "codes [200, 429, 429]") != NULL,
              "asyncio saw:\n%s", r.out);
    cr_expect(strstr(r.out, "retry-after 60\n") != NULL, "%s", r.out);
    cr_expect_eq(server_got(1), 1, "the server got %d requests, not 1",
                 h_server_count(&st, "REQ"));
    double t = printed(r.out, "elapsed");
    struct run ctl;
    h_run_control(&ctl, 45, argv);
    cr_assert(strstr(ctl.out, "codes [200, 200, 200]") != NULL,
              "the control saw:\n%s", ctl.out);
    double t0 = printed(ctl.out, "elapsed");
    /* A made-up answer is at hand at once: no slower than the server's
     * three answers, with room for a slow machine (the floor keeps a
     * control of a few ms from making noise a failure). */
    double floor = t0 > 0.2 ? t0 : 0.2;
    cr_log_info("asyncio: %.3f s, control %.3f s", t, t0);
    cr_expect(t >= 0 && t / floor < 3.0,
              "asyncio took %.3f s, its control %.3f s", t, t0);
}

/* select.epoll by hand on one keep-alive connection: level-triggered, a
 * made-up answer is reported while it waits unread and not once read;
 * edge-triggered, once per answer queued; a thread already blocked in
 * epoll_wait (mio's registration) when another thread's request is
 * answered is woken. An answer is read until EAGAIN
 * (as an edge-triggered reader must) and in whole (select waits for the
 * rest of the server's). Each line: what each wait saw
 * (1: the socket readable, 0: nothing) and the answers' codes read. */
static const char epoll_py[] =
    "import select, socket, sys\n"
    "s = socket.create_connection(('127.0.0.1', int(sys.argv[1])))\n"
    "s.setblocking(False)\n"
    "req = lambda p: ('GET %s HTTP/1.1\\r\\nHost: 127.0.0.1\\r\\n\\r\\n'\n"
    "                 % p).encode()\n"
    "def whole(buf):\n"
    "    head, _, body = buf.partition(b'\\r\\n\\r\\n')\n"
    "    n = [int(l.split(b':')[1]) for l in head.split(b'\\r\\n')\n"
    "         if l.lower().startswith(b'content-length:')]\n"
    "    return bool(_) and len(body) >= n[0]\n"
    "def drain():\n"
    "    buf = b''\n"
    "    while True:\n"
    "        try:\n"
    "            d = s.recv(65536)\n"
    "        except BlockingIOError:\n"
    "            if buf and whole(buf):\n"
    "                return int(buf.split()[1])\n"
    "            select.select([s], [], [], 10)\n"
    "            continue\n"
    "        if not d:\n"
    "            return -1\n"
    "        buf += d\n"
    "def ready(ep, t):\n"
    "    return int(bool(ep.poll(t)))\n"
    "lt = select.epoll()\n"
    "lt.register(s.fileno(), select.EPOLLIN)\n"
    "s.send(req('/a'))\n"
    "seen, codes = [ready(lt, 10)], [drain()]\n"
    "s.send(req('/b'))\n"
    "seen += [ready(lt, 10), ready(lt, 0)]\n"
    "codes.append(drain())\n"
    "seen.append(ready(lt, 0.3))\n"
    "print('lt', seen, codes)\n"
    "lt.close()\n"
    "et = select.epoll()\n"
    "et.register(s.fileno(), select.EPOLLIN | select.EPOLLET)\n"
    "s.send(req('/c'))\n"
    "seen = [ready(et, 10), ready(et, 0.3)]\n"
    "codes = [drain()]\n"
    "s.send(req('/d'))\n"
    "seen += [ready(et, 10), ready(et, 0.3)]\n"
    "codes.append(drain())\n"
    "seen.append(ready(et, 0.3))\n"
    "print('et', seen, codes)\n"
    "import threading, time\n"
    "th = select.epoll()\n"
    "th.register(s.fileno(), select.EPOLLIN | select.EPOLLOUT |\n"
    "            select.EPOLLRDHUP | select.EPOLLET)\n"
    "th.poll(0)\n"
    "got = []\n"
    "def waiter():\n"
    "    t, ev = time.monotonic(), 0\n"
    "    while not ev & select.EPOLLIN and time.monotonic() - t < 10:\n"
    "        for fd, e in th.poll(10):\n"
    "            ev |= e\n"
    "    got.append(int(bool(ev & select.EPOLLIN)))\n"
    "    got.append(time.monotonic() - t < 5)\n"
    "w = threading.Thread(target=waiter)\n"
    "w.start()\n"
    "time.sleep(0.3)\n"
    "s.send(req('/e'))\n"
    "w.join()\n"
    "print('thread', got, drain())\n";

Test(respond, epoll_level_and_edge_triggered_report_a_made_up_answer)
{
    char port[16];
    snprintf(port, sizeof port, "%d", st.port);
    char *argv[] = {"/usr/bin/python3", "-c", (char *)epoll_py, port, NULL};
    h_config_write(ONE_A_MINUTE);
    h_run(&r, true, 40, argv);
    cr_log_info("epoll: %s", r.out);
    cr_assert_eq(r.status, 0, "python: status %d\n%s", r.status, r.out);
    /* Level: readable at once and again while unread, not once read. */
    cr_expect(strstr(r.out, "lt [1, 1, 1, 0] [200, 429]\n") != NULL,
              "level-triggered:\n%s", r.out);
    /* Edge: once for each answer, at once (a 10 s wait that saw nothing
     * would show 0). */
    cr_expect(strstr(r.out, "et [1, 0, 1, 0, 0] [429, 429]\n") != NULL,
              "edge-triggered:\n%s", r.out);
    /* A thread already waiting (edge-triggered for reads and writes, as
     * mio registers a socket) when another's request is answered: woken
     * well before its 10 s. */
    cr_expect(strstr(r.out, "thread [1, True] 429\n") != NULL,
              "a thread blocked in epoll_wait:\n%s", r.out);
    cr_expect_eq(server_got(1), 1, "the server got %d requests, not 1",
                 h_server_count(&st, "REQ"));
}

/* A made-up answer queued behind the server's slow one, over TLS, read by
 * a non-blocking client that waits in poll: the wait must not report the
 * socket readable for the made-up answer while a read would not return it
 * (SPEC §2: the program never spins). Each read that found nothing
 * (SSLWantReadError) is counted; the codes read, and that count. */
static const char tls_poll_py[] =
    "import select, socket, ssl, sys\n"
    "ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)\n"
    "ctx.check_hostname = False\n"
    "ctx.verify_mode = ssl.CERT_NONE\n"
    "s = ctx.wrap_socket(socket.create_connection(('127.0.0.1',\n"
    "                    int(sys.argv[1]))), server_hostname='127.0.0.1')\n"
    "req = lambda p: ('GET %s HTTP/1.1\\r\\nHost: 127.0.0.1\\r\\n\\r\\n'\n"
    "                 % p).encode()\n"
    "s.sendall(req('/slow/1000'))\n"
    "s.sendall(req('/b'))\n"
    "s.setblocking(False)\n"
    "p = select.poll()\n"
    "p.register(s.fileno(), select.POLLIN)\n"
    "buf, codes, empty = b'', [], 0\n"
    "while len(codes) < 2:\n"
    "    head, sep, body = buf.partition(b'\\r\\n\\r\\n')\n"
    "    if sep:\n"
    "        n = [int(l.split(b':')[1]) for l in head.split(b'\\r\\n')\n"
    "             if l.lower().startswith(b'content-length:')][0]\n"
    "        if len(body) >= n:\n"
    "            codes.append(int(head.split()[1]))\n"
    "            buf = body[n:]\n"
    "            continue\n"
    "    try:\n"
    "        d = s.recv(65536)\n"
    "    except ssl.SSLWantReadError:\n"
    "        empty += 1\n"
    "        p.poll(10000)\n"
    "        continue\n"
    "    if not d:\n"
    "        break\n"
    "    buf += d\n"
    "print('codes', codes)\n"
    "print('empty %d' % empty)\n";

Test(respond, tls_poll_does_not_spin_while_the_servers_answer_is_due_first)
{
    start_tls();
    char port[16];
    snprintf(port, sizeof port, "%d", sts.port);
    char *argv[] = {"/usr/bin/python3", "-c", (char *)tls_poll_py, port,
                    NULL};
    h_config_write(ONE_A_MINUTE);
    h_run(&r, true, 30, argv);
    cr_log_info("tls poll: %s", r.out);
    cr_assert_eq(r.status, 0, "python: status %d\n%s", r.status, r.out);
    cr_expect(strstr(r.out, "codes [200, 429]") != NULL, "%s", r.out);
    struct run ctl;
    h_run_control(&ctl, 30, argv);
    cr_assert(strstr(ctl.out, "codes [200, 200]") != NULL,
              "the control saw:\n%s", ctl.out);
    /* Unthrottled, the reads that find nothing are the few the TLS
     * records' arrival makes; a spin makes one per wake for the whole
     * second the server takes. */
    int k = (int)printed(r.out, "empty");
    int k0 = (int)printed(ctl.out, "empty");
    cr_log_info("tls poll: %d empty reads, control %d", k, k0);
    cr_expect(k >= 0 && k <= k0 + 4,
              "%d reads found nothing (the control's %d): a spin", k, k0);
    h_server_stop(&sts);
}
