/* The fd mark table: marks per fd, lazily grown, cleared by ranges. The
 * table lives in src/shim (not in librlcore.a), so it is compiled in. */
#include <criterion/criterion.h>
#include <pthread.h>

#include "../../src/shim/fdtab.c"

/* The shim's state, as shim/init.c holds it (the table's close paths ask
 * its max_open map). */
static struct rl_shim shim;
struct rl_shim *const rl_shim_self = &shim;

Test(fdtab, reads_zero_for_an_fd_never_marked)
{
    cr_assert_eq(rl_fdtab_get(3), 0);
    cr_assert_eq(rl_fdtab_get(123456), 0);
    cr_assert_eq(rl_fdtab_get(-1), 0);
}

Test(fdtab, keeps_the_mark_set_on_an_fd)
{
    cr_assert_eq(rl_fdtab_set(5, RL_FD_MATCHED | RL_FD_STREAM), 0);
    cr_assert_eq(rl_fdtab_get(5), RL_FD_MATCHED | RL_FD_STREAM);
    cr_assert_eq(rl_fdtab_get(4), 0);
    cr_assert_eq(rl_fdtab_get(6), 0);
}

Test(fdtab, grows_to_fd_one_million_without_touching_other_pages)
{
    cr_assert_eq(rl_fdtab_set(1000000, RL_FD_DGRAM), 0);
    cr_assert_eq(rl_fdtab_get(1000000), RL_FD_DGRAM);
    cr_assert_eq(rl_fdtab_get(999999), 0);
    /* Only the page of fd 1,000,000 exists. */
    cr_assert_null(page_of(0));
    cr_assert_not_null(page_of(1000000));
}

Test(fdtab, refuses_fds_beyond_its_range)
{
    cr_assert_eq(rl_fdtab_set(-1, 1), -EBADF);
    cr_assert_eq(rl_fdtab_set((int)RL_FDTAB_MAX, 1), -EBADF);
}

Test(fdtab, forgets_a_cleared_fd)
{
    rl_fdtab_set(7, RL_FD_MATCHED);
    rl_fdtab_clear(7);
    cr_assert_eq(rl_fdtab_get(7), 0);
    rl_fdtab_clear(40000); /* no page: nothing to do, no crash */
}

Test(fdtab, clears_a_range_across_pages_and_nothing_outside_it)
{
    int fds[] = {2, 3, 100, 16383, 16384, 70000, 1000000};
    for (unsigned i = 0; i < sizeof fds / sizeof fds[0]; i++)
        rl_fdtab_set(fds[i], RL_FD_MATCHED);
    rl_fdtab_clear_range(3, 70000);
    cr_assert_eq(rl_fdtab_get(2), RL_FD_MATCHED);
    cr_assert_eq(rl_fdtab_get(3), 0);
    cr_assert_eq(rl_fdtab_get(100), 0);
    cr_assert_eq(rl_fdtab_get(16383), 0);
    cr_assert_eq(rl_fdtab_get(16384), 0);
    cr_assert_eq(rl_fdtab_get(70000), 0);
    cr_assert_eq(rl_fdtab_get(1000000), RL_FD_MATCHED);
}

Test(fdtab, clears_to_the_end_for_an_open_ended_range)
{
    rl_fdtab_set(10, RL_FD_MATCHED);
    rl_fdtab_set(1000000, RL_FD_MATCHED);
    rl_fdtab_clear_range(3, ~0u);
    cr_assert_eq(rl_fdtab_get(10), 0);
    cr_assert_eq(rl_fdtab_get(1000000), 0);
}

Test(fdtab, copies_a_mark_or_its_absence)
{
    rl_fdtab_set(8, RL_FD_MATCHED | RL_FD_CHARGED);
    rl_fdtab_set(9, RL_FD_DGRAM);
    rl_fdtab_copy(8, 20);
    cr_assert_eq(rl_fdtab_get(20), RL_FD_MATCHED | RL_FD_CHARGED);
    rl_fdtab_copy(11, 9); /* 11 unmarked: 9 forgets its own mark */
    cr_assert_eq(rl_fdtab_get(9), 0);
}

static void *mark_page(void *arg)
{
    int base = *(int *)arg;
    for (int i = 0; i < 1000; i++)
        rl_fdtab_set(base + i * 4, RL_FD_MATCHED);
    return NULL;
}

Test(fdtab, keeps_every_mark_when_threads_race_to_create_a_page)
{
    pthread_t th[4];
    int base[4] = {500000, 500001, 500002, 500003};
    for (int i = 0; i < 4; i++)
        pthread_create(&th[i], NULL, mark_page, &base[i]);
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    for (int fd = 500000; fd < 504000; fd++)
        cr_assert_eq(rl_fdtab_get(fd), RL_FD_MATCHED, "fd %d", fd);
}

Test(fdtab, replaces_a_mark_only_while_it_is_what_was_expected)
{
    cr_assert_eq(rl_fdtab_set(7, RL_FD_MATCHED | RL_FD_INHERITED), 0);
    uint32_t expect = RL_FD_MATCHED | RL_FD_INHERITED;
    cr_assert(rl_fdtab_cas(7, &expect, RL_FD_KNOWN | RL_FD_STREAM));
    cr_assert_eq(rl_fdtab_get(7), RL_FD_KNOWN | RL_FD_STREAM);
    /* Another thread re-marked it meanwhile: left alone, and told. */
    expect = RL_FD_MATCHED | RL_FD_INHERITED;
    cr_assert_not(rl_fdtab_cas(7, &expect, 0));
    cr_assert_eq(expect, RL_FD_KNOWN | RL_FD_STREAM);
    cr_assert_eq(rl_fdtab_get(7), RL_FD_KNOWN | RL_FD_STREAM);
    /* No page: nothing to replace. */
    expect = 1;
    cr_assert_not(rl_fdtab_cas(900000000, &expect, RL_FD_KNOWN));
    cr_assert_eq(rl_fdtab_get(900000000), 0);
}

Test(fdtab, drops_only_the_marks_with_a_bit_up_to_the_last_fd)
{
    rl_fdtab_set(3, RL_FD_MATCHED | RL_FD_INHERITED);
    rl_fdtab_set(4, RL_FD_KNOWN | RL_FD_STREAM);
    rl_fdtab_set(20000, RL_FD_MATCHED | RL_FD_INHERITED);
    rl_fdtab_set(40000, RL_FD_MATCHED | RL_FD_INHERITED);
    rl_fdtab_drop_with(20000, RL_FD_INHERITED);
    cr_assert_eq(rl_fdtab_get(3), 0);
    cr_assert_eq(rl_fdtab_get(4), RL_FD_KNOWN | RL_FD_STREAM);
    cr_assert_eq(rl_fdtab_get(20000), 0);
    cr_assert_eq(rl_fdtab_get(40000), RL_FD_MATCHED | RL_FD_INHERITED,
                 "beyond `last`");
}
