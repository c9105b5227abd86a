/* gate_signal.c — what a call decided from a signal handler does
 * differently (see gate.h, rl_gate_handler). It is the gate's one
 * decision (gate_decide.c's connect and send, gate_charges.c's budgets,
 * gate_take.c's take) with the ticket's `handler` set; the steps that
 * mode changes are these, and the take from one charge, which differs
 * whole, is here.
 *
 * A handler may have interrupted anything of its thread: malloc (holding
 * its arena lock), a mutex, stdio, hiredis, the shim itself half-way
 * through a decision. So every step is async-signal-safe: loads of what
 * set-up published (the budget in use, a site's budget, a per-destination
 * entry already in the table), CAS on the limiters' words in the shared
 * segment (token buckets: GCRA, limit/gcra.c), relaxed counter adds, one
 * clock read, and the host's lease of a fleet budget (its words are in the
 * segment too). Nothing is made: a budget that does not exist yet (a site
 * never charged before, a destination not in the table) cannot be had, so
 * the call is denied (rl_gate_charges). Nothing waits: delay mode fails at
 * once with the configured errno (a sleeping handler would keep its
 * thread, and whatever lock the interrupted frame holds, from every other
 * thread for the whole delay). A sliding window is taken under a pthread
 * mutex (its ring is updated in several stores): no mutex in a handler,
 * so a budget with one denies. A fleet budget is decided by Redis: only
 * units this host already holds as its lease are spent (fleet_lease.h),
 * else the call is denied as fail mode denies while Redis is away; Redis's
 * grant is never guessed. A connect's max_open place is bound to its fd
 * in a map that allocates (policy/open.c): a budget with max_open denies.
 * The leases of threads are neither reclaimed nor refilled (their holders
 * are under a lock), and nothing is logged (the log formats and writes).
 *
 * Every budget of the call is charged as outside a handler, all or none;
 * the charges are taken in their order (no turn to agree on), and what a
 * host's lease granted goes back to it when another charge says no. */
#include <stdint.h>

#include "fleet/fleet_lease.h"
#include "limit/limit.h"
#include "policy/gate.h"
#include "policy/gate_int.h"

static bool has_window(const struct rl_rule *r, int kind)
{
    for (unsigned i = 0; i < r->nlimits[kind]; i++)
        if (r->limits[kind][i].algo != RL_ALGO_TOKEN_BUCKET)
            return true;
    return false;
}

/* The host's lease of fleet charge c: only the user's rule budget has one
 * (a site's, owned for the user, or a destination's, keyed, is decided on
 * its own under its key). */
static const struct rl_fleet_pool *lease_of(const struct rl_gate_charge *c)
{
    return c->key_word == NULL && c->fleet_owner == NULL &&
                   c->budget->fleet.w != NULL
               ? &c->budget->fleet
               : NULL;
}

struct rl_verdict rl_gate_take_in_handler(const struct rl_gate_ticket *t,
                                          struct rl_gate_charge *c, int kind,
                                          uint64_t want, uint64_t min)
{
    const struct rl_verdict none = {0, UINT64_MAX, 0};
    const struct rl_limit *lims = c->rule->limits[kind];
    unsigned n = c->rule->nlimits[kind];
    struct rl_verdict *vs = c->v[rl_gate_vrow(kind)];
    if (c->fleet[kind]) {
        /* Whole units only (a call of 1 unit and all its bytes: what
         * rl_fleet_lease_take spends). */
        const struct rl_fleet_pool *pool = lease_of(c);
        if (pool == NULL || kind == RL_KIND_CONNECT ||
            !rl_fleet_lease_take(pool, kind == RL_KIND_SEND ? want : 0,
                                 kind == RL_KIND_SEND_BYTES ? want : 0))
            return none;
        return (struct rl_verdict){want, 0, 0};
    }
    if (has_window(c->rule, kind))
        return none;
    struct rl_verdict v = rl_multi_take(c->states[kind], lims, n, t->now, want,
                                        min < want ? min : want, 0, vs);
    if (v.granted > 0 && v.wait_ns > 0) {
        /* A later turn: not for a handler, which never waits. */
        rl_multi_refund(c->states[kind], lims, n, t->now, vs, v.granted);
        return none;
    }
    return v;
}

void rl_gate_untake_in_handler(const struct rl_gate_charge *c, int kind,
                               uint64_t units)
{
    const struct rl_fleet_pool *pool = lease_of(c);
    if (pool != NULL)
        rl_fleet_lease_refund(pool, kind == RL_KIND_SEND ? units : 0,
                              kind == RL_KIND_SEND_BYTES ? units : 0);
}

bool rl_gate_open_in_handler(struct rl_gate_ticket *t)
{
    for (unsigned i = 0; i < t->ncharges; i++)
        if (t->charge[i].rule->max_open > 0) {
            t->denier = t->charge[i].rule;
            return false;
        }
    return true;
}
