/* test_proc.c — a process's state has one owner (policy/proc.h): two
 * instances loaded from two configs keep apart, and each says what its
 * load found. Each Criterion test runs in its own worker process, so the
 * environment changed here touches nothing else. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "policy/config.h"
#include "policy/proc.h"
#include "proc_new.h"

static char *write_config(const char *text)
{
    static char paths[4][64];
    static int n;
    char *path = paths[n++ % 4];
    snprintf(path, sizeof paths[0], "/tmp/rlshim-proc-XXXXXX");
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    return path;
}

Test(proc, two_instances_keep_their_own_config)
{
    char line[512];
    struct rl_proc *a = proc_new(), *b = proc_new();
    char *pa = write_config("[default]\nconnect = 5/s\n");
    char *pb = write_config("[rlshim]\nreport = yes\n[default]\nsend = 7/s\n");
    setenv("RLSHIM_CONFIG", pa, 1);
    cr_assert_eq(rl_proc_load(a, line, sizeof line), 0, "%s", line);
    setenv("RLSHIM_CONFIG", pb, 1);
    rl_proc_init(b);
    cr_assert_eq(rl_proc_load(b, line, sizeof line), 0, "%s", line);
    cr_assert_not_null(a->cfg);
    cr_assert_not_null(b->cfg);
    cr_expect_neq(a->cfg, b->cfg);
    cr_expect_str_eq(a->cfg->path, pa);
    cr_expect_str_eq(b->cfg->path, pb);
    cr_expect_eq(a->report, RL_PROC_REPORT_OFF);
    cr_expect_eq(b->report, RL_PROC_REPORT_WANTED);
    rl_config_free(a->cfg);
    rl_config_free(b->cfg);
    free(a);
    free(b);
    unlink(pa);
    unlink(pb);
}

Test(proc, a_broken_config_gives_its_line_and_no_config)
{
    char line[512];
    struct rl_proc *p = proc_new();
    char *path = write_config("[default]\nconect = 5/s\n");
    setenv("RLSHIM_CONFIG", path, 1);
    cr_assert_eq(rl_proc_load(p, line, sizeof line), -1);
    cr_expect_null(p->cfg);
    cr_expect_not_null(strstr(line, ":2: unknown key 'conect'"), "%s", line);
    unlink(path);
}

Test(proc, no_config_is_silent_unless_a_report_was_asked_for)
{
    char line[512];
    struct rl_proc *quiet = proc_new(), *asked = proc_new();
    setenv("RLSHIM_CONFIG", "", 1);
    /* Only when the build's sysconfdir has no rlshim.ini is there no
     * config at all; on a host that has one the load reads it. */
    if (rl_proc_config_present()) {
        cr_skip_test("this host has %s/rlshim.ini", RL_SYSCONFDIR);
    }
    cr_expect_eq(rl_proc_load(quiet, line, sizeof line), -1);
    cr_expect_str_eq(line, "");
    cr_expect_eq(quiet->report, RL_PROC_REPORT_OFF);
    setenv("RLSHIM_REPORT", "1", 1);
    rl_proc_init(asked);
    cr_expect_eq(rl_proc_load(asked, line, sizeof line), -1);
    cr_expect_str_eq(line, "");
    cr_expect_eq(asked->report, RL_PROC_REPORT_NONE);
}

/* The shim's two steps (RL_PROC_AT_LOAD, RL_PROC_AT_FIRST_CALL at the
 * first call that needs it): a broken config is said at start-up only
 * under RLSHIM_STRICT=1, else by the set-up; a good one sets up. */
Test(proc, start_then_set_up_say_where_the_process_stands)
{
    char line[512];
    char dir[] = "/tmp/rlshim-proc-state-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    setenv("RLSHIM_STATE_DIR", dir, 1);
    char *bad = write_config("[default]\nconect = 5/s\n");
    setenv("RLSHIM_CONFIG", bad, 1);
    struct rl_proc *lazy = proc_new(), *strict = proc_new(), *good = proc_new();
    cr_expect_eq(rl_proc_set_up(lazy, RL_PROC_AT_LOAD, line, sizeof line),
                 RL_PROC_PENDING);
    cr_expect_str_eq(line, "");
    cr_expect_eq(rl_proc_set_up(lazy, RL_PROC_AT_FIRST_CALL, line, sizeof line),
                 RL_PROC_OFF);
    cr_expect_not_null(strstr(line, "unknown key 'conect'"), "%s", line);
    setenv("RLSHIM_STRICT", "1", 1);
    cr_expect_eq(rl_proc_set_up(strict, RL_PROC_AT_LOAD, line, sizeof line),
                 RL_PROC_OFF);
    cr_expect_not_null(strstr(line, "unknown key 'conect'"), "%s", line);
    unsetenv("RLSHIM_STRICT");
    char *ok = write_config("[default]\nconnect = 5/s\n");
    setenv("RLSHIM_CONFIG", ok, 1);
    cr_expect_eq(rl_proc_set_up(good, RL_PROC_AT_LOAD, line, sizeof line),
                 RL_PROC_PENDING);
    cr_expect_null(good->cfg, "read by the set-up, not at start-up");
    cr_expect_eq(rl_proc_set_up(good, RL_PROC_AT_FIRST_CALL, line, sizeof line),
                 RL_PROC_READY, "%s", line);
    cr_expect_not_null(good->cfg);
    unlink(bad);
    unlink(ok);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_expect_eq(system(cmd), 0);
}
