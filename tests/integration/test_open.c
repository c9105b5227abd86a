/* max_open (SPEC §4): connections open at once, counted from a granted
 * connect to the close of their last fd, measured at a server that logs
 * how many connections it holds at every change. A client that closes
 * first shuts down and waits for the server's close, so that the server's
 * log has seen the close before the next connect can be granted. */
#include "harness.h"

static struct server srv;
static struct run r;

static void setup(void)
{
    h_setup();
    h_server_start(&srv, "hold.py");
}

static void teardown(void)
{
    h_server_stop(&srv);
    h_teardown();
}

TestSuite(open, .init = setup, .fini = teardown, .timeout = 60);

/* The most connections the server held at once. */
static int most_open(void)
{
    char line[512];
    int most = 0, n;
    for (int i = 0;; i++) {
        h_server_line(&srv, "", i, line, sizeof line);
        if (line[0] == '\0')
            break;
        if (sscanf(line, "%*f open %d", &n) == 1 && n > most)
            most = n;
    }
    return most;
}

static void python(const char *code)
{
    char *argv[] = {"python3", "-c", (char *)code, NULL};
    h_run(&r, true, 30, argv);
}

Test(open, ten_connections_at_once_never_open_more_than_two_in_fail_mode)
{
    h_config_write("[default]\nmax_open = 2\n");
    char code[1500];
    snprintf(code, sizeof code,
             "import socket, time\n"
             "held, failed = [], 0\n"
             "for i in range(10):\n"
             "    try:\n"
             "        held.append(socket.create_connection(('127.0.0.1', %d)))\n"
             "    except OSError:\n"
             "        failed += 1\n"
             "time.sleep(0.3)\n"
             "print('held=%%d' %% len(held)); print('failed=%%d' %% failed)\n"
             "dup = held[0].dup()\n"
             "held[0].close()\n"
             "try:\n"
             "    socket.create_connection(('127.0.0.1', %d)); print('third=1')\n"
             "except OSError:\n"
             "    print('third=0')\n"
             "dup.shutdown(socket.SHUT_WR); dup.recv(1); dup.close()\n"
             "c = socket.create_connection(('127.0.0.1', %d)); print('after=1')\n",
             srv.port, srv.port, srv.port);
    python(code);
    cr_assert_eq(r.status, 0, "python: %d %s", r.status, r.out);
    cr_expect_eq(h_out_long(&r, "held", -1), 2);
    cr_expect_eq(h_out_long(&r, "failed", -1), 8);
    cr_expect_eq(h_out_long(&r, "third", -1), 0,
                 "a dup keeps its connection open");
    cr_expect_eq(h_out_long(&r, "after", -1), 1,
                 "closing the last fd frees it");
    usleep(200 * 1000);
    cr_expect_leq(most_open(), 2, "the server held %d at once", most_open());
}

Test(open, ten_threads_wait_their_turn_in_delay_mode)
{
    h_config_write("[rlshim]\non_deny = delay\nmax_delay = 10s\n"
                   "[default]\nmax_open = 2\n");
    char code[1500];
    snprintf(code, sizeof code,
             "import socket, threading, time\n"
             "ok = []\n"
             "def one():\n"
             "    s = socket.create_connection(('127.0.0.1', %d))\n"
             "    time.sleep(0.3)\n"
             "    s.shutdown(socket.SHUT_WR); s.recv(1)  # the server saw it\n"
             "    s.close()\n"
             "    ok.append(1)\n"
             "t0 = time.monotonic()\n"
             "ts = [threading.Thread(target=one) for i in range(10)]\n"
             "[t.start() for t in ts]; [t.join() for t in ts]\n"
             "print('ok=%%d' %% len(ok))\n"
             "print('ms=%%d' %% int((time.monotonic() - t0) * 1000))\n",
             srv.port);
    python(code);
    cr_assert_eq(r.status, 0, "python: %d %s", r.status, r.out);
    cr_expect_eq(h_out_long(&r, "ok", -1), 10);
    /* 10 connections of 0.3 s, 2 at a time: 1.5 s at least. */
    cr_expect_geq(h_out_long(&r, "ms", 0), 1400);
    cr_expect_lt(r.cpu, 1.0, "waiters spun: cpu %.2f s", r.cpu);
    usleep(200 * 1000);
    cr_expect_leq(most_open(), 2, "the server held %d at once", most_open());
}

Test(open, a_killed_holder_frees_its_connections_at_the_next_decision)
{
    h_config_write("[default]\nmax_open = 2\n");
    char script[2500];
    snprintf(script, sizeof script,
             "python3 -c \"import socket, time\n"
             "a = socket.create_connection(('127.0.0.1', %d))\n"
             "b = socket.create_connection(('127.0.0.1', %d))\n"
             "time.sleep(60)\" & p=$!\n"
             "sleep 1\n"
             "python3 -c \"import socket\n"
             "try:\n"
             "    socket.create_connection(('127.0.0.1', %d)); print('before=1')\n"
             "except OSError:\n"
             "    print('before=0')\"\n"
             "kill -9 $p; wait $p\n"
             "python3 -c \"import socket\n"
             "socket.create_connection(('127.0.0.1', %d)); print('after=1')\"\n",
             srv.port, srv.port, srv.port, srv.port);
    char *argv[] = {"sh", "-c", script, NULL};
    h_run(&r, true, 30, argv);
    cr_expect_eq(h_out_long(&r, "before", -1), 0, "%s", r.out);
    cr_expect_eq(h_out_long(&r, "after", -1), 1, "%s", r.out);
}
