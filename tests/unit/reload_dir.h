/* reload_dir.h — a config file of a test's own, in a directory of its own
 * that is also the state directory, for the reload suites. */
#ifndef RL_TEST_RELOAD_DIR_H
#define RL_TEST_RELOAD_DIR_H

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>

static char dir[64], path[96];

/* An atomic replace: a new inode whatever the size and time. */
static inline void put(const char *text)
{
    char tmp[128];
    snprintf(tmp, sizeof tmp, "%s/new", dir);
    FILE *f = fopen(tmp, "w");
    cr_assert_not_null(f);
    fputs(text, f);
    fclose(f);
    cr_assert_eq(rename(tmp, path), 0);
}

static inline void reload_dir_make(void)
{
    snprintf(dir, sizeof dir, "/tmp/rlshim-reload-XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/rlshim.ini", dir);
    setenv("RLSHIM_CONFIG", path, 1);
    setenv("RLSHIM_STATE_DIR", dir, 1);
}

static inline void reload_dir_remove(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
}

#endif
