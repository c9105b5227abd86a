/* fleet_settle.h — what a process keeps per fleet budget between its
 * decisions, and how a decision made without Redis is settled with Redis
 * once it answers: every unit a program spent is charged at Redis once,
 * never twice and never not at all (as far as the budget can hold it).
 *
 * A decision that got no reply in time (SPEC §8's 50 ms) is made by the
 * fallback (f units, charged to the host budget and owed to Redis as
 * debt). Its script may still run at Redis: the debt it carried stays
 * with it (not owed again: it would be charged twice), and its reply,
 * when it comes (fleet_pipe.h's late replies), says what Redis charged
 * for it — g units granted, a lease of l more — and is settled here
 * against what the process did meanwhile:
 *   - the f of the fallback that g covers are taken off the debt (paid
 *     already), while they are still owed;
 *   - what Redis charged and nobody spent (g beyond f, a lease that never
 *     reached the pool) is given back to the bucket with the budget's next
 *     call (`ret`). A sliding window cannot take units back: those stay
 *     charged (the fleet admits less, never more).
 * So an outage over-admits at most what the fallback allows, never what
 * the fallback and the late scripts allow together. A reply lost with its
 * connection (reset, killed Redis) is settled as a script that never ran:
 * the debt it carried is owed again (had it run, the fleet admits less).
 * Every unit given back is one Redis charged and nobody spent; every
 * doubt is settled by charging, never by giving back.
 *
 * No I/O, no clock: atomics on the process's table only. */
#ifndef RL_FLEET_SETTLE_H
#define RL_FLEET_SETTLE_H

#include <stdbool.h>
#include <stdint.h>

#include "fleet/fleet_pipe.h"
#include "model/config.h"
#include "util/atomics.h"

/* Every word relaxed: each is its own account (a stale read costs one
 * round trip or one fallback decision, never a unit charged twice: units
 * move between accounts only by exchange or CAS). */
struct rl_fleet_budget {
    rl_atomic_u64 tag;                         /* label hash | 1; 0: free */
    rl_atomic_u64 debt[RL_KIND_COUNT];         /* spent while away */
    rl_atomic_u64 refund[RL_KIND_COUNT];       /* charged, never spent */
    rl_atomic_u64 closed_until[RL_KIND_COUNT]; /* Redis said no until */
    rl_atomic_u64 drained[RL_KIND_COUNT];      /* outage gen + 1 drained */
};

#define RL_FLEET_BUDGETS 64

/* Units settled so far (for the tests): late replies settled, units
 * taken off debts, units given back, replies lost with a connection. */
struct rl_fleet_settled {
    rl_atomic_u64 late, debt_paid, refunded, lost;
};

/* The user's rule budget (index 0) and a table of the others (a site's,
 * a per-destination one), claimed by their label's hash. */
struct rl_fleet_budgets {
    struct rl_fleet_budget b[1 + RL_FLEET_BUDGETS];
    struct rl_fleet_settled settled;
};

/* The budget named `label` (NULL: the user's rule budget), claimed when
 * new; NULL when the table is full (that budget then keeps no debt, no
 * refund and no denial shortcut: each call asks Redis, or falls back). */
struct rl_fleet_budget *rl_fleet_budget_of(struct rl_fleet_budgets *t,
                                           const char *label);

/* Take up to `n` from an account; returns what was taken. */
uint64_t rl_fleet_take_up_to(rl_atomic_u64 *w, uint64_t n);

/* What a call leaves for its late reply. */
struct rl_fleet_owed {
    struct rl_fleet_budget *budget; /* NULL: nothing to settle */
    int kind;
    bool bucket;       /* a token bucket's script (it takes refunds) */
    uint64_t fallback; /* what the fallback granted instead */
    uint64_t debt;     /* the debt it carried (owed again if lost) */
    uint64_t lease;    /* lease units it asked for */
};

void rl_fleet_owed_pack(const struct rl_fleet_budgets *t,
                        const struct rl_fleet_owed *o,
                        struct rl_fleet_late *late);

/* Settle a late reply `r` of the call that left `late` (a
 * rl_fleet_late_fn: ctx is the table). */
void rl_fleet_settle(void *ctx, const struct rl_fleet_result *r,
                     const struct rl_fleet_late *late);

#endif
