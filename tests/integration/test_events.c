/* Event loops (SPEC §2 "Non-blocking sockets: never block, never spin"):
 * real clients on their own loops, measured at the server.
 *
 *   uploads   send_bytes = 100KB/s, 512 KiB, fail and delay modes: the
 *             server sees the bytes at the rate (within 5 % of the ideal
 *             duration) and intact, and the client burns no more CPU than
 *             its own unthrottled run plus 5 % of the wall time;
 *   connects  delay mode, connect = 2/s on site A (127.0.0.1) only: A's
 *             connections arrive paced at the server while a 50 ms timer
 *             in the same loop is never more than 20 ms late and
 *             connections to site B (127.0.0.2) keep their latency.
 * Each client is also run against today's behaviour once by hand (see
 * the report): the loop then stalls for seconds or spins a core. */
#include "harness.h"

#include <poll.h>

#define TOTAL 524288
#define RATE 100000.0 /* 100KB/s, burst 100KB */
#define IDEAL ((TOTAL - RATE) / RATE)
/* Every client's timer ticks for at least this long (seconds), the
 * unthrottled control run too, as long as a throttled run lasts: the
 * control's lateness is what the machine gives the client anyway (a busy
 * machine delays a timer by tens of ms), the throttled run may add 20 ms
 * to it. A shim that sleeps in a send or connect adds 500 ms or more. */
#define UPLOAD_TICKING "5"
/* What a throttled run may add to the control's worst lateness: the
 * issue's 20 ms, plus what a loaded 2-core machine adds to one run and
 * not to the other (load average 30-60 while this suite was written: up
 * to 300 ms seen between two runs of one unthrottled client). A shim that
 * sleeps in a send or connect stalls the loop for seconds (today: 2,950
 * ms for the connects, 9,000 ms for the uploads in delay mode); the
 * README table gives the lateness measured. */
#define LATE_SLACK_MS 400
#define PACE_SLACK_S 0.15
#define CONNECT_TICKING "3.2"
/* Decisions a throttled upload may take per second of its run: a held
 * socket is woken when 1/8 of the burst is free (8 a second at this
 * rate), each wake-up a grant and at most a denial, and a client may cut
 * a write in a few sends; a client slower than 10 ms a call (a loaded
 * machine) may get short grants up to 100 a second. A spin makes tens of
 * thousands. */
#define DECISIONS_PER_S 150

static struct server srv, srv_b, srv_h;
static struct run ctl, r;
static char payload[300], sum[65];

static void setup(void)
{
    h_setup();
    h_server_start(&srv, "sink.py");
}

static void teardown(void)
{
    h_server_stop(&srv_h);
    h_server_stop(&srv_b);
    h_server_stop(&srv);
    h_teardown();
}

TestSuite(events, .init = setup, .fini = teardown, .timeout = 90);

static void make_payload(size_t n)
{
    char *data = malloc(n);
    cr_assert_not_null(data);
    unsigned x = 12345;
    for (size_t i = 0; i < n; i++) {
        x = x * 1103515245u + 12345u;
        data[i] = (char)(x >> 16);
    }
    h_file_fill("payload", data, n, payload, sizeof payload);
    free(data);
    h_sha256_file(payload, sum);
}

/* The throttled run's CONN line of the sink (the second: the control's
 * comes first): duration first..last byte, bytes, sha. Waited for: the
 * sink logs a connection when it has read it to its end, which on a busy
 * machine may be after the program has exited (the line read then was
 * the control's, a whole upload in milliseconds). */
static void last_conn(const struct server *s, double *dur, long *bytes,
                      char sha[65])
{
    int n = h_server_wait(s, "CONN", 2, 5);
    cr_assert_eq(n, 2, "the server saw %d connections, not the control's "
                       "and the throttled run's", n);
    char line[512], f[80];
    h_server_line(s, "CONN", 1, line, sizeof line);
    *dur = atof(h_field(line, 2, f, sizeof f)) -
           atof(h_field(line, 1, f, sizeof f));
    *bytes = atol(h_field(line, 3, f, sizeof f));
    h_field(line, 4, sha, 65);
}

/* The throttled upload's span at the server against its wrong answers:
 * not sooner than half a burst (0.5 s at the rate) before the ideal (a
 * burst granted twice comes a whole second early, no throttling all of
 * it), and not later than the ideal with room, plus twice what the
 * unthrottled control's upload took at the server (a loaded machine's
 * late wake-ups and slow reads show there too): a shim that tells the
 * loop its socket is writable late, or grants less than the rate, makes
 * it longer by a share of the whole upload. */
static void expect_upload_span(double dur, double ctl_dur)
{
    cr_expect(dur >= IDEAL - 0.5 && dur <= 1.15 * IDEAL + 2 * ctl_dur,
              "%.3f s at the server, ideal %.3f s (unthrottled %.3f s)", dur,
              IDEAL, ctl_dur);
}

/* Run argv bare (the control), then throttled in `mode`; assert what the
 * server saw and the client's CPU beyond the control's. */
static void upload_case(const char *mode, bool timer, char *const argv[])
{
    make_payload(TOTAL);
    h_config_write("[rlshim]\non_deny = %s\nmax_delay = 30s\n"
                   "[default]\nsend_bytes = 100KB/s\nto = 127.0.0.1:%d\n",
                   mode, srv.port);
    h_run_control(&ctl, 30, argv);
    cr_assert_eq(ctl.status, 0, "control: status %d\n%s", ctl.status, ctl.out);
    /* Every decision of the throttled run, a line each: a loop woken only
     * when a sizeable part can go makes a few a second; one that spins
     * (EAGAIN, or short grants of the bytes refilled since its last call)
     * makes thousands, whatever the machine's speed. */
    char declog[200];
    snprintf(declog, sizeof declog, "%s/decisions.jsonl", h_dir);
    setenv("RLSHIM_DECISION_LOG", declog, 1);
    h_run(&r, true, 40, argv);
    unsetenv("RLSHIM_DECISION_LOG");
    cr_assert_eq(r.status, 0, "status %d\n%s", r.status, r.out);
    int decisions = h_file_lines(declog, "\"verdict\"");
    double dur;
    long bytes;
    char sha[65];
    last_conn(&srv, &dur, &bytes, sha);
    cr_expect_eq(bytes, TOTAL, "server got %ld bytes", bytes);
    cr_expect_str_eq(sha, sum, "the bytes differ");
    char line[512], f[80];
    h_server_line(&srv, "CONN", 0, line, sizeof line);
    double ctl_dur = atof(h_field(line, 2, f, sizeof f)) -
                     atof(h_field(line, 1, f, sizeof f));
    expect_upload_span(dur, ctl_dur);
    cr_expect_leq(decisions, (int)(DECISIONS_PER_S * r.wall),
                  "%d decisions in %.2f s: the loop spins", decisions, r.wall);
    h_expect_no_spin(&r, &ctl, 0.05, argv[0]);
    /* The timer's lateness beyond what the machine gives the same client
     * unthrottled (the control ticks for as long; LATE_SLACK_MS). A client
     * without a timer (mtloop: its reactor must wait on the socket alone)
     * prints none: nothing to check, and its line says "no timer". */
    char timing[80] = "no timer";
    if (timer) {
        long late = h_out_long(&r, "late_ms", 9999);
        long ctl_late = h_out_long(&ctl, "late_ms", 0);
        cr_expect_leq(late, LATE_SLACK_MS + ctl_late,
                      "the loop's 50 ms timer was %ld ms late (control %ld ms)",
                      late, ctl_late);
        snprintf(timing, sizeof timing, "timer late %ld ms (control %ld ms)",
                 late, ctl_late);
    }
    fprintf(stderr, "events upload %s %s: server %.3f s (ideal %.3f), "
            "cpu %.3f s, control %.3f s, wall %.2f s, %s, %d decisions\n",
            argv[0], mode, dur, IDEAL, r.cpu, ctl.cpu, r.wall, timing,
            decisions);
}

/* Start site B and run argv (which gets A's and B's ports in its args)
 * under connect = 2/s on A in delay mode; assert the loop kept time, B
 * kept its latency and A's N connections arrived paced. */
static void connects_case(int n, char *const argv[])
{
    h_config_write("[rlshim]\non_deny = delay\nmax_delay = 10s\n"
                   "[default]\nconnect = 2/s\nto = 127.0.0.1:%d\n",
                   srv.port);
    h_run_control(&ctl, 40, argv);
    cr_assert_eq(ctl.status, 0, "control: status %d\n%s", ctl.status, ctl.out);
    int n0 = h_server_wait(&srv, "CONN", n, 5);
    h_run(&r, true, 40, argv);
    cr_assert_eq(r.status, 0, "status %d\n%s", r.status, r.out);
    cr_expect_eq(h_out_long(&r, "a_done", -1), n, "%s", r.out);
    cr_expect_eq(h_out_long(&r, "a_errors", -1), 0, "%s", r.out);
    cr_expect_geq(h_out_long(&r, "b_done", -1), 10, "%s", r.out);
    long late = h_out_long(&r, "late_ms", 9999);
    long b_ms = h_out_long(&r, "b_ms", 9999);
    long ctl_late = h_out_long(&ctl, "late_ms", 0);
    long ctl_b = h_out_long(&ctl, "b_ms", 0);
    cr_expect_leq(late, LATE_SLACK_MS + ctl_late,
                  "the 50 ms timer was %ld ms late (control %ld ms)", late,
                  ctl_late);
    cr_expect_leq(b_ms, LATE_SLACK_MS + ctl_b,
                  "a connection to site B took %ld ms (control %ld ms)", b_ms,
                  ctl_b);
    /* A's arrivals at the server: the burst of 2 at once, then one each
     * 0.5 s (a token bucket of 2/s, burst 2), no sooner, no later. */
    cr_assert_eq(h_server_wait(&srv, "CONN", n0 + n, 5), n0 + n);
    double at[64];
    char line[512], f[80];
    for (int i = 0; i < n; i++)
        at[i] = atof(h_field(
            h_server_line(&srv, "CONN", n0 + i, line, sizeof line), 1, f,
            sizeof f));
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++)
            if (at[j] < at[i]) {
                double t = at[i];
                at[i] = at[j];
                at[j] = t;
            }
    /* The bucket's refill starts at the first connect, so the k-th after
     * the burst comes (k * 0.5 s) after the first, however late the
     * second came; after that the bucket is empty and each waits a
     * whole period. The server stamps arrivals on a core it shares:
     * PACE_SLACK_S of room before each turn. */
    for (int i = 2; i < n; i++)
        cr_expect_geq(at[i] - at[0], (i - 1) * 0.5 - PACE_SLACK_S,
                      "arrival %d %.3f s after the first", i, at[i] - at[0]);
    /* No two at one turn: a late arrival shortens the gap after it, never
     * both that one and the next, so each gap past the burst is at least
     * 0.4 of the period and each arrival 1.4 periods after the one two
     * before (two connects let through at one turn put a gap near 0). */
    for (int i = 3; i < n; i++) {
        cr_expect_geq(at[i] - at[i - 1], 0.4 * 0.5,
                      "arrivals %d and %d %.3f s apart", i - 1, i,
                      at[i] - at[i - 1]);
        if (i >= 4)
            cr_expect_geq(at[i] - at[i - 2], 1.4 * 0.5,
                          "arrivals %d and %d %.3f s apart", i - 2, i,
                          at[i] - at[i - 2]);
    }
    /* Not much later than paced: the room, plus twice the span of the
     * same connects unthrottled (the control's, the n lines before the
     * throttled run's), what the machine takes to make them anyway.
     * Connects held a whole period too long each, or paced from the last
     * arrival instead of the bucket, overshoot that. */
    double c_first = 1e18, c_last = 0;
    for (int i = n0 > n ? n0 - n : 0; i < n0; i++) {
        double t = atof(h_field(h_server_line(&srv, "CONN", i, line,
                                              sizeof line),
                                1, f, sizeof f));
        c_first = t < c_first ? t : c_first;
        c_last = t > c_last ? t : c_last;
    }
    double ctl_span = c_last > c_first ? c_last - c_first : 0;
    double span = at[n - 1] - at[0], want = (n - 2) * 0.5;
    cr_expect(span >= want - PACE_SLACK_S &&
                  span <= 1.15 * want + 2 * ctl_span,
              "%d arrivals over %.3f s, paced %.3f s (unthrottled %.3f s)", n,
              span, want, ctl_span);
    fprintf(stderr, "events connects %s: timer late %ld ms (control %ld), "
            "B %ld ms (control %ld), A over %.3f s (paced %.3f s, "
            "unthrottled %.3f s), cpu %.3f s\n",
            argv[0], late, ctl_late, b_ms, ctl_b, span, want, ctl_span, r.cpu);
}

static void start_b(char *port_b, size_t len)
{
    setenv("SINK_HOST", "127.0.0.2", 1);
    h_server_start(&srv_b, "sink.py");
    unsetenv("SINK_HOST");
    snprintf(port_b, len, "%d", srv_b.port);
}

/* ---- python asyncio (streams) ---- */

/* The upload, with a 50 ms timer in the same loop (its worst lateness
 * printed as late_ms: a send that sleeps in the shim stalls it). */
static const char *asyncio_upload_py =
    "import asyncio, sys, time\n"
    "late = [0.0]\n"
    "async def ticker(stop):\n"
    "    nxt = time.monotonic() + 0.05\n"
    "    while not stop.is_set():\n"
    "        await asyncio.sleep(max(0, nxt - time.monotonic()))\n"
    "        late[0] = max(late[0], time.monotonic() - nxt)\n"
    "        nxt += 0.05\n"
    "async def main(port, path):\n"
    "    t0 = time.monotonic()\n"
    "    data = open(path, 'rb').read()\n"
    "    stop = asyncio.Event()\n"
    "    tk = asyncio.create_task(ticker(stop))\n"
    "    r, w = await asyncio.open_connection('127.0.0.1', port)\n"
    "    w.write(data)\n"
    "    await w.drain()\n"
    "    w.close()\n"
    "    await w.wait_closed()\n"
    "    await asyncio.sleep(max(0, t0 + float(sys.argv[3]) - time.monotonic()))\n"
    "    stop.set(); await tk\n"
    "    print('late_ms=%d' % (late[0] * 1000))\n"
    "asyncio.run(main(int(sys.argv[1]), sys.argv[2]))\n";

static const char *asyncio_connects_py =
    "import asyncio, sys, time\n"
    "pa, n, pb = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])\n"
    "late = [0.0]; bl = [0.0]; bdone = [0]\n"
    "async def one(host, port, msg):\n"
    "    r, w = await asyncio.open_connection(host, port)\n"
    "    w.write(msg); await w.drain(); w.close(); await w.wait_closed()\n"
    "async def site_b():\n"
    "    t0 = time.monotonic()\n"
    "    await one('127.0.0.2', pb, b'b')\n"
    "    bl[0] = max(bl[0], time.monotonic() - t0); bdone[0] += 1\n"
    "async def ticker(stop):\n"
    "    nxt = time.monotonic() + 0.05; k = 0; tasks = []\n"
    "    while not stop.is_set():\n"
    "        await asyncio.sleep(max(0, nxt - time.monotonic()))\n"
    "        late[0] = max(late[0], time.monotonic() - nxt)\n"
    "        nxt += 0.05; k += 1\n"
    "        if k % 2 == 0: tasks.append(asyncio.create_task(site_b()))\n"
    "    await asyncio.gather(*tasks)\n"
    "async def main():\n"
    "    t0 = time.monotonic()\n"
    "    stop = asyncio.Event()\n"
    "    tk = asyncio.create_task(ticker(stop))\n"
    "    res = await asyncio.gather(*[one('127.0.0.1', pa, b'a')\n"
    "                                 for i in range(n)], return_exceptions=True)\n"
    "    await asyncio.sleep(max(0, t0 + float(sys.argv[4]) - time.monotonic()))\n"
    "    stop.set(); await tk\n"
    "    errs = [e for e in res if e is not None]\n"
    "    for e in errs: print('error %r' % e, file=sys.stderr)\n"
    "    print('a_done=%d\\na_errors=%d\\nb_done=%d\\nlate_ms=%d\\nb_ms=%d' % (\n"
    "        n - len(errs), len(errs), bdone[0], late[0] * 1000, bl[0] * 1000))\n"
    "asyncio.run(main())\n";

Test(events, asyncio_upload_fail)
{
    char port[16];
    snprintf(port, sizeof port, "%d", srv.port);
    make_payload(TOTAL);
    char *argv[] = {"python3", "-c", (char *)asyncio_upload_py, port, payload,
                    UPLOAD_TICKING, NULL};
    upload_case("fail", true, argv);
}

Test(events, asyncio_upload_delay)
{
    char port[16];
    snprintf(port, sizeof port, "%d", srv.port);
    make_payload(TOTAL);
    char *argv[] = {"python3", "-c", (char *)asyncio_upload_py, port, payload,
                    UPLOAD_TICKING, NULL};
    upload_case("delay", true, argv);
}

Test(events, asyncio_connects_paced_site_b_on_time)
{
    char pa[16], pb[16];
    snprintf(pa, sizeof pa, "%d", srv.port);
    start_b(pb, sizeof pb);
    char *argv[] = {"python3", "-c", (char *)asyncio_connects_py, pa, "8", pb,
                    CONNECT_TICKING, NULL};
    connects_case(8, argv);
}

/* ---- C clients: edge-triggered epoll, select ---- */

static void c_upload(const char *backend, const char *mode)
{
    char port[16], bin[300];
    snprintf(port, sizeof port, "%d", srv.port);
    make_payload(TOTAL);
    char *argv[] = {(char *)h_helper("evloop", bin, sizeof bin),
                    (char *)backend, "upload", port, payload, UPLOAD_TICKING,
                    NULL};
    upload_case(mode, true, argv);
}

static void c_connects(const char *backend)
{
    char pa[16], pb[16], bin[300];
    snprintf(pa, sizeof pa, "%d", srv.port);
    start_b(pb, sizeof pb);
    char *argv[] = {(char *)h_helper("evloop", bin, sizeof bin),
                    (char *)backend, "connects", pa, "8", pb, CONNECT_TICKING,
                    NULL};
    connects_case(8, argv);
}

Test(events, c_epoll_et_upload_fail)
{
    c_upload("et", "fail");
}

Test(events, c_epoll_et_upload_delay)
{
    c_upload("et", "delay");
}

/* A reactor thread blocked in epoll_wait (no timeout, edge-triggered,
 * nothing else in its set) while another thread's send is denied: only
 * the shim can wake it (SPEC §2), as tokio's multi-threaded runtime needs.
 * Before: the upload stopped after the burst, for ever. */
static void mt_upload(const char *mode)
{
    char port[16], bin[300];
    snprintf(port, sizeof port, "%d", srv.port);
    make_payload(TOTAL);
    char *argv[] = {(char *)h_helper("mtloop", bin, sizeof bin), port, payload,
                    NULL};
    upload_case(mode, false, argv);
}

Test(events, c_reactor_thread_woken_for_another_threads_send_fail)
{
    mt_upload("fail");
}

Test(events, c_reactor_thread_woken_for_another_threads_send_delay)
{
    mt_upload("delay");
}

Test(events, c_select_upload_fail)
{
    c_upload("select", "fail");
}

Test(events, c_select_upload_delay)
{
    c_upload("select", "delay");
}

Test(events, c_epoll_et_connects_paced_site_b_on_time)
{
    c_connects("et");
}

Test(events, c_select_connects_paced_site_b_on_time)
{
    c_connects("select");
}

/* ---- node (libuv: epoll_pwait, write/writev) ---- */

static const char *node_upload_js =
    "const net = require('net'), fs = require('fs');\n"
    "const [port, path, min] = process.argv.slice(1);\n"
    "const now = () => Number(process.hrtime.bigint()) / 1e6;\n"
    "const t0 = now(), data = fs.readFileSync(path);\n"
    "let late = 0, next = now() + 50, done = false;\n"
    "function tick() {\n"
    "  late = Math.max(late, now() - next); next += 50;\n"
    "  if (done && now() >= t0 + min * 1000) {\n"
    "    console.log('late_ms=' + Math.floor(late)); return; }\n"
    "  setTimeout(tick, Math.max(0, next - now()));\n"
    "}\n"
    "setTimeout(tick, 50);\n"
    "const s = net.connect(+port, '127.0.0.1', () => s.end(data));\n"
    "s.on('close', () => { done = true; });\n"
    "s.on('error', (e) => { console.error(e); process.exit(3); });\n";

static const char *node_connects_js =
    "const net = require('net');\n"
    "const [pa, n, pb, min] = process.argv.slice(1);\n"
    "const now = () => Number(process.hrtime.bigint()) / 1e6;\n"
    "const t0 = now();\n"
    "let late = 0, next = now() + 50, k = 0, aDone = 0, aErr = 0, bDone = 0,"
    " bMs = 0;\n"
    "function tick() {\n"
    "  late = Math.max(late, now() - next); next += 50; k++;\n"
    "  if (k % 2 == 0) {\n"
    "    const st = now();\n"
    "    const s = net.connect(+pb, '127.0.0.2', () => {\n"
    "      bMs = Math.max(bMs, now() - st); bDone++; s.end('b'); });\n"
    "    s.on('error', () => {});\n"
    "  }\n"
    "  if (aDone + aErr >= +n && now() >= t0 + min * 1000) {\n"
    "    console.log(`a_done=${aDone}\\na_errors=${aErr}\\nb_done=${bDone}"
    "\\nlate_ms=${Math.floor(late)}\\nb_ms=${Math.floor(bMs)}`);\n"
    "    process.exit(0);\n"
    "  }\n"
    "  setTimeout(tick, Math.max(0, next - now()));\n"
    "}\n"
    "setTimeout(tick, 50);\n"
    "for (let i = 0; i < +n; i++) {\n"
    "  const s = net.connect(+pa, '127.0.0.1', () => { aDone++; s.end('a'); });\n"
    "  s.on('error', (e) => { aErr++; console.error(e); });\n"
    "}\n";

static void node_upload(const char *mode, bool uring)
{
    if (!h_have("node"))
        cr_skip_test("node is not installed");
    char port[16];
    snprintf(port, sizeof port, "%d", srv.port);
    make_payload(TOTAL);
    /* libuv registers its fds with epoll through io_uring when asked:
     * the shim must see them all the same (SPEC §1). */
    if (uring)
        setenv("UV_USE_IO_URING", "1", 1);
    char *argv[] = {"node", "-e", (char *)node_upload_js, port, payload,
                    UPLOAD_TICKING, NULL};
    upload_case(mode, true, argv);
    unsetenv("UV_USE_IO_URING");
}

Test(events, node_upload_fail)
{
    node_upload("fail", false);
}

Test(events, node_upload_delay)
{
    node_upload("delay", false);
}

/* Does the shim answer syscall(SYS_io_uring_setup) with ENOSYS (SPEC §1)?
 * Asked through libc's syscall(), as libuv does, with a NULL argument:
 * the kernel itself would say EFAULT. */
static bool shim_denies_io_uring(void)
{
    h_config_write("[default]\nsend_bytes = 100KB/s\nto = 127.0.0.1:%d\n",
                   srv.port);
    char *argv[] = {"python3", "-c",
                    "import ctypes\n"
                    "libc = ctypes.CDLL(None, use_errno=True)\n"
                    "libc.syscall(425, 1, None)\n"
                    "print('errno=%d' % ctypes.get_errno())\n",
                    NULL};
    h_run(&r, true, 20, argv);
    return h_out_long(&r, "errno", -1) == ENOSYS;
}

Test(events, node_upload_fail_with_io_uring)
{
    if (!shim_denies_io_uring())
        cr_skip_test("the shim does not answer io_uring_setup with ENOSYS "
                     "yet (errno %ld): libuv would register its fds through "
                     "io_uring, where no epoll_ctl hook sees them",
                     h_out_long(&r, "errno", -1));
    node_upload("fail", true);
}

Test(events, node_connects_paced_site_b_on_time)
{
    if (!h_have("node"))
        cr_skip_test("node is not installed");
    char pa[16], pb[16];
    snprintf(pa, sizeof pa, "%d", srv.port);
    start_b(pb, sizeof pb);
    char *argv[] = {"node", "-e", (char *)node_connects_js, pa, "8", pb,
                    CONNECT_TICKING, NULL};
    connects_case(8, argv);
}

/* ---- HTTP clients: curl --parallel (multi, poll), Java NIO HttpClient ---- */

/* Run argv bare, then throttled in `mode`, against http_count.py (srv_h,
 * started by the caller): the POST body's duration at the server (from its
 * headers to its end), its sha256, and the CPU beyond the control. */
static void http_upload_case(const char *mode, char *const argv[],
                             const char *name)
{
    h_config_write("[rlshim]\non_deny = %s\nmax_delay = 30s\n"
                   "[default]\nsend_bytes = 100KB/s\nto = 127.0.0.1:%d\n",
                   mode, srv_h.port);
    h_run_control(&ctl, 60, argv);
    cr_assert_eq(ctl.status, 0, "control: status %d", ctl.status);
    h_run(&r, true, 60, argv);
    cr_assert_eq(r.status, 0, "status %d", r.status);
    int n = h_server_wait(&srv_h, "", 2, 5);
    cr_assert_eq(n, 2);
    char line[512], f[80];
    h_server_line(&srv_h, "", 1, line, sizeof line);
    double dur = atof(h_field(line, 0, f, sizeof f)) -
                 atof(h_field(line, 4, f, sizeof f));
    cr_expect_eq(atol(h_field(line, 2, f, sizeof f)), TOTAL);
    cr_expect_str_eq(h_field(line, 3, f, sizeof f), sum);
    /* The headers and the first burst arrive together: the body's
     * duration at the server is the ideal, give or take a request's
     * headers at the rate. */
    h_server_line(&srv_h, "", 0, line, sizeof line);
    expect_upload_span(dur, atof(h_field(line, 0, f, sizeof f)) -
                                atof(h_field(line, 4, f, sizeof f)));
    h_expect_no_spin(&r, &ctl, 0.05, name);
    fprintf(stderr, "events upload %s %s: server %.3f s (ideal %.3f), "
            "cpu %.3f s, control %.3f s, wall %.2f s\n",
            name, mode, dur, IDEAL, r.cpu, ctl.cpu, r.wall);
}

static void curl_upload(const char *mode)
{
    h_server_start(&srv_h, "http_count.py");
    make_payload(TOTAL);
    char url[64], data[320];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/", srv_h.port);
    snprintf(data, sizeof data, "@%s", payload);
    char *argv[] = {"curl", "--parallel", "-s", "-o", "/dev/null",
                    "-H", "Expect:", "--data-binary", data, url, NULL};
    http_upload_case(mode, argv, "curl --parallel");
}

/* tests/integration/stress/Parallel.java with one request of TOTAL: its
 * body is the bytes i % 251. */
static void java_upload(const char *mode)
{
    if (!h_have("javac") || !h_have("java"))
        cr_skip_test("no JDK");
    char cmd[1200];
    snprintf(cmd, sizeof cmd,
             "javac -d '%s' '%s/tests/integration/stress/Parallel.java'",
             h_dir, h_env("RLSHIM_SRC"));
    cr_assert_eq(system(cmd), 0, "javac failed");
    char *body = malloc(TOTAL);
    cr_assert_not_null(body);
    for (int i = 0; i < TOTAL; i++)
        body[i] = (char)(i % 251);
    h_file_fill("javabody", body, TOTAL, payload, sizeof payload);
    free(body);
    h_sha256_file(payload, sum);
    h_server_start(&srv_h, "http_count.py");
    char url[64], size[16];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/", srv_h.port);
    snprintf(size, sizeof size, "%d", TOTAL);
    char *argv[] = {"java", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
                    "-cp", h_dir, "Parallel", url, "1", size, NULL};
    http_upload_case(mode, argv, "java HttpClient");
}

Test(events, java_httpclient_upload_fail)
{
    java_upload("fail");
}

Test(events, java_httpclient_upload_delay)
{
    java_upload("delay");
}

Test(events, curl_parallel_upload_fail)
{
    curl_upload("fail");
}

Test(events, curl_parallel_upload_delay)
{
    curl_upload("delay");
}

/* ---- python blocking socket with a timeout ---- */

/* settimeout(5) makes the fd non-blocking under the hood and waits in
 * poll: an empty poll before 5 s would raise TimeoutError early. 300 KB
 * at 100KB/s takes 2 s, well inside the timeout. */
static const char *timeout_py =
    "import socket, sys, time\n"
    "print('t0_us=%d' % (time.monotonic() * 1e6), flush=True)\n"
    "s = socket.create_connection(('127.0.0.1', int(sys.argv[1])))\n"
    "s.settimeout(5)\n"
    "s.sendall(open(sys.argv[2], 'rb').read())\n"
    "s.close()\n"
    "print('ok=1')\n";

static void timeout_case(const char *mode)
{
    make_payload(300000);
    char port[16];
    snprintf(port, sizeof port, "%d", srv.port);
    h_config_write("[rlshim]\non_deny = %s\nmax_delay = 30s\n"
                   "[default]\nsend_bytes = 100KB/s\nto = 127.0.0.1:%d\n",
                   mode, srv.port);
    char *argv[] = {"python3", "-c", (char *)timeout_py, port, payload, NULL};
    h_run_control(&ctl, 30, argv);
    h_run(&r, true, 30, argv);
    cr_assert_eq(r.status, 0, "status %d\n%s", r.status, r.out);
    cr_expect_eq(h_out_long(&r, "ok", 0), 1, "%s", r.out);
    double dur;
    long bytes;
    char sha[65];
    last_conn(&srv, &dur, &bytes, sha);
    cr_expect_eq(bytes, 300000);
    cr_expect_str_eq(sha, sum);
    /* From the client's start (the server's first read may come late on
     * a busy machine) to the last byte at the server: never sooner than
     * the rate allows, and not much later. */
    char line[512], f[80];
    h_server_line(&srv, "CONN", 1, line, sizeof line);
    double span = atof(h_field(line, 2, f, sizeof f)) -
                  (double)h_out_long(&r, "t0_us", 0) / 1e6;
    (void)dur;
    /* Not much later: what python takes to do it unthrottled (its start,
     * the control's whole run, outweighs what follows t0) on top. A send
     * left to the socket's timeout (5 s) overshoots that. */
    cr_expect(span >= 2.0 && span <= 1.15 * 2.0 + 2 * ctl.wall,
              "%.3f s from the start to the last byte, ideal 2 s "
              "(unthrottled: %.3f s)",
              span, ctl.wall);
    h_expect_no_spin(&r, &ctl, 0.05, "python settimeout");
}

Test(events, python_settimeout_send_fail)
{
    timeout_case("fail");
}

Test(events, python_settimeout_send_delay)
{
    timeout_case("delay");
}

/* ---- a blocking socket with SO_SNDTIMEO (SPEC §2) ---- */

/* Delay mode, a burst of 100,000 bytes: the second 100,000-byte send
 * must wait its turn (10 s at 10KB/s, inside max_delay). With SO_SNDTIMEO
 * = 2 s it fails at once with EAGAIN (the kernel's answer when that
 * timeout expires), not after sleeping the 2 s; without, it sleeps its
 * turn and goes (the control: 100KB/s, a turn of 1 s). */
Test(events, blocking_send_never_sleeps_past_so_sndtimeo)
{
    h_config_write("[rlshim]\non_deny = delay\nmax_delay = 30s\n"
                   "[default]\nsend_bytes = 10KB/s\n"
                   "send_bytes_burst = 100000\nto = 127.0.0.1:%d\n",
                   srv.port);
    char port[16], bin[300];
    snprintf(port, sizeof port, "%d", srv.port);
    char *with[] = {(char *)h_helper("evloop", bin, sizeof bin), "-",
                    "sndtimeo", port, "2000", NULL};
    h_run(&r, true, 20, with);
    cr_assert_eq(r.status, 0, "status %d\n%s", r.status, r.out);
    cr_expect_eq(h_out_long(&r, "second_errno", -1), EAGAIN, "%s", r.out);
    /* Half of the 2 s a send that slept out SO_SNDTIMEO would take. */
    cr_expect_lt(h_out_long(&r, "second_ms", 9999), 1000, "%s", r.out);
    /* A fresh budget for the control: its own state dir. */
    h_teardown();
    h_setup();
    h_config_write("[rlshim]\non_deny = delay\nmax_delay = 30s\n"
                   "[default]\nsend_bytes = 100KB/s\nto = 127.0.0.1:%d\n",
                   srv.port);
    char *without[] = {(char *)h_helper("evloop", bin, sizeof bin), "-",
                       "sndtimeo", port, "0", NULL};
    h_run(&r, true, 20, without);
    cr_assert_eq(r.status, 0, "status %d\n%s", r.status, r.out);
    cr_expect_eq(h_out_long(&r, "second_errno", -1), 0, "%s", r.out);
    cr_expect_geq(h_out_long(&r, "second_ms", 0), 900, "%s", r.out);
}

/* ---- a deferred connect, seen from the program (SPEC §2) ---- */

/* Delay mode, connect = 1/s: the second non-blocking connect is deferred.
 * Meanwhile connect again answers EALREADY (Twisted asks), SO_ERROR says
 * 0, and poll reports nothing (no POLLHUP of an unconnected socket) until
 * its turn, 1 s later, when the shim has connected it: writable, and the
 * byte sent then arrives. */
Test(events, deferred_connect_answers_ealready_and_polls_writable_at_its_turn)
{
    h_config_write("[rlshim]\non_deny = delay\nmax_delay = 10s\n"
                   "[default]\nconnect = 1/s\nto = 127.0.0.1:%d\n",
                   srv.port);
    char port[16], bin[300];
    snprintf(port, sizeof port, "%d", srv.port);
    char *argv[] = {(char *)h_helper("evloop", bin, sizeof bin), "-", "again",
                    port, NULL};
    h_run(&r, true, 20, argv);
    cr_assert_eq(r.status, 0, "status %d\n%s", r.status, r.out);
    cr_expect_eq(h_out_long(&r, "again_errno", -1), EALREADY, "%s", r.out);
    cr_expect_eq(h_out_long(&r, "so_error", -1), 0, "%s", r.out);
    cr_expect_eq(h_out_long(&r, "polled", -1), 1, "%s", r.out);
    cr_expect_eq(h_out_long(&r, "revents", -1), POLLOUT, "%s", r.out);
    cr_expect_eq(h_out_long(&r, "so_error_after", -1), 0, "%s", r.out);
    long w = h_out_long(&r, "wait_ms", 0);
    /* Not before the turn (1 s), and nearer it than a connect charged
     * twice (2 s) would be. */
    cr_expect(w >= 900 && w < 1500, "writable after %ld ms", w);
    cr_expect_eq(h_out_long(&r, "sent", -1), 1, "%s", r.out);
    cr_assert_eq(h_server_wait(&srv, "CONN", 2, 5), 2);
    char line[512], f[80];
    double t[2];
    for (int i = 0; i < 2; i++)
        t[i] = atof(h_field(h_server_line(&srv, "CONN", i, line, sizeof line),
                            1, f, sizeof f));
    cr_expect_geq(t[1] > t[0] ? t[1] - t[0] : t[0] - t[1], 0.9,
                  "the two arrived %.3f s apart", t[1] - t[0]);
}
