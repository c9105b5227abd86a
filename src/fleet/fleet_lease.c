/* fleet_lease.c — the host's pool of leased fleet units (fleet_lease.h).
 *
 * Words of the pool (a cache line for the fast path, one for the rate):
 *   0, 1  pool of send, send_bytes: left | spent << 40
 *   2     coarse time of the last spend
 *   3     coarse time of the last fill
 *   4     refill claim: coarse time it was taken, 0 when free
 *   8     start of the rate window (coarse)
 *   9, 10 units taken from Redis in the window (send, send_bytes)
 *   11,12 the last window's rate, units per second */
#include "fleet/fleet_lease.h"

#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#include "util/clock.h"

enum {
    W_LAST = 2,
    W_FILLED = 3,
    W_CLAIM = 4,
    W_RSTART = 8,
};

static inline rl_atomic_u64 *pool_word(const struct rl_fleet_pool *p, int k)
{
    return &p->w[k - 1];
}

static inline rl_atomic_u64 *runits(const struct rl_fleet_pool *p, int k)
{
    return &p->w[8 + k];
}

static inline rl_atomic_u64 *rate(const struct rl_fleet_pool *p, int k)
{
    return &p->w[10 + k];
}

bool rl_fleet_leasable(const struct rl_rule *rule)
{
    bool any = false;
    if (rule->scope != RL_SCOPE_FLEET)
        return false;
    for (int k = 0; k < RL_KIND_COUNT; k++) {
        if (!rl_kinds[k].leased)
            continue;
        for (unsigned i = 0; i < rule->nlimits[k]; i++) {
            if (rule->limits[k][i].algo != RL_ALGO_TOKEN_BUCKET)
                return false;
            any = true;
        }
    }
    return any;
}

void rl_fleet_pool_at(rl_atomic_u64 *area, rl_atomic_u64 *allowed,
                      unsigned stride, struct rl_fleet_pool *p)
{
    uintptr_t a = ((uintptr_t)area + 63) & ~(uintptr_t)63;
    p->w = (rl_atomic_u64 *)a;
    for (int k = 0; k < RL_KIND_COUNT; k++)
        p->allowed[k] = allowed != NULL ? allowed + k * stride : NULL;
}

static bool older(uint64_t then, uint64_t now, uint64_t ns)
{
    return now >= then && now - then >= ns;
}

static bool fresh(const struct rl_fleet_pool *p, uint64_t cnow)
{
    return !older(rl_load_relaxed_u64(&p->w[W_LAST]), cnow,
                  RL_FLEET_LEASE_IDLE_NS) &&
           !older(rl_load_relaxed_u64(&p->w[W_FILLED]), cnow,
                  RL_FLEET_LEASE_MAX_AGE_NS);
}

static void count_spent(const struct rl_fleet_pool *p, int k, uint64_t n)
{
    if (n != 0 && p->allowed[k] != NULL)
        rl_add_relaxed_u64(p->allowed[k], n);
}

/* Take n from kind k's pool: as spent (fast path) or not (counted by the
 * caller). */
static bool take_word(const struct rl_fleet_pool *p, int k, uint64_t n,
                      bool as_spent)
{
    rl_atomic_u64 *pw = pool_word(p, k);
    uint64_t w = rl_load_relaxed_u64(pw);
    for (;;) {
        uint64_t left = w & RL_FLEET_LEFT_MASK;
        uint64_t spent = w >> RL_FLEET_LEFT_BITS;
        if (left < n)
            return false;
        if (as_spent && RL_FLEET_SPENT_MAX - spent < n) {
            /* The spent field is full: count it now, and go on. */
            if (atomic_compare_exchange_weak_explicit(
                    pw, &w, left, memory_order_relaxed, memory_order_relaxed)) {
                count_spent(p, k, spent);
                w = left;
            }
            continue;
        }
        uint64_t nw = w - n + (as_spent ? n << RL_FLEET_LEFT_BITS : 0);
        if (atomic_compare_exchange_weak_explicit(
                pw, &w, nw, memory_order_relaxed, memory_order_relaxed))
            return true;
    }
}

/* Put n back into kind k's pool; `unspend`: they were counted as spent
 * (in the word, or in `allowed` once folded). */
static void put_word(const struct rl_fleet_pool *p, int k, uint64_t n,
                     bool unspend)
{
    rl_atomic_u64 *pw = pool_word(p, k);
    uint64_t w = rl_load_relaxed_u64(pw);
    for (;;) {
        uint64_t spent = w >> RL_FLEET_LEFT_BITS;
        uint64_t left = w & RL_FLEET_LEFT_MASK;
        bool in_word = unspend && spent >= n;
        if (RL_FLEET_LEFT_MASK - left < n)
            return; /* cannot happen (leases are far smaller): drop them */
        uint64_t nw = w + n - (in_word ? n << RL_FLEET_LEFT_BITS : 0);
        if (atomic_compare_exchange_weak_explicit(
                pw, &w, nw, memory_order_relaxed, memory_order_relaxed)) {
            if (unspend && !in_word && p->allowed[k] != NULL) {
                /* Folded meanwhile: off the counter, never below 0. */
                uint64_t v = rl_load_relaxed_u64(p->allowed[k]);
                while (!atomic_compare_exchange_weak_explicit(
                    p->allowed[k], &v, v > n ? v - n : 0, memory_order_relaxed,
                    memory_order_relaxed))
                    ;
            }
            return;
        }
    }
}

bool rl_fleet_lease_take(const struct rl_fleet_pool *p, uint64_t calls,
                         uint64_t bytes)
{
    uint64_t cnow = rl_clock_coarse_ns();
    if (!fresh(p, cnow))
        return false;
    if (calls > 0 && !take_word(p, RL_KIND_SEND, calls, true))
        return false;
    if (bytes > 0 && !take_word(p, RL_KIND_SEND_BYTES, bytes, true)) {
        if (calls > 0)
            put_word(p, RL_KIND_SEND, calls, true);
        return false;
    }
    if (rl_load_relaxed_u64(&p->w[W_LAST]) < cnow)
        rl_store_relaxed_u64(&p->w[W_LAST], cnow);
    return true;
}

void rl_fleet_lease_refund(const struct rl_fleet_pool *p, uint64_t calls,
                           uint64_t bytes)
{
    if (calls > 0)
        put_word(p, RL_KIND_SEND, calls, true);
    if (bytes > 0)
        put_word(p, RL_KIND_SEND_BYTES, bytes, true);
}

uint64_t rl_fleet_pool_get(const struct rl_fleet_pool *p, int kind,
                           uint64_t want, uint64_t min, uint64_t cnow)
{
    if (!fresh(p, cnow))
        return 0;
    rl_atomic_u64 *pw = pool_word(p, kind);
    uint64_t w = rl_load_relaxed_u64(pw);
    for (;;) {
        uint64_t left = w & RL_FLEET_LEFT_MASK;
        uint64_t n = left < want ? left : want;
        if (n == 0 || n < min)
            return 0;
        if (atomic_compare_exchange_weak_explicit(
                pw, &w, w - n, memory_order_relaxed, memory_order_relaxed)) {
            if (rl_load_relaxed_u64(&p->w[W_LAST]) < cnow)
                rl_store_relaxed_u64(&p->w[W_LAST], cnow);
            return n;
        }
    }
}

uint64_t rl_fleet_pool_drain(const struct rl_fleet_pool *p, int kind)
{
    rl_atomic_u64 *pw = pool_word(p, kind);
    if (rl_load_relaxed_u64(pw) == 0)
        return 0;
    uint64_t w = atomic_exchange_explicit(pw, 0, memory_order_relaxed);
    count_spent(p, kind, w >> RL_FLEET_LEFT_BITS);
    return w & RL_FLEET_LEFT_MASK;
}

uint64_t rl_fleet_pool_claim_stale(const struct rl_fleet_pool *p, int kind,
                                   uint64_t cnow)
{
    if (fresh(p, cnow))
        return 0;
    return rl_fleet_pool_drain(p, kind);
}

uint64_t rl_fleet_pool_lease_size(const struct rl_fleet_pool *p,
                                  const struct rl_rule *rule, int kind,
                                  uint64_t want, uint64_t cnow)
{
    /* A sixteenth of the smallest burst at most. */
    uint64_t cap = RL_FLEET_LEFT_MASK;
    for (unsigned i = 0; i < rule->nlimits[kind]; i++)
        if (rule->limits[kind][i].burst / 16 < cap)
            cap = rule->limits[kind][i].burst / 16;
    uint64_t r = rl_load_relaxed_u64(rate(p, kind));
    /* Of the host's rate: RL_FLEET_LEASE_HORIZON_NS of it (r < 2^44 for
     * any rate a config can say, so the product fits). */
    uint64_t size = r > (UINT64_MAX / RL_FLEET_LEASE_HORIZON_NS)
                        ? cap
                        : r * RL_FLEET_LEASE_HORIZON_NS / 1000000000u;
    if (size > cap)
        size = cap;
    uint64_t left =
        rl_load_relaxed_u64(pool_word(p, kind)) & RL_FLEET_LEFT_MASK;
    /* A lease that would not cover a few calls like this one is no use:
     * the round trip it saves is paid at the give-back. */
    uint64_t least = kind == RL_KIND_SEND ? 8 : 4 * (want > 0 ? want : 1);
    if (size < least || size <= left)
        return 0;
    rl_atomic_u64 *cw = &p->w[W_CLAIM];
    uint64_t c = rl_load_relaxed_u64(cw);
    if (c != 0 && !older(c, cnow, RL_FLEET_CLAIM_NS))
        return 0;
    if (!atomic_compare_exchange_strong_explicit(
            cw, &c, cnow | 1, memory_order_relaxed, memory_order_relaxed))
        return 0;
    return size - left;
}

/* The host's take rate: units from Redis per window, folded into units
 * per second by whoever first sees the window over. */
static void rate_add(const struct rl_fleet_pool *p, int kind, uint64_t took,
                     uint64_t gave, uint64_t cnow)
{
    rl_atomic_u64 *u = runits(p, kind);
    if (took > 0)
        rl_add_relaxed_u64(u, took);
    if (gave > 0) {
        uint64_t v = rl_load_relaxed_u64(u);
        while (!atomic_compare_exchange_weak_explicit(
            u, &v, v > gave ? v - gave : 0, memory_order_relaxed,
            memory_order_relaxed))
            ;
    }
    rl_atomic_u64 *sw = &p->w[W_RSTART];
    uint64_t start = rl_load_relaxed_u64(sw);
    if (start == 0 || start > cnow) {
        atomic_compare_exchange_strong_explicit(
            sw, &start, cnow, memory_order_relaxed, memory_order_relaxed);
        return;
    }
    uint64_t el = cnow - start;
    if (el < RL_FLEET_RATE_WINDOW_NS ||
        !atomic_compare_exchange_strong_explicit(
            sw, &start, cnow, memory_order_relaxed, memory_order_relaxed))
        return;
    for (int k = RL_KIND_SEND; k <= RL_KIND_SEND_BYTES; k++) {
        uint64_t n =
            atomic_exchange_explicit(runits(p, k), 0, memory_order_relaxed);
        /* n * 1e9 overflows only past 1.8e10 units in a window. */
        uint64_t r = n < UINT64_MAX / 1000000000u ? n * 1000000000u / el
                                                  : UINT64_MAX / 2;
        rl_store_relaxed_u64(rate(p, k), r);
    }
}

/* Count what was spent from kind k's pool so far (the counters stay at
 * most a lease behind). */
static void fold(const struct rl_fleet_pool *p, int k)
{
    rl_atomic_u64 *pw = pool_word(p, k);
    uint64_t w = rl_load_relaxed_u64(pw);
    while (w >> RL_FLEET_LEFT_BITS != 0) {
        if (atomic_compare_exchange_weak_explicit(
                pw, &w, w & RL_FLEET_LEFT_MASK, memory_order_relaxed,
                memory_order_relaxed)) {
            count_spent(p, k, w >> RL_FLEET_LEFT_BITS);
            return;
        }
    }
}

void rl_fleet_pool_filled(const struct rl_fleet_pool *p, int kind,
                          uint64_t leased, uint64_t took, uint64_t gave,
                          bool claimed, uint64_t cnow)
{
    fold(p, kind);
    if (leased > 0) {
        /* Fresh before the units are there: no one finds them stale. */
        rl_store_relaxed_u64(&p->w[W_FILLED], cnow);
        rl_store_relaxed_u64(&p->w[W_LAST], cnow);
        put_word(p, kind, leased, false);
    }
    rate_add(p, kind, took + leased, gave, cnow);
    if (claimed)
        rl_store_relaxed_u64(&p->w[W_CLAIM], 0);
}
