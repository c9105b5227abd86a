/* reload_client.h — what the reload suites share: the client that
 * connects at a steady pace while a test edits its config, and the
 * counts at the server by window of time. */
#ifndef RLSHIM_TEST_RELOAD_CLIENT_H
#define RLSHIM_TEST_RELOAD_CLIENT_H

#include <unistd.h>

#include "harness.h"

/* Connects every 50 ms until argv[2] seconds after its start, then exits;
 * prints its start (CLOCK_MONOTONIC, as the server stamps). A denied
 * connect is an OSError and counted, nothing more. */
static const char *const reload_loop_py =
    "import socket, sys, time\n"
    "port = int(sys.argv[1]); secs = float(sys.argv[2])\n"
    "t0 = time.monotonic()\n"
    "print('t0=%d' % int(t0 * 1e6), flush=True)\n"
    "ok = denied = 0\n"
    "while time.monotonic() < t0 + secs:\n"
    "    try:\n"
    "        socket.create_connection(('127.0.0.1', port)).close()\n"
    "        ok += 1\n"
    "    except OSError:\n"
    "        denied += 1\n"
    "    time.sleep(0.05)\n"
    "print('ok=%d\\ndenied=%d' % (ok, denied), flush=True)\n";

H_FN void sleep_until(double t)
{
    while (h_now() < t)
        usleep(5000);
}

/* Connections server s accepted between t0 + a and t0 + b. */
H_FN int conns_between(const struct server *s, double t0, double a, double b)
{
    int n = h_server_count(s, "CONN"), in = 0;
    char line[512];
    for (int i = 0; i < n; i++) {
        double t = atof(h_server_line(s, "CONN", i, line, sizeof line) + 5);
        in += t >= t0 + a && t < t0 + b;
    }
    return in;
}

#endif
