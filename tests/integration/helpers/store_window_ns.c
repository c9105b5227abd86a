/* store_window_ns — one side of the window-lock tests across PID namespaces,
 * run as its own program (under `unshare -p -f --mount-proc`, or not).
 *
 *   store_window_ns DIR HASH park   take a unit of the window and stop inside
 *                             its lock (between two ring stores); print
 *                             "parked" and wait there to be killed
 *   store_window_ns DIR HASH take   take one unit; print
 *                             "granted=G ms=WALL cpu_ms=CPU"
 *
 * The window is 5 per hour in slot 77 ("w|u") of the uid's segment for
 * config HASH in DIR, as the test makes it (test_store.c). Exit status 0,
 * or 2 when the store cannot be opened. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "limit/limit.h"
#include "state/store.h"
#include "util/clock.h"
#include "util/ownerlock.h"

static void park(rl_word *st)
{
    (void)st;
    fputs("parked\n", stdout);
    fflush(stdout);
    for (;;)
        pause();
}

static uint64_t cpu_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int main(int argc, char **argv)
{
    static struct rl_lock_ops ops;
    const struct rl_algorithm *win = &rl_sliding_window;
    struct rl_store_opts o = {
        .shared = true,
        .uid = (uint32_t)getuid(),
        .nslots = 256,
        .arena_words = 4096,
        .noverflow = 4,
        .overflow_words = 64,
    };
    struct rl_store *s;
    struct rl_limit lim;
    struct rl_slot sl;
    char why[256];
    bool ovf;

    if (argc != 4)
        return 2;
    o.dir = argv[1];
    o.config_hash = strtoull(argv[2], NULL, 0);
    if (rl_store_open(&s, &o, why, sizeof why) < 0 || !rl_store_is_shared(s) ||
        rl_limit_prepare(&lim, RL_ALGO_SLIDING_WINDOW, 5, 3600000000000ull,
                         0) < 0 ||
        rl_store_slot(s, 77, "w|u", win->state_words(&lim), 1, &sl, &ovf) < 0) {
        fprintf(stderr, "store_window_ns: %s\n", why);
        return 2;
    }
    if (argv[3][0] == 'p') {
        ops = rl_ownerlock_ops;
        ops.in_critical = park;
        rl_window_set_lock_ops(&ops);
        win->take(sl.words, &lim, rl_clock_now_ns(), 1, 1, 0);
        return 3; /* not reached */
    }
    uint64_t t0 = rl_clock_now_ns(), c0 = cpu_ns();
    uint64_t g = win->take(sl.words, &lim, rl_clock_now_ns(), 1, 1, 0).granted;
    printf("granted=%llu ms=%llu cpu_ms=%.3f\n", (unsigned long long)g,
           (unsigned long long)((rl_clock_now_ns() - t0) / 1000000),
           (double)(cpu_ns() - c0) / 1e6);
    rl_store_close(s);
    return 0;
}
