/* test_zlibload.c — zlib loaded with dlopen for a compressed robots.txt
 * (policy/zlibload.c): libz.so.1's own functions, a library that cannot
 * be loaded or lacks one said in words, and one load per process however
 * many threads ask at once. */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <zlib.h>

#include "policy/zlibload.h"

Test(zlibload, libz_so_1_gives_its_own_functions)
{
    struct rl_zlibload z;
    cr_assert_eq(rl_zlibload_load(&z, RL_ZLIBLOAD_LIB), 0, "%s", z.about);
    /* This binary links libz.so.1: dlopen finds that very library. */
    cr_expect_eq((void *)z.fns.init2, (void *)inflateInit2_);
    cr_expect_eq((void *)z.fns.inflate, (void *)inflate);
    dlclose(z.lib);
}

Test(zlibload, a_library_that_cannot_be_loaded_says_why)
{
    struct rl_zlibload z;
    cr_assert_eq(rl_zlibload_load(&z, "librlshim-no-such-zlib.so.1"),
                 -ENOENT);
    cr_expect_null(z.lib);
    cr_expect_null(z.fns.init2);
    cr_expect_null(z.fns.inflate);
    cr_expect_not_null(strstr(z.about, "cannot load zlib"), "%s", z.about);
    cr_expect_not_null(strstr(z.about, "librlshim-no-such-zlib.so.1"), "%s",
                       z.about);
}

Test(zlibload, a_library_without_inflate_is_refused)
{
    struct rl_zlibload z;
    cr_assert_eq(rl_zlibload_load(&z, "libc.so.6"), -ENOENT);
    cr_expect_null(z.lib);
    cr_expect_null(z.fns.inflate);
    cr_expect_not_null(strstr(z.about, "zlib lacks a function"), "%s",
                       z.about);
}

#define THREADS 8

static pthread_barrier_t all_there;

static void *ask(void *out)
{
    pthread_barrier_wait(&all_there);
    *(const struct rl_robots_zlib **)out = rl_zlibload_process();
    return NULL;
}

Test(zlibload, threads_asking_at_once_share_one_load)
{
    pthread_t t[THREADS];
    const struct rl_robots_zlib *got[THREADS];
    pthread_barrier_init(&all_there, NULL, THREADS);
    for (int i = 0; i < THREADS; i++)
        cr_assert_eq(pthread_create(&t[i], NULL, ask, &got[i]), 0);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    pthread_barrier_destroy(&all_there);
    for (int i = 0; i < THREADS; i++) {
        cr_assert_not_null(got[i], "thread %d got no zlib", i);
        cr_expect_eq(got[i], got[0], "thread %d", i);
    }
    cr_expect_eq((void *)got[0]->inflate, (void *)inflate);
    cr_expect_eq(rl_zlibload_process(), got[0]);
}
