/* The program's stack (issue 19 item 9): a thread with a 64 KB stack
 * under a guard page makes sends (send, write, writev, sendmsg, sendto),
 * connects (blocking, non-blocking, MSG_FASTOPEN) and waits (poll) under
 * the shim, in fail mode, in delay mode, blocking and non-blocking. It
 * must not overflow (a SIGSEGV on the guard page), and the stack the
 * sends and connects use beyond what the same program uses bare (the
 * control: the same helper without the shim, in the same run) stays
 * within the 4 KB the shim may take from the program's stack. The stack
 * is painted and the deepest byte changed is read back (smallstack.c);
 * static TLS, which glibc carves from the same mapping, counts too. */
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

TestSuite(stack, .init = setup, .fini = teardown, .timeout = 120);

/* The shim's share of the program's stack; twice that under ASan, whose
 * frames carry a redzone around every local array (the same code took
 * 280 bytes here and 6216 under ASan). */
#define SHIM_STACK_MAX 4096

static long stack_max(void)
{
    const char *san = getenv("RLSHIM_SANITIZER");
    return san != NULL && san[0] != '\0' ? 2 * SHIM_STACK_MAX
                                          : SHIM_STACK_MAX;
}

static long used(bool preload, const char *waits, long *sent)
{
    char prog[512], port[16];
    snprintf(port, sizeof port, "%d", srv.port);
    char *argv[] = {(char *)h_helper("smallstack", prog, sizeof prog), port,
                    "64", (char *)waits, NULL};
    h_run(&r, preload, 60, argv);
    cr_assert_eq(r.status, 0,
                 "smallstack %s %s: status %d (139: the stack overflowed "
                 "into its guard page)",
                 preload ? "under the shim" : "bare", waits, r.status);
    long u = h_out_long(&r, "stack_used", -1);
    cr_assert_gt(u, 0);
    *sent = h_out_long(&r, "sent", -1);
    return u;
}

static void check(const char *mode)
{
    h_config_write("[rlshim]\non_deny = %s\nmax_delay = 50ms\n"
                   "[default]\nto = 127.0.0.1:%d\nsend = 100/s\n"
                   "send_bytes = 20KiB/s\nconnect = 5/s\n",
                   mode, srv.port);
    long bare_sent, sent;
    long control = used(false, "nowait", &bare_sent);
    long shim = used(true, "nowait", &sent);
    /* The budgets bound: the decisions ran (denials and delays too). */
    cr_expect_lt(sent, bare_sent, "%s: nothing was throttled", mode);
    cr_expect_leq(shim - control, stack_max(),
                  "%s: sends and connects took %ld bytes of stack beyond "
                  "the program's own %ld",
                  mode, shim - control, control);
    /* With the wait calls too: no overflow in 64 KB. */
    (void)used(true, "all", &sent);
}

Test(stack, fail_mode_fits_a_64k_thread)
{
    check("fail");
}

Test(stack, delay_mode_fits_a_64k_thread)
{
    check("delay");
}
