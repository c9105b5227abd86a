/* stat_rows.h — `rlshim stat`'s rows (stat_rows.c), shared with the walk
 * over the segment's slots (cmd_stat.c). */
#ifndef RL_CLI_STAT_ROWS_H
#define RL_CLI_STAT_ROWS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "policy/budget.h"
#include "policy/config.h"
#include "policy/dests.h"
#include "policy/pauses.h"
#include "state/store.h"

/* What one `rlshim stat` shows, and where. */
struct stat_view {
    const struct rl_config *cfg; /* NULL: counters only */
    bool layout_ok;              /* cfg is the segment's config */
    struct rl_dests dests;       /* cfg's per-destination table */
    bool json;
    bool prom; /* --prometheus: rows go to stat_prometheus.c */
    uint64_t now;
    unsigned rows;
    FILE *out;
    /* --json: the budget's TLS connections whose requests were not
     * counted, written in its "request" row (0: none). */
    uint64_t tls_unseen;
    /* The budget's requests answered under on_deny = respond (SPEC §15),
     * shown in its "request" row apart from `denied`. */
    uint64_t responded;
    struct rl_pauses pauses; /* the segment's pause table (has_pauses) */
    bool has_pauses;
};

/* What could be spent now of kind k in a slot of `rule` (layout l): the
 * least of the kind's rates, into *out; false when it has none. */
bool stat_available(const struct rl_rule *rule,
                    const struct rl_budget_layout *l, int k,
                    struct rl_slot *slot, uint64_t now, uint64_t *out);

/* --prometheus: is a budget's availability not to be read from the host
 * (a fleet budget's state is in Redis)? */
bool stat_avail_unknown(const struct stat_view *v, const struct rl_rule *rule);

/* One row of counters c of kind k (algorithm `algo`, NULL: none shown). */
void stat_row(struct stat_view *v, const char *user, const char *rule_name,
              int k, const char *algo, const uint64_t *c, bool has_avail,
              uint64_t avail);

/* A pause word, with its entry's backoff word (policy/pauses.h), as text
 * (see stat_rows.c); false when it is not paused. */
bool stat_pause_text(const struct stat_view *v, uint64_t word,
                     uint64_t backoff, char *buf, size_t len, uint64_t *left);

/* A line for one pause of the pause table (an rl_pauses_each callback;
 * arg is the struct stat_view): its section, user and destination, when
 * the section is not per destination (its rows say it). */
void stat_pause_row(uint64_t rule, const char *label, uint64_t until,
                    uint64_t backoff, void *arg);

/* The rows of one per-destination budget (an rl_dests_each callback; arg
 * is the struct stat_view). */
void stat_dest_row(const struct rl_rule *rule, const char *label,
                   struct rl_dest_entry *e, void *arg);

#endif
