/* gate_pace.c — the pace of a request's destination in its decision
 * (SPEC §14; policy/pace.h has the words' side): before the take, how
 * long the pace holds the request (it joins a pause's hold, gate_decide.c);
 * after it, the jitter of the granted turn and its record, which spaces
 * the next request of every process of the user.
 *
 * A section that keeps no pace (pace.h's rl_pace_kept) is never looked
 * at here: its requests pay one test per charge. */
#include <stdio.h>

#include "fleet/fleet.h"
#include "policy/dest.h"
#include "policy/gate.h"
#include "policy/gate_int.h"
#include "policy/gate_pace.h"
#include "policy/pace.h"
#include "policy/proc.h"
#include "util/atomics.h"

/* Charge c's pace, for section `ri` (its index + 1); false when its
 * destination has no entry to keep one in. */
static bool pace_of(const struct rl_gate_ticket *t,
                    const struct rl_gate_charge *c, uint64_t ri,
                    struct rl_pace *pc)
{
    if (c->pause_key == 0 || c->budget == NULL || c->budget->store == NULL ||
        !rl_pace_kept(c->rule))
        return false;
    rl_pauses_of(c->budget->store, &pc->table);
    pc->set = (struct rl_pause_set){
        .key = c->pause_key, .rule = ri, .label = "", .now = t->now};
    rl_pace_conf(c->rule, &pc->conf);
    pc->rule = c->rule;
    return true;
}

static uint64_t rule_index(const struct rl_gen *G, const struct rl_rule *r)
{
    return (uint64_t)(r - G->gate.cfg->rules) + 1;
}

/* The jitter's draw: a counter of the process's, salted with the clock. */
static uint64_t draw(struct rl_proc *p, uint64_t now)
{
    struct rl_gen *G = rl_proc_gen(p);
    uint64_t n = rl_add_relaxed_u64(&G->gate.jitter_draws, 1);
    return rl_pace_random(n, now ^ (uint64_t)(uintptr_t)p);
}

uint64_t rl_gate_pace_hold(struct rl_proc *p, struct rl_gate_ticket *t,
                           uint64_t from, uint64_t *jitter)
{
    *jitter = 0;
    uint64_t now = t->now;
    for (unsigned i = 0; i < t->ncharges; i++) {
        const struct rl_gate_charge *c = &t->charge[i];
        struct rl_pace pc;
        if (!pace_of(t, c, rule_index(t->gen, c->rule), &pc))
            continue;
        /* The words read once: for the turn and for the jitter's span. */
        struct rl_adapt a;
        enum rl_adapt_why why = RL_ADAPT_RATE;
        uint64_t turn = now + from;
        if (rl_pauses_pace(&pc.table, pc.set.key, &a))
            turn = rl_adapt_turn(&a, &pc.conf, now, turn, &why);
        if (turn - now > from) {
            from = turn - now;
            t->reason = rl_adapt_reason(why);
        }
        /* Jitter only where the turn may move: delay mode. */
        if (c->rule->jitter_pct == 0 || rl_gate_max_wait(c->rule) == 0)
            continue;
        uint64_t j = rl_pace_jitter_ns(rl_adapt_interval(&a, &pc.conf, now),
                                       c->rule->jitter_pct, draw(p, now));
        if (j > *jitter)
            *jitter = j;
    }
    return from;
}

bool rl_gate_pace_went(struct rl_proc *p, struct rl_gate_ticket *t)
{
    (void)p; /* the ticket carries the decision's generation */
    struct rl_gen *G = t->gen;
    uint64_t now = t->now;
    char label[RL_IDENTITY_MAX + RL_NAME_MAX + 24];
    label[0] = '\0';
    for (unsigned i = 0; i < t->ncharges; i++) {
        const struct rl_gate_charge *c = &t->charge[i];
        struct rl_pace pc;
        if (!pace_of(t, c, rule_index(t->gen, c->rule), &pc))
            continue;
        if (label[0] == '\0')
            snprintf(label, sizeof label, "%s|%s", G->gate.user,
                     t->dest != NULL && t->dest[0] != '\0' ? t->dest : "-");
        pc.set.label = label;
        uint64_t turn = now + t->wait_ns;
        uint64_t latest = now + rl_gate_max_wait(c->rule);
        enum rl_adapt_why why = RL_ADAPT_RATE;
        int r = rl_pace_record(&pc, now, &turn, latest, &why);
        if (r < 0) {
            /* Another process's request took the turn this one was
             * given: it may not go before that one's spacing is over. */
            t->denier = c->rule;
            t->retry_ns = rl_pace_turn(&pc, now, turn, &why) - now;
            t->reason = rl_adapt_reason(why);
            return false;
        }
        if (r > 0) {
            t->wait_ns = turn - now;
            t->reason = rl_adapt_reason(why);
        }
    }
    return true;
}

/* Does any section of the config adapt to latency? (A response of a
 * process whose config has none costs one walk of its sections.) */
static bool any_adapts(const struct rl_config *cfg)
{
    for (size_t i = 0; cfg != NULL && i < cfg->nrules; i++)
        if (cfg->rules[i].adapt == RL_ADAPT_MODE_LATENCY)
            return true;
    return false;
}

/* Charge c's latency word at a response taking `response_ns`: computed
 * on a copy and written from the value read, again when another process
 * wrote it first. True, and the new interval in *interval_ns, when this
 * process moved the interval (not only the response time beside it). */
static bool adapt_latency(struct rl_pace *pc, uint64_t response_ns,
                          uint64_t *interval_ns)
{
    for (unsigned i = 0; i < RL_PACE_TRIES; i++) {
        struct rl_adapt a;
        rl_pauses_pace(&pc->table, pc->set.key, &a);
        struct rl_adapt next = a;
        if (!rl_adapt_latency(&next, &pc->conf, response_ns))
            return false;
        int w = rl_pauses_pace_cas(&pc->table, &pc->set, RL_PACE_LATENCY,
                                   a.latency, next.latency);
        if (w != 0) {
            *interval_ns = rl_adapt_latency_interval(&next, &pc->conf);
            return w > 0 &&
                   *interval_ns != rl_adapt_latency_interval(&a, &pc->conf);
        }
    }
    return false;
}

/* Redis keeps a fleet's latency interval as long as a Crawl-delay: it
 * stops moving once the server's pace is steady, and is written again
 * only when it moves. */
#define FLEET_LATENCY_TTL_NS RL_ADAPT_CRAWL_TTL_NS

void rl_gate_request_latency(struct rl_proc *p, const struct rl_gate_req *q,
                             uint64_t response_ns, uint64_t now)
{
    struct rl_gen *G = rl_proc_gen(p);
    if (!any_adapts(G->gate.cfg))
        return;
    struct rl_gate_answer a;
    if (!rl_gate_answer_charges(p, q, now, &a))
        return;
    for (unsigned i = 0; i < a.t.ncharges; i++) {
        const struct rl_gate_charge *c = &a.t.charge[i];
        struct rl_pace pc;
        if (c->rule->adapt != RL_ADAPT_MODE_LATENCY ||
            !pace_of(&a.t, c, rule_index(a.t.gen, c->rule), &pc))
            continue;
        pc.set.label = a.label;
        uint64_t interval = 0;
        if (adapt_latency(&pc, response_ns, &interval) &&
            rl_fleet_decides(&p->fleet, c->rule)) {
            /* Every host's (SPEC §14): one write, only when it moved. */
            char fl[RL_GATE_FLEET_LABEL_MAX];
            rl_fleet_pace(&p->fleet, rl_gate_fleet_label(&a.t, c, fl),
                          a.dest[0] != '\0' ? a.dest : NULL, false, interval,
                          FLEET_LATENCY_TTL_NS);
        }
    }
}
