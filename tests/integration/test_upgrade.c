/* A 101 Switching Protocols (SPEC §12) ends the counting of a connection
 * only when it answers a request that asked to upgrade (an Upgrade
 * header). One a server sends unasked is a malformed response and changes
 * nothing: the connection's later requests are counted, paced in delay
 * mode and refused in fail mode. Measured at the server
 * (tests/integration/servers/upgrade.py, which answers 101 to /unasked...
 * and to any request with an Upgrade header, and goes on reading request
 * heads after it), in the decision log and in `rlshim stat --json`. */
#include "harness.h"

static struct server up;
static struct run r;
static char dlog[300];

static void setup(void)
{
    h_setup();
    snprintf(dlog, sizeof dlog, "%s/decisions.jsonl", h_dir);
    h_server_start(&up, "upgrade.py");
}

static void teardown(void)
{
    h_server_stop(&up);
    h_teardown();
}

TestSuite(upgrade, .init = setup, .fini = teardown, .timeout = 60);

/* One blocking connection: a GET per path in argv[2:] (a path ending in
 * "+up" asks to upgrade, with Upgrade: websocket), each after the answer
 * to the one before (a 101's head, or a 200's head and body). Prints
 * "sent<i>=0" for each request sent, or its errno, and stops there. */
static const char client_py[] =
    "import socket, sys\n"
    "s = socket.create_connection(('127.0.0.1', int(sys.argv[1])))\n"
    "def answer():\n"
    "    buf = b''\n"
    "    while b'\\r\\n\\r\\n' not in buf:\n"
    "        d = s.recv(4096)\n"
    "        if not d: sys.exit('closed')\n"
    "        buf += d\n"
    "    head, body = buf.split(b'\\r\\n\\r\\n', 1)\n"
    "    n = [int(l.split(b':')[1]) for l in head.split(b'\\r\\n')\n"
    "         if l.lower().startswith(b'content-length:')]\n"
    "    while n and len(body) < n[0]:\n"
    "        body += s.recv(4096)\n"
    "for i, p in enumerate(sys.argv[2:]):\n"
    "    up = p.endswith('+up')\n"
    "    head = 'GET %s HTTP/1.1\\r\\nHost: up.test\\r\\n' % p\n"
    "    if up: head += 'Connection: Upgrade\\r\\nUpgrade: websocket\\r\\n'\n"
    "    try:\n"
    "        s.sendall((head + '\\r\\n').encode())\n"
    "    except OSError as e:\n"
    "        print('sent%d=%d' % (i, e.errno), flush=True)\n"
    "        break\n"
    "    print('sent%d=0' % i, flush=True)\n"
    "    answer()\n"
    "s.close()\n";

static void run_client(const char *const paths[], int n)
{
    char port[16];
    snprintf(port, sizeof port, "%d", up.port);
    char *argv[16] = {"/usr/bin/python3", "-c", (char *)client_py, port};
    for (int i = 0; i < n; i++)
        argv[4 + i] = (char *)paths[i];
    argv[4 + n] = NULL;
    setenv("RLSHIM_DECISION_LOG", dlog, 1);
    h_run(&r, true, 30, argv);
    unsetenv("RLSHIM_DECISION_LOG");
    cr_assert_eq(r.status, 0, "client: status %d\n%s", r.status, r.out);
}

/* `rlshim stat --json`'s "allowed" of the request limit; -1 if none. */
static long stat_requests(void)
{
    char bin[512];
    snprintf(bin, sizeof bin, "%s/rlshim", h_env("RLSHIM_BUILD"));
    char *argv[] = {"env", "RLSHIM_STATE_DIR", bin, "stat", "-c", h_config,
                    "--json", NULL};
    char state[330];
    snprintf(state, sizeof state, "RLSHIM_STATE_DIR=%s", h_state);
    argv[1] = state;
    static struct run s;
    h_run(&s, false, 10, argv);
    cr_assert_eq(s.status, 0, "rlshim stat: %s", s.out);
    const char *p = strstr(s.out, "\"limit\": \"request\"");
    if (p == NULL)
        return -1;
    p = strstr(p, "\"allowed\": ");
    return p != NULL ? strtol(p + 11, NULL, 10) : -1;
}

/* The server's stamp (s) of its i-th request. */
static double stamp(int i)
{
    char line[512], f[64];
    h_server_line(&up, "REQ", i, line, sizeof line);
    return atof(h_field(line, 1, f, sizeof f));
}

#define PERIOD 0.25
#define NREQ 5

/* Four requests a second, one at a time: every request after an unasked
 * 101 is still paced, each at least 0.8 of a period after the one before
 * at the server; all five are charged. */
Test(upgrade, after_an_unasked_101_requests_are_still_paced)
{
    h_config_write("[default]\nrequest = 4/s\nrequest_burst = 1\n"
                   "on_deny = delay\n");
    static const char *const paths[NREQ] = {"/unasked", "/b", "/unasked-2",
                                            "/d", "/e"};
    run_client(paths, NREQ);
    int n = h_server_wait(&up, "REQ", NREQ, 5);
    cr_assert_eq(n, NREQ, "the server saw %d requests\n%s", n, r.out);
    for (int i = 1; i < NREQ; i++) {
        double g = stamp(i) - stamp(i - 1);
        cr_log_info("gap %d: %.3f s", i, g);
        cr_expect_geq(g, 0.8 * PERIOD,
                      "request %d came %.3f s after the one before (the "
                      "period is %.2f s): not counted after the 101",
                      i, g, PERIOD);
    }
    cr_expect_eq(h_file_lines(dlog, "\"call\":\"request\""), NREQ,
                 "%d requests in the decision log, %d went",
                 h_file_lines(dlog, "\"call\":\"request\""), NREQ);
    long st = stat_requests();
    cr_expect_eq(st, NREQ, "rlshim stat: %ld requests allowed, %d went", st,
                 NREQ);
}

/* One request a minute, fail mode: after an unasked 101 the second
 * request is refused, and never reaches the server. */
static const char fail_config[] = "[rlshim]\nerrno = ETIMEDOUT\n"
                                  "[default]\nrequest = 1/min\n"
                                  "request_burst = 1\non_deny = fail\n";

Test(upgrade, after_an_unasked_101_the_next_request_is_refused)
{
    h_config_write(fail_config);
    static const char *const paths[] = {"/unasked", "/b", "/c"};
    run_client(paths, 3);
    cr_expect_eq(h_out_long(&r, "sent0", -2), 0, "%s", r.out);
    cr_expect_eq(h_out_long(&r, "sent1", -2), ETIMEDOUT,
                 "the request after the unasked 101 was not refused\n%s",
                 r.out);
    usleep(200 * 1000);
    int n = h_server_count(&up, "REQ");
    cr_expect_eq(n, 1, "the server saw %d requests, the budget is 1", n);
}

/* The same budget: a request that asked to upgrade gets its 101, and the
 * connection is another protocol from there on. Its bytes (which here
 * read like requests at the server) are not counted: all four go. */
Test(upgrade, an_asked_upgrade_still_ends_the_counting)
{
    h_config_write(fail_config);
    static const char *const paths[] = {"/ws+up", "/b", "/c", "/d"};
    run_client(paths, 4);
    for (int i = 0; i < 4; i++) {
        char k[16];
        snprintf(k, sizeof k, "sent%d", i);
        cr_expect_eq(h_out_long(&r, k, -2), 0, "%s\n%s", k, r.out);
    }
    int n = h_server_wait(&up, "REQ", 4, 5);
    cr_expect_eq(n, 4, "the server saw %d requests", n);
    cr_expect_eq(h_file_lines(dlog, "\"call\":\"request\""), 1,
                 "%d requests in the decision log: only the upgrade's is "
                 "one",
                 h_file_lines(dlog, "\"call\":\"request\""));
}
