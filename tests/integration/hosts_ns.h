/* hosts_ns.h — clients that resolve test host names to loopback
 * addresses: a private mount namespace (unshare -rm) whose /etc/hosts is a
 * file of the test's own, so the host's file is never touched. Include
 * after harness.h. */
#ifndef RL_TEST_HOSTS_NS_H
#define RL_TEST_HOSTS_NS_H

static char ns_hosts[300];

/* Write the test's hosts file (lines "ADDR NAME..."). */
H_FN void ns_hosts_write(const char *lines)
{
    snprintf(ns_hosts, sizeof ns_hosts, "%s/hosts", h_dir);
    FILE *f = fopen(ns_hosts, "w");
    cr_assert_not_null(f);
    fputs("127.0.0.1 localhost\n", f);
    fputs(lines, f);
    fclose(f);
}

/* An http_count.py server bound to `addr` (another loopback address). */
H_FN void ns_server_start(struct server *s, const char *addr)
{
    setenv("HTTP_COUNT_HOST", addr, 1);
    h_server_start(s, "http_count.py");
    unsetenv("HTTP_COUNT_HOST");
}

/* Run `script` (sh) with the shim, in a private mount namespace whose
 * /etc/hosts is the test's file. Skips when namespaces are not allowed,
 * and curl or wget under ASan (they hang under a preloaded libasan). */
H_FN void ns_run(struct run *r, double timeout, const char *script)
{
    static int can = -1;
    if (can < 0)
        can = system("unshare -rm true >/dev/null 2>&1") == 0;
    if (!can)
        cr_skip_test("unshare -rm is not allowed here: no private hosts file");
    const char *san = getenv("RLSHIM_SANITIZER");
    if (san != NULL && strcmp(san, "address") == 0 &&
        (strstr(script, "curl") != NULL || strstr(script, "wget") != NULL))
        cr_skip_test("curl and wget hang under a preloaded libasan; see make "
                     "ubsan");
    char *argv[] = {"unshare", "-rm", "sh", "-c",
                    "mount --bind \"$0\" /etc/hosts && eval \"$1\"",
                    ns_hosts, (char *)script, NULL};
    h_run(r, true, timeout, argv);
}

#endif
