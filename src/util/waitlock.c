/* waitlock.c — see waitlock.h. */
#include "util/waitlock.h"

#include <linux/futex.h>
#include <time.h>

#include "util/clock.h"
#include "util/sys.h"

bool rl_waitlock_take(uint32_t *word, uint64_t max_ns)
{
    uint32_t free = 0;
    if (__atomic_compare_exchange_n(word, &free, 1, false, __ATOMIC_ACQUIRE,
                                    __ATOMIC_RELAXED))
        return true;
    uint64_t now = rl_clock_now_ns();
    uint64_t until = max_ns > UINT64_MAX - now ? UINT64_MAX : now + max_ns;
    /* 2 from now on: whoever lets go wakes a waiter (this one, or one the
     * same exchange found waiting already). */
    while (__atomic_exchange_n(word, 2, __ATOMIC_ACQUIRE) != 0) {
        now = rl_clock_now_ns();
        if (now >= until)
            return false;
        struct timespec ts = {.tv_sec = (time_t)((until - now) / 1000000000u),
                              .tv_nsec = (long)((until - now) % 1000000000u)};
        /* Returns at once unless the word is still 2: no wake is lost. */
        rl_sys.futex(word, FUTEX_WAIT_PRIVATE, 2, &ts);
    }
    return true;
}

void rl_waitlock_let_go(uint32_t *word)
{
    if (__atomic_exchange_n(word, 0, __ATOMIC_RELEASE) == 2)
        rl_sys.futex(word, FUTEX_WAKE_PRIVATE, 1, NULL);
}
