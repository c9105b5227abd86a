/* An answer the program has not read yet still pauses what waits behind
 * it (SPEC §12), measured at the server (tests/integration/servers/
 * http_status.py, plaintext and TLS). The client guards its one
 * connection with one lock, as httpcore's HTTP/2 connection does: the
 * writer sends its requests holding it (waiting in the shim for each
 * turn, in delay mode), and the reader takes it before each read, or
 * (httpcore's reader, which must write its acknowledgements) after each
 * read. While the writer waits, nothing of the program reads, so a 429
 * with Retry-After that came meanwhile is heard only if the waiting
 * write looks at what the server sent: a peek of the socket (plaintext),
 * or a read of the TLS session (OpenSSL) held for the program's reads,
 * made while no read of the program is under way; what a look saw is
 * read once. The client: clients/split_conn.py. */
#include "harness.h"
#include "pause_arrivals.h"

static struct server st;
static struct run r;

static void setup(void)
{
    h_setup();
}

static void teardown(void)
{
    h_server_stop(&st);
    h_teardown();
}

TestSuite(read_ahead, .init = setup, .fini = teardown, .timeout = 90);

/* Six requests at 2 a second on one connection, the second answered 429
 * with Retry-After: 3 while the writer waits for the third's turn: none
 * reaches the server inside the pause, every answer is read, and the 429
 * is heard once (its bytes read ahead, then by the program: not twice).
 * `after`: the reader takes the lock after each read, not before. */
static void locked(bool tls, bool after)
{
    if (tls) {
        setenv("RL_TLS", "1", 1);
        h_server_start(&st, "http_status.py");
        unsetenv("RL_TLS");
    } else {
        h_server_start(&st, "http_status.py");
    }
    char log[300];
    snprintf(log, sizeof log, "%s/decisions.jsonl", h_dir);
    h_config_write("[rlshim]\non_deny = delay\nmax_delay = 30s\n"
                   "decision_log = %s\n"
                   "[default]\nrequest = 2/s\nrequest_burst = 1\n",
                   log);
    char mode[16];
    snprintf(mode, sizeof mode, "%s%s", tls ? "tls-" : "",
             after ? "after" : "before");
    split_conn_run(&r, &st, mode);
    char label[40], times[400];
    snprintf(label, sizeof label, "%s, lock %s reads: ", tls ? "TLS" : "plain",
             after ? "after" : "before");
    double t[16], t429;
    expect_none_inside_the_pause(&st, 6, label, t, &t429, times);
    int heard = h_file_lines(log, "\"verdict\":\"pause\"");
    cr_expect_eq(heard, 1, "the 429 was heard %d times", heard);
    int held = h_file_lines(log, "\"reason\":\"retry_after\"") - heard;
    cr_expect_geq(held, 1, "no decision says the pause held a request");
}

Test(read_ahead, plaintext_read_under_the_writers_lock)
{
    locked(false, false);
}

Test(read_ahead, plaintext_acknowledged_under_the_writers_lock)
{
    locked(false, true);
}

/* Over TLS the look shows the first record the program has not read:
 * httpcore's shape, whose reader read what came before the 429 and then
 * waits for the lock. */
Test(read_ahead, tls_acknowledged_under_the_writers_lock)
{
    locked(true, true);
}

/* The whole lock, over TLS: the look reads what the session has for the
 * program (the first answer, then the 429) and holds it for the
 * program's reads. */
Test(read_ahead, tls_read_under_the_writers_lock)
{
    locked(true, false);
}
