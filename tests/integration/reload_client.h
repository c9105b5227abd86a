/* reload_client.h — what the reload suites share: the client that
 * connects at a steady pace while a test edits its config, and the
 * counts at the server by window of time. */
#ifndef RLSHIM_TEST_RELOAD_CLIENT_H
#define RLSHIM_TEST_RELOAD_CLIENT_H

#include <pthread.h>
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

/* Runs python `script` (PORT SECS) against server s for `secs` seconds
 * while thread `editor` edits the config, into *r; then waits for the
 * server's last stamps. */
H_FN void reload_run(struct run *r, const struct server *s,
                     const char *script, double secs,
                     void *(*editor)(void *))
{
    char port[16], sec[16];
    snprintf(port, sizeof port, "%d", s->port);
    snprintf(sec, sizeof sec, "%.1f", secs);
    char *argv[] = {"python3", "-c", (char *)script, port, sec, NULL};
    pthread_t ed;
    cr_assert_eq(pthread_create(&ed, NULL, editor, NULL), 0);
    h_run(r, true, 40, argv);
    pthread_join(ed, NULL);
    cr_assert_eq(r->status, 0, "status %d\n%s", r->status, r->out);
    usleep(300000);
}

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
