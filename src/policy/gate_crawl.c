/* gate_crawl.c — see gate_crawl.h. The delay is the `crawl` word of the
 * destination's entry in the pause table (policy/pauses.h), keyed as its
 * pause is: by section, user and the name the request was charged to
 * (gate_charges.c), so the decision that reads the pace finds it. The
 * word changes by limit/adapt.h's rule, one compare-and-swap: a process
 * that wrote first is read again. */
#include <stdio.h>
#include <string.h>

#include "fleet/fleet.h"
#include "limit/adapt.h"
#include "policy/dests.h"
#include "policy/gate.h"
#include "policy/gate_crawl.h"
#include "policy/gate_int.h"
#include "policy/pauses.h"
#include "policy/proc.h"
#include "policy/sites.h"
#include "util/clock.h"

/* Tries of one word against other processes writing it: each failure is
 * another write that landed, so a few suffice. */
#define CAS_TRIES 8

bool rl_crawl_obeyed(const struct rl_rule *r)
{
    return r != NULL && r->crawl_delay == RL_CRAWL_DELAY_OBEY &&
           r->nlimits[RL_KIND_REQUEST] > 0;
}

/* The crawl word of entry s->key from delay_ns at now: true when it
 * changed (*in_force: the delay it says now, cut at max_crawl_delay). */
static bool write_crawl(struct rl_pauses *pt, const struct rl_pause_set *s,
                        const struct rl_rule *r, uint64_t delay_ns,
                        uint64_t now, uint64_t *in_force)
{
    const struct rl_adapt_conf conf = {
        .max_crawl_delay_ns = r->max_crawl_delay_ns,
    };
    for (unsigned i = 0; i < CAS_TRIES; i++) {
        struct rl_adapt a;
        rl_pauses_pace(pt, s->key, &a);
        uint64_t old = a.crawl;
        if (!rl_adapt_crawl_delay(&a, &conf, now, delay_ns))
            return false; /* already says so */
        int w = rl_pauses_pace_cas(pt, s, RL_PACE_CRAWL, old, a.crawl);
        *in_force = rl_adapt_crawl_delay_now(&a, &conf, now);
        if (w != 0)
            return w > 0; /* -1: a stopped holder of the lock */
    }
    return false;
}

unsigned rl_gate_crawl_delay_at(struct rl_proc *p, const struct rl_gate_req *q,
                                uint64_t delay_ns, uint64_t now)
{
    struct rl_gate_answer a;
    if (!rl_gate_answer_charges(p, q, now, &a))
        return 0;
    const struct rl_gen *G = a.t.gen; /* the charges' own */
    unsigned moved = 0;
    for (unsigned i = 0; i < a.t.ncharges; i++) {
        const struct rl_gate_charge *c = &a.t.charge[i];
        /* The key the decision reads: the charge's, which follows the
         * section's `per` (a domain's or an address's pace is one). */
        if (!rl_crawl_obeyed(c->rule) || c->budget->store == NULL ||
            c->pause_key == 0)
            continue;
        uint64_t ri = (uint64_t)(c->rule - G->gate.cfg->rules) + 1;
        struct rl_pause_set s = {
            .key = c->pause_key, .rule = ri, .label = a.label, .now = now};
        struct rl_pauses pt;
        rl_pauses_of(c->budget->store, &pt);
        uint64_t in_force = 0;
        if (!write_crawl(&pt, &s, c->rule, delay_ns, now, &in_force))
            continue;
        moved++;
        if (rl_fleet_decides(&p->fleet, c->rule)) {
            /* Every host's (SPEC §14): one write, only when it moved. */
            char fl[RL_GATE_FLEET_LABEL_MAX];
            rl_fleet_pace(&p->fleet, rl_gate_fleet_label(&a.t, c, fl),
                          a.dest[0] != '\0' ? a.dest : NULL, true, in_force,
                          RL_ADAPT_CRAWL_TTL_NS);
        }
    }
    return moved;
}

unsigned rl_gate_crawl_delay(struct rl_proc *p, const struct rl_gate_req *q,
                             uint64_t delay_ns)
{
    return rl_gate_crawl_delay_at(p, q, delay_ns, rl_clock_now_ns());
}
