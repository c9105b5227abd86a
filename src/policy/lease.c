/* lease.c — leases (lease.h).
 *
 * While a budget is far from binding, a thread takes send tokens a few at
 * a time from the shared bucket into a lease, then spends them with no
 * clock read but the coarse one (and the fine one once a tick) and one
 * uncontended CAS on a cache line of its own. The lease is a record in
 * the budget's state words (budget.h): units left and units spent, packed
 * in one word, and a stamp: a CLOCK_MONOTONIC time no later than the
 * holder's last call.
 *
 * Invariants:
 * - Leased units are already taken from the bucket: nothing can be
 *   over-admitted. A lease is taken only while the bucket holds at least
 *   half its burst, so a limit that binds is decided call by call.
 * - `allowed` counts units when spent: spent units sit in the record
 *   until folded into the counters (by the holder when it refills or
 *   gives the record back, or by whoever takes the record back); `rlshim
 *   stat` adds what held records have spent.
 * - A record is changed only by CAS on word 0. Its holder knows the value
 *   it last wrote; when its CAS fails, the record was taken back (idle, or
 *   zeroed by `rlshim reset`) and the holder simply forgets it: units left
 *   went back with it, units spent were counted by the taker.
 * - Any decision (any thread, any process) takes back records whose
 *   stamp is RL_LEASE_IDLE_NS old on CLOCK_MONOTONIC: units left go back
 *   within 10 ms of the holder's last call, whatever the holder does next
 *   (blocks, sleeps, is killed).
 * - The stamp is never later than the holder's last call, so that bound
 *   holds whatever the clocks do. It is not a coarse-clock reading: the
 *   coarse clock lags CLOCK_MONOTONIC by one to two ticks (a tick is 4 ms
 *   at HZ=250), by a different amount at each reading, so a
 *   record idle for 10 ms could look 5 ms idle on it. A holder reads only
 *   the coarse clock per call, and the fine one when the coarse one has
 *   moved: the stamp is about a tick older than its last call at most, so
 *   a busy holder's record is not taken back from under it. The take
 *   itself reads no clock (lease_take.h): the hook stamps after the real
 *   call (policy/gate_leased.h), still within the call.
 * - A refill first makes the record live and empty, then takes from the
 *   bucket, then publishes what it took by CAS from that value: a reset or
 *   a take-back in between makes the CAS fail, and the units go back.
 *
 * What this process spent (the exit report) is kept per thread in a
 * process table (struct rl_leases, a member of the process's struct
 * rl_proc: one struct rl_lease_holder per thread that leases), folded
 * into the report at the same moments as the record is folded into the
 * counters. */
#include "policy/lease.h"
#include "policy/lease_take.h"

#include <pthread.h>
#include <stdalign.h>
#include <string.h>
#include <time.h>

#include "policy/gate_int.h"
#include "policy/proc.h"
#include "policy/report.h"
#include "util/clock.h"
#include "util/ownerlock.h"

#define HOLDERS RL_LEASE_HOLDERS

/* The calling thread's holder in the struct rl_leases it used last
 * (lease_take.h). */
__thread struct rl_lease_holder *rl_lease_me
    __attribute__((tls_model("initial-exec")));

static void at_thread_exit(void *arg);

void rl_lease_setup(struct rl_proc *p, struct rl_gate *g)
{
    const struct rl_rule *rule = g->rule;
    struct rl_lease_conf *c = &g->lease;

    /* The key is the process's: made once, whatever reloads follow. */
    c->on = !rule->dry_run && !g->cfg->dry_run &&
            rl_budget_leasable(rule) &&
            (p->leases.keyed ||
             pthread_key_create(&p->leases.key, at_thread_exit) == 0);
    p->leases.keyed |= c->on;
    c->calls = rule->nlimits[RL_KIND_SEND] != 0;
    c->bytes = rule->nlimits[RL_KIND_SEND_BYTES] != 0;
    for (int k = RL_KIND_SEND; k <= RL_KIND_SEND_BYTES; k++) {
        if (rule->nlimits[k] == 0)
            continue;
        uint64_t cap =
            k == RL_KIND_SEND ? RL_LEASE_MAX_CALLS : RL_LEASE_MAX_BYTES;
        uint64_t b = rule->limits[k][0].burst;
        c->size[k] = b / 64 < cap ? b / 64 : cap;
    }
}

void rl_lease_atfork_child(struct rl_proc *p)
{
    /* The parent's leases are the parent's: spending them here too would
     * over-admit, and what its threads spent is its own report's. */
    memset(p->leases.holders, 0, sizeof p->leases.holders);
    rl_lease_me = NULL;
}

/* Stamp h's record: now (`cnow`: the coarse clock's reading, or 0). Out
 * of line: a leased send mostly finds the coarse clock where it was
 * (rl_lease_stamp). */
static __attribute__((noinline)) void stamp_now(struct rl_lease_holder *h,
                                                uint64_t cnow)
{
    h->tick = cnow != 0 ? cnow : rl_clock_coarse_ns();
    rl_store_relaxed_u64(&h->rec[1], rl_clock_now_ns());
}

void rl_lease_stamp(struct rl_lease_holder *h)
{
    uint64_t cnow = rl_clock_coarse_ns();
    /* Only a record still h's: the hook stamps after the real call, and
     * a send that blocked long enough left its record idle, to be taken
     * back and perhaps claimed by another thread meanwhile. */
    if ((cnow == 0 || cnow != h->tick) &&
        rl_load_relaxed_u64(&h->rec[0]) == h->word)
        stamp_now(h, cnow);
}

static rl_atomic_u64 *area(struct budget *b)
{
    return rl_budget_lease_bitmap(&b->layout, b->slot.words);
}

static rl_atomic_u64 *record(struct budget *b, unsigned i)
{
    return area(b) + RL_LEASE_WORDS * (1 + i);
}

/* Units left go back to b's buckets, units spent into its counters. */
static void settle(struct budget *b, const struct rl_lease_units *u)
{
    const struct rl_rule *rule = b->rule;
    for (int k = RL_KIND_SEND; k <= RL_KIND_SEND_BYTES; k++) {
        if (rule->nlimits[k] == 0)
            continue;
        /* A lease is of one token bucket (rl_budget_leasable). */
        if (u->left[k] != 0)
            rl_token_bucket_credit(b->states[k][0], &rule->limits[k][0],
                                   u->left[k]);
        if (u->spent[k] != 0)
            rl_add_relaxed_u64(&b->slot.counters[k * RL_STORE_STATS_PER_KIND +
                                                 RL_STAT_ALLOWED],
                               u->spent[k]);
    }
}

/* What this thread spent goes into the report. */
static void fold_mine(struct rl_report *r, struct rl_lease_holder *h)
{
    for (int k = RL_KIND_SEND; k <= RL_KIND_SEND_BYTES; k++) {
        uint64_t n = rl_load_relaxed_u64(&h->spent[k]);
        if (n != 0) {
            rl_store_relaxed_u64(&h->spent[k], 0);
            rl_report_add(r, k, RL_STAT_ALLOWED, n);
        }
    }
}

void rl_lease_lost(struct rl_report *r, struct rl_lease_holder *h)
{
    fold_mine(r, h);
    h->from = NULL;
}

/* Free record i of b: word 0 was set to 0 by the caller's CAS. */
static void unclaim(struct budget *b, unsigned i)
{
    atomic_fetch_and_explicit(area(b), ~(1ull << i), memory_order_acq_rel);
}

/* Give the holder's record back: what is left to the bucket, what was
 * spent to the counters. */
static void give_back(struct rl_report *r, struct rl_lease_holder *h)
{
    struct budget *b = h->from;
    if (b == NULL)
        return;
    uint64_t w = h->word;
    if (atomic_compare_exchange_strong_explicit(
            &h->rec[0], &w, 0, memory_order_acq_rel, memory_order_relaxed)) {
        struct rl_lease_units u;
        rl_lease_unpack(h->word, &u);
        settle(b, &u);
        unclaim(b, h->index);
    }
    rl_lease_lost(r, h);
}

static void at_thread_exit(void *arg)
{
    struct rl_lease_holder *h = arg;
    give_back(h->report, h);
    rl_store_release_u64(&h->in_use, 0);
}

struct rl_lease_holder *rl_lease_mine_elsewhere(const struct rl_leases *L)
{
    struct rl_lease_holder *h = L->keyed ? pthread_getspecific(L->key) : NULL;
    if (h != NULL)
        rl_lease_me = h;
    return h;
}


void rl_lease_drop(struct rl_proc *p)
{
    struct rl_gen *G = rl_proc_gen(p);
    struct rl_lease_holder *h = rl_lease_mine(&p->leases);
    if (h == NULL || h->from == NULL)
        return;
    /* Empty the record but keep it: what is left goes back, what was
     * spent is counted, and the next refill needs no claim. An empty
     * record left alone is taken back like any idle one. */
    uint64_t w = h->word;
    uint64_t nw = w & ~((1ull << RL_LEASE_GEN_SHIFT) - 1);
    if (w == nw)
        return;
    if (!atomic_compare_exchange_strong_explicit(
            &h->rec[0], &w, nw, memory_order_acq_rel, memory_order_relaxed)) {
        rl_lease_lost(&G->gate.report, h);
        return;
    }
    h->word = nw;
    struct rl_lease_units u;
    rl_lease_unpack(w, &u);
    settle(h->from, &u);
    fold_mine(&G->gate.report, h);
}

void rl_lease_finish(struct rl_proc *p)
{
    struct rl_gen *G = rl_proc_gen(p);
    struct rl_lease_holder *h = rl_lease_mine(&p->leases);
    if (h != NULL)
        give_back(&G->gate.report, h);
}

/* Could a call of `calls` and `bytes` at `now` use units idle leases
 * hold? When every bucket it needs holds what it asks and half its burst,
 * no: leases are still being taken, and the call has what it wants. Then
 * the scan (loads of other threads' lines) is not worth its cost. */
static bool short_of(struct budget *b, uint64_t now, uint64_t calls,
                     uint64_t bytes)
{
    const struct rl_rule *rule = b->rule;
    for (int k = RL_KIND_SEND; k <= RL_KIND_SEND_BYTES; k++) {
        if (rule->nlimits[k] == 0)
            continue;
        const struct rl_limit *lim = &rule->limits[k][0];
        uint64_t want = k == RL_KIND_SEND ? calls : bytes;
        uint64_t avail =
            rl_algorithm_get(lim->algo)->available(b->states[k][0], lim, now);
        if (avail < want || avail < lim->burst / 2)
            return true;
    }
    return false;
}

void rl_lease_reclaim(struct budget *b, uint64_t now, uint64_t calls,
                      uint64_t bytes)
{
    if (b->layout.lease == 0)
        return;
    uint64_t bits = rl_load_relaxed_u64(area(b));
    if (bits == 0 || !short_of(b, now, calls, bytes))
        return;
    /* Read here, not the decision's `now`: stamps are on the real clock
     * (the tests step `now` by hand). */
    uint64_t fnow = rl_clock_now_ns();
    for (unsigned i = 0; i < RL_LEASE_RECORDS; i++) {
        if (!(bits & (1ull << i)))
            continue;
        rl_atomic_u64 *rec = record(b, i);
        uint64_t w = rl_load_acquire_u64(&rec[0]);
        if (w == 0 || !rl_lease_idle(rl_load_relaxed_u64(&rec[1]), fnow))
            continue;
        if (!atomic_compare_exchange_strong_explicit(
                &rec[0], &w, 0, memory_order_acq_rel, memory_order_relaxed))
            continue; /* its holder just spent: not idle */
        struct rl_lease_units u;
        rl_lease_unpack(w, &u);
        settle(b, &u);
        unclaim(b, i);
    }
}

/* A holder entry for the calling thread, or NULL when all are taken. */
static struct rl_lease_holder *holder(struct rl_proc *p)
{
    struct rl_gen *G = rl_proc_gen(p);
    struct rl_leases *L = &p->leases;
    struct rl_lease_holder *h = rl_lease_mine(L);
    if (h != NULL)
        return h;
    for (unsigned i = 0; i < HOLDERS; i++) {
        uint64_t z = 0;
        if (rl_load_relaxed_u64(&L->holders[i].in_use) == 0 &&
            rl_cas_strong_acq_rel_u64(&L->holders[i].in_use, &z, 1)) {
            h = &L->holders[i];
            h->from = NULL;
            h->owner = L;
            h->report = &G->gate.report;
            /* Given back at thread exit. */
            pthread_setspecific(L->key, h);
            rl_lease_me = h;
            return h;
        }
    }
    return NULL;
}

/* Claim a free record of b for h, live and empty. */
static bool claim_record(struct rl_lease_holder *h, struct budget *b)
{
    rl_atomic_u64 *bitmap = area(b);
    uint64_t bits = rl_load_relaxed_u64(bitmap);
    for (unsigned i = 0; i < RL_LEASE_RECORDS; i++) {
        if (bits & (1ull << i))
            continue;
        if (!rl_cas_strong_acq_rel_u64(bitmap, &bits, bits | (1ull << i))) {
            i = (unsigned)-1; /* bits reloaded: look again from 0 */
            continue;
        }
        rl_atomic_u64 *rec = record(b, i);
        uint64_t gen = (rl_load_relaxed_u64(&rec[2]) + 1) & RL_LEASE_GEN_MASK;
        if (gen == 0)
            gen = 1;
        rl_store_relaxed_u64(&rec[2], gen);
        /* Fresh before live, so no one finds it idle at once. */
        h->rec = rec;
        stamp_now(h, 0);
        uint64_t zero = 0, w = gen << RL_LEASE_GEN_SHIFT;
        if (!rl_cas_strong_acq_rel_u64(&rec[0], &zero, w)) {
            unclaim(b, i);
            return false;
        }
        h->from = b;
        h->word = w;
        h->index = i;
        return true;
    }
    return false;
}

void rl_lease_refill(struct rl_proc *p, struct budget *b, uint64_t now,
                     uint64_t bytes)
{
    struct rl_gen *G = rl_proc_gen(p);
    const struct rl_lease_conf *c = &G->gate.lease;
    const struct rl_rule *rule = b->rule;
    struct rl_lease_holder *h = holder(p);
    if (h == NULL)
        return;
    if (h->from != b)
        give_back(&G->gate.report, h);
    /* A lease that would not cover a few calls like this one is no use. */
    if (c->bytes && c->size[RL_KIND_SEND_BYTES] / 4 < bytes)
        return;
    if (h->from == NULL && !claim_record(h, b))
        return;
    struct rl_lease_units u;
    rl_lease_unpack(h->word, &u);
    uint64_t gen = h->word >> RL_LEASE_GEN_SHIFT;
    /* Top up each kind from a bucket that holds at least half its burst. */
    struct rl_lease_units took = {{0}, {0}}, next = u;
    for (int k = RL_KIND_SEND; k <= RL_KIND_SEND_BYTES; k++) {
        next.spent[k] = 0;
        if (rule->nlimits[k] == 0 || u.left[k] >= c->size[k] / 2)
            continue;
        const struct rl_limit *lim = &rule->limits[k][0];
        const struct rl_algorithm *a = rl_algorithm_get(lim->algo);
        if (a->available(b->states[k][0], lim, now) < lim->burst / 2)
            continue;
        uint64_t n = c->size[k] - u.left[k];
        struct rl_verdict v = a->take(b->states[k][0], lim, now, n, n, 0);
        took.left[k] = v.granted;
        next.left[k] += v.granted;
    }
    /* One CAS publishes what was taken and folds what was spent; it fails
     * when the record was taken back or reset meanwhile, and then what
     * was taken goes back. */
    uint64_t w = h->word, nw = rl_lease_pack(gen, &next);
    if (nw != w) {
        if (!atomic_compare_exchange_strong_explicit(&h->rec[0], &w, nw,
                                                     memory_order_acq_rel,
                                                     memory_order_relaxed)) {
            settle(b, &took);
            rl_lease_lost(&G->gate.report, h);
            return;
        }
        h->word = nw;
        struct rl_lease_units spent = {{0}, {0}};
        spent.spent[RL_KIND_SEND] = u.spent[RL_KIND_SEND];
        spent.spent[RL_KIND_SEND_BYTES] = u.spent[RL_KIND_SEND_BYTES];
        settle(b, &spent);
        fold_mine(&G->gate.report, h);
    }
    stamp_now(h, 0);
}

void rl_lease_refund(struct rl_proc *p, uint64_t calls, uint64_t bytes)
{
    struct rl_gen *G = rl_proc_gen(p);
    const struct rl_lease_conf *c = &G->gate.lease;
    struct rl_lease_holder *h = rl_lease_mine(&p->leases);
    if (h == NULL || h->from == NULL)
        return;
    if (!c->calls)
        calls = 0;
    if (!c->bytes)
        bytes = 0;
    uint64_t w = h->word;
    if (((w >> RL_LEASE_CS_SHIFT) & RL_LEASE_C_MASK) < calls ||
        ((w >> RL_LEASE_BS_SHIFT) & RL_LEASE_B_MASK) < bytes)
        return;
    uint64_t nw = w + (calls << RL_LEASE_CL_SHIFT) -
                  (calls << RL_LEASE_CS_SHIFT) + (bytes << RL_LEASE_BL_SHIFT) -
                  (bytes << RL_LEASE_BS_SHIFT);
    if (!atomic_compare_exchange_strong_explicit(
            &h->rec[0], &w, nw, memory_order_relaxed, memory_order_relaxed)) {
        rl_lease_lost(&G->gate.report, h);
        return;
    }
    h->word = nw;
    rl_sub_sat_u64(&h->spent[RL_KIND_SEND], calls);
    rl_sub_sat_u64(&h->spent[RL_KIND_SEND_BYTES], bytes);
}

void rl_lease_report(struct rl_proc *p)
{
    struct rl_gen *G = rl_proc_gen(p);
    for (unsigned i = 0; i < HOLDERS; i++)
        if (rl_load_relaxed_u64(&p->leases.holders[i].in_use))
            fold_mine(&G->gate.report, &p->leases.holders[i]);
}
