/* lease_take.h — one send out of the calling thread's lease, inline: in
 * the send hooks (through policy/gate_leased.h), the hot path of every
 * never-binding send, and in the gate's own decision (policy/gate.c). The
 * rest of the lease (refill, drop, take-back, the invariants) is in
 * lease.c. */
#ifndef RL_POLICY_LEASE_TAKE_H
#define RL_POLICY_LEASE_TAKE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "policy/budget.h"
#include "policy/lease.h"
#include "policy/proc.h"
#include "util/atomics.h"
#include "util/clock.h"

/* The calling thread's holder in the struct rl_leases it used last: a
 * cache of what pthread_getspecific(its key) says, so that a leased send
 * costs one TLS load; checked against the leases it is asked for (a test
 * process has two). */
extern __thread struct rl_lease_holder *rl_lease_me
    __attribute__((tls_model("initial-exec")));

/* The calling thread's holder in L, when it used another struct
 * rl_leases since: its key says (and the cache follows). */
__attribute__((noinline)) struct rl_lease_holder *
rl_lease_mine_elsewhere(const struct rl_leases *L);

/* The holder's record is gone (taken back, or reset): forget it. */
__attribute__((noinline)) void rl_lease_lost(struct rl_report *r,
                                             struct rl_lease_holder *h);

/* The second half of a take: stamp h's record when the coarse clock has
 * moved since the last stamp (and the record is still h's). Out of line,
 * so that the take before it calls nothing: the hook stamps after the
 * real call. */
__attribute__((noinline)) void rl_lease_stamp(struct rl_lease_holder *h);

/* Is h's record due a stamp (rl_lease_stamp: the coarse clock moved
 * since the last, and the record is still h's)? Inline, for the hook
 * after the real call of a leased send: most find the clock where it
 * was, and the few that do not stamp through rl_settle_send. */
static inline bool rl_lease_stamp_due(const struct rl_lease_holder *h)
{
    uint64_t cnow = rl_clock_coarse_ns();
    return (cnow == 0 || cnow != h->tick) &&
           rl_load_relaxed_u64(&h->rec[0]) == h->word;
}

/* The calling thread's holder in L when it has one (NULL: none). A thread
 * that never held a lease (rl_lease_me NULL) has none anywhere. */
static inline struct rl_lease_holder *rl_lease_mine(const struct rl_leases *L)
{
    struct rl_lease_holder *h = rl_lease_me;
    if (__builtin_expect(h == NULL || h->owner == L, 1))
        return h;
    return rl_lease_mine_elsewhere(L);
}

enum rl_lease_spend { RL_LEASE_SHORT, RL_LEASE_SPENT, RL_LEASE_GONE };

/* One send call of `bytes` out of h's lease (h holds a record): SPENT when
 * it covered them, SHORT when it holds less, GONE when its record was
 * taken back (idle, or reset) since h last wrote it: then the caller
 * forgets it (rl_lease_lost). Calls nothing: no clock read, one
 * uncontended CAS. The caller stamps the record (rl_lease_stamp). */
static inline __attribute__((always_inline)) enum rl_lease_spend
rl_lease_spend(const struct rl_gen *G, struct rl_lease_holder *h,
               uint64_t bytes)
{
    const struct rl_lease_conf *c = &G->gate.lease;
    uint64_t w = h->word;
    uint64_t calls = c->calls ? 1 : 0;
    if (!c->bytes)
        bytes = 0;
    if (((w >> RL_LEASE_CL_SHIFT) & RL_LEASE_C_MASK) < calls ||
        ((w >> RL_LEASE_BL_SHIFT) & RL_LEASE_B_MASK) < bytes)
        return RL_LEASE_SHORT;
    /* From left to spent. Spent never exceeds what was leased since the
     * last fold, so the fields cannot carry into each other. */
    uint64_t nw = w +
                  calls * ((1ull << RL_LEASE_CS_SHIFT) -
                           (1ull << RL_LEASE_CL_SHIFT)) +
                  bytes * ((1ull << RL_LEASE_BS_SHIFT) -
                           (1ull << RL_LEASE_BL_SHIFT));
    if (!atomic_compare_exchange_strong_explicit(
            &h->rec[0], &w, nw, memory_order_relaxed, memory_order_relaxed))
        return RL_LEASE_GONE;
    h->word = nw;
    /* What this thread spent, for the exit report (only it reads it). */
    if (G->gate.report.on) {
        rl_store_relaxed_u64(&h->spent[RL_KIND_SEND],
                             rl_load_relaxed_u64(&h->spent[RL_KIND_SEND]) +
                                 calls);
        rl_store_relaxed_u64(
            &h->spent[RL_KIND_SEND_BYTES],
            rl_load_relaxed_u64(&h->spent[RL_KIND_SEND_BYTES]) + bytes);
    }
    return RL_LEASE_SPENT;
}

/* One send call of `bytes` out of the calling thread's lease: its holder
 * when the lease covered it (and it is spent; the caller then stamps it
 * with rl_lease_stamp), else NULL. G: the generation the caller's
 * decision loaded (proc.h), its lease settings the ones it checked. */
static inline struct rl_lease_holder *
rl_lease_take(struct rl_proc *p, struct rl_gen *G, uint64_t bytes)
{
    struct rl_lease_holder *h = rl_lease_mine(&p->leases);
    if (h == NULL || h->from == NULL)
        return NULL;
    enum rl_lease_spend r = rl_lease_spend(G, h, bytes);
    if (r == RL_LEASE_GONE)
        rl_lease_lost(&G->gate.report, h);
    return r == RL_LEASE_SPENT ? h : NULL;
}

/* rl_lease_take that calls nothing, for the hook's hot path: NULL also
 * when the thread's holder is another rl_leases' (a test process has two)
 * or its record is gone; the decision it then falls back to (rl_gate_send)
 * takes again and finds out. */
static inline __attribute__((always_inline)) struct rl_lease_holder *
rl_lease_take_hot(struct rl_proc *p, const struct rl_gen *G, uint64_t bytes)
{
    struct rl_lease_holder *h = rl_lease_me;
    if (h == NULL || h->owner != &p->leases || h->from == NULL)
        return NULL;
    return rl_lease_spend(G, h, bytes) == RL_LEASE_SPENT ? h : NULL;
}

#endif
