/* A server that hangs up on a throttled client (SPEC §2: what the kernel
 * has to say about a socket is never hidden). The client's second request
 * on a keep-alive connection is held back (`request = 1/min`); the server
 * (tests/integration/servers/hangup.py) finds the connection idle, sends a
 * FIN, and resets it a second later. The kernel then reports the socket
 * POLLERR|POLLHUP whatever the client asked for; a client that tries its
 * send again must hear the kernel's answer (EPIPE, ECONNRESET), not EAGAIN
 * until the hold ends, which it would retry at once, for a whole minute.
 * curl (poll; plaintext, and HTTPS through its own BIO), a python
 * asyncio client (epoll), in fail and in delay mode, and a blocking
 * python client (plaintext and TLS), whose held send sleeps in the shim: each ends, having learnt of the reset; it spent no more CPU than
 * the same client unthrottled (beyond a small share of its wall time); in
 * fail mode the budget counts a handful of denials, not one per retry;
 * and the server got the first request only, nothing after its FIN. */
#include "harness.h"

static struct server plain, tls;
static struct server *srv = &plain; /* the server of the test */
static struct run r, ctl;

static void setup(void)
{
    h_setup();
    h_server_start(&plain, "hangup.py");
}

static void teardown(void)
{
    h_server_stop(&plain);
    h_server_stop(&tls);
    h_teardown();
}

/* The same server over TLS, for the test that asks. */
static void over_tls(void)
{
    setenv("RL_TLS", "1", 1);
    h_server_start(&tls, "hangup.py");
    unsetenv("RL_TLS");
    srv = &tls;
}

TestSuite(hangup, .init = setup, .fini = teardown, .timeout = 120);

/* The hold lasts up to a minute; the client is killed after half of it,
 * long before it would learn of the reset by the hold's end. */
#define RUN_FOR 30

static const char fail_ini[] = "[default]\nrequest = 1/min\n";
/* The second request's send itself waits (no request limit). */
static const char send_delay_ini[] = "[default]\nsend = 1/min\n"
                                     "on_deny = delay\nmax_delay = 2min\n";
static const char delay_ini[] = "[default]\nrequest = 1/min\n"
                                "on_deny = delay\nmax_delay = 2min\n";

/* Two POSTs of 256 KiB on one connection; "got PATH" for each answered,
 * "lost ERROR" when the connection is lost (then it stops). drain() waits
 * until the body has left: the client waits on the socket's writability
 * (its reader gone after the FIN), as an upload does. */
static const char asyncio_py[] =
    "import asyncio, sys\n"
    "BODY = b'x' * 262144\n"
    "async def main(port, paths):\n"
    "    r, w = await asyncio.open_connection('127.0.0.1', port)\n"
    "    for p in paths:\n"
    "        w.write(('POST %s HTTP/1.1\\r\\nHost: 127.0.0.1:%d\\r\\n'\n"
    "                 'Content-Length: %d\\r\\n\\r\\n' % (p, port, len(BODY)))\n"
    "                .encode() + BODY)\n"
    "        try:\n"
    "            await w.drain()\n"
    "            head = await r.readuntil(b'\\r\\n\\r\\n')\n"
    "            n = [l for l in head.split(b'\\r\\n')\n"
    "                 if l.lower().startswith(b'content-length:')]\n"
    "            await r.readexactly(int(n[0].split(b':')[1]))\n"
    "            print('got', p)\n"
    "        except (ConnectionError, asyncio.IncompleteReadError) as e:\n"
    "            print('lost', type(e).__name__)\n"
    "            return\n"
    "asyncio.run(main(int(sys.argv[1]), sys.argv[2:]))\n";

/* The same two requests (GETs) from a blocking socket, plaintext or TLS
 * (argv[2]): its held send sleeps in the shim, which must wake it when
 * the server resets the connection. */
static const char blocking_py[] =
    "import socket, ssl, sys\n"
    "port = int(sys.argv[1])\n"
    "s = socket.create_connection(('127.0.0.1', port))\n"
    "if sys.argv[2] == 'tls':\n"
    "    ctx = ssl.create_default_context()\n"
    "    ctx.check_hostname = False\n"
    "    ctx.verify_mode = ssl.CERT_NONE\n"
    "    s = ctx.wrap_socket(s)\n"
    "f = s.makefile('rb')\n"
    "for p in sys.argv[3:]:\n"
    "    try:\n"
    "        s.sendall(('GET %s HTTP/1.1\\r\\nHost: 127.0.0.1:%d\\r\\n\\r\\n'\n"
    "                   % (p, port)).encode())\n"
    "        n = 0\n"
    "        while True:\n"
    "            line = f.readline()\n"
    "            if not line:\n"
    "                raise ConnectionError('closed')\n"
    "            if line.lower().startswith(b'content-length:'):\n"
    "                n = int(line.split(b':')[1])\n"
    "            if line == b'\\r\\n':\n"
    "                break\n"
    "        f.read(n)\n"
    "        print('got', p, flush=True)\n"
    "    except (OSError, ConnectionError) as e:\n"
    "        print('lost', type(e).__name__)\n"
    "        break\n";

static char url_a[96], url_b[96], port_s[16];

/* curl's HTTPS writes go through a BIO of its own: the TLS layer finds
 * their socket by the ciphertext (shim/tlswrite.c). */
static void curl_argv(char **argv)
{
    const char *scheme = srv == &tls ? "https" : "http";
    snprintf(url_a, sizeof url_a, "%s://127.0.0.1:%d/a", scheme, srv->port);
    snprintf(url_b, sizeof url_b, "%s://127.0.0.1:%d/b", scheme, srv->port);
    char *v[] = {"curl", "-sk", "-o", "/dev/null", "-o", "/dev/null",
                 url_a, url_b, NULL};
    memcpy(argv, v, sizeof v);
}

static void asyncio_argv(char **argv)
{
    snprintf(port_s, sizeof port_s, "%d", srv->port);
    char *v[] = {"/usr/bin/python3", "-c", (char *)asyncio_py, port_s, "/a",
                 "/b", NULL, NULL, NULL};
    memcpy(argv, v, sizeof v);
}

static void blocking_argv(char **argv)
{
    snprintf(port_s, sizeof port_s, "%d", srv->port);
    char *v[] = {"/usr/bin/python3", "-c", (char *)blocking_py, port_s,
                 srv == &tls ? "tls" : "plain", "/a", "/b", NULL, NULL};
    memcpy(argv, v, sizeof v);
}

/* `rlshim stat --json`'s `field` of the limit `kind`; -1 when absent. */
static long stat_limit(const char *kind, const char *field)
{
    char bin[512], state[330], needle[64];
    snprintf(bin, sizeof bin, "%s/rlshim", h_env("RLSHIM_BUILD"));
    snprintf(state, sizeof state, "RLSHIM_STATE_DIR=%s", h_state);
    char *argv[] = {"env", state, bin, "stat", "-c", h_config, "--json", NULL};
    static struct run s;
    h_run(&s, false, 10, argv);
    cr_assert_eq(s.status, 0, "rlshim stat: %s", s.out);
    snprintf(needle, sizeof needle, "\"limit\": \"%s\"", kind);
    const char *p = strstr(s.out, needle);
    if (p == NULL)
        return -1;
    snprintf(needle, sizeof needle, "\"%s\": ", field);
    p = strstr(p, needle);
    return p != NULL ? strtol(p + strlen(needle), NULL, 10) : -1;
}

static void hung_up(const char *ini, void (*make)(char **), bool fail,
                    const char *who)
{
    h_config_write("%s", ini);
    char *argv[9];
    make(argv);
    h_run(&r, true, RUN_FOR, argv);
    cr_log_info("%s: status %d in %.2f s, cpu %.2f s: %s", who, r.status,
                r.wall, r.cpu, r.out);
    cr_expect_neq(r.status, -1,
                  "%s did not end in %d s: it never learnt of the reset",
                  who, RUN_FOR);
    cr_expect_eq(h_server_count(srv, "RST"), 1,
                 "the server did not reset the connection");
    /* Nothing but the first request went: the held one never reached
     * the server, before its FIN or after it. */
    cr_expect_eq(h_server_count(srv, "REQ"), 1, "%d requests arrived",
                 h_server_count(srv, "REQ"));
    cr_expect_eq(h_server_count(srv, "LATE"), 0,
                 "bytes arrived after the server's FIN");
    if (strstr(who, "python") != NULL)
        cr_expect_not_null(strstr(r.out, "got /a\nlost "),
                           "%s: not told of the lost connection: %s", who,
                           r.out);
    long denied =
        stat_limit(strstr(ini, "send =") != NULL ? "send" : "request",
                   "denied");
    cr_log_info("%s: %ld denials", who, denied);
    if (fail)
        /* The first refusal, and the try after the reset that found it. */
        cr_expect_leq(denied, 3, "%s: %ld denials: it spun", who, denied);
    else
        cr_expect_eq(denied, 0, "%s: %ld denials in delay mode", who,
                     denied);
    h_run_control(&ctl, RUN_FOR, argv);
    h_expect_no_spin(&r, &ctl, 0.1, who);
}

Test(hangup, curl_fail_mode_hears_the_reset)
{
    hung_up(fail_ini, curl_argv, true, "curl, fail");
}

Test(hangup, curl_delay_mode_hears_the_reset)
{
    hung_up(delay_ini, curl_argv, false, "curl, delay");
}

Test(hangup, curl_https_fail_mode_hears_the_reset)
{
    over_tls();
    hung_up(fail_ini, curl_argv, true, "curl https, fail");
}

Test(hangup, asyncio_fail_mode_hears_the_reset)
{
    hung_up(fail_ini, asyncio_argv, true, "python asyncio, fail");
}

Test(hangup, asyncio_delay_mode_hears_the_reset)
{
    hung_up(delay_ini, asyncio_argv, false, "python asyncio, delay");
}

/* A blocking send held for its turn sleeps in the shim: the reset must
 * end that sleep, not the turn a minute later. */
Test(hangup, blocking_python_delay_mode_hears_the_reset)
{
    hung_up(delay_ini, blocking_argv, false, "python blocking, delay");
}

Test(hangup, blocking_python_tls_delay_mode_hears_the_reset)
{
    over_tls();
    hung_up(delay_ini, blocking_argv, false, "python blocking tls, delay");
}

Test(hangup, blocking_python_send_limit_hears_the_reset)
{
    hung_up(send_delay_ini, blocking_argv, false, "python blocking, send");
}
