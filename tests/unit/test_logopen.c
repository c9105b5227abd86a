/* test_logopen.c — the files the shim writes its lines to (SPEC §3): only a
 * regular file is kept, created 0600; anything else planted at the path
 * is refused at once and named; a privileged program refuses a path that
 * another user could have laid out, and follows no link on it. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/logopen.h"

static char dir[64];

static void setup(void)
{
    snprintf(dir, sizeof dir, "/tmp/rlshim-logopen-XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
}

static void teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
}

TestSuite(logopen, .init = setup, .fini = teardown);

static const char *at(const char *name, char *buf, size_t len)
{
    snprintf(buf, len, "%s/%s", dir, name);
    return buf;
}

/* Refused, saying `what`, and nothing made at `made` (NULL: not asked). */
static void refused(const char *path, bool privileged, const char *what,
                    const char *made)
{
    char why[128];
    int fd = rl_logopen_as(path, privileged, why, sizeof why);
    if (fd >= 0)
        close(fd);
    cr_expect_lt(fd, 0, "%s was opened", path);
    cr_expect_not_null(strstr(why, what), "%s: '%s' says no '%s'", path, why,
                       what);
    struct stat st;
    if (made != NULL)
        cr_expect_neq(lstat(made, &st), 0, "%s was made", made);
}

Test(logopen, creates_a_regular_file_0600_and_appends_to_it)
{
    char p[128], why[128];
    mode_t old = umask(0);
    int fd = rl_logopen_as(at("log", p, sizeof p), false, why, sizeof why);
    umask(old);
    cr_assert_geq(fd, 0, "%s", why);
    cr_expect_eq(write(fd, "a\n", 2), 2);
    close(fd);
    fd = rl_logopen_as(p, false, why, sizeof why);
    cr_assert_geq(fd, 0, "%s", why);
    cr_expect_eq(write(fd, "b\n", 2), 2);
    cr_expect_neq(fcntl(fd, F_GETFD) & FD_CLOEXEC, 0);
    close(fd);
    struct stat st;
    cr_assert_eq(stat(p, &st), 0);
    cr_expect_eq(st.st_mode & 07777, 0600, "%o", st.st_mode & 07777);
    cr_expect_eq(st.st_size, 4);
}

Test(logopen, refuses_a_fifo_without_a_reader_at_once)
{
    char p[128];
    cr_assert_eq(mkfifo(at("fifo", p, sizeof p), 0600), 0);
    refused(p, false, "a FIFO", NULL);
}

Test(logopen, refuses_a_fifo_with_a_reader_and_writes_it_nothing)
{
    char p[128], buf[16];
    cr_assert_eq(mkfifo(at("fifo", p, sizeof p), 0600), 0);
    int rd = open(p, O_RDONLY | O_NONBLOCK);
    cr_assert_geq(rd, 0);
    refused(p, false, "a FIFO", NULL);
    cr_expect_leq(read(rd, buf, sizeof buf), 0);
    close(rd);
}

Test(logopen, refuses_a_symlink_and_leaves_its_target)
{
    char p[128], t[128];
    FILE *f = fopen(at("target", t, sizeof t), "w");
    cr_assert_not_null(f);
    fputs("precious\n", f);
    fclose(f);
    cr_assert_eq(symlink(t, at("link", p, sizeof p)), 0);
    refused(p, false, "a symbolic link", NULL);
    struct stat st;
    cr_assert_eq(stat(t, &st), 0);
    cr_expect_eq(st.st_size, 9);
    /* A dangling link is not followed to create its target either. */
    char d[128], dt[128];
    cr_assert_eq(symlink(at("nowhere", dt, sizeof dt),
                         at("dangling", d, sizeof d)),
                 0);
    refused(d, false, "a symbolic link", dt);
}

Test(logopen, refuses_a_character_device_and_a_directory)
{
    refused("/dev/null", false, "a character device", NULL);
    refused(dir, false, "a directory", NULL);
}

Test(logopen, privileged_accepts_a_private_directory_below_a_sticky_one)
{
    /* mkdtemp made it 0700 in /tmp (1777): no one else can move it. */
    char p[128], why[128];
    int fd = rl_logopen_as(at("log", p, sizeof p), true, why, sizeof why);
    cr_assert_geq(fd, 0, "%s", why);
    close(fd);
}

/* A directory of mode `mode` in the test's dir, and the log path in it. */
static const char *log_in(const char *name, mode_t mode, char *p, size_t len)
{
    char d[96];
    cr_assert_eq(mkdir(at(name, d, sizeof d), 0700), 0);
    cr_assert_eq(chmod(d, mode), 0);
    snprintf(p, len, "%s/log", d);
    return p;
}

Test(logopen, privileged_refuses_a_directory_others_can_write)
{
    char p[128];
    refused(log_in("world", 0777, p, sizeof p), true, "another user", p);
    refused(log_in("sticky", 01777, p, sizeof p), true, "another user", p);
    refused(log_in("group", 0770, p, sizeof p), true, "another user", p);
    /* Not privileged, the same paths are the user's business. */
    char why[128];
    int fd = rl_logopen_as(p, false, why, sizeof why);
    cr_expect_geq(fd, 0, "%s", why);
    if (fd >= 0)
        close(fd);
}

Test(logopen, privileged_refuses_a_directory_above_others_can_rename)
{
    char above[96], p[192];
    cr_assert_eq(mkdir(at("above", above, sizeof above), 0700), 0);
    cr_assert_eq(chmod(above, 0777), 0);
    char d[160];
    snprintf(d, sizeof d, "%s/mine", above);
    cr_assert_eq(mkdir(d, 0700), 0);
    snprintf(p, sizeof p, "%s/log", d);
    refused(p, true, "another user", p);
}

Test(logopen, privileged_refuses_a_directory_of_another_user)
{
    if (geteuid() != 0)
        cr_skip_test("chown to another uid needs root");
    char p[128], d[96];
    log_in("theirs", 0755, p, sizeof p);
    cr_assert_eq(chown(at("theirs", d, sizeof d), 65534, 65534), 0);
    refused(p, true, "another user", p);
}

Test(logopen, privileged_follows_no_link_on_the_path)
{
    char real[96], link[96], p[160];
    cr_assert_eq(mkdir(at("real", real, sizeof real), 0700), 0);
    cr_assert_eq(symlink(real, at("link", link, sizeof link)), 0);
    snprintf(p, sizeof p, "%s/log", link);
    char made[160];
    snprintf(made, sizeof made, "%s/log", real);
    refused(p, true, "a symbolic link on its path", made);
}

Test(logopen, privileged_refuses_a_relative_path)
{
    refused("rlshim-relative.log", true, "not an absolute path",
            "rlshim-relative.log");
}
