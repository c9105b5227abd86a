/* test_window.c — the exact sliding window, on a fake clock except where
 * real threads race on the real one, and its lock, which a killed holder
 * cannot leave locked. */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "giveback_sim.h"
#include "limit/limit.h"
#include "util/clock.h"

#define MS 1000000ull
#define SEC 1000000000ull
#define HOUR (3600ull * SEC)

static const struct rl_algorithm *const win = &rl_sliding_window;

static struct rl_limit window(uint64_t count, uint64_t period)
{
    struct rl_limit lim;

    cr_assert_eq(
        rl_limit_prepare(&lim, RL_ALGO_SLIDING_WINDOW, count, period, 0), 0);
    return lim;
}

/* Fresh zeroed state words for `lim`. */
static rl_word *state(const struct rl_limit *lim)
{
    rl_word *st = calloc(win->state_words(lim), sizeof(*st));

    cr_assert_not_null(st);
    return st;
}

static uint64_t take(rl_word *st, const struct rl_limit *lim, uint64_t now,
                     uint64_t want, uint64_t min)
{
    return win->take(st, lim, now, want, min, 0).granted;
}

Test(window, admits_five_of_a_burst_of_seven_and_again_after_a_second)
{
    struct rl_limit lim = window(5, SEC);
    rl_word *st = state(&lim);
    int allowed = 0, i;

    cr_assert_eq(win->state_words(&lim), RL_WINDOW_STATE_WORDS + 5);
    for (i = 0; i < 7; i++)
        allowed += (int)take(st, &lim, 100 * SEC, 1, 1);
    cr_assert_eq(allowed, 5);
    allowed = 0;
    for (i = 0; i < 7; i++)
        allowed += (int)take(st, &lim, 101 * SEC, 1, 1);
    cr_assert_eq(allowed, 5);
    free(st);
}

Test(window, frees_a_slot_exactly_when_its_stamp_is_a_window_old)
{
    struct rl_limit lim = window(3, SEC);
    rl_word *st = state(&lim);
    uint64_t t0 = 50 * SEC;

    cr_assert_eq(take(st, &lim, t0, 1, 1), 1);
    cr_assert_eq(take(st, &lim, t0 + 300 * MS, 2, 2), 2);
    cr_assert_eq(take(st, &lim, t0 + SEC - 1, 1, 1), 0);
    cr_assert_eq(win->available(st, &lim, t0 + SEC - 1), 0);
    cr_assert_eq(win->available(st, &lim, t0 + SEC), 1);
    cr_assert_eq(take(st, &lim, t0 + SEC, 2, 2), 0);
    cr_assert_eq(take(st, &lim, t0 + SEC, 1, 1), 1);
    cr_assert_eq(take(st, &lim, t0 + 1300 * MS - 1, 1, 1), 0);
    cr_assert_eq(take(st, &lim, t0 + 1300 * MS, 5, 1), 2);
    free(st);
}

Test(window, admits_from_time_zero_without_reading_zero_as_unused)
{
    struct rl_limit lim = window(2, SEC);
    rl_word *st = state(&lim);

    cr_assert_eq(take(st, &lim, 0, 2, 2), 2);
    cr_assert_eq(take(st, &lim, 0, 1, 1), 0);
    cr_assert_eq(take(st, &lim, SEC / 2, 1, 1), 0);
    cr_assert_eq(take(st, &lim, SEC + 1, 2, 2), 2);
    free(st);
}

/* Random arrivals of random costs, partial grants allowed: list the time
 * of every unit admitted and check no window [t, t + W) holds N + 1. */
Test(window, never_admits_n_plus_one_in_any_window)
{
    const uint64_t n = 7, w = 100 * MS;
    struct rl_limit lim = window(n, w);
    rl_word *st = state(&lim);
    static uint64_t times[200000];
    uint64_t now = 5 * SEC, x = 2463534242, g, i, count = 0, full = 0;

    while (count + n < sizeof(times) / sizeof(times[0])) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        now += x % (w / 5);
        if (x % 4 == 0)
            now = now / w * w; /* land on window edges too */
        g = take(st, &lim, now, 1 + x % 4, 1 + (x >> 8) % 2);
        for (i = 0; i < g; i++)
            times[count++] = now;
        full += g;
    }
    for (i = n; i < count; i++)
        cr_assert(times[i] - times[i - n] >= w,
                  "units %lu and %lu only %lu ns apart", i - n, i,
                  times[i] - times[i - n]);
    /* Saturated: it admitted at least N per window on average. */
    cr_assert(full * w >= n * (now - 5 * SEC) * 9 / 10);
    free(st);
}

Test(window, uses_all_n_per_window_under_saturation)
{
    const uint64_t n = 10, w = SEC;
    struct rl_limit lim = window(n, w);
    rl_word *st = state(&lim);
    uint64_t t0 = 77 * SEC, t, k, got;

    for (k = 0; k < 100; k++) {
        got = 0;
        for (t = t0 + k * w; t < t0 + (k + 1) * w; t += 10 * MS)
            got += take(st, &lim, t, 1, 1);
        cr_assert_eq(got, n, "window %lu", k);
    }
    free(st);
}

/* An hour of saturation at each rate, arrivals every period / count: the
 * count admitted by every step is exactly N per window started. */
static void check_hour(uint64_t count, uint64_t period)
{
    struct rl_limit lim = window(count, period);
    rl_word *st = state(&lim);
    uint64_t t0 = 999 * SEC + 1, t, got = 0, ideal, step;

    step = period % count == 0 && period / count > MS ? period / count : period;
    for (t = t0; t - t0 <= HOUR; t += step) {
        got += take(st, &lim, t, count, 1);
        ideal = count * ((t - t0) / period + 1);
        cr_assert(got <= ideal + 1 && got + 1 >= ideal,
                  "%lu/%lu at +%lu: admitted %lu, ideal %lu", count, period,
                  t - t0, got, ideal);
    }
    free(st);
}

Test(window, stays_within_one_of_ideal_over_a_simulated_hour)
{
    check_hour(1, 60 * SEC);
    check_hour(5, SEC);
    check_hour(3, SEC);
    check_hour(1000, SEC);
    check_hour(7, MS);
    check_hour(60000, 60 * SEC);
}

Test(window, grants_part_of_a_cost_as_far_as_stamps_have_expired)
{
    struct rl_limit lim = window(10, SEC);
    rl_word *st = state(&lim);
    uint64_t t0 = SEC;

    cr_assert_eq(take(st, &lim, t0, 4, 4), 4);
    cr_assert_eq(take(st, &lim, t0 + 100 * MS, 6, 6), 6);
    cr_assert_eq(take(st, &lim, t0 + SEC, 20, 5), 0);
    cr_assert_eq(take(st, &lim, t0 + SEC, 20, 1), 4);
    cr_assert_eq(take(st, &lim, t0 + 1100 * MS, 3, 3), 3);
    cr_assert_eq(take(st, &lim, t0 + 1100 * MS, 3, 3), 3);
    cr_assert_eq(take(st, &lim, t0 + 1100 * MS, 3, 1), 0);
    free(st);
}

Test(window, tells_the_wait_to_the_nanosecond)
{
    struct rl_limit lim = window(3, SEC);
    rl_word *st = state(&lim);
    struct rl_verdict v;
    uint64_t t0 = 5 * SEC;

    take(st, &lim, t0, 1, 1);
    take(st, &lim, t0 + 250 * MS, 2, 2);
    v = win->take(st, &lim, t0 + 400 * MS, 1, 1, 0);
    cr_assert_eq(v.granted, 0);
    cr_assert_eq(v.wait_ns, 600 * MS);
    v = win->take(st, &lim, t0 + 400 * MS, 2, 2, 0);
    cr_assert_eq(v.wait_ns, 850 * MS);
    cr_assert_eq(take(st, &lim, t0 + 400 * MS + 850 * MS - 1, 2, 2), 0);
    cr_assert_eq(take(st, &lim, t0 + 400 * MS + 850 * MS, 2, 2), 2);
    v = win->take(st, &lim, t0, 4, 4, 0);
    cr_assert_eq(v.wait_ns, UINT64_MAX, "4 never fit in a window of 3");
    free(st);
}

Test(window, serves_reservations_in_order)
{
    struct rl_limit lim = window(2, SEC);
    rl_word *st = state(&lim);
    struct rl_verdict v;
    uint64_t t0 = 9 * SEC;
    unsigned i;

    take(st, &lim, t0, 1, 1);
    take(st, &lim, t0 + 100 * MS, 1, 1);
    for (i = 0; i < 6; i++) {
        v = win->take(st, &lim, t0 + 200 * MS, 1, 1, 10 * SEC);
        cr_assert_eq(v.granted, 1);
        /* Slots free at 1.0, 1.1, then 2.0, 2.1, 3.0, 3.1 s. */
        cr_assert_eq(v.wait_ns,
                     (i / 2 + 1) * SEC + (i % 2) * 100 * MS - 200 * MS,
                     "reservation %u", i);
    }
    v = win->take(st, &lim, t0 + 200 * MS, 1, 1, 3 * SEC);
    cr_assert_eq(v.granted, 0, "beyond max_wait");
    cr_assert_eq(v.wait_ns, 3 * SEC + 100 * MS - 200 * MS + SEC - 100 * MS);
    /* The reserved slots hold the time their callers go: nothing is free
     * before the first of them is a window old. */
    cr_assert_eq(take(st, &lim, t0 + 4 * SEC - 1, 1, 1), 0);
    cr_assert_eq(take(st, &lim, t0 + 4 * SEC, 1, 1), 1);
    free(st);
}

Test(window, refund_frees_the_slots_just_taken)
{
    struct rl_limit lim = window(4, SEC);
    rl_word *st = state(&lim);
    struct rl_verdict v;

    take(st, &lim, SEC, 1, 1);
    v = win->take(st, &lim, 2 * SEC - 10, 3, 3, 0);
    cr_assert_eq(v.granted, 3);
    cr_assert_eq(win->available(st, &lim, 2 * SEC - 10), 0);
    win->refund(st, &lim, 2 * SEC - 10, &v, 2);
    cr_assert_eq(win->available(st, &lim, 2 * SEC - 10), 2);
    win->refund(st, &lim, 2 * SEC - 10, &v, 2);
    cr_assert_eq(win->available(st, &lim, 2 * SEC - 10), 3,
                 "never more than was taken");
    cr_assert_eq(win->available(st, &lim, 2 * SEC), 4);
    /* The ring is still in time order: a cost of 4 waits for the oldest. */
    cr_assert_eq(take(st, &lim, 2 * SEC - 10, 4, 4), 0);
    cr_assert_eq(take(st, &lim, 2 * SEC - 10, 3, 3), 3);
    cr_assert_eq(take(st, &lim, 2 * SEC - 10, 1, 1), 0);
    free(st);
}

Test(window, refund_gives_nothing_back_once_newer_stamps_follow)
{
    struct rl_limit lim = window(4, SEC);
    rl_word *st = state(&lim);
    struct rl_verdict v;

    v = win->take(st, &lim, SEC, 2, 2, 0);
    take(st, &lim, SEC + 1, 1, 1);
    win->refund(st, &lim, SEC, &v, 2);
    cr_assert_eq(win->available(st, &lim, SEC + 1), 1);
    cr_assert_eq(take(st, &lim, SEC + 1, 2, 1), 1);
    free(st);
}

/* The case of the report: with `connect = 1/s` the ring is one stamp. A
 * reserved turn given back must leave the stamp it replaced, the unit
 * that went half a second ago, not 0: else the window looks empty and
 * the next caller goes at once, two within a second. */
Test(window, a_reserved_turn_given_back_leaves_the_stamp_it_replaced)
{
    struct rl_limit lim = window(1, SEC);
    rl_word *st = state(&lim);
    struct rl_verdict a, c;
    uint64_t t0 = 10 * SEC;

    cr_assert_eq(take(st, &lim, t0, 1, 1), 1);
    a = win->take(st, &lim, t0 + SEC / 2, 1, 1, HOUR);
    cr_assert_eq(a.granted, 1);
    cr_assert_eq(a.wait_ns, SEC / 2);
    win->refund(st, &lim, t0 + SEC / 2, &a, 1);
    cr_assert_eq(a.granted, 0);
    cr_assert_eq(take(st, &lim, t0 + SEC / 2 + MS, 1, 1), 0,
                 "the unit at t0 still counts");
    c = win->take(st, &lim, t0 + SEC / 2 + MS, 1, 1, HOUR);
    cr_assert_eq(c.granted, 1);
    cr_assert_eq(t0 + SEC / 2 + MS + c.wait_ns, t0 + SEC,
                 "the next turn is a window after t0, as if A never took");
    free(st);
}

/* A takes, B reserves the next turn, A gives back, C asks: C goes no
 * sooner than B's turn + W. */
Test(window, a_give_back_behind_a_later_reservation_frees_nothing)
{
    struct rl_limit lim = window(1, SEC);
    rl_word *st = state(&lim);
    struct rl_verdict a, b, c;
    uint64_t t = 10 * SEC;

    a = win->take(st, &lim, t, 1, 1, HOUR);
    b = win->take(st, &lim, t, 1, 1, HOUR);
    cr_assert_eq(a.wait_ns, 0);
    cr_assert_eq(b.wait_ns, SEC);
    win->refund(st, &lim, t, &a, 1);
    c = win->take(st, &lim, t, 1, 1, HOUR);
    cr_assert_eq(c.granted, 1);
    cr_assert_geq(c.wait_ns, 2 * SEC);
    free(st);
}

Test(window, a_reservation_given_back_at_once_frees_nothing_sooner)
{
    struct rl_limit lim = window(3, SEC);
    rl_word *st = state(&lim);
    struct rl_verdict a;
    uint64_t t0 = 10 * SEC, e1, e2;

    take(st, &lim, t0, 1, 1);
    take(st, &lim, t0 + 100 * MS, 1, 1);
    take(st, &lim, t0 + 200 * MS, 1, 1);
    e1 = win->eta(st, &lim, t0 + 500 * MS, 1);
    e2 = win->eta(st, &lim, t0 + 500 * MS, 2);
    cr_assert_eq(e1, 500 * MS);
    cr_assert_eq(e2, 600 * MS);
    a = win->take(st, &lim, t0 + 500 * MS, 2, 2, HOUR);
    cr_assert_eq(a.wait_ns, 600 * MS);
    win->refund(st, &lim, t0 + 500 * MS, &a, 2);
    /* The two slots get one stamp, that of the later unit they held:
     * exact for a cost of 2, the first unit frees later (under-use). */
    cr_assert_geq(win->eta(st, &lim, t0 + 500 * MS, 1), e1);
    cr_assert_leq(win->eta(st, &lim, t0 + 500 * MS, 1), e2);
    cr_assert_eq(win->eta(st, &lim, t0 + 500 * MS, 2), e2);
    cr_assert_eq(win->eta(st, &lim, t0 + 500 * MS, 4), UINT64_MAX);
    cr_assert_eq(take(st, &lim, t0 + SEC, 1, 1), 0,
                 "the unit at t0 is not gone before t0 + 1 s");
    cr_assert_eq(take(st, &lim, t0 + SEC + 100 * MS, 2, 2), 2);
    free(st);
}

/* Random interleavings of takes, reservations and give-backs: what went
 * never puts more than N in any window. */
Test(window, interleaved_give_backs_never_put_more_than_n_in_a_window)
{
    for (uint64_t seed = 1; seed <= 40; seed++) {
        struct rl_limit lim = window(seed % 2 ? 1 : 4, SEC);
        rl_word *st = state(&lim), *sts[1] = {st};

        cr_assert_gt(gb_run(sts, &lim, 1, seed, 2000, 300 * MS, lim.count), 0);
        free(st);
    }
}

Test(window, refuses_a_count_over_the_cap_and_a_burst)
{
    struct rl_limit lim;

    cr_assert_eq(rl_limit_prepare(&lim, RL_ALGO_SLIDING_WINDOW,
                                  RL_WINDOW_MAX_COUNT + 1, SEC, 0),
                 -EINVAL);
    cr_assert_eq(rl_limit_prepare(&lim, RL_ALGO_SLIDING_WINDOW,
                                  RL_WINDOW_MAX_COUNT, SEC, 0),
                 0);
    cr_assert_eq(rl_limit_prepare(&lim, RL_ALGO_SLIDING_WINDOW, 5, SEC, 6),
                 -EINVAL);
    cr_assert_eq(rl_limit_prepare(&lim, RL_ALGO_SLIDING_WINDOW, 5, SEC, 5), 0);
    cr_assert_eq(rl_limit_prepare(&lim, RL_ALGO_SLIDING_WINDOW, 0, SEC, 0),
                 -EINVAL);
    cr_assert_eq(rl_algorithm_get(RL_ALGO_SLIDING_WINDOW), win);
    cr_assert_str_eq(win->name, "sliding_window");
}

/* 100 real threads released together on one fresh window, all at one
 * instant (on the real clock, a round slower than the window on a loaded
 * machine would let a sixth in): exactly 5 go, 200 times over. */
struct herd {
    pthread_barrier_t start, done;
    struct rl_limit lim;
    rl_word *st;
    _Atomic unsigned admitted;
    unsigned rounds;
};

static void *herd_worker(void *arg)
{
    struct herd *h = arg;
    unsigned r;

    for (r = 0; r < h->rounds; r++) {
        pthread_barrier_wait(&h->start);
        if (win->take(h->st, &h->lim, 100 * SEC, 1, 1, 0).granted)
            atomic_fetch_add(&h->admitted, 1);
        pthread_barrier_wait(&h->done);
    }
    return NULL;
}

Test(window, admits_exactly_five_of_a_hundred_threads_two_hundred_times)
{
    static struct herd h;
    pthread_t th[100];
    unsigned i, r, words;

    h.lim = window(5, SEC);
    h.st = state(&h.lim);
    h.rounds = 200;
    words = win->state_words(&h.lim);
    pthread_barrier_init(&h.start, NULL, 101);
    pthread_barrier_init(&h.done, NULL, 101);
    for (i = 0; i < 100; i++)
        cr_assert_eq(pthread_create(&th[i], NULL, herd_worker, &h), 0);
    for (r = 0; r < h.rounds; r++) {
        for (i = 0; i < words; i++)
            atomic_store(&h.st[i], 0);
        atomic_store(&h.admitted, 0);
        pthread_barrier_wait(&h.start);
        pthread_barrier_wait(&h.done);
        cr_assert_eq(atomic_load(&h.admitted), 5, "round %u", r);
    }
    for (i = 0; i < 100; i++)
        pthread_join(th[i], NULL);
    free(h.st);
}

/* The lock. A process parked inside the critical section (between two
 * stores of the ring) through the test hook is SIGKILLed; another process
 * must then decide within a second, and the ring must still count right. */
struct shared {
    _Atomic int park; /* 1: the next holder parks in the hook */
    _Atomic int parked;
    rl_word st[RL_WINDOW_STATE_WORDS + 4];
};

static struct shared *shm;

static void park_here(rl_word *st)
{
    (void)st;
    if (!atomic_load(&shm->park))
        return;
    atomic_store(&shm->parked, 1);
    for (;;)
        pause();
}

static void use_parking_ops(void)
{
    static struct rl_lock_ops ops;

    ops = rl_ownerlock_ops;
    ops.in_critical = park_here;
    rl_window_set_lock_ops(&ops);
}

/* A child that parks inside the lock while taking 2 units, SIGKILLed
 * there. Returns its pid, not yet reaped. */
static pid_t kill_a_holder_of(const struct rl_limit *lim)
{
    shm = mmap(NULL, sizeof(*shm), PROT_READ | PROT_WRITE,
               MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    cr_assert_neq(shm, MAP_FAILED);
    use_parking_ops();
    atomic_store(&shm->park, 1);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        win->take(shm->st, lim, 10 * SEC, 2, 2, 0);
        _exit(0);
    }
    while (!atomic_load(&shm->parked))
        usleep(1000);
    /* The mutex's lock word (glibc: its first int) holds the child's tid. */
    cr_assert_neq((uint32_t)atomic_load(&shm->st[0]), 0,
                  "the child holds the lock");
    atomic_store(&shm->park, 0);
    kill(pid, SIGKILL);
    return pid;
}

Test(window, a_killed_lock_holder_does_not_wedge_the_others, .timeout = 10)
{
    struct rl_limit lim = window(4, SEC);
    uint64_t t0, took;
    struct rl_verdict v;
    int status;

    pid_t pid = kill_a_holder_of(&lim);
    cr_assert_eq(waitpid(pid, &status, 0), pid);

    t0 = rl_clock_now_ns();
    v = win->take(shm->st, &lim, 10 * SEC, 4, 1, 0);
    took = rl_clock_now_ns() - t0;
    cr_assert_lt(took, SEC, "decided after %lu ns", took);
    /* The child died after writing one of its two stamps, before moving
     * the head. Its job is finished for it (the ring stays in order): its
     * two units count, though it never went, and two are left. */
    cr_assert_eq(v.granted, 2, "granted %lu", v.granted);
    cr_assert_eq((uint32_t)atomic_load(&shm->st[0]), 0,
                 "and the lock is free again");
    cr_assert_eq(take(shm->st, &lim, 10 * SEC, 1, 1), 0);
    cr_assert_eq(take(shm->st, &lim, 11 * SEC, 4, 4), 4);
    rl_window_set_lock_ops(NULL);
    munmap(shm, sizeof(*shm));
}

Test(window, a_refund_killed_half_way_is_finished_by_the_next_holder,
     .timeout = 10)
{
    struct rl_limit lim = window(4, SEC);
    struct rl_verdict v;
    pid_t pid;
    int status;

    shm = mmap(NULL, sizeof(*shm), PROT_READ | PROT_WRITE,
               MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    cr_assert_neq(shm, MAP_FAILED);
    use_parking_ops();
    take(shm->st, &lim, 9 * SEC + SEC / 2, 1, 1);
    v = win->take(shm->st, &lim, 10 * SEC, 3, 3, 0);
    cr_assert_eq(v.granted, 3);
    atomic_store(&shm->park, 1);
    pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        win->refund(shm->st, &lim, 10 * SEC, &v, 3);
        _exit(0);
    }
    while (!atomic_load(&shm->parked))
        usleep(1000);
    atomic_store(&shm->park, 0);
    kill(pid, SIGKILL);
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    /* One slot zeroed at the newest end, the head not moved: taken as it
     * is, a cost of 4 would look at a 0 and over-admit. */
    cr_assert_eq(win->available(shm->st, &lim, 10 * SEC), 3);
    cr_assert_eq(take(shm->st, &lim, 10 * SEC, 4, 4), 0);
    cr_assert_eq(take(shm->st, &lim, 10 * SEC, 4, 1), 3);
    rl_window_set_lock_ops(NULL);
    munmap(shm, sizeof(*shm));
}

/* A holder that is alive but slow is waited for, never robbed. */
static void *slow_holder(void *arg)
{
    struct rl_limit *lim = arg;

    win->take(shm->st, lim, 10 * SEC, 3, 3, 0);
    return NULL;
}

static void nap_in_critical(rl_word *st)
{
    (void)st;
    if (atomic_exchange(&shm->park, 0)) {
        atomic_store(&shm->parked, 1);
        usleep(100 * 1000);
    }
}

Test(window, a_live_slow_holder_is_waited_for, .timeout = 10)
{
    static struct rl_lock_ops ops;
    struct rl_limit lim = window(4, SEC);
    pthread_t th;

    shm = calloc(1, sizeof(*shm));
    cr_assert_not_null(shm);
    ops = rl_ownerlock_ops;
    ops.in_critical = nap_in_critical;
    rl_window_set_lock_ops(&ops);
    atomic_store(&shm->park, 1);
    cr_assert_eq(pthread_create(&th, NULL, slow_holder, &lim), 0);
    while (!atomic_load(&shm->parked))
        usleep(1000);
    cr_assert_eq(take(shm->st, &lim, 10 * SEC, 4, 1), 1);
    pthread_join(th, NULL);
    cr_assert_eq(take(shm->st, &lim, 10 * SEC, 1, 1), 0);
    rl_window_set_lock_ops(NULL);
    free(shm);
}

/* A signal handler that decides on the window while its thread is inside
 * the lock: denied at once, never waiting for itself. */
static rl_word *reenter_st;
static const struct rl_limit *reenter_lim;
static int reenter_granted = -1;

static void reenter_inside(rl_word *st)
{
    (void)st;
    if (reenter_granted < 0)
        reenter_granted =
            (int)win->take(reenter_st, reenter_lim, SEC, 1, 1, 0).granted;
}

Test(window, a_handler_reentering_the_lock_is_denied_not_deadlocked,
     .timeout = 10)
{
    static struct rl_lock_ops ops;
    struct rl_limit lim = window(4, SEC);
    rl_word *st = state(&lim);
    rl_word *other = state(&lim);

    ops = rl_ownerlock_ops;
    ops.in_critical = reenter_inside;
    reenter_st = st;
    reenter_lim = &lim;
    rl_window_set_lock_ops(&ops);
    cr_assert_eq(take(st, &lim, SEC, 1, 1), 1);
    cr_assert_eq(reenter_granted, 0, "the same window: denied");
    /* Another window, while inside this one: denied too (the thread may
     * be inside glibc's robust-list bookkeeping, which is not
     * re-entrant). */
    reenter_granted = -1;
    reenter_st = other;
    cr_assert_eq(take(st, &lim, SEC, 1, 1), 1);
    cr_assert_eq(reenter_granted, 0);
    rl_window_set_lock_ops(NULL);
    /* The outer takes were whole: 2 of 4 spent, and nothing else. */
    cr_assert_eq(take(st, &lim, SEC, 4, 1), 2);
    cr_assert_eq(take(other, &lim, SEC, 4, 1), 4);
    free(st);
    free(other);
}

/* Four threads on one window, each reading a shared fake clock (so the
 * `now` a thread holds is often stale by the time it has the lock): sorted
 * by the times they passed, no N + 1 units fall within one window. */
#define RACE_CALLS 50000

struct race {
    struct rl_limit lim;
    rl_word *st;
    _Atomic uint64_t clock;
    uint64_t times[4][RACE_CALLS];
    unsigned count[4];
};

struct racer_arg {
    struct race *r;
    unsigned id;
};

static void *racer(void *arg)
{
    struct race *r = ((struct racer_arg *)arg)->r;
    unsigned id = ((struct racer_arg *)arg)->id, i, n = 0;
    uint64_t now;

    for (i = 0; i < RACE_CALLS; i++) {
        now = atomic_fetch_add(&r->clock, 1000);
        if (take(r->st, &r->lim, now, 1, 1))
            r->times[id][n++] = now;
    }
    r->count[id] = n;
    return NULL;
}

static int by_time(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return x < y ? -1 : x > y;
}

Test(window, never_admits_n_plus_one_in_a_window_under_contention)
{
    static struct race r;
    static uint64_t all[4 * RACE_CALLS];
    struct racer_arg args[4];
    pthread_t th[4];
    unsigned i, total = 0;

    r.lim = window(10, 100000); /* 10 per 100 us; calls every 1 us */
    r.st = state(&r.lim);
    atomic_store(&r.clock, SEC);
    for (i = 0; i < 4; i++) {
        args[i] = (struct racer_arg){&r, i};
        cr_assert_eq(pthread_create(&th[i], NULL, racer, &args[i]), 0);
    }
    for (i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        memcpy(all + total, r.times[i], r.count[i] * sizeof(all[0]));
        total += r.count[i];
    }
    qsort(all, total, sizeof(all[0]), by_time);
    for (i = 10; i < total; i++)
        cr_assert_geq(all[i] - all[i - 10], 100000, "units %u and %u", i - 10,
                      i);
    cr_assert_geq(total, 4 * RACE_CALLS / 100 * 10 * 9 / 10);
    free(r.st);
}

/* A holder stopped inside the lock (SIGSTOP): its waiters sleep. Each
 * waiter measures its own CPU time (getrusage) over the wall time of the
 * same wait, taking in a loop for 1.5 s; a spinning or yielding waiter
 * would use most of a core. */
struct stop_page {
    _Atomic int parked;
    _Atomic uint64_t cpu_ns[2], wall_ns[2], decided[2];
    rl_word st[RL_WINDOW_STATE_WORDS + 4];
};

static struct stop_page *spage;

static void park_stopped(rl_word *st)
{
    (void)st;
    atomic_store(&spage->parked, 1);
    for (;;)
        pause();
}

static uint64_t self_cpu_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * SEC + (uint64_t)ts.tv_nsec;
}

Test(window, a_stopped_holder_makes_its_waiters_sleep, .timeout = 20)
{
    static struct rl_lock_ops ops;
    struct rl_limit lim = window(4, SEC);
    pid_t holder, w[2];
    int status;

    spage = mmap(NULL, sizeof(*spage), PROT_READ | PROT_WRITE,
                 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    cr_assert_neq(spage, MAP_FAILED);
    holder = fork();
    cr_assert_geq(holder, 0);
    if (holder == 0) {
        ops = rl_ownerlock_ops;
        ops.in_critical = park_stopped;
        rl_window_set_lock_ops(&ops);
        win->take(spage->st, &lim, 10 * SEC, 1, 1, 0);
        _exit(3);
    }
    while (!atomic_load(&spage->parked))
        usleep(1000);
    cr_assert_eq(kill(holder, SIGSTOP), 0);
    for (int i = 0; i < 2; i++) {
        w[i] = fork();
        cr_assert_geq(w[i], 0);
        if (w[i] == 0) {
            uint64_t c0 = self_cpu_ns(), t0 = rl_clock_now_ns(), n = 0;

            while (rl_clock_now_ns() - t0 < 1500 * MS)
                n += win->take(spage->st, &lim, 10 * SEC, 1, 1, 0).granted;
            atomic_store(&spage->cpu_ns[i], self_cpu_ns() - c0);
            atomic_store(&spage->wall_ns[i], rl_clock_now_ns() - t0);
            atomic_store(&spage->decided[i], n);
            _exit(0);
        }
    }
    int wst[2];
    for (int i = 0; i < 2; i++)
        waitpid(w[i], &wst[i], 0);
    kill(holder, SIGKILL); /* before any assertion can leave it stopped */
    waitpid(holder, &status, 0);
    for (int i = 0; i < 2; i++) {
        cr_assert(WIFEXITED(wst[i]) && WEXITSTATUS(wst[i]) == 0);
        double cpu = (double)atomic_load(&spage->cpu_ns[i]);
        double wall = (double)atomic_load(&spage->wall_ns[i]);

        cr_assert_eq(atomic_load(&spage->decided[i]), 0,
                     "nobody passes a stopped holder");
        cr_assert_lt(cpu, wall / 100, "waiter %d: %.0f ns of CPU in %.0f ns", i,
                     cpu, wall);
    }
    /* Killed at last: the next take goes through at once. */
    cr_assert_eq(take(spage->st, &lim, 10 * SEC, 1, 1), 1);
    munmap(spage, sizeof(*spage));
}

Test(window, a_killed_holder_not_yet_reaped_counts_as_dead, .timeout = 10)
{
    struct rl_limit lim = window(4, SEC);
    uint64_t t0, took;
    struct rl_verdict v;
    int status;

    pid_t pid = kill_a_holder_of(&lim);
    /* Not reaped: the holder stays a zombie (as under a parent that never
     * waits) until the end of this test. Wait until it is one. */
    siginfo_t si;
    cr_assert_eq(waitid(P_PID, (id_t)pid, &si, WEXITED | WNOWAIT), 0);

    t0 = rl_clock_now_ns();
    v = win->take(shm->st, &lim, 10 * SEC, 4, 1, 0);
    took = rl_clock_now_ns() - t0;
    cr_assert_lt(took, SEC, "decided after %lu ns", took);
    cr_assert_eq(v.granted, 2, "granted %lu", v.granted);
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    rl_window_set_lock_ops(NULL);
    munmap(shm, sizeof(*shm));
}
