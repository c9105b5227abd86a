/* fleet_settle.c — a fleet budget's accounts, and late replies settled
 * against them (see fleet_settle.h). */
#include "fleet/fleet_settle.h"

#include <stdatomic.h>

#include "util/hash.h"

struct rl_fleet_budget *rl_fleet_budget_of(struct rl_fleet_budgets *t,
                                           const char *label)
{
    if (label == NULL)
        return &t->b[0];
    uint64_t h = rl_hash_str(RL_HASH_INIT, label) | 1;
    for (unsigned i = 0; i < RL_FLEET_BUDGETS; i++) {
        struct rl_fleet_budget *b = &t->b[1 + (h + i) % RL_FLEET_BUDGETS];
        uint64_t tag = rl_load_relaxed_u64(&b->tag);
        if (tag == 0 &&
            atomic_compare_exchange_strong_explicit(
                &b->tag, &tag, h, memory_order_relaxed, memory_order_relaxed))
            return b;
        if (tag == h)
            return b;
    }
    return NULL;
}

uint64_t rl_fleet_take_up_to(rl_atomic_u64 *w, uint64_t n)
{
    uint64_t v = rl_load_relaxed_u64(w);
    for (;;) {
        uint64_t take = v < n ? v : n;
        if (take == 0)
            return 0;
        if (atomic_compare_exchange_weak_explicit(
                w, &v, v - take, memory_order_relaxed, memory_order_relaxed))
            return take;
    }
}

/* late->w: [0] budget index + 1 (0: nothing to settle), [1] kind |
 * bucket << 8, [2] the fallback's grant, [3] the debt carried, [4] the
 * lease asked for. */
void rl_fleet_owed_pack(const struct rl_fleet_budgets *t,
                        const struct rl_fleet_owed *o,
                        struct rl_fleet_late *late)
{
    *late = (struct rl_fleet_late){{0}};
    if (o->budget == NULL)
        return;
    late->w[0] = (uint64_t)(o->budget - t->b) + 1;
    late->w[1] = (uint64_t)o->kind | (o->bucket ? 1u << 8 : 0);
    late->w[2] = o->fallback;
    late->w[3] = o->debt;
    late->w[4] = o->lease;
}

static uint64_t nonneg(int64_t v)
{
    return v > 0 ? (uint64_t)v : 0;
}

void rl_fleet_settle(void *ctx, const struct rl_fleet_result *r,
                     const struct rl_fleet_late *late)
{
    struct rl_fleet_budgets *t = ctx;
    uint64_t idx = late->w[0];
    if (t == NULL || idx == 0 || idx > 1 + RL_FLEET_BUDGETS)
        return;
    struct rl_fleet_budget *b = &t->b[idx - 1];
    int kind = (int)(late->w[1] & 0xff);
    bool bucket = (late->w[1] >> 8) & 1;
    if (kind >= RL_KIND_COUNT)
        return;
    if (r->err != 0 || r->type != RL_FLEET_REPLY_INTS || r->n < 4) {
        /* Lost with its connection, or an error: its script most likely
         * never ran (a killed Redis keeps nothing), so the debt it carried
         * is owed again. Had it run, it is charged twice: the fleet
         * admits less. */
        rl_add_relaxed_u64(&b->debt[kind], late->w[3]);
        rl_add_relaxed_u64(&t->settled.lost, 1);
        return;
    }
    uint64_t f = late->w[2];
    uint64_t g = nonneg(r->v[0]), leased = nonneg(r->v[3]);
    /* The debt it carried was charged (as far as the budget held it, as
     * any call's). Of the fallback's f units (owed as debt), the grant
     * covers min(f, g): off the debt while they are still there; once
     * sent with another call they are charged again (the fleet admits
     * less, never more). What Redis granted beyond f, and a lease that
     * never reached the pool, nobody spent: given back to the bucket. */
    uint64_t off = rl_fleet_take_up_to(&b->debt[kind], f < g ? f : g);
    uint64_t back = (g > f ? g - f : 0) + leased;
    rl_add_relaxed_u64(&t->settled.late, 1);
    rl_add_relaxed_u64(&t->settled.debt_paid, off);
    if (bucket && back > 0) {
        rl_add_relaxed_u64(&b->refund[kind], back);
        rl_add_relaxed_u64(&t->settled.refunded, back);
    }
}
