/* window.c — the exact sliding window: at most N units in any W.
 *
 * State (RL_WINDOW_STATE_WORDS + N words, all zero at first):
 *   [W_LOCK..] RL_WINDOW_LOCK_WORDS words of the lock (struct
 *              rl_lock_ops: a robust process-shared mutex by default);
 *   [W_HEAD]   index in the ring of the oldest stamp, 0..N-1;
 *   [W_JOB]    0, or the update in progress (see below);
 *   [W_JSTAMP] the stamp that update writes;
 *   ring[N]    one stamp per unit admitted: the ns at which it went (or,
 *              for a reservation, will go); 0 = unused.
 * Only the lock's holder writes any of them. The ring is kept in time
 * order from the head (stamps are written as max(now, newest), refunds
 * rewind the head and write stamps no later than the oldest), which lets
 * a cost of k be decided by one stamp, the k-th oldest; the newest stamp
 * is the one just before the head.
 *
 * A unit may go at `now` when the stamp it replaces is at least W old: then
 * the N units before it all lie before now - W + 1, so no window [t, t + W)
 * holds N + 1. Units W apart exactly are both allowed (the window is
 * half-open).
 *
 * A holder may be killed half-way through an update of several words. So
 * an update first writes what it is about to do into W_JSTAMP and W_JOB
 * (which ring slots, which head), then the slots, then the head, then
 * clears W_JOB; all with release stores, in that order. Whoever takes the
 * lock after a dead holder (the kernel releases a robust mutex whose holder
 * dies, and wakes a waiter) finds W_JOB set and finishes the update
 * (redoing it is harmless: it writes the same values), so the ring is
 * never left half-written or out of order. A take finished this way counts
 * units its caller never used: conservative, never over-admitting. */
#include "limit/internal.h"

enum {
    W_LOCK = 0,
    W_HEAD = RL_WINDOW_LOCK_WORDS,
    W_JOB = RL_WINDOW_LOCK_WORDS + 1,
    W_JSTAMP = RL_WINDOW_LOCK_WORDS + 2,
};
enum { D_N = 0, D_W = 1 };

/* W_JOB: JOB_VALID | kind | count << 32 | head before the update. */
#define JOB_VALID (UINT64_C(1) << 63)
#define JOB_REFUND (UINT64_C(1) << 62)
#define JOB_COUNT(j) (((j) >> 32) & 0x3FFFFu)
#define JOB_HEAD(j) ((j)&0xFFFFFFFFu)

_Static_assert(RL_WINDOW_STATE_WORDS == RL_WINDOW_LOCK_WORDS + 3,
               "lock, head, job, job stamp");
_Static_assert(RL_WINDOW_MAX_COUNT < 0x3FFFFu, "a count fits in a job");

const struct rl_lock_ops rl_ownerlock_ops = {
    .lock = rl_ownerlock_lock,
    .unlock = rl_ownerlock_unlock,
};

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

static uint64_t get(rl_word *w)
{
    return atomic_load_explicit(w, memory_order_relaxed);
}

/* Stores inside the lock are release stores so that they become visible
 * in program order: a holder killed between two of them leaves a prefix
 * of its update, which the job word describes. */
static void put(rl_word *w, uint64_t v)
{
    atomic_store_explicit(w, v, memory_order_release);
}

/* Ring index `k` places after index `i` (k <= n), or before it. */
static uint64_t fwd(uint64_t i, uint64_t k, uint64_t n)
{
    return i + k >= n ? i + k - n : i + k;
}

static uint64_t back(uint64_t i, uint64_t k, uint64_t n)
{
    return i >= k ? i - k : i + n - k;
}

/* The ring index of the k-th oldest stamp (k >= 1). */
static uint64_t at(uint64_t head, uint64_t k, uint64_t n)
{
    return fwd(head, k - 1, n);
}

static uint64_t head_of(rl_word *st, uint64_t n)
{
    uint64_t head = get(&st[W_HEAD]);

    return head < n ? head : 0; /* a corrupt word: not ours to trust */
}

/* Write `stamp` into `count` slots from ring index `from` (a take: going
 * forwards; a refund: going backwards from the slot before `from`) and
 * move the head. Used by the holder, and by whoever finishes a dead
 * holder's job. */
static void apply(rl_word *st, uint64_t n, uint64_t job, uint64_t stamp,
                  const struct rl_lock_ops *ops)
{
    rl_word *ring = st + RL_WINDOW_STATE_WORDS;
    uint64_t from = JOB_HEAD(job), count = JOB_COUNT(job), i;

    if (from >= n || count > n)
        count = 0;
    for (i = 0; i < count; i++) {
        if (job & JOB_REFUND)
            put(&ring[back(from, i + 1, n)], stamp);
        else
            put(&ring[fwd(from, i, n)], stamp);
        if (i == 0 && ops && ops->in_critical)
            ops->in_critical(st);
    }
    if (count)
        put(&st[W_HEAD],
            job & JOB_REFUND ? back(from, count, n) : fwd(from, count, n));
    put(&st[W_JOB], 0);
}

static void run_job(rl_word *st, uint64_t n, uint64_t job, uint64_t stamp,
                    const struct rl_lock_ops *ops)
{
    put(&st[W_JSTAMP], stamp);
    put(&st[W_JOB], job);
    apply(st, n, job, stamp, ops);
}

/* Take the lock and finish a dead holder's job if it left one. Returns
 * false when the lock cannot be had (RL_LOCK_BUSY: a signal handler
 * re-entering a lock its thread is inside of, or a holder stopped for
 * longer than the ops wait): the caller must not touch the ring then. */
static bool lock(rl_word *st, uint64_t n, const struct rl_lock_ops *ops)
{
    uint64_t job;

    if (ops->lock(&st[W_LOCK]) == RL_LOCK_BUSY)
        return false;
    /* Acquire pairs with the release stores of the job's writer. Set only
     * when a holder died inside an update (or the state is corrupt): the
     * lock said RL_LOCK_RECOVERED then, but a job is finished whenever it
     * is found, which covers a corrupt word too. */
    job = atomic_load_explicit(&st[W_JOB], memory_order_acquire);
    if (job)
        apply(st, n, job, get(&st[W_JSTAMP]), 0);
    return true;
}

static void unlock(rl_word *st, const struct rl_lock_ops *ops)
{
    ops->unlock(&st[W_LOCK]);
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

static const struct rl_lock_ops *ops_now(void)
{
    /* Acquire pairs with the release in rl_window_set_lock_ops. */
    return atomic_load_explicit(&lock_ops, memory_order_acquire);
}

static struct rl_verdict window_take(rl_word *st, const struct rl_limit *lim,
                                     uint64_t now, uint64_t want, uint64_t min,
                                     uint64_t max_wait_ns)
{
    const uint64_t n = lim->derived[D_N], w = lim->derived[D_W];
    const struct rl_lock_ops *ops = ops_now();
    rl_word *ring = st + RL_WINDOW_STATE_WORDS;
    struct rl_verdict v = {0, 0, 0};
    uint64_t head, newest, grant, stamp, wait, oldest;

    if (min == 0)
        min = 1;
    if (want > n)
        want = n;
    if (min > want) {
        v.wait_ns = UINT64_MAX;
        return v;
    }
    if (!lock(st, n, ops))
        return v;
    head = head_of(st, n);
    newest = get(&ring[back(head, 1, n)]);
    oldest = get(&ring[at(head, min, n)]);
    if (expired(oldest, now, w)) {
        grant = expired_count(ring, head, n, w, now, min, want);
        stamp = now > newest ? now : newest;
        wait = 0;
    } else {
        /* The min-th oldest stamp frees min units when it expires. */
        wait = oldest + w - now;
        if (max_wait_ns == 0)
            goto deny;
        /* Reserve `want`: the slots hold the time the caller will go. */
        oldest = get(&ring[at(head, want, n)]);
        stamp = oldest + w > newest ? oldest + w : newest;
        if (stamp - now > max_wait_ns)
            goto deny;
        grant = want;
        wait = stamp - now;
    }
    if (stamp == 0) /* 0 means unused: a stamp at time 0 is kept as 1 */
        stamp = 1;
    run_job(st, n, JOB_VALID | grant << 32 | head, stamp, ops);
    unlock(st, ops);
    v.granted = grant;
    v.wait_ns = wait;
    v.stamp = stamp;
    return v;
deny:
    unlock(st, ops);
    v.wait_ns = wait;
    return v;
}

/* Give back units by rewinding the head over the newest stamps, if they
 * still hold our stamp: the freed slots become the oldest again, so the
 * ring stays in time order. Stamps written since by others are newer and
 * stop the rewind: then less, or nothing, is given back (their verdicts
 * were decided on ours). (Overwriting our stamps in the middle instead
 * would break the order, and a cost of k, decided by the k-th oldest stamp
 * alone, could over-admit.) Equal stamps of another grant are
 * indistinguishable from ours, and rewinding over them leaves the very
 * same ring.
 *
 * What the freed slots get is what keeps a give-back from admitting more
 * than if the take had not happened: the stamps the take replaced were
 * its oldest, each at most stamp - W (a take now replaces expired stamps,
 * <= now - W <= stamp - W; a reservation goes W after the last stamp it
 * replaces), and no later than any stamp still in the ring. So
 * min(stamp - W, oldest left) is no younger than any of them, and keeps
 * the order. 0 (empty) would be younger: with N = 1 the slot of the unit
 * that went less than W ago would look free, and the next caller would go
 * at once. For a reservation given back at once this is exact (stamp - W
 * is the stamp it replaced); a take given back at once gets a stamp that
 * has expired by then, as the one it replaced had. */
static void window_refund(rl_word *st, const struct rl_limit *lim, uint64_t now,
                          struct rl_verdict *verdict, uint64_t units)
{
    const uint64_t n = lim->derived[D_N], w = lim->derived[D_W];
    const struct rl_lock_ops *ops = ops_now();
    rl_word *ring = st + RL_WINDOW_STATE_WORDS;
    uint64_t head, k, mine = verdict->stamp, old, left;

    (void)now;
    if (units > verdict->granted)
        units = verdict->granted;
    verdict->granted -= units;
    if (units > n)
        units = n;
    if (units == 0 || mine == 0)
        return;
    if (!lock(st, n, ops))
        return;
    head = head_of(st, n);
    for (k = 0; k < units; k++)
        if (get(&ring[back(head, k + 1, n)]) != mine)
            break;
    if (k > 0) {
        /* The oldest stamp that stays (our own when all N go back). */
        left = get(&ring[head]);
        old = mine > w ? mine - w : 0;
        if (left < old)
            old = left;
        run_job(st, n, JOB_VALID | JOB_REFUND | k << 32 | head, old, ops);
    }
    unlock(st, ops);
}

static uint64_t window_available(rl_word *st, const struct rl_limit *lim,
                                 uint64_t now)
{
    const uint64_t n = lim->derived[D_N], w = lim->derived[D_W];
    rl_word *ring = st + RL_WINDOW_STATE_WORDS;
    const struct rl_lock_ops *ops = ops_now();
    uint64_t head, k = 0;

    if (!lock(st, n, ops))
        return 0;
    head = head_of(st, n);
    if (expired(get(&ring[head]), now, w))
        k = expired_count(ring, head, n, w, now, 1, n);
    unlock(st, ops);
    return k;
}

static uint64_t window_eta(rl_word *st, const struct rl_limit *lim,
                           uint64_t now, uint64_t units)
{
    const uint64_t n = lim->derived[D_N], w = lim->derived[D_W];
    rl_word *ring = st + RL_WINDOW_STATE_WORDS;
    const struct rl_lock_ops *ops = ops_now();
    uint64_t stamp;

    if (units == 0)
        return 0;
    if (units > n || !lock(st, n, ops))
        return UINT64_MAX;
    /* The units-th oldest stamp frees `units` when it expires. */
    stamp = get(&ring[at(head_of(st, n), units, n)]);
    unlock(st, ops);
    return expired(stamp, now, w) ? 0 : stamp + w - now;
}

/* Empty the ring under the lock, so that no holder is ever inside a ring
 * that changes under it: every take after the reset sees an empty window,
 * every take before it finished in the old one. The lock words are not
 * touched. */
static int window_reset(rl_word *st, const struct rl_limit *lim)
{
    const uint64_t n = lim->derived[D_N];
    const struct rl_lock_ops *ops = ops_now();
    uint64_t i;

    if (!lock(st, n, ops))
        return -1;
    for (i = 0; i < n; i++)
        put(&st[RL_WINDOW_STATE_WORDS + i], 0);
    put(&st[W_HEAD], 0);
    put(&st[W_JSTAMP], 0);
    unlock(st, ops);
    return 0;
}

const struct rl_algorithm rl_sliding_window = {
    .name = "sliding_window",
    .state_words = window_state_words,
    .take = window_take,
    .refund = window_refund,
    .available = window_available,
    .eta = window_eta,
    .reset = window_reset,
};
