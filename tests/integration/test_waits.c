/* The wait calls with timeouts at the edge of their range (SPEC §2: a
 * wait call never returns empty before the caller's own timeout because
 * of the shim). A timeout of 2^62 s is for ever, practically: times 10^9
 * it wraps to 0 in 64 bits, and the call must not take that for "now". */
#include "harness.h"

static struct server srv;
static struct run r;

static void setup(void)
{
    h_setup();
    h_server_start(&srv, "sink.py");
}

static void teardown(void)
{
    h_server_stop(&srv);
    h_teardown();
}

TestSuite(waits, .init = setup, .fini = teardown, .timeout = 60);

/* `send = 4/s`: after the burst a denied send holds the socket for about
 * a quarter of a second. Each call first shows it held (a zero timeout:
 * not writable), then waits 2^62 s and is woken at the socket's turn,
 * writable. */
Test(waits, a_timeout_of_2_62_seconds_waits_for_the_turn)
{
    h_config_write("[default]\nsend = 4/s\nto = 127.0.0.1:%d\n", srv.port);
    const char *calls[] = {"ppoll", "select", "pselect", "epoll_pwait2"};
    char helper[512], port[16];
    snprintf(port, sizeof port, "%d", srv.port);
    h_helper("hugewait", helper, sizeof helper);
    char *argv[] = {helper, port,
                    "ppoll", "select", "pselect", "epoll_pwait2", NULL};
    h_run(&r, true, 30, argv);
    cr_assert_eq(r.status, 0, "status %d: %s", r.status, r.out);
    for (size_t i = 0; i < sizeof calls / sizeof *calls; i++) {
        char want[64];
        snprintf(want, sizeof want, "%s held=", calls[i]);
        const char *line = strstr(r.out, want);
        cr_assert_not_null(line, "no line for %s: %s", calls[i], r.out);
        int held, huge, writable;
        double ms;
        cr_assert_eq(sscanf(line + strlen(want), "%d huge=%d writable=%d ms=%lf",
                            &held, &huge, &writable, &ms),
                     4, "%s", line);
        cr_expect_eq(held, 0, "%s: the socket was not held: %s", calls[i],
                     line);
        cr_expect_eq(huge, 1, "%s returned %d (0: at once, empty): %s",
                     calls[i], huge, line);
        cr_expect_eq(writable, 1, "%s: not woken writable: %s", calls[i],
                     line);
    }
}

/* The wait calls' slow path (a held socket) on a thread with a 64 KiB
 * stack: each uses at most 4 KiB of it more than the fast path does (the
 * control, the same call on the same thread before any hold). */
Test(waits, a_held_wait_takes_at_most_4_KiB_of_the_stack)
{
    h_config_write("[default]\nsend = 4/s\nto = 127.0.0.1:%d\n", srv.port);
    char helper[512], port[16];
    snprintf(port, sizeof port, "%d", srv.port);
    h_helper("stackdepth", helper, sizeof helper);
    char *argv[] = {helper, port, NULL};
    h_run(&r, true, 30, argv);
    cr_assert_eq(r.status, 0, "status %d: %s", r.status, r.out);
    long control = h_out_long(&r, "control", -1);
    cr_assert_gt(control, 0, "%s", r.out);
    cr_expect_eq(h_out_long(&r, "fails", -1), 0,
                 "a wait did not report the socket: %s", r.out);
    const char *calls[] = {"poll", "select", "epoll"};
    for (size_t i = 0; i < 3; i++) {
        long b = h_out_long(&r, calls[i], -1);
        cr_assert_gt(b, 0, "no %s line: %s", calls[i], r.out);
        cr_log_info("%s: %ld bytes of stack, %ld for the control", calls[i],
                    b, control);
        cr_expect_leq(b - control, 4096,
                     "%s used %ld bytes of stack held, %ld not: %s", calls[i],
                     b, control, r.out);
    }
}
