/* gate_signal.c — a call decided from a signal handler (see gate.h,
 * rl_gate_handler).
 *
 * A handler may have interrupted anything of its thread: malloc (holding
 * its arena lock), a mutex, stdio, hiredis, the shim itself half-way
 * through a decision. So every step here is async-signal-safe: loads of
 * what set-up published (the budget in use, a site's budget, a
 * per-destination entry already in the table), CAS on the limiters'
 * words in the shared segment (token buckets: GCRA, limit/gcra.c),
 * relaxed counter adds, one clock read, and the host's lease of a fleet
 * budget (its words are in the segment too). Nothing is made: a budget
 * that does not exist yet (a site never charged before, a destination
 * not in the table) cannot be had, so the call is denied. Nothing waits:
 * delay mode fails at once with the configured errno (a sleeping handler
 * would keep its thread, and whatever lock the interrupted frame holds,
 * from every other thread for the whole delay). A sliding window is
 * taken under a pthread mutex (its ring is updated in several stores):
 * no mutex in a handler, so a budget with one denies. A fleet budget is
 * decided by Redis: only units this host already holds as its lease are
 * spent (fleet_lease.h), else the call is denied as fail mode denies
 * while Redis is away; Redis's grant is never guessed.
 *
 * Every budget of the call is charged, as gate_take.c charges them: the
 * user's rule (or its budget for the destination), and the first site
 * that covers the destination (or its budget for the destination); all
 * or none. Nothing is logged (the log formats and writes: not here). */
#include <errno.h>
#include <stdatomic.h>
#include <string.h>

#include "fleet/fleet.h"
#include "fleet/fleet_lease.h"
#include "limit/limit.h"
#include "policy/dest.h"
#include "policy/dests.h"
#include "policy/gate.h"
#include "policy/gate_int.h"
#include "policy/gate_log.h"
#include "policy/names.h"
#include "policy/proc.h"
#include "policy/sites.h"
#include "util/atomics.h"
#include "util/clock.h"

/* One budget the call is charged to, as a handler holds it. */
struct hcharge {
    struct budget *counted; /* whose counters */
    const struct rl_rule *rule;
    rl_word *const *states[RL_KIND_COUNT];
    rl_atomic_u64 *key_word; /* a per-destination entry's: checked after */
    uint64_t key;
    const struct rl_fleet_pool *pool; /* a fleet budget's host lease */
    bool took[RL_KIND_COUNT];
    uint64_t granted[RL_KIND_COUNT];
    struct rl_verdict v[RL_KIND_COUNT][RL_MAX_RATES];
};

struct hcall {
    unsigned n;
    struct hcharge c[RL_GATE_MAX_CHARGES];
    rl_word *dstates[RL_GATE_MAX_CHARGES][RL_KIND_COUNT][RL_MAX_RATES];
    const struct rl_rule *denier;
};

static void add_budget(const struct rl_gate *g, struct hcall *h,
                       struct budget *b)
{
    struct hcharge *c = &h->c[h->n++];
    c->counted = b;
    c->rule = b->rule;
    for (int k = 0; k < RL_KIND_COUNT; k++)
        c->states[k] = b->states[k];
    /* Only the user's rule budget has a host lease of fleet units. */
    if (b->rule == g->rule && b->fleet.w != NULL)
        c->pool = &b->fleet;
}

/* The budget of `r` for (owner, name), if the table holds it already. */
static bool add_dest(struct rl_dests *d, struct hcall *h, struct budget *b,
                     const struct rl_rule *r, const char *owner,
                     const char *name, size_t namelen)
{
    struct rl_dest_entry e;
    if (rl_dests_lookup(d, b->store, r, owner, name, namelen, &e) < 0)
        return false;
    unsigned i = h->n++;
    struct hcharge *c = &h->c[i];
    c->counted = b;
    c->rule = r;
    memcpy(h->dstates[i], e.states, sizeof h->dstates[i]);
    for (int k = 0; k < RL_KIND_COUNT; k++)
        c->states[k] = h->dstates[i][k];
    c->key_word = e.key_word;
    c->key = e.key;
    return true;
}

/* The budgets of a call to `sa`, as charges() in gate_take.c finds them,
 * without making any. false: one of them cannot be had here (deny). */
static bool charges(struct rl_proc *p, struct hcall *h, struct budget *b,
                    const void *sa, unsigned salen)
{
    const struct rl_gate *g = &p->gate;
    const struct rl_rule *rule = g->rule;
    if (!rl_sites_any(&p->sites) && !rl_dests_any(&p->dests)) {
        if (rule != NULL)
            add_budget(g, h, b); /* the hook asked rl_gate_covers */
        return true;
    }
    struct rl_peer peer;
    char name[RL_NAME_MAX + 1], pname[RL_NAME_MAX + 1];
    size_t namelen = 0;
    if (sa == NULL || !rl_peer_from_addr(&p->names, sa, salen, &peer)) {
        if (rule != NULL)
            add_budget(g, h, b);
        return true;
    }
    if (rule != NULL &&
        rl_dests_cover_peer(rule->to, rule->nto, &peer, pname)) {
        if (rule->per == RL_PER_DESTINATION) {
            namelen = rl_dests_peer_name(&peer, name);
            if (!add_dest(&p->dests, h, b, rule, rl_budget_user(rule, g->user),
                          name, namelen)) {
                h->denier = rule;
                return false;
            }
        } else {
            add_budget(g, h, b);
        }
    }
    int si = rl_sites_pick_peer(&p->sites, &peer, pname);
    if (si < 0)
        return true;
    struct budget *sb = rl_sites_budget_now(&p->sites, si, b->store);
    if (sb == NULL) {
        /* Never charged in this process yet: its slot is claimed (and
         * allocated for) only outside a handler. */
        h->denier = rl_sites_rule(&p->sites, si);
        return false;
    }
    if (sb->rule->per != RL_PER_DESTINATION) {
        add_budget(g, h, sb);
        return true;
    }
    if (namelen == 0)
        namelen = rl_dests_peer_name(&peer, name);
    if (!add_dest(&p->dests, h, sb, sb->rule, g->user, name, namelen)) {
        h->denier = sb->rule;
        return false;
    }
    return true;
}

static bool has_window(const struct rl_rule *r, int kind)
{
    for (unsigned i = 0; i < r->nlimits[kind]; i++)
        if (r->limits[kind][i].algo != RL_ALGO_TOKEN_BUCKET)
            return true;
    return false;
}

static void untake(const struct rl_fleet *f, struct hcharge *c, int kind,
                   uint64_t now, uint64_t units)
{
    if (!c->took[kind] || units == 0)
        return;
    if (c->pool != NULL && rl_fleet_decides(f, c->rule)) {
        rl_fleet_lease_refund(c->pool, kind == RL_KIND_SEND ? units : 0,
                              kind == RL_KIND_SEND_BYTES ? units : 0);
        return;
    }
    rl_multi_refund(c->states[kind], c->rule->limits[kind],
                    c->rule->nlimits[kind], now, c->v[kind], units);
}

static void untake_all(const struct rl_fleet *f, struct hcall *h, int kind,
                       uint64_t now)
{
    for (unsigned i = 0; i < h->n; i++) {
        untake(f, &h->c[i], kind, now, h->c[i].granted[kind]);
        h->c[i].took[kind] = false;
    }
}

/* `want` (at least `min`) units of `kind` from every charge, now, or
 * none: true with *got the least grant (what more the others took goes
 * back). */
static bool take(const struct rl_fleet *f, struct hcall *h, int kind,
                 uint64_t now, uint64_t want, uint64_t min, uint64_t *got)
{
    uint64_t least = want;
    *got = want;
    if (want == 0)
        return true;
    for (unsigned i = 0; i < h->n; i++) {
        struct hcharge *c = &h->c[i];
        unsigned n = c->rule->nlimits[kind];
        if (n == 0)
            continue;
        uint64_t g = 0;
        if (rl_fleet_decides(f, c->rule)) {
            /* The host's lease, whole units only (a call of 1 unit and
             * all its bytes: what rl_fleet_lease_take spends). */
            if (c->pool != NULL && kind != RL_KIND_CONNECT &&
                rl_fleet_lease_take(c->pool, kind == RL_KIND_SEND ? least : 0,
                                    kind == RL_KIND_SEND_BYTES ? least : 0))
                g = least;
        } else if (!has_window(c->rule, kind)) {
            struct rl_verdict v =
                rl_multi_take(c->states[kind], c->rule->limits[kind], n, now,
                              least, min < least ? min : least, 0, c->v[kind]);
            g = v.granted;
            if (g > 0 && v.wait_ns > 0) {
                /* A later turn: not for a handler, which never waits. */
                rl_multi_refund(c->states[kind], c->rule->limits[kind], n, now,
                                c->v[kind], g);
                g = 0;
            }
        }
        bool moved = g > 0 && c->key_word != NULL &&
                     rl_load_acquire_u64(c->key_word) != c->key;
        if (g == 0 || moved) {
            /* Denied; or what it took fell on another name, which keeps
             * it (admits less, never more). */
            untake_all(f, h, kind, now);
            h->denier = c->rule;
            return false;
        }
        c->took[kind] = true;
        c->granted[kind] = g;
        if (g < least)
            least = g;
    }
    for (unsigned i = 0; i < h->n; i++) {
        struct hcharge *c = &h->c[i];
        if (c->took[kind] && c->granted[kind] > least) {
            untake(f, c, kind, now, c->granted[kind] - least);
            c->granted[kind] = least;
        }
    }
    *got = least;
    return true;
}

static int deny(struct rl_proc *p, struct hcall *h, int kind, uint64_t units,
                int *err)
{
    struct rl_gate *g = &p->gate;
    const struct rl_rule *by = h->denier;
    struct budget *counted = NULL;
    for (unsigned i = 0; i < h->n && counted == NULL; i++)
        if (by == NULL || h->c[i].rule == by)
            counted = h->c[i].counted;
    rl_gate_count(g, by != NULL ? by : counted != NULL ? counted->rule : NULL,
                  counted, kind, RL_STAT_DENIED, units);
    bool dry = by != NULL ? by->dry_run : rl_gate_dry_run(p);
    *err = by != NULL        ? by->deny_errno
           : g->rule != NULL ? g->rule->deny_errno
                             : g->cfg->deny_errno;
    return dry ? RL_GATE_GO : RL_GATE_FAIL;
}

int rl_gate_handler(struct rl_proc *p, const struct rl_gate_q *q,
                    uint64_t *granted, int *err)
{
    struct rl_gate *g = &p->gate;
    const struct rl_rule *rule = g->rule;
    *granted = q->bytes;
    *err = 0;
    if (rule == NULL && (g->deny_all || !rl_sites_any(&p->sites))) {
        if (!g->deny_all)
            return RL_GATE_GO;
        rl_gate_count(g, NULL, NULL, q->kind, RL_STAT_DENIED, q->calls);
        *err = g->cfg->deny_errno;
        return g->cfg->dry_run ? RL_GATE_GO : RL_GATE_FAIL;
    }
    /* The budget as it is: re-opening a replaced segment allocates. */
    struct budget *b = atomic_load_explicit(&g->cur, memory_order_acquire);
    if (b == NULL)
        return RL_GATE_GO; /* no store: the gate charges none either */
    struct hcall h;
    h.n = 0;
    h.denier = NULL;
    memset(h.c, 0, sizeof h.c);
    if (!charges(p, &h, b, q->sa, q->salen))
        return deny(p, &h, q->kind, q->calls, err);
    /* A connect's max_open place is bound to its fd in this process's
     * map (policy/open.c), which allocates: not from a handler. */
    for (unsigned i = 0; i < h.n; i++)
        if (q->kind == RL_KIND_CONNECT && h.c[i].rule->max_open > 0) {
            h.denier = h.c[i].rule;
            return deny(p, &h, q->kind, q->calls, err);
        }
    uint64_t now = rl_clock_now_ns(), gc, gb = 0;
    if (!take(&p->fleet, &h, q->kind, now, q->calls, q->calls, &gc))
        return deny(p, &h, q->kind, q->calls, err);
    if (q->kind == RL_KIND_SEND) {
        uint64_t min = q->bytes_min > 0 ? q->bytes_min : 1;
        if (!take(&p->fleet, &h, RL_KIND_SEND_BYTES, now, q->bytes, min, &gb)) {
            untake_all(&p->fleet, &h, q->kind, now);
            return deny(p, &h, RL_KIND_SEND_BYTES, q->bytes, err);
        }
    }
    for (unsigned i = 0; i < h.n; i++) {
        /* A fleet lease's spent units reach the segment's counters at
         * its next fill (fleet_lease.h): the report only, here. */
        struct budget *cb =
            rl_fleet_decides(&p->fleet, h.c[i].rule) ? NULL : h.c[i].counted;
        if (h.c[i].took[q->kind])
            rl_gate_count(g, h.c[i].rule, cb, q->kind, RL_STAT_ALLOWED, gc);
        if (q->kind == RL_KIND_SEND && h.c[i].took[RL_KIND_SEND_BYTES])
            rl_gate_count(g, h.c[i].rule, cb, RL_KIND_SEND_BYTES,
                          RL_STAT_ALLOWED, gb);
    }
    if (q->kind == RL_KIND_SEND)
        *granted = gb;
    return RL_GATE_GO;
}
