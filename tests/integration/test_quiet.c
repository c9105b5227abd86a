/* What a program pays for fds the shim never throttles (SPEC §1: files
 * and pipes pass through untouched; §4: nothing is set up before a call
 * that could be charged). Counted with strace: the system calls of N
 * rounds of pipe/file closes, dup2, dup3 and fclose after an epoll
 * registration of a pipe, under the shim with a rule, against the same
 * program bare. Start-up differs (the loader opens the shim, the shim its
 * config): each side is the run of N rounds less the run of none. */
#include <dirent.h>

#include "harness.h"

/* LeakSanitizer cannot run under ptrace: an ASan build's helpers would
 * fail at exit under strace. */
static void setup(void)
{
    h_setup();
    setenv("ASAN_OPTIONS", "detect_leaks=0", 1);
}

TestSuite(quiet, .init = setup, .fini = h_teardown, .timeout = 120);

#define MAXSYS 96

struct counts {
    int k;
    char name[MAXSYS][32];
    long n[MAXSYS];
};

static struct run r;

/* Memory management differs with the allocator preloaded (ASan's): not
 * the shim's doing, and not what these tests count. */
static bool memory_call(const char *name)
{
    return strcmp(name, "mmap") == 0 || strcmp(name, "munmap") == 0 ||
           strcmp(name, "brk") == 0 || strcmp(name, "madvise") == 0 ||
           strcmp(name, "mprotect") == 0;
}

static long count_of(const struct counts *c, const char *name)
{
    for (int i = 0; i < c->k; i++)
        if (strcmp(c->name[i], name) == 0)
            return c->n[i];
    return 0;
}

/* quiet_fds N under strace -f -c, preloaded or bare. */
static void counted(bool preload, int n, const char *mode, struct counts *c)
{
    char out[300], helper[512], ns[16];
    snprintf(out, sizeof out, "%s/strace.%d.%d", h_dir, preload, n);
    snprintf(ns, sizeof ns, "%d", n);
    h_helper("quiet_fds", helper, sizeof helper);
    char *argv[] = {"strace", "-f", "-c", "-o", out, helper,
                    ns, h_config, (char *)mode, NULL};
    h_run(&r, preload, 100, argv);
    cr_assert_eq(r.status, 0, "status %d: %s", r.status, r.out);
    cr_assert(strstr(r.out, "done=1") != NULL, "%s", r.out);
    FILE *f = fopen(out, "r");
    cr_assert_not_null(f);
    char line[256];
    c->k = 0;
    while (fgets(line, sizeof line, f) != NULL && c->k < MAXSYS) {
        char *tok[8];
        int t = 0;
        for (char *p = strtok(line, " \n"); p != NULL && t < 8;
             p = strtok(NULL, " \n"))
            tok[t++] = p;
        /* "% time seconds usecs/call calls [errors] syscall" */
        if (t < 5 || strcmp(tok[t - 1], "total") == 0 ||
            tok[0][0] < '0' || tok[0][0] > '9')
            continue;
        snprintf(c->name[c->k], sizeof c->name[0], "%s", tok[t - 1]);
        c->n[c->k++] = strtol(tok[3], NULL, 10);
    }
    fclose(f);
    cr_assert_gt(c->k, 0, "no strace counts in %s", out);
}

/* Every system call (but memory management) the N rounds cost under the
 * shim is one the bare program makes, as many times. */
static void expect_same_per_round(int n, const char *mode, long closes)
{
    static struct counts s0, sn, b0, bn;
    counted(true, 0, mode, &s0);
    counted(true, n, mode, &sn);
    counted(false, 0, mode, &b0);
    counted(false, n, mode, &bn);
    int checked = 0;
    for (int pass = 0; pass < 2; pass++) {
        const struct counts *c = pass == 0 ? &sn : &bn;
        for (int i = 0; i < c->k; i++) {
            const char *name = c->name[i];
            if (memory_call(name))
                continue;
            long shim = count_of(&sn, name) - count_of(&s0, name);
            long bare = count_of(&bn, name) - count_of(&b0, name);
            cr_expect_eq(shim, bare,
                         "%s: %ld calls in %d rounds under the shim, %ld bare",
                         name, shim, n, bare);
            checked++;
        }
    }
    cr_assert_eq(count_of(&bn, "close") - count_of(&b0, "close"), closes * n,
                 "the bare rounds made %ld closes",
                 count_of(&bn, "close") - count_of(&b0, "close"));
    cr_assert_gt(checked, 0);
}

Test(quiet, closes_of_files_and_pipes_make_no_system_call_of_the_shims)
{
    h_config_write("[default]\nsend = 10/s\nto = 127.0.0.1\n");
    expect_same_per_round(1000, "", 5);
}

/* A marked socket's close looks at the shim's tables, and asks the kernel
 * nothing (the vfork check is a thread-local flag, not getpid()). */
Test(quiet, closes_of_marked_sockets_make_no_system_call_of_the_shims)
{
    h_config_write("[default]\nsend = 10/s\nto = 127.0.0.1\n");
    expect_same_per_round(1000, "sockets", 6);
}

/* After a vfork (its child closed an inet socket), the parent's closes
 * are as cheap as before: the flag the child saw is the parent's no more. */
Test(quiet, closes_after_a_vfork_make_no_system_call_of_the_shims)
{
    h_config_write("[default]\nsend = 10/s\nto = 127.0.0.1\n");
    expect_same_per_round(1000, "vfork", 6);
}

/* Files in the state dir. */
static int state_files(void)
{
    DIR *d = opendir(h_state);
    cr_assert_not_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.' || strlen(e->d_name) > 2)
            n++;
    closedir(d);
    return n;
}

/* The set-up (a named section makes it look up the login, then the
 * segment in the state dir) did not run for an epoll registration of a
 * pipe and the closes after it; it does for one of an inet socket (the
 * control: a set-up is seen when there is one). */
Test(quiet, an_epoll_registration_of_a_pipe_sets_nothing_up)
{
    h_config_write("[user:rlshim-nosuchlogin]\nconnect = 1/s\n"
                   "[default]\nsend = 10/s\nto = 127.0.0.1\n");
    char out[300], helper[512];
    snprintf(out, sizeof out, "%s/openat.log", h_dir);
    h_helper("quiet_fds", helper, sizeof helper);
    char *argv[] = {"strace", "-f", "-e", "trace=openat", "-o", out,
                    helper, "100", h_config, NULL};
    h_run(&r, true, 60, argv);
    cr_assert_eq(r.status, 0, "status %d: %s", r.status, r.out);
    cr_expect_eq(state_files(), 0, "a segment was made in %s", h_state);
    cr_expect_eq(h_file_lines(out, h_state), 0,
                 "the state dir was opened (%s)", out);
    cr_expect_eq(h_file_lines(out, "/etc/passwd") +
                     h_file_lines(out, "nsswitch"),
                 0, "the login was looked up (%s)", out);

    char *inet[] = {"strace", "-f", "-e", "trace=openat", "-o", out,
                    helper, "100", h_config, "inet", NULL};
    h_run(&r, true, 60, inet);
    cr_assert_eq(r.status, 0, "status %d: %s", r.status, r.out);
    cr_expect_eq(state_files(), 1, "no segment made for an inet socket");
    cr_expect_gt(h_file_lines(out, h_state), 0,
                 "the state dir was not opened for an inet socket (%s)", out);
}
