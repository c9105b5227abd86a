/* The programs the suites run are the ones a fresh Debian machine has.
 *
 * A python3 found on PATH before /usr/bin (pyenv's shims, as on the CI
 * machines) is a shell script that runs several more before python starts,
 * for every client and every server a test starts, and is another python
 * than Debian's, without its python3-* modules. So before any test runs,
 * the runner puts a directory whose python3 is /usr/bin/python3 first on
 * PATH: `python3` in a test's script and `#!/usr/bin/env python3` in a
 * server are then the system's. Without /usr/bin/python3, PATH is left
 * alone. */
#include <criterion/criterion.h>
#include <criterion/hooks.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

ReportHook(PRE_ALL)(struct criterion_test_set *set)
{
    (void)set;
    const char *build = getenv("RLSHIM_BUILD");
    const char *path = getenv("PATH");
    if (build == NULL || access("/usr/bin/python3", X_OK) != 0)
        return;
    char dir[600], link[640], newpath[8192];
    snprintf(dir, sizeof dir, "%s/tests/system-python", build);
    snprintf(link, sizeof link, "%s/python3", dir);
    if ((mkdir(dir, 0755) != 0 && errno != EEXIST) ||
        (symlink("/usr/bin/python3", link) != 0 && errno != EEXIST)) {
        fprintf(stderr, "integration: could not make %s: %s\n", link,
                strerror(errno));
        return;
    }
    snprintf(newpath, sizeof newpath, "%s:%s", dir,
             path != NULL ? path : "/usr/bin:/bin");
    setenv("PATH", newpath, 1);
}

/* What a test's `python3` runs. */
Test(env, python3_on_path_is_the_systems)
{
    if (access("/usr/bin/python3", X_OK) != 0)
        cr_skip_test("no /usr/bin/python3: PATH's python3 is used");
    FILE *p = popen("python3 -c 'import sys; print(sys.executable)'", "r");
    cr_assert_not_null(p);
    char line[600] = "";
    char *got = fgets(line, sizeof line, p);
    pclose(p);
    cr_assert_not_null(got, "python3 printed nothing");
    line[strcspn(line, "\n")] = '\0';
    char *real = realpath(line, NULL);
    char *want = realpath("/usr/bin/python3", NULL);
    cr_expect(real != NULL && want != NULL && strcmp(real, want) == 0,
              "python3 is %s (%s), not /usr/bin/python3 (%s)", line,
              real != NULL ? real : "?", want != NULL ? want : "?");
    free(real);
    free(want);
}
