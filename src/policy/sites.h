/* sites.h — the site budgets a call is charged to besides the user's rule
 * (SPEC §3 "Sites").
 *
 * A call to a destination is charged to the first [site:LABEL] section,
 * in file order, whose `to` covers it (rl_config_find_site), in a budget
 * of that site's limits that belongs to the calling user: the slot
 * "site:LABEL|USER" of the process's own segment (so a site budget is per
 * user and never crosses uids: segments are per uid). This module knows
 * the sites of the config and claims their slots in a store on first use;
 * the gate takes from them beside the rule's budget, all or nothing.
 *
 * rl_sites_setup runs once, before any decision; rl_sites_budget may be
 * called from any thread (a slot is claimed once per store and the result
 * published with a CAS; a racing claimer gets the same slot). */
#ifndef RL_POLICY_SITES_H
#define RL_POLICY_SITES_H

#include <stdbool.h>
#include <stdint.h>

#include "limit/limit.h"
#include "policy/budget.h"
#include "policy/config.h"
#include "state/store.h"

struct budget; /* gate_int.h */
struct rl_site; /* sites.c */

/* The process's sites (a member of struct rl_proc), set up once. All
 * zero: none. */
struct rl_sites {
    const struct rl_config *cfg;
    struct rl_site *sites; /* cfg's site rules, in file order */
    unsigned nsites;
    bool sends; /* some site limits sends */
};

/* Learn the sites of `cfg` for user `user` (the budget user of the caller:
 * its key or uid) into ss. Returns 0 or -ENOMEM. Sets nothing when the
 * config has no site. */
int rl_sites_setup(struct rl_sites *ss, const struct rl_config *cfg,
                   const char *user);

/* Does the config have sites? Does any site limit sends (send or
 * send_bytes)? */
bool rl_sites_any(const struct rl_sites *ss);
bool rl_sites_charge_sends(const struct rl_sites *ss);

/* The state words the sites' slots need in all, for sizing a store's
 * arena (every user of the uid may have a budget of every site). */
uint64_t rl_sites_arena_words(const struct rl_config *cfg);

/* The site a call to `sa` is charged to (its name looked up in `names`):
 * its index, or -1. */
int rl_sites_pick(const struct rl_sites *ss, struct rl_names *names,
                  const void *sa, unsigned salen);

/* The same for a peer taken apart already; `name` (RL_NAME_MAX + 1 bytes)
 * receives its name if a `to` needs it (kept in p). */
int rl_sites_pick_peer(const struct rl_sites *ss, struct rl_peer *p,
                       char *name);

/* Site `i`'s budget in store `st`, claimed on first use. NULL when the
 * store cannot hold it (-ENOSPC even in the overflow area, or a slot made
 * by another config). */
struct budget *rl_sites_budget(struct rl_sites *ss, int i, struct rl_store *st);

/* Site `i`'s budget in `st` if it was claimed already, else NULL: no
 * claim, no allocation (what a signal handler may do). */
struct budget *rl_sites_budget_now(struct rl_sites *ss, int i,
                                   struct rl_store *st);

/* Site `i`'s section (NULL for no site). */
const struct rl_rule *rl_sites_rule(const struct rl_sites *ss, int i);

#endif
