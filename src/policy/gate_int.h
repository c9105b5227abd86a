/* gate_int.h — the gate's process state, shared by gate.c (set-up),
 * gate_decide.c (the decision), gate_charges.c (its budgets), gate_take.c
 * (the take from them), gate_signal.c (the steps a signal handler's
 * decision changes), gate_open.c (max_open places), gate_log.c, lease.c
 * (units a thread takes ahead) and report.c (the exit report).
 * Not for the shim: it calls gate.h's functions only (policy/proc.h
 * includes this header for the size of struct rl_proc, nothing more).
 *
 * A member of the process's struct rl_proc (policy/proc.h): written by
 * rl_gate_init at load, before any hook acts, then only read, except the
 * fields marked otherwise. */
#ifndef RL_POLICY_GATE_INT_H
#define RL_POLICY_GATE_INT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "fleet/fleet_lease.h"
#include "limit/limit.h"
#include "policy/budget.h"
#include "policy/config.h"
#include "policy/gate.h"
#include "policy/identity.h"
#include "policy/names.h"
#include "state/store.h"
#include "util/atomics.h"

/* One budget a call may be charged to: a rule's slot in one open store,
 * with each limit's state words. */
struct budget {
    const struct rl_rule *rule;
    struct rl_budget_layout layout;
    struct rl_store *store;
    struct rl_slot slot;
    rl_word *states[RL_KIND_COUNT][RL_MAX_RATES];
    /* A fleet budget's lease of send units (fleet_lease.h); w NULL: none. */
    struct rl_fleet_pool fleet;
    /* The budget this one replaced: never freed, since another thread may
     * still be deciding in it, and kept reachable from here. */
    struct budget *replaced;
};

/* One section's counts for the exit report: what this process's calls
 * spent of its budgets (per destination too, for a section with `per =
 * destination`), per kind and stat (RL_STAT_*), and the TLS connections
 * whose requests it could not count. */
struct rl_report_counts {
    rl_atomic_u64 n[RL_KIND_COUNT][RL_STORE_STATS_PER_KIND];
    rl_atomic_u64 tls_unseen;
    rl_atomic_u64 responded; /* requests answered (SPEC §15), not denied */
};

/* What this process decided, for the exit report; only counted when the
 * report is on. Relaxed adds by any thread (a signal handler's too: the
 * arrays are allocated before the first decision), read once at exit. */
struct rl_report {
    bool on;
    /* The user's rule (or none: unknown = deny). */
    struct rl_report_counts mine;
    /* Each site's, indexed as the config's rules (only sites' are used);
     * NULL: the config has none (or no memory: counted in mine). */
    struct rl_report_counts *sections;
    const struct rl_rule *rules;
    size_t nrules;
    /* TLS connections whose requests were not counted (report.h's
     * rl_report_tls_unseen), counted whether or not the report is on:
     * said on stderr the first time. */
    rl_atomic_u64 tls_unseen;
};

/* The lease settings (lease.c), fixed at init. */
struct rl_lease_conf {
    bool on;
    bool calls, bytes; /* send, send_bytes limited */
    uint64_t size[RL_KIND_COUNT];
};

struct rl_gate {
    const struct rl_config *cfg;
    const struct rl_rule *rule; /* NULL: no section for this user */
    bool deny_all;              /* no rule and unknown = deny */
    bool active;
    bool charges_sends;
    bool counts_requests; /* the rule or a site sets `request` */
    bool needs_peer;      /* rl_gate_needs_peer */
    struct rl_store_opts store_opts;
    uint64_t slot_tag, overflow_tag;
    char label[RL_STORE_LABEL_MAX];
    char user[RL_IDENTITY_MAX + 16];
    /* The largest stream send that can ever be granted at once (the
     * smallest send_bytes burst), UINT64_MAX when bytes are not limited. */
    uint64_t max_bytes;
    uint64_t refill_10ms; /* bytes the slowest byte rate refills in 10 ms */
    struct rl_lease_conf lease;
    /* Sends of a fleet budget spend the host's lease (fleet_lease.h):
     * the fleet's counterpart of lease.on, fixed at init. */
    bool fleet_lease;
    /* The user's rule budget has another label than the fleet's own (the
     * process's first set-up's, fleet.h): a reload moved the user to
     * another section, or a fork child to another cgroup. Its fleet
     * charges then name it in each call (rl_gate_fleet_label), since the
     * fleet, which other threads use meanwhile, is not set up again. */
    bool fleet_named;
    /* A connect is charged to the rule's own budget alone, with one limit
     * of connects and no max_open, decided in this host and not logged:
     * one take, counted, and no ticket of charges, only what a give-back
     * needs (gate.h's `alone`; rl_gate_connect_now). Fixed at init. */
    bool connect_alone;
    struct rl_report report;

    /* The budget in use: swapped when the segment goes stale (another
     * process replaced it); one thread at a time re-opens. */
    _Atomic(struct budget *) cur;
    atomic_flag reopening;
    /* Non-blocking calls failed past max_delay (policy/overdue.h): the
     * first says why. Relaxed adds by any thread. */
    rl_atomic_u64 overdue_said;
    /* Requests refused under on_deny = respond that the shim could not
     * answer (HTTP/2, a TLS write of several): they fail, the first says
     * so (gate_decide.c). Relaxed adds by any thread. */
    rl_atomic_u64 respond_failed_said;
    /* Jitter's draws so far (policy/gate_pace.c): relaxed adds by any
     * thread, each draw a count no other draw of the process has. */
    rl_atomic_u64 jitter_draws;
};

struct rl_proc;

/* Add n to counter (kind, stat) of b (NULL: the report only), a budget of
 * section `sec` (NULL: the user's rule, or none), which the report counts
 * it under. */
void rl_gate_count(struct rl_gate *g, const struct rl_rule *sec,
                   struct budget *b, int kind, int stat, uint64_t n);

/* Add n requests answered under on_deny = respond (SPEC §15) to b's
 * `responded` word (NULL: the report only) and to section sec's report:
 * counted there instead of as denied. */
void rl_gate_count_responded(struct rl_gate *g, const struct rl_rule *sec,
                             struct budget *b, uint64_t n);

/* Take n off counter (kind, stat), never below zero (a reset may have
 * zeroed it meanwhile). */
void rl_gate_uncount(struct rl_gate *g, const struct rl_rule *sec,
                     struct budget *b, int kind, int stat, uint64_t n);

/* Subtract n from *p, stopping at zero; relaxed. */
void rl_sub_sat_u64(rl_atomic_u64 *p, uint64_t n);

/* The budget to charge: the current one, re-opened and re-claimed when
 * another process replaced the segment (may allocate: never from a
 * signal handler, which loads g->cur as it is). */
struct budget *rl_gate_budget(struct rl_gate *g);

/* A fresh ticket for a decision at `now` asking `calls` and `bytes`. */
struct rl_gate_ticket;
void rl_gate_ticket_init(struct rl_gate_ticket *t, uint64_t now,
                         uint64_t calls, uint64_t bytes);

/* The budgets a call to destination p is charged to, into t->charge[]
 * (kind >= 0: only sections that limit that kind), and the destination a
 * request names (false: none can be told). gate_charges.c; the request's
 * outcome (gate_pause.c) finds the same budgets as its decision did.
 * false only in a handler (t->handler): a budget it would have to make,
 * t->denier the section whose it is. */
struct rl_peer;
struct rl_gate_req;
bool rl_gate_charges_peer(struct rl_proc *p, struct rl_gate_ticket *t,
                          struct budget *b, struct rl_peer *peer, int kind);
bool rl_gate_request_peer(struct rl_proc *p, const struct rl_gate_req *q,
                          struct rl_peer *peer);

/* The budgets request q was charged to, found again for what its answer
 * tells (a status, a response time, a robots.txt, no answer at all):
 * those of its decision (rl_gate_charges_peer), into a->t at `now`, with
 * a->dest the destination's key (its name, domain or address, as a fleet
 * keys it; "" when not told) and a->label "USER|KEY", its label in the
 * pause table for `rlshim stat`. false when q names no budget. */
struct rl_gate_answer {
    struct rl_gate_ticket t;
    char dest[RL_NAME_MAX + 1];
    char label[RL_IDENTITY_MAX + RL_NAME_MAX + 24];
};
bool rl_gate_answer_charges(struct rl_proc *p, const struct rl_gate_req *q,
                            uint64_t now, struct rl_gate_answer *a);

/* The budgets a call to `sa` (NULL: not known) is charged to, into
 * t->charge[] (rl_gate_charges_peer; without a destination, the rule's own
 * budget). A store that could not be set up charges none. false only in
 * a handler, as rl_gate_charges_peer. */
bool rl_gate_charges(struct rl_proc *p, struct rl_gate_ticket *t,
                     const void *sa, unsigned salen);

/* The Redis label of fleet charge c (NULL: the user's rule budget under
 * the fleet's own label; its generation's label when fleet_named), into
 * label[RL_GATE_FLEET_LABEL_MAX]: a decision's take and a response's
 * pause (gate_pause.c) name the same key. */
#define RL_GATE_FLEET_LABEL_MAX (RL_STORE_LABEL_MAX + RL_NAME_MAX + 2)
struct rl_gate_charge;
const char *rl_gate_fleet_label(const struct rl_gate_ticket *t,
                                const struct rl_gate_charge *c, char *label);

/* Give back to the host's lease of a fleet budget what a call it granted
 * did not use. */
void rl_gate_fleet_lease_refund(struct rl_gate *g, uint64_t calls,
                                uint64_t bytes);

/* max_open (gate_open.c): hold a place in every charge of t with
 * max_open (false: none held, t->open_full says which was full), or give
 * back the places held. */
bool rl_gate_open_take(struct rl_proc *p, struct rl_gate_ticket *t);
void rl_gate_open_untake(struct rl_proc *p, struct rl_gate_ticket *t);

/* The take from t's charges (gate_take.c): `want` (at least `min`) units
 * of `kind` from every charge at one turn, from `from` ns after t->now;
 * true with *granted the least grant, else nothing of `kind` held and
 * t->denier the section that said no. rl_gate_untake_all gives back
 * `units` of `kind` to every charge that took and forgets it. */
bool rl_gate_take(struct rl_proc *p, struct rl_gate_ticket *t, int kind,
                  uint64_t want, uint64_t min, uint64_t from,
                  uint64_t *granted);
void rl_gate_untake_all(struct rl_gate_ticket *t, int kind, uint64_t units);

/* How far a denial by `rule` may move a call's turn (0: fail mode). */
static inline uint64_t rl_gate_max_wait(const struct rl_rule *rule)
{
    return rule->on_deny == RL_DENY_DELAY ? rule->max_delay_ns : 0;
}

/* A signal handler's steps (gate_signal.c), for a ticket with `handler`
 * set: the take of `want` (at least `min`) units of `kind` from charge c
 * now, never waiting (a verdict of nothing: denied); the give-back of a
 * fleet charge's grant to the host's lease; and max_open, which a handler
 * cannot hold (false: a charge has it, t->denier says which). */
struct rl_verdict rl_gate_take_in_handler(const struct rl_gate_ticket *t,
                                          struct rl_gate_charge *c, int kind,
                                          uint64_t want, uint64_t min);
void rl_gate_untake_in_handler(const struct rl_gate_charge *c, int kind,
                               uint64_t units);
bool rl_gate_open_in_handler(struct rl_gate_ticket *t);

#endif
