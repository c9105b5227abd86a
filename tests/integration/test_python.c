/* python3 urllib from 16 threads in delay mode: the connect rate holds
 * across threads, and no request fails. */
#include "harness.h"

static struct server srv;
static struct run r, ctl;

static void setup(void)
{
    h_setup();
    h_server_start(&srv, "http_count.py");
}

static void teardown(void)
{
    h_server_stop(&srv);
    h_teardown();
}

TestSuite(python, .init = setup, .fini = teardown, .timeout = 30);

/* 16 threads request in a loop for 3 s; then the process exits at once
 * (requests still asleep in the shim never happen). Errors go to stdout,
 * so that a failed assertion shows them. Prints its start on
 * CLOCK_MONOTONIC (the server stamps with the same clock), then the
 * counts. With a second argument N, the threads stop after N requests in
 * all: the control does the throttled run's work, no more. */
static const char *threads_py =
    "import os, sys, threading, time, urllib.request\n"
    "url = sys.argv[1]\n"
    "most = int(sys.argv[2]) if len(sys.argv) > 2 else 1 << 30\n"
    "t0 = time.monotonic()\n"
    "print('t0=%d' % int(t0 * 1e6), flush=True)\n"
    "ok = [0]; err = [0]; lock = threading.Lock(); started = [0]\n"
    "def run():\n"
    "    while time.monotonic() < t0 + 3:\n"
    "        with lock:\n"
    "            if started[0] >= most: break\n"
    "            started[0] += 1\n"
    "        try:\n"
    "            urllib.request.urlopen(url, timeout=10).read()\n"
    "            with lock: ok[0] += 1\n"
    "        except Exception as e:\n"
    "            with lock: err[0] += 1\n"
    "            print('error: %r' % e, flush=True)\n"
    "for i in range(16):\n"
    "    threading.Thread(target=run, daemon=True).start()\n"
    "time.sleep(max(0, t0 + 3 - time.monotonic()))\n"
    "with lock:\n"
    "    print('ok=%d\\nerrors=%d' % (ok[0], err[0]), flush=True)\n"
    "os._exit(0)\n";

Test(python, urllib_threads_get_ten_plus_ten_per_second_in_delay_mode)
{
    h_config_write("[rlshim]\non_deny = delay\n"
                   "[default]\nconnect = 10/s\nto = 127.0.0.1:%d\n",
                   srv.port);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/", srv.port);
    char *argv[] = {"python3", "-c", (char *)threads_py, url, NULL};
    h_run(&r, true, 20, argv);
    cr_assert_eq(r.status, 0, "status %d\n%s", r.status, r.out);
    cr_expect_eq(h_out_long(&r, "errors", -1), 0, "%s", r.out);
    double t0 = (double)h_out_long(&r, "t0", 0) / 1e6;
    usleep(200000);
    /* Requests that reached the server within the 3 s. */
    int n = h_server_count(&srv, "");
    int in = 0;
    char line[512];
    for (int i = 0; i < n; i++)
        if (atof(h_server_line(&srv, "", i, line, sizeof line)) <= t0 + 3.0)
            in++;
    cr_expect(in >= 38 && in <= 42, "%d requests in 3 s (%d in all)", in, n);
    /* The control: the same 16 threads make the requests the throttled
     * run completed, unthrottled, and idle out the same 3 s. */
    char most[32];
    snprintf(most, sizeof most, "%ld", h_out_long(&r, "ok", 0));
    char *again[] = {"python3", "-c", (char *)threads_py, url, most, NULL};
    h_run_control(&ctl, 20, again);
    cr_expect_eq(h_out_long(&ctl, "ok", -1), h_out_long(&r, "ok", 0), "%s",
                 ctl.out);
    h_expect_no_spin(&r, &ctl, 0.1, "python urllib");
}
