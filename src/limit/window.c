/* window.c — the exact sliding window: at most N units in any W.
 *
 * State (RL_WINDOW_STATE_WORDS + N words, all zero at first):
 *   [W_LOCK]  0, or the id of the thread inside (struct rl_lock_ops);
 *   [W_HEAD]  index in the ring of the oldest stamp, 0..N-1;
 *   [W_LAST]  the newest stamp written (0: none);
 *   ring[N]   one stamp per unit admitted: the ns at which it went (or, for
 *             a reservation, will go); 0 = unused.
 * Every word is written only by the lock's holder, one store at a time, so
 * a holder killed half-way leaves a ring that is still made of whole
 * stamps; readers outside the lock (none today) would see whole words.
 *
 * A unit may go at `now` when the stamp it replaces is at least W old: then
 * the N units before it all lie before now - W + 1, so no window [t, t + W)
 * holds N + 1. Units W apart exactly are both allowed (the window is
 * half-open). The ring is kept in time order from the head (stamps are
 * written as max(now, last), refunds rewind the head), which lets a cost of
 * k be decided by looking at one stamp, the k-th oldest. */
#include "limit/internal.h"

enum { W_LOCK = 0, W_HEAD = 1, W_LAST = 2 };
enum { D_N = 0, D_W = 1 };

/* The ops in use: the default needs no set-up (a static initialiser);
 * tests swap them with rl_window_set_lock_ops. Read once per call. */
static _Atomic(const struct rl_lock_ops *) lock_ops = &rl_ownerlock_ops;

void rl_window_set_lock_ops(const struct rl_lock_ops *ops)
{
    atomic_store_explicit(&lock_ops, ops ? ops : &rl_ownerlock_ops,
                          memory_order_release);
}

int rl_window_derive(struct rl_limit *lim)
{
    if (lim->count > RL_WINDOW_MAX_COUNT || lim->burst != lim->count)
        return RL_LIMIT_EINVAL;
    lim->derived[D_N] = lim->count;
    lim->derived[D_W] = lim->period_ns;
    return 0;
}

static uint32_t window_state_words(const struct rl_limit *lim)
{
    return RL_WINDOW_STATE_WORDS + (uint32_t)lim->count;
}

static void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* Spins a little, then yields; every 64 yields asks whether the owner is
 * still alive and takes the lock over from a dead one. Returns our id, or
 * 0 when this thread already holds the lock (a signal handler re-entering
 * a take it interrupted): the caller must not touch the ring then. */
static uint64_t lock(rl_word *st, const struct rl_lock_ops *ops)
{
    uint64_t self = ops->self(), cur;
    unsigned tries = 0;

    for (;;) {
        cur = 0;
        /* Acquire pairs with the release in unlock(), so the ring stores
         * of the previous holder are visible to us. */
        if (atomic_compare_exchange_weak_explicit(&st[W_LOCK], &cur, self,
                                                  memory_order_acquire,
                                                  memory_order_relaxed))
            return self;
        if (cur == self)
            return 0;
        if (cur == 0)
            continue;
        if (++tries < 100) {
            cpu_relax();
            continue;
        }
        ops->yield();
        if (tries % 64 == 0 && !ops->alive(cur) &&
            atomic_compare_exchange_strong_explicit(
                &st[W_LOCK], &cur, self, memory_order_acquire,
                memory_order_relaxed))
            return self;
    }
}

static void unlock(rl_word *st, uint64_t self)
{
    uint64_t cur = self;

    /* Release pairs with the acquire in lock(). A CAS, not a store: should
     * a waiter have wrongly judged us dead, we leave its lock alone. */
    atomic_compare_exchange_strong_explicit(&st[W_LOCK], &cur, 0,
                                            memory_order_release,
                                            memory_order_relaxed);
}

static uint64_t get(rl_word *w)
{
    return atomic_load_explicit(w, memory_order_relaxed);
}

static void put(rl_word *w, uint64_t v)
{
    atomic_store_explicit(w, v, memory_order_relaxed);
}

/* The ring index of the k-th oldest stamp (k >= 1). */
static uint64_t at(uint64_t head, uint64_t k, uint64_t n)
{
    uint64_t i = head + k - 1;

    return i >= n ? i - n : i;
}

/* A stamp that no longer counts at `now`: stamp + W <= now, saturating so
 * that a small `now` (a fresh boot, a fake clock) cannot wrap. */
static bool expired(uint64_t stamp, uint64_t now, uint64_t w)
{
    return stamp == 0 || (now >= w && stamp <= now - w);
}

/* The largest k in [lo, hi] whose k-th oldest stamp has expired, given
 * that the lo-th has and stamps grow from the head. */
static uint64_t expired_count(rl_word *ring, uint64_t head, uint64_t n,
                              uint64_t w, uint64_t now, uint64_t lo,
                              uint64_t hi)
{
    uint64_t mid;

    if (expired(get(&ring[at(head, hi, n)]), now, w))
        return hi;
    while (hi - lo > 1) {
        mid = lo + (hi - lo) / 2;
        if (expired(get(&ring[at(head, mid, n)]), now, w))
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

static struct rl_verdict window_take(rl_word *st, const struct rl_limit *lim,
                                     uint64_t now, uint64_t want,
                                     uint64_t min, uint64_t max_wait_ns)
{
    const uint64_t n = lim->derived[D_N], w = lim->derived[D_W];
    const struct rl_lock_ops *ops =
        atomic_load_explicit(&lock_ops, memory_order_acquire);
    rl_word *ring = st + RL_WINDOW_STATE_WORDS;
    struct rl_verdict v = {0, 0, 0};
    uint64_t self, head, last, grant, stamp, wait, oldest, i;

    if (min == 0)
        min = 1;
    if (want > n)
        want = n;
    if (min > want) {
        v.wait_ns = UINT64_MAX;
        return v;
    }
    self = lock(st, ops);
    if (self == 0)
        return v;
    head = get(&st[W_HEAD]);
    last = get(&st[W_LAST]);
    if (head >= n) /* not ours to trust: a corrupt word */
        head = 0;
    if (expired(get(&ring[at(head, min, n)]), now, w)) {
        grant = expired_count(ring, head, n, w, now, min, want);
        stamp = now > last ? now : last;
        wait = 0;
    } else {
        /* The min-th oldest stamp frees min units when it expires. */
        oldest = get(&ring[at(head, min, n)]);
        wait = oldest + w - now;
        if (max_wait_ns == 0)
            goto deny;
        /* Reserve `want`: the slot holds the time the caller will go. */
        oldest = get(&ring[at(head, want, n)]);
        stamp = oldest + w > last ? oldest + w : last;
        if (stamp - now > max_wait_ns)
            goto deny;
        grant = want;
        wait = stamp - now;
    }
    if (stamp == 0) /* 0 means unused: a stamp at time 0 is kept as 1 */
        stamp = 1;
    for (i = 0; i < grant; i++) {
        put(&ring[at(head, i + 1, n)], stamp);
        if (i == 0 && ops->in_critical)
            ops->in_critical(st);
    }
    put(&st[W_HEAD], at(head, grant + 1, n));
    put(&st[W_LAST], stamp);
    unlock(st, self);
    v.granted = grant;
    v.wait_ns = wait;
    v.stamp = stamp;
    return v;
deny:
    unlock(st, self);
    v.wait_ns = wait;
    return v;
}

/* Give back units by rewinding the head over the newest stamps, if they
 * still hold our stamp: the freed slots become the oldest (0 = unused), so
 * the ring stays in time order. Stamps written since by others are newer
 * and stop the rewind: then less, or nothing, is given back. Overwriting
 * our stamps in the middle with 0 instead would break the order, and a
 * cost of k, decided by the k-th oldest stamp alone, could over-admit. */
static void window_refund(rl_word *st, const struct rl_limit *lim,
                          uint64_t now, const struct rl_verdict *verdict,
                          uint64_t units)
{
    const uint64_t n = lim->derived[D_N];
    const struct rl_lock_ops *ops =
        atomic_load_explicit(&lock_ops, memory_order_acquire);
    rl_word *ring = st + RL_WINDOW_STATE_WORDS;
    uint64_t self, head, k, i;

    (void)now;
    if (units > verdict->granted)
        units = verdict->granted;
    if (units == 0 || verdict->stamp == 0)
        return;
    self = lock(st, ops);
    if (self == 0)
        return;
    head = get(&st[W_HEAD]);
    if (head >= n)
        head = 0;
    /* The newest stamp is the one just before the head. */
    for (k = 0; k < units; k++) {
        i = head >= k + 1 ? head - k - 1 : head + n - k - 1;
        if (get(&ring[i]) != verdict->stamp)
            break;
        put(&ring[i], 0);
    }
    if (k > 0) {
        head = head >= k ? head - k : head + n - k;
        put(&st[W_HEAD], head);
        put(&st[W_LAST], get(&ring[head == 0 ? n - 1 : head - 1]));
    }
    unlock(st, self);
}

static uint64_t window_available(rl_word *st, const struct rl_limit *lim,
                                 uint64_t now)
{
    const uint64_t n = lim->derived[D_N], w = lim->derived[D_W];
    const struct rl_lock_ops *ops =
        atomic_load_explicit(&lock_ops, memory_order_acquire);
    rl_word *ring = st + RL_WINDOW_STATE_WORDS;
    uint64_t self, head, k = 0;

    self = lock(st, ops);
    if (self == 0)
        return 0;
    head = get(&st[W_HEAD]);
    if (head >= n)
        head = 0;
    if (expired(get(&ring[head]), now, w))
        k = expired_count(ring, head, n, w, now, 1, n);
    unlock(st, self);
    return k;
}

const struct rl_algorithm rl_sliding_window = {
    .name = "sliding_window",
    .state_words = window_state_words,
    .take = window_take,
    .refund = window_refund,
    .available = window_available,
};
