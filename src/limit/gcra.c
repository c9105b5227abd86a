/* gcra.c — the token bucket as GCRA on one 64-bit word.
 *
 * The word is the theoretical arrival time (TAT): the time at which the
 * bucket would be full again, had nothing more been taken. A call at time t
 * finds max(TAT, t) + cost <= t + burst, takes by moving TAT forward, and
 * publishes it with one CAS. Because the new TAT is built on max(TAT, t),
 * the word never moves backwards, whatever stale or skewed `now` a caller
 * passes, and nothing can be over-admitted by a stall between the caller's
 * clock read and the CAS: every grant moves TAT forward by its cost, and no
 * grant lets TAT pass (latest t used) + burst.
 *
 * Time is measured in ticks, not nanoseconds: one token is exactly S ticks
 * (S a power of two), and ticks(now) = floor(now * N * S / period), exact.
 * Rounding the emission interval period/N to whole nanoseconds would drift
 * (7000/s for an hour is 88 tokens off); here `now` is converted afresh on
 * every call and costs are exact integers, so no error accumulates: over
 * any span the count admitted is within one token of burst + rate * span.
 * S is as large as the range allows (ticks(now) <= now while the rate is at
 * most 1 unit/ns), which keeps a tick at most a nanosecond wide.
 *
 * Who writes the word: every take and refund, only by CAS; 0 means full.
 * A refund is exact or nothing: see gcra_refund.
 *
 * derived[] of a token-bucket limit: */
#include "limit/internal.h"

enum {
    D_SHIFT = 0, /* log2(S) */
    D_NS = 1,    /* N * S: ticks per period */
    D_MI = 2,    /* integer part of N * S / period (rounded up) */
    D_MF = 3,    /* fractional part, in 2^-64 units (rounded up) */
    D_BS = 4,    /* burst * S: the bucket's depth in ticks */
    D_MAXNOW = 5 /* the largest `now` whose ticks stay below 2^62 */
};

__extension__ typedef unsigned __int128 u128;

#define TICKS_MAX (UINT64_C(1) << 62)
#define BURST_TICKS_MAX (UINT64_C(1) << 60)

static uint64_t mulhi(uint64_t a, uint64_t b)
{
    return (uint64_t)(((u128)a * b) >> 64);
}

/* floor(now * N * S / period), exactly. The estimate from the rounded-up
 * reciprocal is never low and at most one high (its error is below
 * now / 2^64 < 1), so one comparison of two exact products corrects it. */
static uint64_t ticks(const struct rl_limit *lim, uint64_t now)
{
    uint64_t q = now * lim->derived[D_MI] + mulhi(now, lim->derived[D_MF]);

    if ((u128)q * lim->period_ns > (u128)now * lim->derived[D_NS])
        q--;
    return q;
}

/* The first time, in ns, at which ticks() reaches `x`: the smallest n with
 * n * N * S >= x * period. Slow path only (a 128-bit division). */
static uint64_t ticks_to_ns_ceil(const struct rl_limit *lim, uint64_t x)
{
    u128 num = (u128)x * lim->period_ns;
    u128 ns = lim->derived[D_NS];
    u128 n = (num + ns - 1) / ns;

    return n > UINT64_MAX ? UINT64_MAX : (uint64_t)n;
}

/* ns from `now` until ticks() reaches `x` (> ticks(now)). */
static uint64_t wait_until(const struct rl_limit *lim, uint64_t now, uint64_t x)
{
    uint64_t at = ticks_to_ns_ceil(lim, x);

    if (at == UINT64_MAX)
        return UINT64_MAX;
    return at > now ? at - now : 0;
}

int rl_gcra_derive(struct rl_limit *lim)
{
    uint64_t n = lim->count, p = lim->period_ns, b = lim->burst;
    unsigned shift = 0;
    uint64_t ns;
    u128 r;

    if ((u128)n > (u128)p * RL_GCRA_MAX_UNITS_PER_NS)
        return RL_LIMIT_ERANGE;
    if (b > BURST_TICKS_MAX)
        return RL_LIMIT_ERANGE;
    /* The largest S = 2^shift with N * S <= period and burst * S <= 2^60. */
    while (shift < 60 && n <= p >> (shift + 1) &&
           b <= BURST_TICKS_MAX >> (shift + 1))
        shift++;
    ns = n << shift;
    /* N * S / period as Mi + Mf / 2^64, rounded up. ns < 2^64. */
    r = (((u128)ns << 64) + p - 1) / p;
    lim->derived[D_SHIFT] = shift;
    lim->derived[D_NS] = ns;
    lim->derived[D_MI] = (uint64_t)(r >> 64);
    lim->derived[D_MF] = (uint64_t)r;
    lim->derived[D_BS] = b << shift;
    /* ticks(now) <= now * ns / p + 1 < 2^62 for now below this. */
    r = ((u128)(TICKS_MAX - 1) * p) / ns;
    lim->derived[D_MAXNOW] = r > UINT64_MAX ? UINT64_MAX : (uint64_t)r;
    return 0;
}

static uint32_t gcra_state_words(const struct rl_limit *lim)
{
    (void)lim;
    return 1;
}

/* Whole tokens free at tick t with the TAT at base (>= t). */
static uint64_t tokens_free(const struct rl_limit *lim, uint64_t t,
                            uint64_t base)
{
    uint64_t top = t + lim->derived[D_BS];

    return base >= top ? 0 : (top - base) >> lim->derived[D_SHIFT];
}

static struct rl_verdict gcra_take(rl_word *st, const struct rl_limit *lim,
                                   uint64_t now, uint64_t want, uint64_t min,
                                   uint64_t max_wait_ns)
{
    const unsigned shift = (unsigned)lim->derived[D_SHIFT];
    const uint64_t bs = lim->derived[D_BS];
    struct rl_verdict v = {0, 0, 0};
    uint64_t t, tat, base, avail, grant, next, wait, reserved;

    if (min == 0)
        min = 1;
    if (want > lim->burst)
        want = lim->burst;
    if (min > want || now > lim->derived[D_MAXNOW]) {
        v.wait_ns = UINT64_MAX;
        return v;
    }
    t = ticks(lim, now);
    /* Pairs with the CAS below in other callers: we read the TAT they
     * published and publish ours the same way. */
    tat = atomic_load_explicit(st, memory_order_acquire);
    for (;;) {
        base = tat > t ? tat : t;
        avail = tokens_free(lim, t, base);
        if (avail >= min) {
            grant = avail < want ? avail : want;
            next = base + (grant << shift);
            wait = 0;
        } else {
            /* Not enough now: when `min` would be free. */
            wait = wait_until(lim, now, base + (min << shift) - bs);
            /* Reserve `want`: the caller goes when they would have been
             * free, and the TAT moves past them so the next one queues
             * behind. Capped far below overflow (base <= 2^62 + 2^61). */
            if (max_wait_ns == 0 || base > TICKS_MAX + (TICKS_MAX >> 1))
                goto deny;
            grant = want;
            next = base + (grant << shift);
            reserved = wait_until(lim, now, next - bs);
            if (reserved > max_wait_ns)
                goto deny;
            wait = reserved;
        }
        if (atomic_compare_exchange_weak_explicit(
                st, &tat, next, memory_order_acq_rel, memory_order_acquire))
            break;
    }
    v.granted = grant;
    v.wait_ns = wait;
    v.stamp = next; /* what refund() must still find there */
    return v;
deny:
    v.wait_ns = wait;
    return v;
}

/* Give back only while the word is still what this grant (or its last
 * give-back) wrote: then no take has been decided on it since, and moving
 * the TAT back by the units is undoing them exactly. Once another caller
 * has taken, its grant was built on our TAT: a reservation's turn is
 * already promised, and a take that found the bucket full was not charged
 * for ours, so moving the TAT back would hand the same turn, or a token
 * the bucket never held, to the next caller. Then the units are lost:
 * under-use, never over-admission. A word that comes back to our value
 * (the later takes were given back in turn) is ours again: TATs only grow
 * but by exact undoing. */
static void gcra_refund(rl_word *st, const struct rl_limit *lim, uint64_t now,
                        struct rl_verdict *verdict, uint64_t units)
{
    uint64_t mine = verdict->stamp, back;

    (void)now;
    if (units > verdict->granted)
        units = verdict->granted;
    if (units == 0)
        return;
    verdict->granted -= units;
    back = units << lim->derived[D_SHIFT];
    if (mine < back) /* no stamp (not a grant of take()), or corrupt */
        return;
    /* acq_rel pairs with the CAS of take() and refund() in other callers,
     * as in take(). */
    if (atomic_compare_exchange_strong_explicit(
            st, &mine, mine - back, memory_order_acq_rel, memory_order_acquire))
        verdict->stamp -= back;
}

void rl_token_bucket_credit(rl_word *st, const struct rl_limit *lim,
                            uint64_t units)
{
    uint64_t tat, back = units << lim->derived[D_SHIFT], next;

    if (units == 0 || units > lim->burst)
        return;
    /* As in refund(). A TAT pushed into the past counts as a full bucket
     * and no more: take() starts from max(TAT, t). */
    tat = atomic_load_explicit(st, memory_order_acquire);
    do {
        next = tat > back ? tat - back : 0;
    } while (!atomic_compare_exchange_weak_explicit(
        st, &tat, next, memory_order_acq_rel, memory_order_acquire));
}

static uint64_t gcra_available(rl_word *st, const struct rl_limit *lim,
                               uint64_t now)
{
    uint64_t t, tat;

    if (now > lim->derived[D_MAXNOW])
        return 0;
    t = ticks(lim, now);
    tat = atomic_load_explicit(st, memory_order_acquire);
    return tokens_free(lim, t, tat > t ? tat : t);
}

static uint64_t gcra_eta(rl_word *st, const struct rl_limit *lim, uint64_t now,
                         uint64_t units)
{
    uint64_t t, tat, base;

    if (units == 0)
        return 0;
    if (units > lim->burst || now > lim->derived[D_MAXNOW])
        return UINT64_MAX;
    t = ticks(lim, now);
    tat = atomic_load_explicit(st, memory_order_acquire);
    base = tat > t ? tat : t;
    if (tokens_free(lim, t, base) >= units)
        return 0;
    return wait_until(
        lim, now, base + (units << lim->derived[D_SHIFT]) - lim->derived[D_BS]);
}

/* One word, one store: a CAS of a decision in flight keeps the value of
 * whichever lands last, either of which is a budget no fuller than full. */
static int gcra_reset(rl_word *st, const struct rl_limit *lim)
{
    (void)lim;
    atomic_store_explicit(st, 0, memory_order_release);
    return 0;
}

const struct rl_algorithm rl_token_bucket = {
    .name = "token_bucket",
    .state_words = gcra_state_words,
    .take = gcra_take,
    .refund = gcra_refund,
    .available = gcra_available,
    .eta = gcra_eta,
    .reset = gcra_reset,
};
