/* waitbuf.c — see waitbuf.h. */
#include "shim/waitbuf.h"

#include <stdatomic.h>
#include <stdint.h>

#include "shim/self.h"
#include "util/zmap.h"

#define BUFS RL_WAITBUFS
/* The slots this thread holds: a fork child keeps only those (the other
 * threads' calls are not in it). */
static __thread uint64_t bufs_mine __attribute__((tls_model("initial-exec")));

static struct rl_waitbuf *buf_map(void)
{
    return rl_zmap(sizeof(struct rl_waitbuf));
}

struct rl_waitbuf *rl_waitbuf_take(unsigned *slot)
{
    struct rl_waitbufs *w = &rl_shim_self->waitbufs;
    uint64_t t = atomic_load_explicit(&w->taken, memory_order_relaxed);
    while (~t != 0) {
        unsigned i = (unsigned)__builtin_ctzll(~t);
        uint64_t bit = (uint64_t)1 << i;
        /* Acquire: pairs with the release of buf_give, so the slot's
         * buffer pointer, written by whoever held it first, is seen. */
        if (!atomic_compare_exchange_weak_explicit(&w->taken, &t, t | bit,
                                                   memory_order_acquire,
                                                   memory_order_relaxed))
            continue;
        bufs_mine |= bit;
        if (w->bufs[i] == NULL)
            w->bufs[i] = buf_map();
        if (w->bufs[i] == NULL) {
            bufs_mine &= ~bit;
            atomic_fetch_and_explicit(&w->taken, ~bit, memory_order_release);
            return NULL;
        }
        *slot = i;
        return w->bufs[i];
    }
    *slot = BUFS;
    return buf_map();
}

void rl_waitbuf_give(struct rl_waitbuf *b, unsigned slot)
{
    struct rl_waitbufs *w = &rl_shim_self->waitbufs;
    if (slot == BUFS) {
        rl_zunmap(b, sizeof *b);
        return;
    }
    uint64_t bit = (uint64_t)1 << slot;
    bufs_mine &= ~bit;
    atomic_fetch_and_explicit(&w->taken, ~bit, memory_order_release);
}

void rl_wait_atfork_child(void)
{
    struct rl_waitbufs *w = &rl_shim_self->waitbufs;
    atomic_store_explicit(&w->taken, bufs_mine, memory_order_relaxed);
}
