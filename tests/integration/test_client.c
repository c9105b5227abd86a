/* The C client under the shim: each send path and connect case, measured
 * at a sink server (TCP and UDP on one port). */
#include "harness.h"

static struct server sink, other;
static struct run r, ctl;

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

TestSuite(client, .init = setup, .fini = teardown, .timeout = 30);

/* Run `client MODE PORT ARGS...` under the shim. */
static void client(const char *mode, const char *a1, const char *a2)
{
    char bin[512], port[16];
    snprintf(port, sizeof port, "%d", sink.port);
    char *argv[] = {(char *)h_helper("client", bin, sizeof bin),
                    (char *)mode,
                    port,
                    (char *)a1,
                    (char *)a2,
                    NULL};
    h_run(&r, true, 20, argv);
    cr_assert_eq(r.status, 0, "client %s: status %d\n%s", mode, r.status,
                 r.out);
}

static long out(const char *key)
{
    long v = h_out_long(&r, key, -999);
    cr_assert_neq(v, -999, "no %s in:\n%s", key, r.out);
    return v;
}

/* Bytes and sha256 of the i-th TCP connection the sink saw. */
static long conn_bytes(const struct server *s, int i, char sha[65])
{
    char line[512], f[80];
    cr_assert_geq(h_server_wait(s, "CONN", i + 1, 2), i + 1,
                  "the sink saw no connection %d", i);
    h_server_line(s, "CONN", i, line, sizeof line);
    if (sha != NULL)
        snprintf(sha, 65, "%s", h_field(line, 4, f, sizeof f));
    return atol(h_field(line, 3, f, sizeof f));
}

Test(client, fails_a_denied_nonblocking_connect_at_once_and_nothing_arrives)
{
    h_config_write("[default]\nconnect = 1/h\nto = 127.0.0.1:%d\n", sink.port);
    client("connects", "3", NULL);
    cr_expect_eq(out("ok"), 1);
    cr_expect_eq(out("denied"), 2);
    cr_expect_eq(out("other"), 0);
    /* At once: a denial that slept would sleep towards its turn (an hour
     * away) until max_delay (10 s, the default); a tenth of that tells the
     * two apart on any machine. */
    cr_expect_lt(out("deny_us"), 1000000, "a denial took %ld us",
                 out("deny_us"));
    cr_expect_eq(h_server_wait(&sink, "CONN", 1, 2), 1);
    usleep(300000);
    cr_expect_eq(h_server_count(&sink, "CONN"), 1, "a denied connect arrived");
}

Test(client, lets_the_burst_then_the_rate_of_sends_through_at_50_per_s_in_fail_mode)
{
    h_config_write("[default]\nsend = 50/s\nto = 127.0.0.1:%d\n", sink.port);
    client("sends", "80", "1000");
    long ok = out("calls_ok"), sent = out("sent");
    double secs = (double)out("elapsed_ms") / 1e3;
    cr_expect_eq(ok + out("denied"), 80);
    cr_expect_eq(out("other"), 0);
    cr_expect_geq(ok, 50);
    cr_expect_leq(ok, 50 + (long)(secs * 50) + 1, "%ld sends in %.3f s", ok,
                  secs);
    cr_expect_eq(sent, ok * 1000);
    cr_expect_eq(conn_bytes(&sink, 0, NULL), sent, "sent %ld", sent);
}

Test(client, sends_exactly_the_byte_budget_with_a_short_write)
{
    h_config_write("[default]\nsend_bytes = 10000/h\nto = 127.0.0.1:%d\n",
                   sink.port);
    client("sends", "20", "1500");
    cr_expect_eq(out("sent"), 10000);
    cr_expect_eq(out("calls_ok"), 7); /* 6 whole, then 1000 of 1500 */
    cr_expect_eq(out("denied"), 13);
    cr_expect_eq(conn_bytes(&sink, 0, NULL), 10000);
}

Test(client, gives_back_what_the_kernel_did_not_take)
{
    /* A sink that leaves the data unread for a while. */
    h_server_stop(&sink);
    setenv("SINK_PAUSE", "0.5", 1);
    h_server_start(&sink, "sink.py");
    unsetenv("SINK_PAUSE");
    h_config_write("[default]\nsend_bytes = 200000/h\nto = 127.0.0.1:%d\n",
                   sink.port);
    client("shortfill", "300000", NULL);
    cr_expect_gt(out("shorts"), 0, "the kernel never wrote short: vacuous");
    /* The bucket refills 55.6 B/s meanwhile. */
    long sent = out("sent"), refill = out("elapsed_ms") * 56 / 1000 + 1;
    cr_expect(sent >= 200000 && sent <= 200000 + refill, "sent %ld", sent);
    cr_expect_eq(conn_bytes(&sink, 0, NULL), sent);
}

Test(client, sleeps_instead_of_granting_crumbs_to_a_client_that_returns_fast)
{
    h_config_write("[rlshim]\non_deny = delay\n"
                   "[default]\nsend_bytes = 400KiB/s\nto = 127.0.0.1:%d\n",
                   sink.port);
    client("sendall", "1048576", NULL);
    cr_expect_eq(out("sent"), 1048576);
    /* 16 calls of 64 KiB; a few more for grants cut at 1/16 burst. */
    cr_expect_leq(out("calls"), 64, "%ld send calls", out("calls"));
    cr_expect_eq(conn_bytes(&sink, 0, NULL), 1048576);
    /* The same client and megabyte, nothing throttled. */
    char bin[512], port[16];
    snprintf(port, sizeof port, "%d", sink.port);
    char *argv[] = {(char *)h_helper("client", bin, sizeof bin), "sendall",
                    port, "1048576", NULL};
    h_run_control(&ctl, 20, argv);
    h_expect_no_spin(&r, &ctl, 0.1, "client sendall");
}

Test(client, charges_udp_sendto_to_a_covered_address_only)
{
    h_config_write("[default]\nsend = 3/h\nto = 127.0.0.1:%d\n", sink.port);
    char port2[16];
    snprintf(port2, sizeof port2, "%d", other.port);
    client("udp", port2, "10");
    cr_expect_eq(out("match_ok"), 3);
    cr_expect_eq(out("match_denied"), 7);
    cr_expect_eq(out("other_ok"), 10);
    cr_expect_eq(out("other_denied"), 0);
    cr_expect_eq(h_server_wait(&other, "DGRAM", 10, 2), 10);
    /* The sink's 3 may be logged after the other's 10: wait for them,
     * then a while for any beyond them. */
    cr_expect_eq(h_server_wait(&sink, "DGRAM", 3, 2), 3);
    usleep(200000);
    cr_expect_eq(h_server_count(&sink, "DGRAM"), 3);
}

Test(client, charges_named_sendmsg_and_sendmmsg_by_their_destinations)
{
    h_config_write("[default]\nsend = 3/h\nto = 127.0.0.1:%d\n", sink.port);
    char port2[16];
    snprintf(port2, sizeof port2, "%d", other.port);
    client("udpmsg", port2, NULL);
    cr_expect_eq(out("sendmsg1"), 1);
    /* 2 units left: matching, other (free), matching; the 4th is cut. */
    cr_expect_eq(out("sendmmsg"), 3);
    cr_expect_eq(out("sendmsg2"), -1);
    cr_expect_eq(out("sendmsg2_errno"), EAGAIN);
    cr_expect_eq(out("sendmsg_other"), 1);
    cr_expect_eq(h_server_wait(&sink, "DGRAM", 3, 2), 3);
    cr_expect_eq(h_server_wait(&other, "DGRAM", 2, 2), 2);
    usleep(200000);
    cr_expect_eq(h_server_count(&sink, "DGRAM"), 3);
}

Test(client, charges_a_connected_udp_socket_per_datagram_not_per_connect)
{
    h_config_write("[default]\nconnect = 1/h\nsend = 1/h\n"
                   "to = 127.0.0.1:%d\n",
                   sink.port);
    client("udpconnect", NULL, NULL);
    cr_expect_eq(out("udp_connect"), 0);
    cr_expect_eq(out("send1"), 1);
    cr_expect_eq(out("send2"), -1);
    cr_expect_eq(out("send2_errno"), EAGAIN);
    cr_expect_eq(out("tcp_connect_errno"), 0, "the UDP connect was charged");
    cr_expect_eq(h_server_wait(&sink, "DGRAM", 1, 2), 1);
}

Test(client, cuts_a_writev_short_at_the_byte_budget)
{
    h_config_write("[default]\nsend_bytes = 1000/h\nto = 127.0.0.1:%d\n",
                   sink.port);
    client("writev", NULL, NULL);
    cr_expect_eq(out("first"), 1000);
    cr_expect_eq(out("second"), -1);
    cr_expect_eq(out("second_errno"), EAGAIN);
    char want[1000], path[300], sha_want[65], sha_got[65];
    memset(want, 'a', 500);
    memset(want + 500, 'b', 500);
    h_sha256_file(
        h_file_fill("writev.want", want, sizeof want, path, sizeof path),
        sha_want);
    cr_expect_eq(conn_bytes(&sink, 0, sha_got), 1000);
    cr_expect_str_eq(sha_got, sha_want);
}

Test(client, sends_the_granted_prefix_of_a_sendmmsg)
{
    h_config_write("[default]\nsend = 3/h\nto = 127.0.0.1:%d\n", sink.port);
    client("sendmmsg", NULL, NULL);
    cr_expect_eq(out("first"), 3);
    cr_expect_eq(out("second"), -1);
    cr_expect_eq(out("second_errno"), EAGAIN);
    cr_expect_eq(h_server_wait(&sink, "DGRAM", 3, 2), 3);
    usleep(200000);
    cr_expect_eq(h_server_count(&sink, "DGRAM"), 3);
}

Test(client, counts_sendfile_bytes)
{
    h_config_write("[default]\nsend_bytes = 1000/h\nto = 127.0.0.1:%d\n",
                   sink.port);
    char data[1500], path[300], sha_want[65], sha_got[65];
    for (int i = 0; i < 1500; i++)
        data[i] = (char)('A' + i % 26);
    h_file_fill("sendfile.src", data, sizeof data, path, sizeof path);
    client("sendfile", path, NULL);
    cr_expect_eq(out("first"), 1000);
    cr_expect_eq(out("second"), -1);
    cr_expect_eq(out("second_errno"), EAGAIN);
    char p2[300];
    h_sha256_file(h_file_fill("sendfile.want", data, 1000, p2, sizeof p2),
                  sha_want);
    cr_expect_eq(conn_bytes(&sink, 0, sha_got), 1000);
    cr_expect_str_eq(sha_got, sha_want);
}

Test(client, matches_an_ipv4_mapped_ipv6_connect_like_ipv4)
{
    h_config_write("[default]\nconnect = 1/h\nto = 127.0.0.1:%d\n", sink.port);
    client("v4mapped", NULL, NULL);
    cr_expect_eq(out("first_errno"), 0);
    cr_expect_eq(out("second_errno"), EAGAIN);
}

Test(client, charges_a_fastopen_sendto_as_a_connect)
{
    h_config_write("[default]\nconnect = 1/h\nto = 127.0.0.1:%d\n", sink.port);
    client("fastopen", NULL, NULL);
    cr_expect_neq(out("first_errno"), EAGAIN);
    cr_expect_eq(out("second"), -1);
    cr_expect_eq(out("second_errno"), EAGAIN);
    cr_expect_eq(h_server_wait(&sink, "CONN", 1, 2), 1);
    usleep(200000);
    cr_expect_eq(h_server_count(&sink, "CONN"), 1);
}

/* The second MSG_FASTOPEN's connect is granted at once (a lone connect
 * limit: no ticket of charges), its send denied: the connect never
 * happens, and its unit goes back, so one connect is left for the next
 * run (policy/decide_send.c's refund, whichever way it was granted). */
Test(client, gives_back_the_connect_of_a_denied_fastopen_sendto)
{
    h_config_write("[default]\nconnect = 2/h\nsend = 1/h\n"
                   "to = 127.0.0.1:%d\n",
                   sink.port);
    client("fastopen", NULL, NULL);
    cr_expect_neq(out("first_errno"), EAGAIN);
    cr_expect_eq(out("second"), -1);
    cr_expect_eq(out("second_errno"), EAGAIN);
    client("v4mapped", NULL, NULL);
    cr_expect_eq(out("first_errno"), 0, "the fastopen's connect stayed spent");
    cr_expect_eq(out("second_errno"), EAGAIN);
}

Test(client, charges_a_connect_repeated_on_one_socket_once)
{
    h_config_write("[default]\nconnect = 2/h\nto = 127.0.0.1:%d\n", sink.port);
    client("repeat", NULL, NULL);
    cr_expect_eq(out("a1_errno"), EINPROGRESS);
    long a2 = out("a2"), e2 = out("a2_errno");
    cr_expect(a2 == 0 || e2 == EISCONN, "second connect: %ld/%ld", a2, e2);
    cr_expect_eq(out("a3_errno"), EISCONN);
    cr_expect_eq(out("b_errno"), 0, "the repeats were charged");
    cr_expect_eq(out("c_errno"), EAGAIN, "the budget was not enforced");
}

Test(client, leaves_files_pipes_unix_sockets_and_other_destinations_alone)
{
    h_config_write("[default]\nconnect = 1000/h\nsend = 1/h\n"
                   "send_bytes = 1/h\nto = 127.0.0.1:%d\n",
                   sink.port);
    char port2[16];
    snprintf(port2, sizeof port2, "%d", other.port);
    client("untouched", port2, h_dir);
    cr_expect_eq(out("file"), 1 << 20);
    cr_expect_eq(out("pipe"), 32768);
    cr_expect_eq(out("unix_send"), 6);
    cr_expect_eq(out("unix_write"), 6);
    cr_expect_eq(out("outside"), 1 << 20);
    cr_expect_eq(conn_bytes(&other, 0, NULL), 1 << 20);
    /* The control: the same budget does bind on the covered socket. */
    cr_expect_eq(out("covered_first"), 1);
    cr_expect_eq(out("covered_second"), -1);
}

Test(client, forgets_a_socket_fd_after_every_close_path)
{
    h_config_write("[default]\nsend_bytes = 1/h\nto = 127.0.0.1:%d\n",
                   sink.port);
    client("reuse", h_dir, NULL);
    cr_expect_eq(out("control_first"), 1);
    cr_expect_eq(out("control_second"), -1);
    cr_expect_eq(out("close"), 100000);
    cr_expect_eq(out("close_range"), 100000);
    cr_expect_eq(out("closefrom"), 100000);
    cr_expect_eq(out("fclose"), 100000);
    cr_expect_eq(out("dup2"), 100000);
    cr_expect_eq(out("cloexec_still_marked"), 1);
    cr_expect_eq(out("dup_marked"), 1);
    cr_expect_eq(out("fdupfd_marked"), 1);
}

Test(client, marks_and_forgets_a_socket_at_a_very_high_fd)
{
    h_config_write("[default]\nsend_bytes = 1/h\nto = 127.0.0.1:%d\n",
                   sink.port);
    client("bigfd", h_dir, NULL);
    cr_expect_geq(out("big"), 19999);
    cr_expect_eq(out("big_first"), 1);
    cr_expect_eq(out("big_second"), -1);
    cr_expect_eq(out("big_reused"), 100000);
}

Test(client, never_writes_into_an_fd_the_program_reused_after_close_range)
{
    char log[300];
    snprintf(log, sizeof log, "%s/rlshim.log", h_dir);
    h_config_write("[rlshim]\nlog = %s\non_deny = delay\n"
                   "[default]\nsend = 20/s\nsend_burst = 1\n"
                   "to = 127.0.0.1:%d\n",
                   log, sink.port);
    client("closerange", NULL, NULL);
    cr_expect_eq(out("sent"), 13);
    cr_expect_eq(h_file_lines(log, "delayed send"), 3);
    char want[300], sha_want[65], sha_got[65];
    h_sha256_file(h_file_fill("app.want", "APPDATAMORE", 11, want, sizeof want),
                  sha_want);
    cr_expect_eq(h_server_wait(&sink, "CONN", 2, 2), 2);
    /* Whichever closed first: one connection carried exactly the app's
     * data, the other "xy". */
    long a = conn_bytes(&sink, 0, sha_got);
    if (a != 11)
        a = conn_bytes(&sink, 1, sha_got);
    cr_expect_eq(a, 11);
    cr_expect_str_eq(sha_got, sha_want);
}

Test(client, shares_one_budget_between_parent_and_forked_child)
{
    h_config_write("[default]\nsend = 3/h\nto = 127.0.0.1:%d\n", sink.port);
    client("fork", NULL, NULL);
    cr_expect_eq(out("child_ok"), 2);
    cr_expect_eq(out("parent_ok"), 1);
}
