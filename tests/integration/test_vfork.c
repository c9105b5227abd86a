/* A vfork child runs in its parent's memory until it execs: the closes it
 * makes (python's subprocess closes every fd above 2 in its vfork child)
 * must not make the parent forget its sockets' marks. Measured at the
 * server: a send over the budget after a subprocess must still be denied. */
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

TestSuite(vfork, .init = setup, .fini = teardown, .timeout = 30);

/* Three 1-byte sends under `send = 2/h`, a subprocess between each: the
 * third is denied, and the server gets two bytes. */
Test(vfork, a_subprocess_leaves_the_parents_marks_alone)
{
    h_config_write("[default]\nsend = 2/h\nto = 127.0.0.1:%d\n", srv.port);
    char code[900];
    snprintf(code, sizeof code,
             "import socket, subprocess, sys\n"
             "s = socket.create_connection(('127.0.0.1', %d))\n"
             "for b in (b'a', b'b', b'c'):\n"
             "    subprocess.run(['/bin/true'], check=True)\n"
             "    try:\n"
             "        s.send(b)\n"
             "        print('sent', b.decode())\n"
             "    except BlockingIOError:\n"
             "        print('denied', b.decode())\n"
             "s.close()\n",
             srv.port);
    char *argv[] = {"python3", "-c", code, NULL};
    h_run(&r, true, 20, argv);
    cr_assert_eq(r.status, 0, "status %d: %s", r.status, r.out);
    cr_expect(strstr(r.out, "sent a\nsent b\ndenied c\n") != NULL,
              "python saw: %s", r.out);
    char line[512], f[80];
    cr_assert_eq(h_server_wait(&srv, "CONN", 1, 5), 1, "nothing arrived");
    h_server_line(&srv, "CONN", 0, line, sizeof line);
    cr_expect_str_eq(h_field(line, 3, f, sizeof f), "2",
                     "bytes at the server: %s", line);
}
