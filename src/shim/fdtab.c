/* fdtab.c — the lock-free per-fd mark table (see fdtab.h). */
#include "shim/fdtab.h"

#include "shim/self.h"
#include "util/zmap.h"

#include <stdatomic.h>
#include <stddef.h>

#define PAGE_SIZE_FDS (1u << RL_FDTAB_PAGE_BITS)
#define PAGE_MASK_FDS (PAGE_SIZE_FDS - 1u)
#define NPAGES (RL_FDTAB_MAX >> RL_FDTAB_PAGE_BITS)

/* The directory (struct rl_fdtab, in the shim's struct rl_shim): a page
 * pointer per PAGE_SIZE_FDS fds. A slot goes from NULL to a page once (CAS
 * by whichever thread marks first; the loser unmaps its page) and never
 * changes again. Readers load it with acquire, pairing with the release of
 * that CAS, so they see a zeroed page. 32 KiB of bss, touched only where
 * fds are marked. */

static _Atomic uint32_t *page_of(unsigned fd)
{
    /* Pairs with the release CAS in page_make. */
    return atomic_load_explicit(
        &rl_shim_self->fdtab.dir[fd >> RL_FDTAB_PAGE_BITS],
        memory_order_acquire);
}

static _Atomic uint32_t *page_make(unsigned fd)
{
    _Atomic uint32_t *p = page_of(fd);
    if (p != NULL)
        return p;
    _Atomic uint32_t *m = rl_zmap(PAGE_SIZE_FDS * sizeof(uint32_t));
    if (m == NULL)
        return NULL;
    _Atomic uint32_t *expected = NULL;
    if (atomic_compare_exchange_strong_explicit(
            &rl_shim_self->fdtab.dir[fd >> RL_FDTAB_PAGE_BITS], &expected, m,
            memory_order_acq_rel, memory_order_acquire))
        return m;
    rl_zunmap((void *)m, PAGE_SIZE_FDS * sizeof(uint32_t));
    return expected;
}

int rl_fdtab_set(int fd, uint32_t mark)
{
    if ((unsigned)fd >= RL_FDTAB_MAX)
        return -EBADF;
    if (mark == 0) {
        rl_fdtab_clear(fd);
        return 0;
    }
    _Atomic uint32_t *p = page_make((unsigned)fd);
    if (p == NULL)
        return -ENOMEM;
    atomic_store_explicit(&p[(unsigned)fd & PAGE_MASK_FDS], mark,
                          memory_order_relaxed);
    return 0;
}

void rl_fdtab_clear_range(unsigned first, unsigned last)
{
    if (first >= RL_FDTAB_MAX || first > last)
        return;
    if (last >= RL_FDTAB_MAX)
        last = RL_FDTAB_MAX - 1;
    unsigned fd = first;
    for (;;) {
        unsigned page_end = fd | PAGE_MASK_FDS;
        unsigned end = page_end < last ? page_end : last;
        _Atomic uint32_t *p = page_of(fd);
        if (p != NULL)
            for (unsigned i = fd; i <= end; i++)
                atomic_store_explicit(&p[i & PAGE_MASK_FDS], 0,
                                      memory_order_relaxed);
        if (end == last)
            break;
        fd = end + 1;
    }
}

void rl_fdtab_copy(int from, int to)
{
    uint32_t m = rl_fdtab_get(from);
    if (m != 0)
        rl_fdtab_set(to, m);
    else
        rl_fdtab_clear(to);
}

void rl_fdtab_drop_with(unsigned last, uint32_t bit)
{
    if (last >= RL_FDTAB_MAX)
        last = RL_FDTAB_MAX - 1;
    for (unsigned fd = 0; fd <= last; fd++) {
        _Atomic uint32_t *p = page_of(fd);
        if (p == NULL) {
            fd |= PAGE_MASK_FDS; /* skip the page that does not exist */
            continue;
        }
        _Atomic uint32_t *w = &p[fd & PAGE_MASK_FDS];
        uint32_t m = atomic_load_explicit(w, memory_order_relaxed);
        /* CAS: a socket() of another thread may have just re-marked the
         * number; only the provisional mark itself is dropped. */
        if (m & bit)
            atomic_compare_exchange_strong_explicit(
                w, &m, 0, memory_order_relaxed, memory_order_relaxed);
    }
}

bool rl_fdtab_cas(int fd, uint32_t *expect, uint32_t mark)
{
    if ((unsigned)fd >= RL_FDTAB_MAX)
        return false;
    _Atomic uint32_t *p = page_of((unsigned)fd);
    if (p == NULL) {
        *expect = 0;
        return false;
    }
    return atomic_compare_exchange_strong_explicit(
        &p[(unsigned)fd & PAGE_MASK_FDS], expect, mark, memory_order_relaxed,
        memory_order_relaxed);
}
