/* policy/fdlife.c: the one entry the shim's close and dup paths tell
 * policy through (rl_policy_fd_event), over both things policy keeps by
 * fd: max_open connections and the wait calls' entries. */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "gate_fixture.h"
#include "policy/fdlife.h"
#include "policy/open.h"
#include "policy/ready.h"
#include "ready_look.h"

#define S 1000000000ull
#define T0 (1000 * S)

static rl_atomic_u64 area[RL_OPEN_WORDS];

static void setup(void)
{
    fixture_state_dir("fdlife");
}

static void teardown(void)
{
    fixture_state_dir_remove();
}

TestSuite(fdlife, .init = setup, .fini = teardown);

static void tell(int what, unsigned first, unsigned last, bool may_lock)
{
    struct rl_fd_event ev = {what, first, last, may_lock};
    rl_policy_fd_event(&proc, &ev);
}

static void bind_one(int fd)
{
    uint32_t seq;
    rl_atomic_u64 *a[1] = {area};
    cr_assert_eq(rl_open_acquire(&proc.open, area, 1, &seq), 0);
    rl_open_bind(&proc.open, fd, a, 1);
}

Test(fdlife, a_connection_lives_while_a_dup_of_it_does)
{
    rl_open_enable(&proc.open);
    bind_one(100);
    tell(RL_FDLIFE_DUPED, 100, 101, false);
    tell(RL_FDLIFE_CLOSED, 100, 100, false);
    cr_expect_eq(rl_open_held(&proc.open, area), 1, "held through its dup");
    tell(RL_FDLIFE_CLOSED_RANGE, 90, ~0u, false);
    cr_expect_eq(rl_open_held(&proc.open, area), 0, "its last fd closed");
}

Test(fdlife, a_dup_onto_a_connections_fd_closes_it)
{
    rl_open_enable(&proc.open);
    bind_one(102);
    tell(RL_FDLIFE_DUPED, 103, 102, false); /* 103 holds nothing */
    cr_expect_eq(rl_open_held(&proc.open, area), 0);
}

Test(fdlife, wait_entries_are_forgotten_only_by_a_caller_that_may_lock)
{
    cr_assert_eq(rl_ready_hold(&proc, 7, T0 + S), 1);
    cr_assert_eq(rl_ready_hold(&proc, 8, T0 + S), 1);
    cr_assert_eq(rl_ready_hold(&proc, 9, T0 + S), 1);
    tell(RL_FDLIFE_CLOSED, 7, 7, false);
    cr_expect_eq(ready_hidden(&proc, 7, T0), RL_READY_HOLD,
                 "a handler's close leaves the entry");
    tell(RL_FDLIFE_CLOSED, 7, 7, true);
    cr_expect_eq(ready_hidden(&proc, 7, T0), 0);
    tell(RL_FDLIFE_DUPED, 3, 8, true); /* 8 replaced by a copy of 3 */
    cr_expect_eq(ready_hidden(&proc, 8, T0), 0);
    cr_expect_eq(ready_hidden(&proc, 3, T0), 0);
    tell(RL_FDLIFE_CLOSED_RANGE, 9, 9, true);
    cr_expect(!rl_ready_any(&proc.ready));
}
