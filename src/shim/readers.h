/* readers.h — the threads inside a read of one connection, counted by key
 * (its fd, or its TLS session), so that a write asleep for its turn looks
 * at what the server sent only while no read of the program is under way
 * (readahead.h).
 *
 * A read under way hears an answer itself; and a look beside it could
 * show bytes that read took from the kernel before its own went to the
 * response side: read twice, or out of order. So a look is made only
 * while its key's count is 0, and sets RL_READERS_LOOK there meanwhile: a
 * read that begins during a look waits for it to end (a peek and a scan;
 * the scan never waits for the connection's state). A read in a signal
 * handler is not counted and never waits (the thread it interrupted may
 * be the one looking); its bytes go by unseen anyway (hook_recv.c). Keys
 * share a slot by hash: a shared slot costs a look, never a wrong one. */
#ifndef RL_SHIM_READERS_H
#define RL_SHIM_READERS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#define RL_READERS_SLOTS 256
#define RL_READERS_LOOK 0x40000000u

struct rl_readers {
    atomic_uint slot[RL_READERS_SLOTS];
};

static inline atomic_uint *rl_readers_at(struct rl_readers *t, uintptr_t key)
{
    key ^= key >> 17;
    key *= (uintptr_t)0x9e3779b97f4a7c15ull;
    return &t->slot[(key >> 24) % RL_READERS_SLOTS];
}

/* A look has the slot: wait for it (readahead.c). */
void rl_readers_wait(atomic_uint *slot);

/* Around the program's real read of `key`. */
static inline void rl_readers_enter(struct rl_readers *t, uintptr_t key)
{
    atomic_uint *s = rl_readers_at(t, key);
    unsigned old = atomic_fetch_add_explicit(s, 1, memory_order_acquire);
    if (__builtin_expect(old & RL_READERS_LOOK, 0))
        rl_readers_wait(s);
}

static inline void rl_readers_leave(struct rl_readers *t, uintptr_t key)
{
    atomic_fetch_sub_explicit(rl_readers_at(t, key), 1,
                              memory_order_release);
}

/* Take `key`'s slot for a look: false when a read is under way there (or
 * another look). */
static inline bool rl_readers_look(struct rl_readers *t, uintptr_t key)
{
    unsigned none = 0;
    return atomic_compare_exchange_strong_explicit(
        rl_readers_at(t, key), &none, RL_READERS_LOOK, memory_order_acquire,
        memory_order_relaxed);
}

static inline void rl_readers_looked(struct rl_readers *t, uintptr_t key)
{
    atomic_fetch_and_explicit(rl_readers_at(t, key), ~RL_READERS_LOOK,
                              memory_order_release);
}

#endif
