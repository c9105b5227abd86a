/* budget.h — how a (rule, user) pair maps onto one store slot.
 *
 * A named section ([user:KEY]) is one budget shared by every process that
 * maps to it: its user is the section's own name. [default] gives each
 * user (key, or uid) a budget of its own. The slot's label is
 * "SECTION|USER" (what `rlshim stat` prints) and its tag the hash of the
 * label. The slot's state words hold, in order, every limit of the rule:
 * kind by kind (connect, send, send_bytes), rate by rate. Counters are per
 * kind (enum rl_kind) in the store's layout. */
#ifndef RL_POLICY_BUDGET_H
#define RL_POLICY_BUDGET_H

#include <stddef.h>
#include <stdint.h>

#include "policy/config.h"

struct rl_budget_layout {
    uint32_t nwords; /* all state words of the rule */
    uint32_t offset[RL_KIND_COUNT][RL_MAX_RATES];
};

void rl_budget_layout(const struct rl_rule *rule, struct rl_budget_layout *out);

/* The budget's user: the section's own user for a named section, else
 * `caller` (rl_identity_user). */
const char *rl_budget_user(const struct rl_rule *rule, const char *caller);

/* "SECTION|USER", truncated to fit; returns the label's tag (non-zero). */
uint64_t rl_budget_label(const struct rl_rule *rule, const char *user,
                         char *buf, size_t len);

/* The tag of the slot that users of `rule` share when the table is full. */
uint64_t rl_budget_overflow_tag(const struct rl_rule *rule);

/* The other way, for `rlshim stat`/`reset`: the rule of `cfg` whose
 * section starts `label` ("SECTION|USER"; the longest such section), and in
 * *user the part after it ("*" for an overflow slot). NULL when no rule
 * matches (a label made under another config); *user is then the part
 * after the last '|', or the whole label. */
const struct rl_rule *rl_budget_parse_label(const struct rl_config *cfg,
                                            const char *label,
                                            const char **user);

#endif
