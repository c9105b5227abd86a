/* test_identity.c — who the calling process is. Each Criterion test runs in
 * its own worker process, so changing the environment or the uid here
 * touches nothing else. */
#include <criterion/criterion.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "policy/config.h"
#include "policy/identity.h"

Test(identity, takes_the_key_from_rlshim_key)
{
    struct rl_identity id;
    char buf[80];
    setenv("RLSHIM_KEY", "crawler", 1);
    cr_assert_eq(rl_identity_resolve(&id, RL_KEY_ENV), 0);
    cr_expect(id.has_key);
    cr_expect_str_eq(id.key, "crawler");
    cr_expect_str_eq(rl_identity_user(&id, buf, sizeof buf), "crawler");
}

Test(identity, without_a_key_is_its_real_uid)
{
    struct rl_identity id;
    char buf[80], want[16];
    unsetenv("RLSHIM_KEY");
    cr_assert_eq(rl_identity_resolve(&id, RL_KEY_ENV), 0);
    cr_expect_not(id.has_key);
    cr_expect_eq(id.uid, (uint32_t)getuid());
    snprintf(want, sizeof want, "%u", (unsigned)getuid());
    cr_expect_str_eq(rl_identity_user(&id, buf, sizeof buf), want);
}

Test(identity, an_empty_rlshim_key_counts_as_none)
{
    struct rl_identity id;
    setenv("RLSHIM_KEY", "", 1);
    rl_identity_resolve(&id, RL_KEY_ENV);
    cr_expect_not(id.has_key);
}

Test(identity, with_key_exe_is_the_program_name)
{
    struct rl_identity id;
    unsetenv("RLSHIM_KEY");
    rl_identity_resolve(&id, RL_KEY_EXE);
    cr_expect(id.has_key);
    /* The runner is build/tests/unit. */
    cr_expect_str_eq(id.key, "unit");
}

Test(identity, prefers_rlshim_key_to_the_program_name)
{
    struct rl_identity id;
    setenv("RLSHIM_KEY", "k", 1);
    rl_identity_resolve(&id, RL_KEY_EXE);
    cr_expect_str_eq(id.key, "k");
}

Test(identity, cuts_a_long_key_to_what_a_section_can_name)
{
    struct rl_identity id;
    char key[200];
    memset(key, 'k', sizeof key - 1);
    key[sizeof key - 1] = '\0';
    setenv("RLSHIM_KEY", key, 1);
    rl_identity_resolve(&id, RL_KEY_ENV);
    cr_expect_eq(strlen(id.key), RL_IDENTITY_MAX - 1);
}

Test(identity, finds_the_login_name_of_its_uid)
{
    struct rl_identity id;
    struct passwd *pw = getpwuid(getuid());
    if (pw == NULL)
        cr_skip_test("this uid has no passwd entry");
    rl_identity_resolve(&id, RL_KEY_ENV);
    cr_expect(id.has_login);
    cr_expect_str_eq(id.login, pw->pw_name);
}

/* In a child that changes uid and reports by exit status (0 = right),
 * so that the runner's own worker keeps its uid (and LeakSanitizer,
 * which cannot inspect a process after a uid change, is not involved). */
static int uid_child(uid_t uid)
{
    struct rl_identity id;
    struct rl_diag d = {0};
    struct rl_config *cfg = NULL;
    const struct rl_rule *r;

    if (setresuid(uid, uid, uid) != 0)
        return 10;
    unsetenv("RLSHIM_KEY");
    rl_identity_resolve(&id, RL_KEY_ENV);
    if (id.uid != uid)
        return 11;
    if (id.has_login)
        return 12;
    if (rl_config_load_string("[user:54321]\nconnect = 1/s\n"
                              "[default]\nconnect = 2/s\n",
                              "t.ini", &cfg, &d) != 0)
        return 13;
    r = rl_config_find_rule(cfg, id.has_key ? id.key : NULL, id.uid,
                            id.has_login ? id.login : NULL);
    if (r == NULL || strcmp(r->section, "user:54321") != 0)
        return 14;
    return 0;
}

Test(identity, a_uid_without_passwd_entry_still_matches_by_number)
{
    const uid_t unknown_uid = 54321;
    int st;
    pid_t pid;

    if (getpwuid(unknown_uid) != NULL)
        cr_skip_test("uid %u has a passwd entry here", unknown_uid);
    if (getuid() != 0)
        cr_skip_test("needs root to change uid");
    pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0)
        _exit(uid_child(unknown_uid));
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    cr_expect(WIFEXITED(st));
    cr_expect_eq(WEXITSTATUS(st), 0, "child check %d failed", WEXITSTATUS(st));
}

/* When the runner is started with RLSHIM_TEST_PRINT_EXE=1 it prints the
 * key that key = exe gives it and exits, before Criterion starts: how a
 * test sees the name of a program started through a symlink. */
__attribute__((constructor)) static void print_exe_key(void)
{
    struct rl_identity id;
    const char *v = getenv("RLSHIM_TEST_PRINT_EXE");
    if (v == NULL || strcmp(v, "1") != 0)
        return;
    unsetenv("RLSHIM_KEY");
    rl_identity_resolve(&id, RL_KEY_EXE);
    printf("%s\n", id.key);
    fflush(stdout);
    _exit(0);
}

Test(identity, with_key_exe_names_the_program_as_started_not_its_target)
{
    char dir[] = "/tmp/rlshim-exe-XXXXXX", link[64], self[4096], out[128];
    int fds[2], st;
    ssize_t n;
    pid_t pid;

    n = readlink("/proc/self/exe", self, sizeof self - 1);
    cr_assert_gt(n, 0);
    self[n] = '\0';
    cr_assert_not_null(mkdtemp(dir));
    snprintf(link, sizeof link, "%s/crawler", dir);
    cr_assert_eq(symlink(self, link), 0);
    cr_assert_eq(pipe(fds), 0);
    pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        char *argv[] = {"something-else", NULL};
        char *envp[] = {"RLSHIM_TEST_PRINT_EXE=1", NULL};
        dup2(fds[1], 1);
        execve(link, argv, envp);
        _exit(127);
    }
    close(fds[1]);
    n = read(fds[0], out, sizeof out - 1);
    out[n > 0 ? n : 0] = '\0';
    close(fds[0]);
    waitpid(pid, &st, 0);
    unlink(link);
    rmdir(dir);
    cr_expect_str_eq(out, "crawler\n");
}
