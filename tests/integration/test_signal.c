/* Sends from a signal handler (issue 19 item 4): 10,000 signals whose
 * handler sends on a covered TCP socket while the program's thread loops
 * in malloc/free (and now and then sends itself, so that some signals
 * land inside the shim). The program must finish (a handler that took
 * the full decision path could deadlock on malloc's lock, a mutex or
 * stdio that the interrupted frame holds), and every budget of the call
 * must hold, counted at the receiving server: the user's rule, a site,
 * a site's per-destination budget. */
#include "harness.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "../redis_server.h"

static struct server srv;
static struct run r;
static struct redis R;

static void setup(void)
{
    h_setup();
    h_server_start(&srv, "sink.py");
    memset(&R, 0, sizeof R);
}

static void teardown(void)
{
    redis_kill(&R);
    h_server_stop(&srv);
    h_teardown();
}

TestSuite(signal, .init = setup, .fini = teardown, .timeout = 120);

#define NSIG_SENT "10000"
#define RATE 200.0 /* per second, burst one second's worth */

/* Run sigsend with `how`; the bytes the server got must fit a budget of
 * RATE a second (burst RATE) over the run's wall time. */
/* handler_goes: sends from the handler must go (1), none may (0), or
 * either (-1). */
static void run_and_check_as(const char *how, const char *quiet,
                             int handler_goes)
{
    char prog[512], port[16];
    snprintf(port, sizeof port, "%d", srv.port);
    char *argv[] = {(char *)h_helper("sigsend", prog, sizeof prog), port,
                    NSIG_SENT, (char *)how, (char *)quiet, NULL};
    h_run(&r, true, 30, argv);
    cr_assert_eq(r.status, 0,
                 "sigsend %s: status %d (-1: no end within 30 s, a deadlock)",
                 how, r.status);
    cr_assert_eq(h_server_wait(&srv, "CONN", 1, 5), 1);
    char line[512], f[64];
    h_server_line(&srv, "CONN", 0, line, sizeof line);
    long got = strtol(h_field(line, 3, f, sizeof f), NULL, 10);
    long hok = h_out_long(&r, "handler_ok", -1);
    long mok = h_out_long(&r, "main_ok", -1);
    long handled = h_out_long(&r, "handled", -1);
    cr_expect_eq(h_out_long(&r, "old_is_ours", -1), 1,
                 "the old action was not the program's own handler");
    cr_expect_eq(got, hok + mok, "server got %ld, the program sent %ld + %ld",
                 got, hok, mok);
    if (handler_goes == 1)
        cr_expect_gt(hok, 0, "no send from the handler went (of %ld handled)",
                     handled);
    else if (handler_goes == 0)
        cr_expect_eq(hok, 0, "%ld sends from the handler went", hok);
    cr_expect_gt(handled, 1000, "only %ld signals handled", handled);
    double allowed = RATE + RATE * r.wall;
    cr_expect_leq((double)got, allowed,
                  "%s: the server got %ld bytes in %.2f s: over %.0f "
                  "(handler %ld, main %ld)",
                  how, got, r.wall, allowed, hok, mok);
}

static void run_and_check(const char *how)
{
    run_and_check_as(how, NULL, 1);
}

Test(signal, the_rule_holds_for_handler_sends)
{
    h_config_write("[default]\nto = 127.0.0.1:%d\nsend = 200/s\n", srv.port);
    run_and_check("info");
}

Test(signal, a_site_holds_for_handler_sends)
{
    h_config_write("[default]\nto = 127.0.0.1:%d\nsend = 100000/s\n"
                   "[site:here]\nto = 127.0.0.1:%d\nsend = 200/s\n",
                   srv.port, srv.port);
    run_and_check("plain");
}

Test(signal, a_per_destination_budget_holds_for_handler_sends)
{
    h_config_write("[default]\nto = 127.0.0.1:%d\nsend = 100000/s\n"
                   "[site:here]\nto = 127.0.0.1:%d\nper = destination\n"
                   "send = 200/s\n",
                   srv.port, srv.port);
    run_and_check("reset");
}

Test(signal, delay_mode_fails_at_once_in_a_handler)
{
    h_config_write("[rlshim]\non_deny = delay\nmax_delay = 30s\n"
                   "[default]\nto = 127.0.0.1:%d\nsend = 200/s\n"
                   "[site:here]\nto = 127.0.0.1:%d\nsend = 200/s\n",
                   srv.port, srv.port);
    /* The program sends only once (in delay mode its own sends may keep
     * the buckets reserved ahead, leaving a handler nothing free now):
     * the handler's sends go while tokens are free, and are denied at
     * once after, never slept for (the run ends in its bound). */
    run_and_check_as("info", "quiet", 1);
}

/* scope = fleet: a handler spends only units the host already holds as
 * its lease of the fleet budget (none in Redis's name is ever admitted
 * from a handler), else it is denied as fail mode would. The fleet's
 * budget holds at the server whatever share the handler got. */
Test(signal, a_fleet_budget_holds_for_handler_sends)
{
    if (!redis_have())
        cr_skip_test("redis-server is not installed");
    cr_assert(redis_start(&R), "redis-server did not start");
    h_config_write("[rlshim]\nfleet = redis://127.0.0.1:%d\n"
                   "[default]\nscope = fleet\nto = 127.0.0.1:%d\n"
                   "send = 200/s\n",
                   R.port, srv.port);
    /* What the handler gets is what the program's own sends left in the
     * host's lease (often nothing: they spend it first). */
    run_and_check_as("info", NULL, -1);
}

/* A site's fleet budget has no host lease: from a handler, denied. */
Test(signal, a_site_fleet_budget_holds_for_handler_sends)
{
    if (!redis_have())
        cr_skip_test("redis-server is not installed");
    cr_assert(redis_start(&R), "redis-server did not start");
    h_config_write("[rlshim]\nfleet = redis://127.0.0.1:%d\n"
                   "[default]\nto = 127.0.0.1:%d\nsend = 100000/s\n"
                   "[site:here]\nto = 127.0.0.1:%d\nscope = fleet\n"
                   "send = 200/s\n",
                   R.port, srv.port, srv.port);
    run_and_check_as("plain", NULL, 0);
}

/* A connect from a handler: charged to the rule's connect budget (it
 * passed uncharged when the handler interrupted the shim), counted as
 * connections at the server. */
Test(signal, the_connect_budget_holds_for_handler_connects)
{
    /* A send limit too: the program's own sends go into the shim, where
     * some signals land. */
    h_config_write("[default]\nto = 127.0.0.1:%d\nconnect = 20/s\n"
                   "send = 100000/s\n",
                   srv.port);
    char prog[512], port[16];
    snprintf(port, sizeof port, "%d", srv.port);
    char *argv[] = {(char *)h_helper("sigsend", prog, sizeof prog), port,
                    "2000", "connect", NULL};
    h_run(&r, true, 30, argv);
    cr_assert_eq(r.status, 0, "sigsend connect: status %d (-1: a deadlock)",
                 r.status);
    long hok = h_out_long(&r, "handler_ok", -1);
    /* The program's own connection, and the handler's. */
    cr_assert_eq(h_server_wait(&srv, "CONN", (int)hok + 1, 5), hok + 1);
    cr_expect_gt(hok, 0, "no connect from the handler went");
    double allowed = 20 + 20 * r.wall;
    cr_expect_leq((double)hok + 1, allowed,
                  "%ld connections in %.2f s: over %.0f", hok + 1, r.wall,
                  allowed);
}

/* A connect from a handler with a request limit set (issue 31 item 10):
 * the connection whose requests are counted is not made in the handler
 * (it allocates, and the interrupted thread may be inside malloc), so
 * 10,000 signals whose handler connects and closes while the program's
 * thread loops in malloc/free all end. The handler connects to a port
 * nobody listens on (refused at once: no server has to keep up); the
 * program's own connection is to the sink, an HTTP one whose sends go
 * into the shim, where some signals land. Measured against the same
 * program without the shim: a deadlock never ends (status -1 at the
 * run's bound), and a run that ends takes a few times the bare run at
 * most. */
static struct run bare;

Test(signal, a_handler_connect_with_a_request_limit_does_not_deadlock)
{
    h_config_write("[default]\nrequest = 100/s\n");
    char prog[512], port[16], closed[16];
    snprintf(port, sizeof port, "%d", srv.port);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof sa;
    cr_assert(fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0 &&
              getsockname(fd, (struct sockaddr *)&sa, &len) == 0);
    close(fd); /* bound, never listened on: a connect to it is refused */
    snprintf(closed, sizeof closed, "%d", ntohs(sa.sin_port));
    char *argv[] = {(char *)h_helper("sigsend", prog, sizeof prog), port,
                    NSIG_SENT, "connect", "-", closed, NULL};
    h_run(&bare, false, 60, argv);
    cr_assert_eq(bare.status, 0, "sigsend bare: status %d", bare.status);
    h_run(&r, true, 60, argv);
    cr_assert_eq(r.status, 0,
                 "sigsend connect, request limit: status %d (-1: no end "
                 "within 60 s, a deadlock); the bare run took %.2f s",
                 r.status, bare.wall);
    long handled = h_out_long(&r, "handled", -1);
    cr_expect_gt(handled, 1000, "only %ld signals handled", handled);
    cr_expect_gt(h_out_long(&r, "main_ok", -1), 0, "%s", r.out);
    cr_expect_lt(r.wall, 4 * bare.wall, "%.2f s under the shim, %.2f s bare",
                 r.wall, bare.wall);
    cr_log_info("handler connects: %.2f s under the shim, %.2f s bare, "
                "%ld signals handled",
                r.wall, bare.wall, handled);
}

/* The connection a handler's connect left to be made later is made at
 * the program's first send outside the handler: its requests are
 * counted from the first. A budget of 2 requests: of 5 sent, 2 reach the
 * server (bytes at the sink), 3 are refused. */
Test(signal, a_handler_connects_requests_are_counted_from_the_first)
{
    h_config_write("[default]\nrequest = 1/min\nrequest_burst = 2\n");
    char prog[512], port[16];
    snprintf(port, sizeof port, "%d", srv.port);
    char *argv[] = {(char *)h_helper("sigsend", prog, sizeof prog), port, "5",
                    "late", NULL};
    h_run(&r, true, 30, argv);
    cr_assert_eq(r.status, 0, "sigsend late: status %d\n%s", r.status, r.out);
    cr_assert_eq(h_out_long(&r, "handler_ok", -1), 1, "%s", r.out);
    cr_expect_eq(h_out_long(&r, "late_ok", -1), 2, "%s", r.out);
    cr_expect_eq(h_out_long(&r, "late_denied", -1), 3, "%s", r.out);
    /* The program's own connection (no bytes) and the handler's. */
    cr_assert_eq(h_server_wait(&srv, "CONN", 2, 5), 2);
    long len = h_out_long(&r, "req_len", -1), bytes = 0;
    for (int i = 0; i < 2; i++) {
        char line[512], f[64];
        h_server_line(&srv, "CONN", i, line, sizeof line);
        bytes += strtol(h_field(line, 3, f, sizeof f), NULL, 10);
    }
    cr_expect_eq(bytes, 2 * len, "the server got %ld bytes: %ld requests",
                 bytes, len > 0 ? bytes / len : -1);
}
