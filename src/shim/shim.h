/* shim.h — what every hook file shares: the init state, the re-entry
 * guard, and the sleep of a delayed call.
 *
 * A hook does its own work only between rl_shim_enter() (true) and
 * rl_shim_leave(); it never holds the guard across the real call or a
 * sleep, so a caller that siglongjmps out of either leaves nothing set. */
#ifndef RL_SHIM_SHIM_H
#define RL_SHIM_SHIM_H

#include <stdbool.h>
#include <stdint.h>

/* Set by the constructor when a config applies to this process; until
 * then (and for ever when there is nothing to enforce) hooks pass through.
 * Written once, before any mark exists. */
extern bool rl_shim_ready;

/* The thread's re-entry guard: set while the shim does its own work
 * (config, store, log), so that any hooked call made from inside passes
 * through; except a send on a MATCHED fd (only a signal handler that
 * interrupted the shim makes one: the shim's own writes are raw system
 * calls), which rl_hook_reentered charges. initial-exec: no allocation on
 * first access. */
extern __thread int rl_shim_busy __attribute__((tls_model("initial-exec")));

static inline bool rl_shim_enter(void)
{
    if (!__atomic_load_n(&rl_shim_ready, __ATOMIC_ACQUIRE) || rl_shim_busy)
        return false;
    rl_shim_busy = 1;
    /* Keep the compiler from moving the shim's work above the flag: a
     * signal handler on this thread must see it set. */
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    return true;
}

static inline void rl_shim_leave(void)
{
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    rl_shim_busy = 0;
}

/* Sleep until `deadline_ns` on CLOCK_MONOTONIC, resuming after EINTR for
 * the time left (an absolute deadline makes that exact). Holds nothing. */
void rl_shim_sleep_until(uint64_t deadline_ns);

#endif
