/* waitbuf.c — see waitbuf.h. */
#include "shim/waitbuf.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/mman.h>

#define BUFS 64
static struct rl_waitbuf *bufs[BUFS];
static _Atomic uint64_t bufs_taken;
/* The slots this thread holds: a fork child keeps only those (the other
 * threads' calls are not in it). */
static __thread uint64_t bufs_mine __attribute__((tls_model("initial-exec")));

static struct rl_waitbuf *buf_map(void)
{
    int saved = errno;
    void *m = mmap(NULL, sizeof(struct rl_waitbuf), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    errno = saved;
    return m == MAP_FAILED ? NULL : m;
}

struct rl_waitbuf *rl_waitbuf_take(unsigned *slot)
{
    uint64_t t = atomic_load_explicit(&bufs_taken, memory_order_relaxed);
    while (~t != 0) {
        unsigned i = (unsigned)__builtin_ctzll(~t);
        uint64_t bit = (uint64_t)1 << i;
        /* Acquire: pairs with the release of buf_give, so the slot's
         * buffer pointer, written by whoever held it first, is seen. */
        if (!atomic_compare_exchange_weak_explicit(&bufs_taken, &t, t | bit,
                                                   memory_order_acquire,
                                                   memory_order_relaxed))
            continue;
        bufs_mine |= bit;
        if (bufs[i] == NULL)
            bufs[i] = buf_map();
        if (bufs[i] == NULL) {
            bufs_mine &= ~bit;
            atomic_fetch_and_explicit(&bufs_taken, ~bit, memory_order_release);
            return NULL;
        }
        *slot = i;
        return bufs[i];
    }
    *slot = BUFS;
    return buf_map();
}

void rl_waitbuf_give(struct rl_waitbuf *b, unsigned slot)
{
    if (slot == BUFS) {
        int saved = errno;
        munmap(b, sizeof *b);
        errno = saved;
        return;
    }
    uint64_t bit = (uint64_t)1 << slot;
    bufs_mine &= ~bit;
    atomic_fetch_and_explicit(&bufs_taken, ~bit, memory_order_release);
}

void rl_wait_atfork_child(void)
{
    atomic_store_explicit(&bufs_taken, bufs_mine, memory_order_relaxed);
}
