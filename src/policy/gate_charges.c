/* gate_charges.c — the budgets one call is charged to (see gate_int.h):
 * the user's rule (or its budget for the destination, `per =
 * destination`) and the first site that covers the destination (or the
 * site's budget for it), each local or on Redis; found from the
 * destination the hook handed over, never by asking about the fd. The
 * take from them is gate_take.c's. */
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "fleet/fleet.h"
#include "policy/dest.h"
#include "policy/dests.h"
#include "policy/gate.h"
#include "policy/gate_int.h"
#include "policy/gate_log.h"
#include "policy/gate_pause.h"
#include "policy/pace.h"
#include "policy/pauses.h"
#include "policy/proc.h"
#include "policy/sites.h"
#include "util/clock.h"

/* The next charge of t, zeroed but for its verdicts (written by the take
 * that reads them). */
static struct rl_gate_charge *new_charge(struct rl_gate_ticket *t)
{
    struct rl_gate_charge *c = &t->charge[t->ncharges++];
    memset(c, 0, offsetof(struct rl_gate_charge, v));
    return c;
}

/* Charge `b` (its own limiters) for this call. */
static struct rl_gate_charge *
add_budget(const struct rl_gate *g, struct rl_gate_ticket *t, struct budget *b)
{
    struct rl_gate_charge *c = new_charge(t);
    c->budget = b;
    c->rule = b->rule;
    memcpy(c->states, b->states, sizeof c->states);
    /* A site's fleet budget is the site's for this user. */
    if (b->rule != g->rule)
        c->fleet_owner = g->user;
    return c;
}

/* The destination's name for a per-destination fleet budget (its Redis
 * key names it), from charges() to take_one() within one decision: in a
 * buffer of the decision's frame (t->dest, RL_NAME_MAX + 1 bytes; see
 * rl_gate_send_at), not in the ticket, which the program's stack carries
 * through the real call too. */
static void fleet_dest(struct rl_gate_ticket *t, struct rl_gate_charge *c,
                       const char *owner, const char *name, size_t namelen)
{
    if (c->rule->scope != RL_SCOPE_FLEET || namelen > RL_NAME_MAX ||
        t->dest == NULL)
        return;
    memcpy(t->dest, name, namelen);
    t->dest[namelen] = '\0';
    c->fleet_owner = owner;
    c->fleet_dest = true;
}

/* Charge the budget of section `r` for (owner, name) in the table of
 * policy/dests.h, counting in `b` (the section's budget for the user).
 * false when not even an overflow budget could be had; in a handler, when
 * the table does not hold it yet (making it allocates). */
static bool add_dest(struct rl_dests *d, struct rl_gate_ticket *t,
                     struct budget *b, const struct rl_rule *r,
                     const char *owner, const char *name, size_t namelen)
{
    struct rl_dest_entry e;
    int got =
        t->handler
            ? rl_dests_lookup(d, b->store, r, owner, name, namelen, &e)
            : rl_dests_find(d, b->store, r, owner, name, namelen, t->now, &e);
    if (got < 0)
        return false;
    struct rl_gate_charge *c = new_charge(t);
    c->budget = b;
    c->rule = r;
    memcpy(c->states, e.states, sizeof c->states);
    c->key_word = e.key_word;
    c->key = e.key;
    c->open_area = e.open;
    fleet_dest(t, c, owner, name, namelen);
    return true;
}

/* A budget a handler cannot have (rl_gate_charges_peer): the call is
 * denied by its section. */
static bool not_here(struct rl_gate_ticket *t, const struct rl_rule *r)
{
    t->denier = r;
    return false;
}

/* The budgets a call to destination p is charged to, into t->charge[]:
 * the rule's (when its `to` covers p; its budget for the destination when
 * it is `per = destination`) and the first site that covers p (likewise).
 * `kind` >= 0: only sections that limit that kind (a request charges no
 * per-destination entry of a section without a request limit). */
bool rl_gate_charges_peer(struct rl_proc *p, struct rl_gate_ticket *t,
                          struct budget *b, struct rl_peer *peer, int kind)
{
    (void)p; /* the ticket carries the decision's generation */
    struct rl_gen *G = t->gen;
    const struct rl_gate *g = &G->gate;
    const struct rl_rule *rule = g->rule;
    /* The destination's name is looked up at most once for every `to`
     * and per-destination budget below. */
    char name[RL_NAME_MAX + 1], pname[RL_NAME_MAX + 1], key[RL_NAME_MAX + 1];
    size_t namelen = 0, keylen;
    if (rule != NULL && (kind < 0 || rule->nlimits[kind] > 0) &&
        rl_dests_cover_peer(rule->to, rule->nto, peer, pname)) {
        if (rl_rule_per_dest(rule)) {
            namelen = rl_dests_peer_name(peer, name);
            keylen = rl_dests_key(&G->dests, rule->per, peer, name, namelen,
                                  key);
            const char *owner = rl_budget_user(rule, g->user);
            if (!add_dest(&G->dests, t, b, rule, owner, key, keylen)) {
                if (t->handler)
                    return not_here(t, rule);
                /* No room at all: the rule's own (in Redis, still the
                 * destination's). */
                fleet_dest(t, add_budget(g, t, b), owner, key, keylen);
            }
        } else {
            add_budget(g, t, b);
        }
    }
    int si = rl_sites_pick_peer(&G->sites, peer, pname);
    struct budget *sb = NULL;
    if (si >= 0) {
        /* A site's budget never charged in this process yet is claimed
         * (and allocated for) only outside a handler. */
        sb = t->handler ? rl_sites_budget_now(&G->sites, si, b->store)
                        : rl_sites_budget(&G->sites, si, b->store);
        if (sb == NULL && t->handler)
            return not_here(t, rl_sites_rule(&G->sites, si));
    }
    if (sb != NULL && (kind < 0 || sb->rule->nlimits[kind] > 0)) {
        if (!rl_rule_per_dest(sb->rule)) {
            add_budget(g, t, sb);
        } else {
            if (namelen == 0)
                namelen = rl_dests_peer_name(peer, name);
            keylen = rl_dests_key(&G->dests, sb->rule->per, peer, name,
                                  namelen, key);
            if (!add_dest(&G->dests, t, sb, sb->rule, g->user, key, keylen)) {
                if (t->handler)
                    return not_here(t, sb->rule);
                fleet_dest(t, add_budget(g, t, sb), g->user, key, keylen);
            }
        }
    }
    if (kind != RL_KIND_REQUEST || t->ncharges == 0)
        return true;
    /* A request's pauses are its destination's (SPEC §12), whatever
     * budget it shares: keyed by section, user and the section's key of
     * the destination (its name, or its domain or address with `per =
     * domain` or `address`: SPEC §14, the pace follows the key), here and
     * on Redis (t->dest: the key fleet_dest writes; the first charge's
     * when a site is keyed otherwise than the rule). */
    if (namelen == 0)
        namelen = rl_dests_peer_name(peer, name);
    bool told = false;
    for (unsigned i = 0; i < t->ncharges; i++) {
        struct rl_gate_charge *c = &t->charge[i];
        if (!(rl_pause_obeyed(c->rule) || rl_pace_kept(c->rule)) ||
            c->budget->store == NULL)
            continue;
        keylen =
            rl_dests_key(&G->dests, c->rule->per, peer, name, namelen, key);
        if (t->dest != NULL && !told) {
            memcpy(t->dest, key, keylen);
            t->dest[keylen] = '\0';
            told = true;
        }
        uint64_t ri = (uint64_t)(c->rule - g->cfg->rules) + 1;
        c->pause_key = rl_pauses_key(ri, g->user, key, keylen);
        c->pause_key_untold = rl_pauses_key(ri, g->user, "-", 1);
    }
    if (t->dest != NULL && !told) {
        memcpy(t->dest, name, namelen);
        t->dest[namelen] = '\0';
    }
    return true;
}

bool rl_gate_charges(struct rl_proc *p, struct rl_gate_ticket *t,
                     const void *sa, unsigned salen)
{
    struct rl_gen *G = t->gen;
    struct rl_gate *g = &G->gate;
    const struct rl_rule *rule = g->rule;
    /* In a handler, the budget as it is: re-opening a replaced segment
     * allocates. */
    struct budget *b = t->handler
                           ? atomic_load_explicit(&g->cur, memory_order_acquire)
                           : rl_gate_budget(g);
    t->ncharges = 0;
    if (b == NULL)
        return true;
    if (!rl_sites_any(&G->sites) && !rl_dests_any(&G->dests)) {
        add_budget(g, t, b); /* the hook asked rl_gate_covers */
        return true;
    }
    struct rl_peer dest;
    if (sa != NULL && rl_peer_from_addr(&p->names, sa, salen, &dest))
        return rl_gate_charges_peer(p, t, b, &dest, -1);
    /* No destination: the rule's own budget. An address that is not
     * inet names no destination of ours and charges nothing, in a
     * handler as outside one (the kernel refuses such a send to an inet
     * socket; handler::charges_nothing_for_an_address_that_is_not_inet). */
    if (rule != NULL && sa == NULL)
        add_budget(g, t, b);
    return true;
}

/* The destination a request names: the connection's peer address (when
 * known) under the request's own name and port (when it gave them). */
bool rl_gate_request_peer(struct rl_proc *p, const struct rl_gate_req *q,
                          struct rl_peer *peer)
{
    if (q->sa == NULL || !rl_peer_from_addr(&p->names, q->sa, q->salen, peer))
        /* Neither address nor name (a TLS library writing through a BIO
         * of the program's, an HTTP/2 request whose name only its commit
         * decodes): only sections without `to` cover it, under the
         * destination "-". */
        memset(peer, 0, sizeof *peer);
    if (q->name != NULL && q->name[0] != '\0') {
        size_t l = strlen(q->name);
        if (l > RL_NAME_MAX)
            return false;
        peer->name = q->name;
        peer->namelen = (int16_t)l;
    }
    if (q->port != 0)
        peer->port = q->port;
    return true;
}

/* Does every budget that charges q (none dry-run) refuse a request over
 * it with on_deny `how`? Decides and takes nothing. */
static bool every_charge(struct rl_proc *p, const struct rl_gate_req *q,
                         int how)
{
    struct rl_gen *G = rl_proc_gen(p);
    struct rl_gate *g = &G->gate;
    if (g->rule == NULL && (g->deny_all || !rl_sites_any(&G->sites)))
        return false;
    struct budget *b = rl_gate_budget(g);
    struct rl_peer peer;
    if (b == NULL || !rl_gate_request_peer(p, q, &peer))
        return false;
    /* The budgets its decision charges (request_at, gate_decide.c). */
    struct rl_gate_ticket t;
    char dest[RL_NAME_MAX + 1];
    rl_gate_ticket_init(&t, rl_clock_now_ns(), q->units, 0);
    t.gen = G;
    t.dest = dest;
    rl_gate_charges_peer(p, &t, b, &peer, RL_KIND_REQUEST);
    for (unsigned i = 0; i < t.ncharges; i++) {
        const struct rl_rule *r = t.charge[i].rule;
        if (r->on_deny != how || r->dry_run)
            return false;
    }
    return t.ncharges > 0 && !rl_gate_dry_run(p);
}

bool rl_gate_request_delays(struct rl_proc *p, const struct rl_gate_req *q)
{
    return every_charge(p, q, RL_DENY_DELAY);
}

bool rl_gate_request_responds(struct rl_proc *p, const struct rl_gate_req *q)
{
    return every_charge(p, q, RL_DENY_RESPOND);
}

/* A fleet charge's Redis label: its budget's, and for a budget per
 * destination, "|" and the destination's name (NULL: the user's rule
 * budget, under the label the fleet was set up with). */
const char *rl_gate_fleet_label(const struct rl_gate_ticket *t,
                                const struct rl_gate_charge *c, char *label)
{
    if (c->fleet_owner == NULL)
        return t->gen->gate.fleet_named ? t->gen->gate.label : NULL;
    rl_budget_label(c->rule, c->fleet_owner, label, RL_STORE_LABEL_MAX);
    if (c->fleet_dest) {
        size_t l = strlen(label);
        snprintf(label + l, RL_GATE_FLEET_LABEL_MAX - l, "|%s", t->dest);
    }
    return label;
}

bool rl_gate_answer_charges(struct rl_proc *p, const struct rl_gate_req *q,
                            uint64_t now, struct rl_gate_answer *a)
{
    struct rl_gen *G = rl_proc_gen(p);
    if (G->gate.rule == NULL && !rl_sites_any(&G->sites))
        return false;
    struct budget *b = rl_gate_budget(&G->gate);
    struct rl_peer peer;
    if (b == NULL || !rl_gate_request_peer(p, q, &peer))
        return false;
    rl_gate_ticket_init(&a->t, now, q->units, 0);
    a->t.gen = G;
    a->dest[0] = '\0';
    a->t.dest = a->dest;
    rl_gate_charges_peer(p, &a->t, b, &peer, RL_KIND_REQUEST);
    snprintf(a->label, sizeof a->label, "%s|%s", G->gate.user,
             a->dest[0] != '\0' ? a->dest : "-");
    return true;
}
