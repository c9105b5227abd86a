/* Requests written through a TLS library (SPEC §11): OpenSSL's SSL_write
 * and SSL_write_ex (a C client, curl, python's dlopen'ed `_ssl`), GnuTLS's
 * gnutls_record_send (wget), each counted once in its plaintext and
 * measured where they arrive: the HTTPS server timestamps each request
 * head (servers/https_count.py). */
#include "harness.h"
#include "nginx_fixture.h"

static struct server srv;
static struct run r;

static void setup(void)
{
    h_setup();
    h_server_start(&srv, "https_count.py");
}

static void teardown(void)
{
    h_server_stop(&srv);
    h_teardown();
}

TestSuite(tls_requests, .init = setup, .fini = teardown, .timeout = 40);

/* 2 requests a second, a burst of 1: one every 0.5 s after the first. */
static const char paced[] = "[rlshim]\non_deny = delay\n"
                            "[default]\nrequest = 2/s\nrequest_burst = 1\n";

/* The i-th request's arrival (server's monotonic seconds), its path and
 * connection. */
static double arrival(int i, char *path, size_t plen, int *conn)
{
    char line[512], p[256] = "";
    double t = -1;
    int c = -1;
    h_server_line(&srv, "REQ ", i, line, sizeof line);
    cr_assert_eq(sscanf(line, "REQ %lf %255s %d", &t, p, &c), 3,
                 "request %d not logged: '%s'", i, line);
    if (path != NULL)
        snprintf(path, plen, "%s", p);
    if (conn != NULL)
        *conn = c;
    return t;
}

/* The n requests arrived on one connection at least `gap` s apart. The
 * limiter's period is 0.5 s exactly (the token bucket's own clock); 0.4 s
 * leaves 100 ms for the server's thread to log a head late and the next
 * one early. Unthrottled, the same client's requests arrive within a few
 * ms of each other (each run's control below). */
static void expect_paced(int n, double gap, const char *who)
{
    cr_assert_eq(h_server_wait(&srv, "REQ ", n, 5), n,
                 "%s: %d requests reached the server, not %d", who,
                 h_server_count(&srv, "REQ "), n);
    /* `gap` is 0.8 of the period. No two at one turn: a request that
     * reaches the server late on a loaded machine shortens the gap after
     * it, so each gap need only be half of `gap`, and each arrival 1.75
     * `gap`s (1.4 periods) after the one two before, which one late
     * arrival cannot break and a merged turn does. */
    int conn0;
    double first = arrival(0, NULL, 0, &conn0), prev = first, before = -1;
    double least = 1e9;
    for (int i = 1; i < n; i++) {
        int conn;
        double t = arrival(i, NULL, 0, &conn);
        cr_expect_eq(conn, conn0, "%s: request %d on another connection",
                     who, i);
        cr_expect_geq(t - prev, gap / 2, "%s: requests %d and %d %.3f s apart",
                      who, i - 1, i, t - prev);
        if (before >= 0)
            cr_expect_geq(t - before, 1.75 * gap,
                          "%s: requests %d to %d within %.3f s", who, i - 2,
                          i, t - before);
        if (t - prev < least)
            least = t - prev;
        before = prev;
        prev = t;
    }
    cr_log_info("%s: %d requests in %.3f s, at least %.3f s apart", who, n,
                prev - first, least);
}

/* The same client unthrottled: its n requests come faster than the
 * limit would let them (else the paced test proves nothing). */
static void expect_control_fast(char *const argv[], int n, const char *who)
{
    FILE *f = fopen(srv.log, "w"); /* the throttled run's lines are read */
    cr_assert_not_null(f);
    fclose(f);
    struct run c;
    h_run(&c, false, 20, argv);
    cr_assert_eq(c.status, 0, "%s control: status %d", who, c.status);
    cr_assert_eq(h_server_wait(&srv, "REQ ", n, 5), n);
    double span = arrival(n - 1, NULL, 0, NULL) - arrival(0, NULL, 0, NULL);
    cr_expect_lt(span, 0.25 * (n - 1), "%s control: %d requests in %.3f s",
                 who, n, span);
}

static void c_client_paced(const char *how)
{
    h_config_write("%s", paced);
    char helper[512], port[16];
    snprintf(port, sizeof port, "%d", srv.port);
    char *argv[] = {(char *)h_helper("tls_client", helper, sizeof helper),
                    port, "5", (char *)how, NULL};
    h_run(&r, true, 20, argv);
    cr_assert_eq(r.status, 0, "status %d: %s", r.status, r.out);
    cr_assert_eq(h_out_long(&r, "ok", -1), 5, "%s", r.out);
    expect_paced(5, 0.4, how);
    expect_control_fast(argv, 5, how);
}

Test(tls_requests, ssl_write_requests_on_one_connection_are_paced)
{
    c_client_paced("write");
}

Test(tls_requests, ssl_write_ex_requests_on_one_connection_are_paced)
{
    c_client_paced("ex");
}

/* A non-blocking socket never sleeps in the shim: its write is denied
 * (WANT_WRITE) and the socket is not reported writable until its turn,
 * so the client's poll wakes once per denied request, not in a loop. */
Test(tls_requests, a_non_blocking_ssl_write_waits_in_poll_for_its_turn)
{
    h_config_write("%s", paced);
    char helper[512], port[16];
    snprintf(port, sizeof port, "%d", srv.port);
    char *argv[] = {(char *)h_helper("tls_client", helper, sizeof helper),
                    port, "4", "nb", NULL};
    h_run(&r, true, 20, argv);
    cr_assert_eq(r.status, 0, "status %d: %s", r.status, r.out);
    cr_assert_eq(h_out_long(&r, "ok", -1), 4, "%s", r.out);
    expect_paced(4, 0.4, "non-blocking");
    /* 3 requests wait: one wake-up each, a few more for a poll that
     * returned as the hold ended; a spinning retry makes thousands. */
    long w = h_out_long(&r, "wakeups", -1);
    cr_expect(w >= 0 && w <= 12, "%ld wake-ups for 3 waits", w);
    expect_control_fast(argv, 4, "non-blocking");
}

/* Requests without a Host header are charged to the server name the
 * program gave OpenSSL (SSL_get_servername): a site that covers that name
 * paces them, and the same client with another name is not paced. */
Test(tls_requests, requests_are_charged_to_the_server_name_set)
{
    h_config_write("[rlshim]\non_deny = delay\n"
                   "[site:a]\nto = site-a.test\n"
                   "request = 1/s\nrequest_burst = 1\n");
    char helper[512], port[16];
    snprintf(port, sizeof port, "%d", srv.port);
    char *argv[] = {(char *)h_helper("tls_client", helper, sizeof helper),
                    port, "3", "write", "site-a.test", "nohost", NULL};
    h_run(&r, true, 20, argv);
    cr_assert_eq(r.status, 0, "status %d: %s", r.status, r.out);
    cr_assert_eq(h_out_long(&r, "ok", -1), 3, "%s", r.out);
    expect_paced(3, 0.4, "site-a.test");
    /* Another name, the same config: nothing covers it. */
    FILE *f = fopen(srv.log, "w");
    cr_assert_not_null(f);
    fclose(f);
    char *other[] = {argv[0], port, "3", "write", "other.test", "nohost",
                     NULL};
    h_run(&r, true, 20, other);
    cr_assert_eq(r.status, 0, "status %d: %s", r.status, r.out);
    cr_assert_eq(h_server_wait(&srv, "REQ ", 3, 5), 3);
    double span = arrival(2, NULL, 0, NULL) - arrival(0, NULL, 0, NULL);
    /* Paced, they would span two periods (2 s): under half of that. */
    cr_expect_lt(span, 1.0, "other.test: 3 requests in %.3f s", span);
}

/* Fail mode: the second request is beyond the burst. SSL_write says -1
 * (SSL_write_ex 0), SSL_get_error says SSL_ERROR_WANT_WRITE (3) and errno
 * is EAGAIN, or with another errno configured SSL_ERROR_SYSCALL (5) and
 * that errno; nothing of that request reaches the server. */
static void denied_as(const char *how, long ret, const char *cfg_errno,
                      long ssl_error, long err)
{
    h_config_write("[default]\nrequest = 2/s\nrequest_burst = 1\n%s%s%s",
                   cfg_errno != NULL ? "errno = " : "",
                   cfg_errno != NULL ? cfg_errno : "",
                   cfg_errno != NULL ? "\n" : "");
    char helper[512], port[16];
    snprintf(port, sizeof port, "%d", srv.port);
    char *argv[] = {(char *)h_helper("tls_client", helper, sizeof helper),
                    port, "3", (char *)how, NULL};
    h_run(&r, true, 20, argv);
    cr_assert_eq(r.status, 0, "status %d: %s", r.status, r.out);
    cr_expect_eq(h_out_long(&r, "ok", -1), 1, "%s", r.out);
    cr_expect_eq(h_out_long(&r, "fail_at", -1), 1, "%s", r.out);
    cr_expect_eq(h_out_long(&r, "ret", 99), ret, "%s", r.out);
    cr_expect_eq(h_out_long(&r, "ssl_error", -1), ssl_error, "%s", r.out);
    cr_expect_eq(h_out_long(&r, "errno", -1), err, "%s", r.out);
    /* Time for a request that did get through to be logged. */
    usleep(500000);
    cr_expect_eq(h_server_count(&srv, "REQ "), 1,
                 "%d requests reached the server", h_server_count(&srv, "REQ "));
}

Test(tls_requests, ssl_write_beyond_the_burst_fails_with_want_write)
{
    denied_as("write", -1, NULL, 3, EAGAIN);
}

Test(tls_requests, ssl_write_ex_beyond_the_burst_fails_with_want_write)
{
    denied_as("ex", 0, NULL, 3, EAGAIN);
}

/* WANT_WRITE would have the program write again when its socket is
 * writable, at once: the configured errno is a failure it gives up on. */
Test(tls_requests, ssl_write_denied_with_a_configured_errno_fails_as_syscall)
{
    denied_as("write", -1, "ECONNREFUSED", 5, ECONNREFUSED);
}

/* Debian's python dlopens `_ssl` RTLD_LOCAL: its libssl is out of
 * RTLD_NEXT's reach, found already loaded (RTLD_NOLOAD). */
Test(tls_requests, python_requests_session_is_paced)
{
    if (access("/usr/bin/python3", X_OK) != 0 ||
        system("/usr/bin/python3 -c 'import requests' 2>/dev/null") != 0)
        h_skip("/usr/bin/python3 with requests is not installed "
               "(apt-get install python3-requests)");
    h_config_write("%s", paced);
    char code[512];
    snprintf(code, sizeof code,
             "import requests, urllib3\n"
             "urllib3.disable_warnings()\n"
             "s = requests.Session()\n"
             "for i in range(4):\n"
             "    s.get('https://localhost:%d/p%%d' %% i, verify=False)\n"
             "print('done=1')\n",
             srv.port);
    char *argv[] = {"/usr/bin/python3", "-c", code, NULL};
    h_run(&r, true, 25, argv);
    cr_assert_eq(r.status, 0, "status %d", r.status);
    cr_assert_eq(h_out_long(&r, "done", 0), 1);
    expect_paced(4, 0.4, "python requests");
    expect_control_fast(argv, 4, "python requests");
}

/* curl links libssl: URLs on one command line share one keep-alive
 * connection, and each request after the first waits its turn. */
Test(tls_requests, curl_two_urls_on_one_connection_are_paced)
{
    h_config_write("%s", paced);
    char u[3][64];
    for (int i = 0; i < 3; i++)
        snprintf(u[i], sizeof u[i], "https://localhost:%d/c%d", srv.port, i);
    char *argv[] = {"curl", "-sSk", "--http1.1", "-o", "/dev/null",
                    "-o", "/dev/null", "-o", "/dev/null", u[0], u[1], u[2],
                    NULL};
    h_run(&r, true, 20, argv);
    cr_assert_eq(r.status, 0, "curl: status %d", r.status);
    expect_paced(3, 0.4, "curl");
    expect_control_fast(argv, 3, "curl");
    /* curl's socket is non-blocking: its denied write is retried when
     * poll says writable, so the socket is held until its turn; without
     * that, curl spins for the 1 s it waits. */
    struct run ctl;
    h_run_control(&ctl, 20, argv);
    cr_assert_eq(ctl.status, 0, "curl control: status %d", ctl.status);
    h_expect_no_spin(&r, &ctl, 0.1, "curl");
}

/* wget links GnuTLS (gnutls_record_send, the name through
 * gnutls_server_name_set). */
Test(tls_requests, wget_gnutls_requests_on_one_connection_are_paced)
{
    h_config_write("%s", paced);
    char u[3][64];
    for (int i = 0; i < 3; i++)
        snprintf(u[i], sizeof u[i], "https://localhost:%d/w%d", srv.port, i);
    char *argv[] = {"wget", "-q", "--no-check-certificate", "-O",
                    "/dev/null", u[0], u[1], u[2], NULL};
    h_run(&r, true, 20, argv);
    cr_assert_eq(r.status, 0, "wget: status %d", r.status);
    expect_paced(3, 0.4, "wget");
    expect_control_fast(argv, 3, "wget");
}

/* A program that never loads libssl or libgnutls, calling the names
 * anyway (they are in the global scope: the shim's): the calls fail as
 * the libraries fail, nothing crashes, and no TLS library is loaded. */
Test(tls_requests, a_program_without_tls_libraries_is_unaffected)
{
    h_config_write("%s", paced);
    char *argv[] = {
        "python3", "-c",
        "import ctypes\n"
        "g = ctypes.CDLL(None)\n"
        "print('write=%d' % g.SSL_write(None, b'GET / HTTP/1.1\\r\\n\\r\\n', 18))\n"
        "w = ctypes.c_size_t(7)\n"
        "print('write_ex=%d' % g.SSL_write_ex(None, b'x', 1, ctypes.byref(w)))\n"
        "print('written=%d' % w.value)\n"
        "g.gnutls_record_send.restype = ctypes.c_ssize_t\n"
        "print('gnutls=%d' % g.gnutls_record_send(None, b'x', 1))\n"
        "g.SSL_free(None)\n"
        "g.gnutls_deinit(None)\n"
        "maps = open('/proc/self/maps').read()\n"
        "print('loaded=%d' % ('libssl' in maps or 'libgnutls' in maps))\n",
        NULL};
    h_run(&r, true, 20, argv);
    cr_assert_eq(r.status, 0, "status %d: %s", r.status, r.out);
    cr_expect_eq(h_out_long(&r, "write", 0), -1, "%s", r.out);
    cr_expect_eq(h_out_long(&r, "write_ex", 1), 0, "%s", r.out);
    cr_expect_eq(h_out_long(&r, "written", 1), 0, "%s", r.out);
    cr_expect_eq(h_out_long(&r, "gnutls", 0), -59, "%s", r.out);
    cr_expect_eq(h_out_long(&r, "loaded", 1), 0, "%s", r.out);
}

/* ---- Edges: SSL_sendfile, 0-byte writes, two threads, a late libssl ---- */

static struct run ctl_run;

/* tls_client PORT N MODE under `config`. */
static void tls_client_run(struct run *out, bool preload, int n,
                           const char *mode)
{
    char helper[512], port[16], count[16];
    snprintf(port, sizeof port, "%d", srv.port);
    snprintf(count, sizeof count, "%d", n);
    char *argv[] = {(char *)h_helper("tls_client", helper, sizeof helper),
                    port, count, (char *)mode, NULL};
    h_run(out, preload, 20, argv);
    cr_assert_eq(out->status, 0, "status %d: %s", out->status, out->out);
}

/* SSL_sendfile is a TLS write of the file's bytes (SPEC §11). Without
 * kernel TLS the library cannot send a file and the client writes the
 * same head with SSL_write: one request, charged once. On a budget of 2:
 * two requests go, the third is refused by SSL_sendfile itself
 * (SSL_ERROR_WANT_WRITE), and the server has exactly 2. */
Test(tls_requests, ssl_sendfile_is_a_request_charged_once_with_its_fallback)
{
    h_config_write("[default]\nrequest = 1/min\nrequest_burst = 2\n");
    tls_client_run(&r, true, 3, "sendfile");
    cr_expect_eq(h_out_long(&r, "ok", -1), 2, "%s", r.out);
    cr_expect_eq(h_out_long(&r, "sendfile_err2", -1), 3,
                 "the third request's SSL_sendfile: %s", r.out);
    usleep(300000);
    cr_expect_eq(h_server_count(&srv, "REQ "), 2, "the server saw %d",
                 h_server_count(&srv, "REQ "));
}

/* Writes of 0 bytes are no requests and return what the library returns
 * (the same run bare); a budget of 3 takes exactly the 3 heads. */
Test(tls_requests, ssl_writes_of_0_bytes_are_passed_on_and_not_counted)
{
    h_config_write("[default]\nrequest = 1/min\nrequest_burst = 3\n");
    tls_client_run(&r, true, 4, "zero");
    cr_expect_eq(h_out_long(&r, "ok", -1), 3, "%s", r.out);
    cr_expect_eq(h_out_long(&r, "fail_at", -1), 3, "%s", r.out);
    tls_client_run(&ctl_run, false, 1, "zero");
    cr_expect_eq(h_out_long(&r, "zero", 99), h_out_long(&ctl_run, "zero", 98),
                 "SSL_write(0): %s, bare: %s", r.out, ctl_run.out);
    cr_expect_eq(h_out_long(&r, "zero_ex", 99),
                 h_out_long(&ctl_run, "zero_ex", 98),
                 "SSL_write_ex(0): %s, bare: %s", r.out, ctl_run.out);
}

/* One SSL* written from two threads (each write under the program's
 * lock): paced one request per turn in delay mode, every head arriving
 * whole and once; in fail mode a budget of 5 takes 5 of 6. */
Test(tls_requests, one_ssl_written_from_two_threads_is_counted_exactly)
{
    h_config_write("%s", paced);
    tls_client_run(&r, true, 6, "threads");
    cr_expect_eq(h_out_long(&r, "ok", -1), 6, "%s", r.out);
    expect_paced(6, 0.4, "two threads");
    char path[64], seen[6] = {0};
    for (int i = 0; i < 6; i++) {
        arrival(i, path, sizeof path, NULL);
        int k = path[0] == '/' && path[1] == 'r' ? atoi(path + 2) : -1;
        cr_expect(k >= 0 && k < 6 && !seen[k], "request %d: path %s", i, path);
        if (k >= 0 && k < 6)
            seen[k] = 1;
    }
    FILE *f = fopen(srv.log, "w");
    cr_assert_not_null(f);
    fclose(f);
    h_config_write("[default]\nrequest = 1/min\nrequest_burst = 5\n");
    tls_client_run(&r, true, 6, "threads");
    cr_expect_eq(h_out_long(&r, "ok", -1), 5, "%s", r.out);
    usleep(300000);
    cr_expect_eq(h_server_count(&srv, "REQ "), 5, "the server saw %d",
                 h_server_count(&srv, "REQ "));
}

/* libssl loaded by `dlopen` long after the shim set itself up (python
 * imports `ssl` after a plain connection was made and counted on): its
 * requests are found and paced. */
Test(tls_requests, libssl_loaded_after_the_shim_is_set_up_is_seen)
{
    h_config_write("%s", paced);
    char code[1200];
    snprintf(code, sizeof code,
             "import socket, sys\n"
             "socket.create_connection(('127.0.0.1', %d)).close()\n"
             "before = 'libssl' in open('/proc/self/maps').read()\n"
             "print('ssl_before=%%d' %% before)\n"
             "import ssl, http.client\n"
             "ctx = ssl._create_unverified_context()\n"
             "c = http.client.HTTPSConnection('localhost', %d, context=ctx)\n"
             "for i in range(4):\n"
             "    c.request('GET', '/late%%d' %% i)\n"
             "    c.getresponse().read()\n"
             "print('done=1')\n",
             srv.port, srv.port);
    char *argv[] = {"/usr/bin/python3", "-c", code, NULL};
    h_run(&r, true, 25, argv);
    cr_assert_eq(r.status, 0, "status %d: %s", r.status, r.out);
    cr_expect_eq(h_out_long(&r, "ssl_before", -1), 0,
                 "libssl was loaded before the import: %s", r.out);
    cr_assert_eq(h_out_long(&r, "done", 0), 1);
    expect_paced(4, 0.4, "python, ssl imported late");
    expect_control_fast(argv, 4, "python, ssl imported late");
}

/* ---- `to` by address, by CIDR, by name (SPEC §11 "whatever carries
 * it") ---- */

/* curl 7.87 and later write TLS through a BIO of their own: the library
 * knows no fd, and the session is paired with its socket by the
 * ciphertext its handshake sent. An address form in `to` matches the
 * address that socket went to. The server is nginx (nginx_fixture.h),
 * whose access log stamps each request. */

static struct ngx_site tls_site[1] = {{.addr = "127.0.0.1", .tls = true}};

static void dest_setup(void)
{
    h_setup();
    ngx_start(tls_site, 1);
}

static void dest_teardown(void)
{
    ngx_stop();
    h_teardown();
}

TestSuite(tls_dest, .init = dest_setup, .fini = dest_teardown, .timeout = 60);

#define DEST_N 4
#define DEST_PERIOD 0.5

/* curl fetching DEST_N URLs of host (a name or the site's address) over
 * one keep-alive connection, under `[default] to = <to>` at 2 a second,
 * a burst of 1, delay: every request reaches nginx, on one connection,
 * each at least 0.8 of the period after the one before (nginx's stamps
 * are milliseconds); the same curl unthrottled takes well under one
 * period for all. */
static void curl_paced_to(const char *to, const char *host)
{
    const struct ngx_site *s = &tls_site[0];
    char u[DEST_N][96];
    char *full[5 + 3 * DEST_N + 1] = {"curl", "-sSk", "--http1.1",
                                      "--max-time", "20"};
    int k = 5;
    for (int i = 0; i < DEST_N; i++) {
        snprintf(u[i], sizeof u[i], "https://%s:%d/%c.txt", host, s->port,
                 'a' + i);
        full[k++] = "-o";
        full[k++] = "/dev/null";
        full[k++] = u[i];
    }
    full[k] = NULL;
    h_config_write("[rlshim]\non_deny = delay\n"
                   "[default]\nto = %s\nrequest = 2/s\nrequest_burst = 1\n",
                   to);
    ngx_truncate(s);
    h_run(&r, true, 30, full);
    cr_assert_eq(r.status, 0, "curl (to = %s): status %d\n%s", to, r.status,
                 r.out);
    ngx_settle(s, DEST_N);
    double t[DEST_N + 4];
    int n = ngx_times(s, t, DEST_N + 4);
    cr_expect_eq(n, DEST_N, "to = %s: nginx saw %d requests, not %d", to, n,
                 DEST_N);
    cr_expect_eq(ngx_connections(s), 1, "to = %s: %d connections", to,
                 ngx_connections(s));
    double least = 1e9;
    for (int i = 1; i < n && i < DEST_N; i++) {
        cr_expect_geq(t[i] - t[i - 1], 0.8 * DEST_PERIOD,
                      "to = %s: requests %d and %d %.3f s apart at nginx", to,
                      i - 1, i, t[i] - t[i - 1]);
        if (t[i] - t[i - 1] < least)
            least = t[i] - t[i - 1];
    }
    ngx_truncate(s);
    h_run_control(&ctl_run, 30, full);
    ngx_settle(s, DEST_N);
    double c[DEST_N + 4];
    int cn = ngx_times(s, c, DEST_N + 4);
    cr_expect_eq(cn, DEST_N, "control: nginx saw %d requests", cn);
    cr_expect_lt(c[cn > 0 ? cn - 1 : 0] - c[0], DEST_PERIOD,
                 "control: %d requests in %.3f s", cn,
                 c[cn > 0 ? cn - 1 : 0] - c[0]);
    cr_log_info("curl, to = %s: %d requests, at least %.3f s apart; "
                "control %.3f s", to, n, least, c[cn > 0 ? cn - 1 : 0] - c[0]);
}

Test(tls_dest, curl_through_its_own_bio_is_paced_under_to_by_address)
{
    char to[64];
    snprintf(to, sizeof to, "127.0.0.1:%d", tls_site[0].port);
    curl_paced_to(to, "127.0.0.1");
}

Test(tls_dest, curl_through_its_own_bio_is_paced_under_to_by_cidr)
{
    curl_paced_to("127.0.0.0/8", "127.0.0.1");
}

Test(tls_dest, curl_through_its_own_bio_is_paced_under_to_by_name)
{
    curl_paced_to("localhost", "localhost");
}

/* A memory BIO (python's ssl.MemoryBIO, as Twisted's): the program moves
 * the ciphertext itself, and the session is paired with its socket by its
 * handshake's client random. Under `to` by address its requests are paced
 * at nginx as curl's are. */
static const char membio_client[] =
    "import socket, ssl, sys\n"
    "port = int(sys.argv[1])\n"
    "ctx = ssl.create_default_context()\n"
    "ctx.check_hostname = False\n"
    "ctx.verify_mode = ssl.CERT_NONE\n"
    "ctx.set_alpn_protocols(['http/1.1'])\n"
    "s = socket.create_connection(('127.0.0.1', port))\n"
    "inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()\n"
    "o = ctx.wrap_bio(inc, out, server_hostname='localhost')\n"
    "def flush():\n"
    "    d = out.read()\n"
    "    if d:\n"
    "        s.sendall(d)\n"
    "def pump():\n"
    "    d = s.recv(65536)\n"
    "    if not d:\n"
    "        raise SystemExit('eof')\n"
    "    inc.write(d)\n"
    "while True:\n"
    "    try:\n"
    "        o.do_handshake()\n"
    "        flush()\n"
    "        break\n"
    "    except ssl.SSLWantReadError:\n"
    "        flush()\n"
    "        pump()\n"
    "for c in 'abcd':\n"
    "    o.write(('GET /%s.txt HTTP/1.1\\r\\nHost: localhost\\r\\n\\r\\n' % c)"
    ".encode())\n"
    "    flush()\n"
    "    buf = b''\n"
    "    while True:\n"
    "        head, sep, body = buf.partition(b'\\r\\n\\r\\n')\n"
    "        if sep:\n"
    "            n = [int(l.split(b':')[1]) for l in head.split(b'\\r\\n')\n"
    "                 if l.lower().startswith(b'content-length:')][0]\n"
    "            if len(body) >= n:\n"
    "                break\n"
    "        try:\n"
    "            buf += o.read(65536)\n"
    "        except ssl.SSLWantReadError:\n"
    "            pump()\n"
    "print('done=1')\n";

Test(tls_dest, a_memory_bio_session_is_paced_under_to_by_address)
{
    const struct ngx_site *s = &tls_site[0];
    char port[16], to[64];
    snprintf(port, sizeof port, "%d", s->port);
    snprintf(to, sizeof to, "127.0.0.1:%d", s->port);
    char *argv[] = {"/usr/bin/python3", "-c", (char *)membio_client, port,
                    NULL};
    h_config_write("[rlshim]\non_deny = delay\n"
                   "[default]\nto = %s\nrequest = 2/s\nrequest_burst = 1\n",
                   to);
    ngx_truncate(s);
    h_run(&r, true, 30, argv);
    cr_assert_eq(r.status, 0, "python: status %d\n%s", r.status, r.out);
    cr_assert_eq(h_out_long(&r, "done", 0), 1, "%s", r.out);
    ngx_settle(s, DEST_N);
    double t[DEST_N + 4];
    int n = ngx_times(s, t, DEST_N + 4);
    cr_expect_eq(n, DEST_N, "nginx saw %d requests, not %d", n, DEST_N);
    for (int i = 1; i < n && i < DEST_N; i++)
        cr_expect_geq(t[i] - t[i - 1], 0.8 * DEST_PERIOD,
                      "requests %d and %d %.3f s apart at nginx", i - 1, i,
                      t[i] - t[i - 1]);
    ngx_truncate(s);
    h_run_control(&ctl_run, 30, argv);
    ngx_settle(s, DEST_N);
    double c[DEST_N + 4];
    int cn = ngx_times(s, c, DEST_N + 4);
    cr_expect_eq(cn, DEST_N, "control: nginx saw %d requests", cn);
    cr_expect_lt(c[cn > 0 ? cn - 1 : 0] - c[0], DEST_PERIOD,
                 "control: %d requests in %.3f s", cn,
                 c[cn > 0 ? cn - 1 : 0] - c[0]);
}
