/* test_cfgwatch.c — the config file's identity and the once-a-second look
 * (SPEC §16): an atomic replace and an in-place write both count, a file
 * that appears or goes counts, and one look a period at most, whatever
 * the callers do between. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "util/cfgwatch.h"

#define SEC 1000000000ull

static char dir[64], path[96], tmp[96];

static void setup(void)
{
    snprintf(dir, sizeof dir, "/tmp/rlshim-cfgwatch-XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/rlshim.ini", dir);
    snprintf(tmp, sizeof tmp, "%s/new.ini", dir);
}

static void teardown(void)
{
    unlink(path);
    unlink(tmp);
    rmdir(dir);
}

TestSuite(cfgwatch, .init = setup, .fini = teardown);

static void write_file(const char *p, const char *text)
{
    FILE *f = fopen(p, "w");
    cr_assert_not_null(f);
    fputs(text, f);
    fclose(f);
}

static struct rl_cfgwatch watching(void)
{
    struct rl_cfgwatch w = {0};
    struct rl_cfgid id;
    cr_assert_eq(rl_cfgid_read(path, &id), 0);
    rl_cfgwatch_start(&w, &id, 5 * SEC);
    return w;
}

Test(cfgwatch, an_unchanged_file_is_the_same)
{
    write_file(path, "[default]\nconnect = 5/s\n");
    struct rl_cfgwatch w = watching();
    struct rl_cfgid now;
    cr_assert_not(rl_cfgwatch_changed(&w, path, &now));
}

Test(cfgwatch, an_atomic_replace_of_equal_size_and_time_counts)
{
    write_file(path, "[default]\nconnect = 5/s\n");
    struct rl_cfgwatch w = watching();
    write_file(tmp, "[default]\nconnect = 7/s\n");
    /* The same size, and the same mtime: only the inode tells. */
    struct timespec ts[2] = {{w.id.mtime_s, w.id.mtime_ns},
                             {w.id.mtime_s, w.id.mtime_ns}};
    cr_assert_eq(utimensat(AT_FDCWD, tmp, ts, 0), 0);
    cr_assert_eq(rename(tmp, path), 0);
    struct rl_cfgid now;
    cr_assert(rl_cfgwatch_changed(&w, path, &now));
    cr_assert_neq(now.ino, w.id.ino);
}

Test(cfgwatch, an_in_place_write_of_another_size_counts)
{
    write_file(path, "[default]\nconnect = 5/s\n");
    struct rl_cfgwatch w = watching();
    write_file(path, "[default]\nconnect = 50/s\n");
    struct rl_cfgid now;
    cr_assert(rl_cfgwatch_changed(&w, path, &now));
    cr_assert_eq(now.ino, w.id.ino);
}

Test(cfgwatch, an_in_place_write_of_the_same_size_counts_by_its_mtime)
{
    write_file(path, "[default]\nconnect = 5/s\n");
    struct rl_cfgwatch w = watching();
    write_file(path, "[default]\nconnect = 6/s\n");
    struct timespec ts[2] = {{0, UTIME_OMIT},
                             {w.id.mtime_s + 1, w.id.mtime_ns}};
    cr_assert_eq(utimensat(AT_FDCWD, path, ts, 0), 0);
    struct rl_cfgid now;
    cr_assert(rl_cfgwatch_changed(&w, path, &now));
}

Test(cfgwatch, a_removed_file_and_one_that_appears_count)
{
    struct rl_cfgwatch w = watching(); /* no file yet */
    cr_assert_not(w.id.present);
    struct rl_cfgid now;
    cr_assert_not(rl_cfgwatch_changed(&w, path, &now));
    write_file(path, "[default]\nconnect = 5/s\n");
    cr_assert(rl_cfgwatch_changed(&w, path, &now));
    cr_assert(now.present);
    w.id = now;
    unlink(path);
    cr_assert(rl_cfgwatch_changed(&w, path, &now));
    cr_assert_not(now.present);
}

Test(cfgwatch, one_look_a_second_at_most)
{
    write_file(path, "[default]\nconnect = 5/s\n");
    struct rl_cfgwatch w = watching(); /* started at 5 s */
    unsigned looks = 0;
    /* Calls every millisecond for ten seconds. */
    for (uint64_t t = 5 * SEC; t < 15 * SEC; t += SEC / 1000) {
        if (!rl_cfgwatch_due(&w, t))
            continue;
        looks += rl_cfgwatch_claim(&w, t);
        cr_assert_not(rl_cfgwatch_claim(&w, t), "a second claim at %lu",
                      (unsigned long)t);
    }
    cr_assert_eq(looks, 9, "looks: %u", looks); /* at 6, 7, ..., 14 s */
}

Test(cfgwatch, no_look_before_the_config_was_read)
{
    struct rl_cfgwatch w = {0};
    cr_assert_not(rl_cfgwatch_due(&w, 100 * SEC));
    cr_assert_not(rl_cfgwatch_claim(&w, 100 * SEC));
}

Test(cfgwatch, an_idle_process_looks_once_when_it_wakes)
{
    write_file(path, "[default]\nconnect = 5/s\n");
    struct rl_cfgwatch w = watching();
    cr_assert(rl_cfgwatch_claim(&w, 3600 * SEC));
    cr_assert_not(rl_cfgwatch_due(&w, 3600 * SEC + SEC / 2));
    cr_assert(rl_cfgwatch_due(&w, 3601 * SEC));
}
