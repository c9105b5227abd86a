/* lease.c — leases (lease.h).
 *
 * While a budget is far from binding, a thread takes send tokens a few at
 * a time from the shared bucket into a lease of its own, then spends them
 * with no clock read but the coarse one, no atomic and no lock. Leased
 * tokens are already taken from the bucket, so nothing can be
 * over-admitted. A lease is taken only while the bucket holds at least
 * half its burst, so a limit that binds is decided call by call, exactly;
 * and what a thread holds goes back when it expires (LEASE_NS, or when
 * the lease no longer covers a call) and at thread or process exit, so
 * other threads and processes miss at most size[k] per thread for at most
 * LEASE_NS. Only for rules whose send and send_bytes are each at most one
 * token bucket, and not in dry-run (every call is logged). */
#include "policy/lease.h"

#include <pthread.h>
#include <time.h>

#include "policy/gate_int.h"

#define LEASE_NS 4000000u /* coarse clock ticks every 4 ms */
#define LEASE_CALLS 64u
#define LEASE_BYTES (256u * 1024u)

/* A thread's lease: units of send and send_bytes taken from `from` and not
 * spent yet. Only its own thread touches it (and the thread's exit). */
struct lease {
    struct budget *from;
    uint64_t left[RL_KIND_COUNT];
    uint64_t until; /* coarse ns */
};
static __thread struct lease lease
    __attribute__((tls_model("initial-exec")));
static pthread_key_t lease_key;

static void lease_return(struct lease *l);

static void lease_at_thread_exit(void *arg)
{
    lease_return(arg);
}

void rl_lease_setup(void)
{
    const struct rl_rule *rule = rl_gate.rule;
    struct rl_lease_conf *c = &rl_gate.lease;

    c->on = !rule->dry_run && !rl_gate.cfg->dry_run &&
            pthread_key_create(&lease_key, lease_at_thread_exit) == 0;
    c->calls = rule->nlimits[RL_KIND_SEND] != 0;
    c->bytes = rule->nlimits[RL_KIND_SEND_BYTES] != 0;
    for (int k = RL_KIND_SEND; k <= RL_KIND_SEND_BYTES; k++) {
        if (rule->nlimits[k] == 0)
            continue;
        const struct rl_limit *l = &rule->limits[k][0];
        uint64_t cap = k == RL_KIND_SEND ? LEASE_CALLS : LEASE_BYTES;
        c->size[k] = l->burst / 64 < cap ? l->burst / 64 : cap;
        /* Several rates, a window, or a burst too small to share out:
         * every call is decided on its own. */
        if (rule->nlimits[k] > 1 || l->algo != RL_ALGO_TOKEN_BUCKET ||
            c->size[k] < 2)
            c->on = false;
    }
}

void rl_lease_atfork_child(void)
{
    /* The parent keeps its lease: the child's copy of it was never taken
     * for the child, and spending it twice would over-admit. */
    lease = (struct lease){0};
}

static uint64_t coarse_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Give what the thread's lease holds back to the bucket it came from, and
 * take it out of the allowed counters (it was counted when leased). */
static void lease_return(struct lease *l)
{
    const struct rl_rule *rule = rl_gate.rule;
    struct budget *b = l->from;
    l->from = NULL;
    if (b == NULL)
        return;
    for (int k = RL_KIND_SEND; k <= RL_KIND_SEND_BYTES; k++) {
        uint64_t n = l->left[k];
        l->left[k] = 0;
        if (n == 0 || rule->nlimits[k] == 0)
            continue;
        struct rl_verdict v = {n, 0, 0};
        rl_multi_refund(b->states[k], rule->limits[k], 1, 0, &v, n);
        rl_gate_count(b, k, RL_STAT_ALLOWED, (uint64_t)0 - n);
    }
}

void rl_lease_drop(void)
{
    if (rl_gate.rule != NULL)
        lease_return(&lease);
}

void rl_lease_refill(struct budget *b, uint64_t now, uint64_t bytes)
{
    const struct rl_rule *rule = rl_gate.rule;
    const struct rl_lease_conf *c = &rl_gate.lease;
    struct lease *l = &lease;
    if (l->from != b)
        lease_return(l);
    /* A lease that would not cover a few calls like this one is no use. */
    if (rule->nlimits[RL_KIND_SEND_BYTES] != 0 &&
        c->size[RL_KIND_SEND_BYTES] / 4 < bytes)
        return;
    for (int k = RL_KIND_SEND; k <= RL_KIND_SEND_BYTES; k++) {
        if (rule->nlimits[k] == 0 || l->left[k] >= c->size[k] / 2)
            continue;
        const struct rl_limit *lim = &rule->limits[k][0];
        const struct rl_algorithm *a = rl_algorithm_get(lim->algo);
        if (a->available(b->states[k][0], lim, now) < lim->burst / 2)
            continue;
        uint64_t n = c->size[k] - l->left[k];
        struct rl_verdict v = a->take(b->states[k][0], lim, now, n, n, 0);
        l->left[k] += v.granted;
        rl_gate_count(b, k, RL_STAT_ALLOWED, v.granted);
    }
    if (l->from == NULL) {
        /* The first lease of this thread: hand it back at thread exit. */
        pthread_setspecific(lease_key, l);
        l->from = b;
    }
    l->until = coarse_ns() + LEASE_NS;
}

bool rl_lease_take(uint64_t bytes)
{
    const struct rl_lease_conf *c = &rl_gate.lease;
    struct lease *l = &lease;
    if (l->from == NULL || (c->calls && l->left[RL_KIND_SEND] == 0) ||
        (c->bytes && l->left[RL_KIND_SEND_BYTES] < bytes))
        return false;
    if (coarse_ns() >= l->until)
        return false;
    if (c->calls)
        l->left[RL_KIND_SEND]--;
    if (c->bytes)
        l->left[RL_KIND_SEND_BYTES] -= bytes;
    return true;
}

void rl_lease_refund(uint64_t calls, uint64_t bytes)
{
    const struct rl_lease_conf *c = &rl_gate.lease;
    if (lease.from == NULL)
        return;
    if (c->calls)
        lease.left[RL_KIND_SEND] += calls;
    if (c->bytes)
        lease.left[RL_KIND_SEND_BYTES] += bytes;
}
