/* store_live.c — what keeps a segment from being removed as unused
 * (SPEC §5): its hold (the latest end of a pause in it) and its pins (the
 * processes that hold something counted in it while they live: a
 * max_open connection). Written by the gate, read by the sweep
 * (store_attach.c); layout.h says how the words move. A segment unused
 * for longer than its longest period has every budget full again, but a
 * pause or an open connection is not a budget that refills: removing
 * either would let requests reach a server that asked for a pause, or a
 * connection more than max_open. */
#include <stdatomic.h>

#include "state/store_int.h"
#include "util/atomics.h"
#include "util/ownerlock.h"

void rl_store_hold(struct rl_store *s, uint64_t until_ns)
{
    rl_atomic_u64 *w = &s->hdr->hold_until;
    uint64_t seen = rl_load_relaxed_u64(w);

    while (seen < until_ns && !rl_cas_acq_rel_u64(w, &seen, until_ns))
        ;
}

/* Claim record r for (pid, start) when it is free: start first, so that a
 * record is only read as someone's with both. */
static bool claim_pin(rl_atomic_u64 *r, uint32_t pid, uint64_t start)
{
    uint64_t zero = 0;

    if (rl_load_relaxed_u64(&r[0]) != 0)
        return false;
    rl_store_relaxed_u64(&r[1], start);
    return rl_cas_strong_acq_rel_u64(&r[0], &zero, (uint64_t)pid << 32 | 1);
}

void rl_store_pin(struct rl_store *s, uint32_t pid, uint64_t start)
{
    uint64_t me = (uint64_t)pid << 32 | 1;
    rl_atomic_u64(*pins)[2] = s->hdr->pins;

    /* One load when this process pinned it already (a fork child, or the
     * supervisor acting for another pid, looks again). */
    if (atomic_load_explicit(&s->pinned, memory_order_relaxed) == me)
        return;
    for (unsigned i = 0; i < RL_SEG_PINS; i++)
        if (rl_load_acquire_u64(&pins[i][0]) == me &&
            rl_load_relaxed_u64(&pins[i][1]) == start)
            goto pinned;
    for (int pass = 0; pass < 2; pass++)
        for (unsigned i = 0; i < RL_SEG_PINS; i++) {
            uint64_t w = rl_load_acquire_u64(&pins[i][0]);
            /* Second pass: the record of a process that is gone. */
            if (pass == 1 && w != 0 &&
                rl_pid_gone((uint32_t)(w >> 32),
                            rl_load_relaxed_u64(&pins[i][1])))
                rl_cas_strong_acq_rel_u64(&pins[i][0], &w, 0);
            if (claim_pin(pins[i], pid, start))
                goto pinned;
        }
    /* No record: the segment is never removed as unused (kept, never
     * lost); the next pin of this process tries again. */
    rl_add_relaxed_u64(&s->hdr->pins_lost, 1);
    return;
pinned:
    atomic_store_explicit(&s->pinned, me, memory_order_relaxed);
}

bool rl_seg_live(struct rl_seg_header *h, uint64_t now)
{
    if (rl_load_acquire_u64(&h->hold_until) > now ||
        rl_load_relaxed_u64(&h->pins_lost) != 0)
        return true;
    for (unsigned i = 0; i < RL_SEG_PINS; i++) {
        uint64_t w = rl_load_acquire_u64(&h->pins[i][0]);
        if (w != 0 && !rl_pid_gone((uint32_t)(w >> 32),
                                   rl_load_relaxed_u64(&h->pins[i][1])))
            return true;
    }
    return false;
}
