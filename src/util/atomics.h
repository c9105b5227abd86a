/* atomics.h — the only file that includes <stdatomic.h> outside limit/.
 *
 * Every shared word in rlshim is a 64-bit unsigned integer. The memory order
 * is part of each wrapper's name, so a reader sees it at the call site, and
 * each acquire names its release partner in a comment where it is used.
 * Words in shared memory must be lock-free: a lock-based atomic would be
 * guarded by a lock private to each process, which is no atomicity at all
 * across processes. */
#ifndef RL_UTIL_ATOMICS_H
#define RL_UTIL_ATOMICS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

_Static_assert(ATOMIC_LLONG_LOCK_FREE == 2, "64-bit atomics must be lock-free");
_Static_assert(sizeof(_Atomic uint64_t) == 8, "an atomic word is 8 bytes");

typedef _Atomic uint64_t rl_atomic_u64;

static inline uint64_t rl_load_relaxed_u64(rl_atomic_u64 *p)
{
    return atomic_load_explicit(p, memory_order_relaxed);
}

static inline uint64_t rl_load_acquire_u64(rl_atomic_u64 *p)
{
    return atomic_load_explicit(p, memory_order_acquire);
}

static inline void rl_store_relaxed_u64(rl_atomic_u64 *p, uint64_t v)
{
    atomic_store_explicit(p, v, memory_order_relaxed);
}

static inline void rl_store_release_u64(rl_atomic_u64 *p, uint64_t v)
{
    atomic_store_explicit(p, v, memory_order_release);
}

static inline uint64_t rl_add_relaxed_u64(rl_atomic_u64 *p, uint64_t v)
{
    return atomic_fetch_add_explicit(p, v, memory_order_relaxed);
}

static inline uint64_t rl_xchg_acq_rel_u64(rl_atomic_u64 *p, uint64_t v)
{
    return atomic_exchange_explicit(p, v, memory_order_acq_rel);
}

/* On failure *expected is updated with the current value. */
static inline bool rl_cas_acq_rel_u64(rl_atomic_u64 *p, uint64_t *expected,
                                      uint64_t desired)
{
    return atomic_compare_exchange_weak_explicit(
        p, expected, desired, memory_order_acq_rel, memory_order_acquire);
}

static inline bool rl_cas_strong_acq_rel_u64(rl_atomic_u64 *p,
                                             uint64_t *expected,
                                             uint64_t desired)
{
    return atomic_compare_exchange_strong_explicit(
        p, expected, desired, memory_order_acq_rel, memory_order_acquire);
}

static inline void rl_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

#endif
