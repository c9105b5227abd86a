/* pause_arrivals.h — what reached the server around a 429 with
 * Retry-After: 3 (tests/integration/servers/http_status.py's stamps), and
 * the split-connection client both pause suites drive
 * (clients/split_conn.py). */
#ifndef RLSHIM_TEST_PAUSE_ARRIVALS_H
#define RLSHIM_TEST_PAUSE_ARRIVALS_H

#include <stdio.h>
#include <string.h>

#include "harness.h"

/* The server's n requests, one of them answered 429 with Retry-After: 3,
 * by the server's own clock: none arrived inside the pause. The client
 * read the 429 after the server stamped it, so an arrival earlier than
 * 3 s after it is inside the pause (less 50 ms for the stamps); a slow
 * machine only makes arrivals later. t[] gets the stamps in the order
 * they arrived (n at most 16), *t429 the 429's, times[400] them as text
 * relative to it; `label` starts the log line. */
H_FN void expect_none_inside_the_pause(struct server *sv, int n,
                                       const char *label, double *t,
                                       double *t429, char *times)
{
    char line[512];
    size_t tl = 0;
    *t429 = -1;
    times[0] = '\0';
    cr_assert_leq(n, 16);
    for (int i = 0; i < n; i++) {
        int status = 0;
        h_server_line(sv, "REQ", i, line, sizeof line);
        cr_assert_eq(sscanf(line, "REQ %lf %*s %*s %d", &t[i], &status), 2,
                     "%s", line);
        if (status == 429)
            *t429 = t[i];
    }
    cr_assert_geq(*t429, 0, "no 429 was answered");
    for (int i = 1; i < n; i++) /* in the order they arrived */
        for (int k = i; k > 0 && t[k] < t[k - 1]; k--) {
            double x = t[k];
            t[k] = t[k - 1];
            t[k - 1] = x;
        }
    int inside = 0;
    for (int i = 0; i < n; i++) {
        tl += (size_t)snprintf(times + tl, 400 - tl, " %+.3f", t[i] - *t429);
        if (t[i] > *t429 && t[i] - *t429 < 3 - 0.05)
            inside++;
    }
    cr_log_info("%sarrivals after the 429 (s):%s", label, times);
    cr_expect_eq(inside, 0, "%d requests reached the server inside the "
                            "3 s pause (at%s s)",
                 inside, times);
}

/* clients/split_conn.py in `mode` against sv: six GETs on one
 * connection, the 2nd answered 429 with Retry-After: 3; all six reach the
 * server and the reader reads all six answers. */
H_FN void split_conn_run(struct run *r, struct server *sv, const char *mode)
{
    char port[16], script[512];
    snprintf(port, sizeof port, "%d", sv->port);
    snprintf(script, sizeof script,
             "%s/tests/integration/clients/split_conn.py",
             h_env("RLSHIM_SRC"));
    char *argv[] = {"/usr/bin/python3", script, port, (char *)mode, "/ok/0",
                    "/s/429/3", "/ok/2", "/ok/3", "/ok/4", "/ok/5", NULL};
    h_run(r, true, 50, argv);
    cr_assert_eq(r->status, 0, "python: status %d\n%s", r->status, r->out);
    cr_assert_eq(h_server_wait(sv, "REQ", 6, 5), 6, "%s", r->out);
    int answers = 0;
    for (const char *p = r->out; (p = strstr(p, "RESP ")) != NULL; p++)
        answers++;
    cr_expect_eq(answers, 6, "the reader read %d answers of 6\n%s", answers,
                 r->out);
}

#endif
