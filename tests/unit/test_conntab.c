/* The plaintext connections whose requests are counted: a write and a
 * read hold one connection apart (a thread reading answers while another
 * thread's write sleeps for its turn sees them), their shared state is
 * taken by one side at a time, and an entry closed while held is freed
 * by the last holder. The table lives in src/shim (not in librlcore.a),
 * so it is compiled in; the shim's state (rl_shim_self) and the fd marks
 * it reads are test_fdtab.c's, which compiles shim/fdtab.c in. */
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <pthread.h>

#include "../../src/shim/conntab.c"

#define FD 7

static struct rl_reqconn *open_one(void)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(80)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    cr_assert(rl_conntab_open(FD, (struct sockaddr *)&sa, sizeof sa));
    struct rl_reqconn *c = rl_conntab_acquire(FD);
    cr_assert_not_null(c);
    rl_conntab_release(c);
    return c;
}

Test(conntab, a_read_holds_the_connection_a_write_holds)
{
    struct rl_reqconn *c = open_one();
    cr_assert_eq(rl_conntab_acquire(FD), c);
    cr_assert_eq(rl_conntab_acquire_read(FD), c,
                 "the read found the connection held by the write");
    cr_assert_eq(__atomic_load_n(&c->resp_lost, __ATOMIC_RELAXED), 0,
                 "the read marked the answers lost");
    rl_conntab_release(c);
    rl_conntab_release_read(c);
}

Test(conntab, a_second_write_or_read_at_once_is_not_scanned)
{
    struct rl_reqconn *c = open_one();
    cr_assert_eq(rl_conntab_acquire(FD), c);
    cr_assert_eq(rl_conntab_acquire_read(FD), c);
    cr_assert_null(rl_conntab_acquire(FD));
    cr_assert_eq(c->resp_lost, 0, "a second write lost no answer");
    cr_assert_null(rl_conntab_acquire_read(FD));
    cr_assert_eq(c->resp_lost, 1, "a second read's bytes went by unseen");
    rl_conntab_release(c);
    rl_conntab_release_read(c);
    cr_assert_eq(rl_conntab_acquire_read(FD), c, "let go, it is had again");
    rl_conntab_release_read(c);
}

Test(conntab, a_connection_closed_while_both_hold_it_outlives_the_first)
{
    struct rl_reqconn *c = open_one();
    cr_assert_eq(rl_conntab_acquire(FD), c);
    cr_assert_eq(rl_conntab_acquire_read(FD), c);
    rl_conntab_forget(FD);
    cr_assert_eq(atomic_load(&rl_shim_self->conntab.n), 0);
    cr_assert_null(rl_conntab_acquire(FD), "unlinked at the close");
    rl_conntab_release(c);
    /* Still the reader's (ASan sees a use after a free here). */
    cr_assert_eq(c->holds, READER | CLOSED);
    rl_conntab_release_read(c); /* the last: frees it */
}

Test(conntab, a_closed_connection_held_by_a_read_alone_is_freed_by_it)
{
    struct rl_reqconn *c = open_one();
    cr_assert_eq(rl_conntab_acquire_read(FD), c);
    rl_conntab_forget(FD);
    cr_assert_eq(c->holds, READER | CLOSED);
    rl_conntab_release_read(c);
}

static void *hold_for_5s(void *arg)
{
    return (void *)(intptr_t)rl_reqconn_hold(arg, 5000000000ull);
}

static void *hold_for_1ms(void *arg)
{
    return (void *)(intptr_t)rl_reqconn_hold(arg, 1000000ull);
}

Test(conntab, the_shared_state_is_one_sides_at_a_time)
{
    struct rl_reqconn *c = open_one();
    cr_assert(rl_reqconn_hold(c, 0));
    pthread_t t;
    void *got;
    /* Not had while held: the bound ends the wait. */
    cr_assert_eq(pthread_create(&t, NULL, hold_for_1ms, c), 0);
    pthread_join(t, &got);
    cr_assert_eq((intptr_t)got, 0, "taken while the other side held it");
    /* A waiter is woken when it is let go (well inside its bound). */
    cr_assert_eq(pthread_create(&t, NULL, hold_for_5s, c), 0);
    struct timespec ms = {0, 20000000};
    nanosleep(&ms, NULL);
    rl_reqconn_let_go(c);
    pthread_join(t, &got);
    cr_assert_eq((intptr_t)got, 1, "the waiter did not get it");
    rl_reqconn_let_go(c);
    cr_assert(rl_reqconn_hold(c, 0), "let go, it is free");
    rl_reqconn_let_go(c);
}
