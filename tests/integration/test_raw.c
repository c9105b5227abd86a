/* Raw calls and marks: syscall() takes the named calls' path, io_uring is
 * refused under a rule, a socket gets a fresh mark whatever the shim
 * missed, an inherited connection is charged, and the first calls of many
 * threads are decided exactly while the shim sets itself up. Measured at
 * a sink server (TCP and UDP on one port). */
#include "harness.h"

static struct server sink, other;
static struct run r;

static void setup(void)
{
    h_setup();
    h_server_start(&sink, "sink.py");
    h_server_start(&other, "sink.py");
}

static void teardown(void)
{
    h_server_stop(&sink);
    h_server_stop(&other);
    h_teardown();
}

TestSuite(raw, .init = setup, .fini = teardown, .timeout = 30);

/* Run `client MODE PORT ARGS...`, with the shim or bare. */
static void client_as(bool preload, const char *mode, const char *a1,
                      const char *a2)
{
    char bin[512], port[16];
    snprintf(port, sizeof port, "%d", sink.port);
    char *argv[] = {(char *)h_helper("client", bin, sizeof bin),
                    (char *)mode,
                    port,
                    (char *)a1,
                    (char *)a2,
                    NULL};
    h_run(&r, preload, 20, argv);
    cr_assert_eq(r.status, 0, "client %s: status %d\n%s", mode, r.status,
                 r.out);
}

static void client(const char *mode, const char *a1, const char *a2)
{
    client_as(true, mode, a1, a2);
}

static long out(const char *key)
{
    long v = h_out_long(&r, key, -999);
    cr_assert_neq(v, -999, "no %s in:\n%s", key, r.out);
    return v;
}

/* Bytes of the i-th TCP connection a sink saw. */
static long conn_bytes(const struct server *s, int i)
{
    char line[512], f[80];
    cr_assert_geq(h_server_wait(s, "CONN", i + 1, 2), i + 1,
                  "the sink saw no connection %d", i);
    h_server_line(s, "CONN", i, line, sizeof line);
    return atol(h_field(line, 3, f, sizeof f));
}

static const char *other_port(void)
{
    static char p[16];
    snprintf(p, sizeof p, "%d", other.port);
    return p;
}

Test(raw, charges_a_syscall_connect_like_connect)
{
    h_config_write("[default]\nconnect = 1/h\nto = 127.0.0.1:%d\n", sink.port);
    client("rawconnect", NULL, NULL);
    cr_expect_eq(out("first_errno"), 0);
    cr_expect_eq(out("second_errno"), EAGAIN);
    cr_expect_eq(h_server_wait(&sink, "CONN", 1, 2), 1);
    usleep(300000);
    cr_expect_eq(h_server_count(&sink, "CONN"), 1, "a denied connect arrived");
}

Test(raw, charges_syscall_sends_like_the_named_calls)
{
    h_config_write("[default]\nsend_bytes = 1000/h\nto = 127.0.0.1:%d\n",
                   sink.port);
    client("rawsend", NULL, NULL);
    cr_expect_eq(out("write"), 600);
    cr_expect_eq(out("sendto"), 400, "a short write at the budget");
    cr_expect_eq(out("writev"), -1);
    cr_expect_eq(out("writev_errno"), EAGAIN);
    cr_expect_eq(out("sendmsg"), -1);
    cr_expect_eq(out("sendmsg_errno"), EAGAIN);
    cr_expect_eq(out("sendmmsg"), -1);
    cr_expect_eq(out("sendmmsg_errno"), EAGAIN);
    cr_expect_eq(conn_bytes(&sink, 0), 1000);
}

Test(raw, forgets_and_copies_marks_through_syscall_close_and_dup)
{
    h_config_write("[default]\nsend_bytes = 1/h\nto = 127.0.0.1:%d\n",
                   sink.port);
    client("rawclose", h_dir, NULL);
    cr_expect_eq(out("control_first"), 1);
    cr_expect_eq(out("control_second"), -1);
    cr_expect_eq(out("close"), 100000);
    cr_expect_eq(out("close_range"), 100000);
    cr_expect_eq(out("dup_marked"), 1);
    cr_expect_eq(out("dup3_marked"), 1);
}

Test(raw, gives_every_new_socket_a_fresh_mark_whatever_the_shim_missed)
{
    h_config_write("[default]\nconnect = 2/h\nsend_bytes = 1/h\n"
                   "to = 127.0.0.1:%d\n",
                   sink.port);
    client("stale", other_port(), NULL);
    cr_expect_eq(out("raw_connect_errno"), 0);
    cr_expect_eq(out("first"), 1);
    cr_expect_eq(out("second"), -1);
    cr_expect_eq(out("same_fd"), 1, "the number was not reused: vacuous");
    cr_expect_eq(out("other_errno"), 0);
    cr_expect_eq(out("free"), 100000, "a stale mark charged a new socket");
    cr_expect_eq(out("next_connect_errno"), EAGAIN,
                 "the inline socket's connect was not charged");
    cr_expect_eq(conn_bytes(&other, 0), 100000);
}

Test(raw, gives_accepted_and_paired_sockets_a_fresh_mark)
{
    h_config_write("[default]\nsend_bytes = 1/h\nto = 127.0.0.1:%d\n",
                   sink.port);
    client("freshaccept", NULL, NULL);
    cr_expect_eq(h_out_long(&r, "budget_not_spent", 0), 0);
    cr_expect_eq(out("accept_same_fd"), 1, "not the stale number: vacuous");
    cr_expect_eq(out("accepted"), 2000, "a stale mark charged accept's fd");
    cr_expect_eq(out("pair_same_fd"), 1, "not the stale number: vacuous");
    cr_expect_eq(out("pair_first"), 3);
    cr_expect_eq(out("pair_second"), 3);
}

Test(raw, charges_an_inherited_connection_from_its_first_send)
{
    h_config_write("[default]\nsend_bytes = 10/h\nto = 127.0.0.1:%d\n",
                   sink.port);
    client("inherit", other_port(), NULL);
    cr_expect_eq(out("first"), 10);
    cr_expect_eq(out("second"), -1);
    cr_expect_eq(out("second_errno"), EAGAIN);
    cr_expect_eq(out("other"), 100000, "an uncovered peer was charged");
    cr_expect_eq(conn_bytes(&sink, 0), 10);
    cr_expect_eq(conn_bytes(&other, 0), 100000);
}

/* io_uring_setup's errno in a bare run: what the kernel says. */
static long bare_io_uring_errno(void)
{
    client_as(false, "iouring", NULL, NULL);
    long e = out("iouring_errno");
    if (e == ENOSYS)
        cr_skip_test("this kernel has no io_uring (ENOSYS bare): the "
                     "shim's ENOSYS cannot be told apart");
    return e;
}

Test(raw, answers_enosys_to_io_uring_setup_while_a_rule_applies)
{
    long bare = bare_io_uring_errno();
    h_config_write("[default]\nconnect = 1/h\nto = 127.0.0.1:%d\n", sink.port);
    client("iouring", NULL, NULL);
    cr_expect_eq(out("iouring_errno"), ENOSYS, "bare: %ld", bare);
    h_config_write("[rlshim]\nio_uring = allow\n"
                   "[default]\nconnect = 1/h\nto = 127.0.0.1:%d\n",
                   sink.port);
    client("iouring", NULL, NULL);
    cr_expect_eq(out("iouring_errno"), bare, "io_uring = allow");
}

Test(raw, leaves_io_uring_alone_when_no_rule_applies)
{
    long bare = bare_io_uring_errno();
    h_config_write("[user:nobody-here]\nconnect = 1/h\n");
    client("iouring", NULL, NULL);
    cr_expect_eq(out("iouring_errno"), bare);
}

Test(raw, decides_the_first_calls_of_many_threads_exactly)
{
    h_config_write("[default]\nconnect = 3/h\nto = 127.0.0.1:%d\n", sink.port);
    client("firstcalls", "16", NULL);
    cr_expect_eq(out("ok"), 3);
    cr_expect_eq(out("denied"), 13);
    cr_expect_eq(h_server_wait(&sink, "CONN", 3, 2), 3);
    usleep(300000);
    cr_expect_eq(h_server_count(&sink, "CONN"), 3);
}
