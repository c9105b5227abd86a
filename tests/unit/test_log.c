/* test_log.c — where the shim's own stderr lines go (SPEC §3): to fd 2
 * while it is the file it was when the shim loaded, never into a file the
 * program opened at 2 since. Each case runs in a child of its own: the
 * noted stderr is the process's. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/log.h"

static char dir[64], a[96], b[96];

static void setup(void)
{
    snprintf(dir, sizeof dir, "/tmp/rlshim-log-XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
    snprintf(a, sizeof a, "%s/a", dir);
    snprintf(b, sizeof b, "%s/b", dir);
}

static void teardown(void)
{
    unlink(a);
    unlink(b);
    rmdir(dir);
}

TestSuite(log_stderr, .init = setup, .fini = teardown);

static off_t size_of(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? st.st_size : -1;
}

static int open_at_2(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0600);
    if (fd < 0 || dup2(fd, 2) != 2)
        _exit(3);
    if (fd != 2)
        close(fd);
    return 2;
}

enum step { MARK_A, CLOSE_MARK, MARK_A_REOPEN_B, NO_MARK_B };

static void in_child(enum step s)
{
    pid_t pid = fork();
    cr_assert_neq(pid, -1);
    if (pid == 0) {
        switch (s) {
        case MARK_A:
            open_at_2(a);
            rl_log_stderr_mark();
            break;
        case CLOSE_MARK:
            close(2);
            rl_log_stderr_mark();
            open_at_2(b);
            break;
        case MARK_A_REOPEN_B:
            open_at_2(a);
            rl_log_stderr_mark();
            close(2);
            if (open(b, O_WRONLY | O_CREAT | O_APPEND, 0600) != 2)
                _exit(4);
            break;
        case NO_MARK_B:
            open_at_2(b);
            break;
        }
        rl_log_stderr("a start-up line");
        rl_log_stderr_line("rlshim: a whole line\n", 21);
        _exit(0);
    }
    int st;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child: %d", st);
}

Test(log_stderr, lines_go_to_the_stderr_noted_at_load)
{
    in_child(MARK_A);
    cr_expect_gt(size_of(a), 0);
}

Test(log_stderr, no_line_lands_in_a_file_the_program_opened_at_fd_2_since)
{
    in_child(MARK_A_REOPEN_B);
    cr_expect_eq(size_of(a), 0, "written to the stderr the program closed");
    cr_expect_eq(size_of(b), 0, "written into the program's file");
}

Test(log_stderr, no_line_lands_at_fd_2_when_it_was_closed_at_load)
{
    in_child(CLOSE_MARK);
    cr_expect_eq(size_of(b), 0, "written into the program's file");
}

/* The CLI notes nothing: its lines go to its fd 2, whatever it is. */
Test(log_stderr, without_a_note_lines_go_to_fd_2)
{
    in_child(NO_MARK_B);
    cr_expect_gt(size_of(b), 0);
}
