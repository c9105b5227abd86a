/* Sends from a signal handler (issue 19 item 4): 10,000 signals whose
 * handler sends on a covered TCP socket while the program's thread loops
 * in malloc/free (and now and then sends itself, so that some signals
 * land inside the shim). The program must finish (a handler that took
 * the full decision path could deadlock on malloc's lock, a mutex or
 * stdio that the interrupted frame holds), and every budget of the call
 * must hold, counted at the receiving server: the user's rule, a site,
 * a site's per-destination budget. */
#include "harness.h"

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
