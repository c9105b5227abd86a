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

/* A child made by clone(CLONE_VM) (posix_spawn's shape, CLONE_VFORK or
 * not) runs in the parent's memory with a pid of its own: its close of
 * its copy of the parent's socket must leave the parent's marks, its
 * request connection and its max_open place be. The parent holds one
 * connection under max_open = 1 and a budget of 2 (`send = 2/h`; with
 * `http`, `request = 1/h`, a burst of 2, and 5 HTTP requests): after the
 * child, 2 of 5 go (their bytes at the server) and a second connect is
 * refused. */
static void parent_keeps_its_socket(const char *how, bool http)
{
    if (http)
        h_config_write("[default]\nto = 127.0.0.1:%d\nmax_open = 1\n"
                       "request = 1/h\nrequest_burst = 2\n",
                       srv.port);
    else
        h_config_write("[default]\nto = 127.0.0.1:%d\nmax_open = 1\n"
                       "send = 2/h\n",
                       srv.port);
    char prog[512], port[16];
    snprintf(port, sizeof port, "%d", srv.port);
    char *argv[] = {(char *)h_helper("spawnclose", prog, sizeof prog), port,
                    (char *)how, http ? "http" : NULL, NULL};
    h_run(&r, true, 20, argv);
    cr_assert_eq(r.status, 0, "%s: status %d: %s", how, r.status, r.out);
    cr_assert_eq(h_out_long(&r, "child", -1), 0, "%s: %s", how, r.out);
    cr_expect_eq(h_out_long(&r, "sent", -1), 2, "%s: %s", how, r.out);
    cr_expect_eq(h_out_long(&r, "denied", -1), 3, "%s: %s", how, r.out);
    cr_expect_eq(h_out_long(&r, "connect2", -1), EAGAIN,
                 "%s: the second connect (max_open = 1): %s", how, r.out);
    char line[512], f[80];
    cr_assert_geq(h_server_wait(&srv, "CONN", 1, 5), 1, "nothing arrived");
    h_server_line(&srv, "CONN", 0, line, sizeof line);
    long bytes = strtol(h_field(line, 3, f, sizeof f), NULL, 10);
    cr_expect_eq(bytes, 2 * h_out_long(&r, "req_len", -1),
                 "%s: bytes at the server: %s", how, line);
}

Test(vfork, a_posix_spawn_child_closing_the_socket_leaves_it_counted)
{
    parent_keeps_its_socket("spawn", false);
}

Test(vfork, a_clone_vm_vfork_child_closing_the_socket_leaves_it_counted)
{
    parent_keeps_its_socket("clone_vfork", false);
}

Test(vfork, a_clone_vm_child_closing_the_socket_leaves_it_counted)
{
    parent_keeps_its_socket("clone_vm", false);
}

Test(vfork, a_clone_vm_vfork_child_closing_the_socket_leaves_requests_counted)
{
    parent_keeps_its_socket("clone_vfork", true);
}

Test(vfork, a_posix_spawn_child_closing_the_socket_leaves_requests_counted)
{
    parent_keeps_its_socket("spawn", true);
}
