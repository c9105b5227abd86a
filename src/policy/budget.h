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

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "policy/config.h"
#include "util/atomics.h"

struct rl_budget_layout {
    uint32_t nwords; /* all state words of the rule */
    uint32_t offset[RL_KIND_COUNT][RL_MAX_RATES];
    uint32_t lease; /* first word of the lease area; 0: none */
    uint32_t fleet; /* first word of the fleet pool area (fleet_lease.h);
                       0: none */
};

void rl_budget_layout(const struct rl_rule *rule, struct rl_budget_layout *out);

/* What segments are made for: the config's hash mixed with the format of
 * the state words laid out here, so that a segment made by a build that
 * laid them out otherwise is replaced, never misread. */
uint64_t rl_budget_hash(const struct rl_config *cfg);

/* Leases: units per record at most, and the record's word 0. */
#define RL_LEASE_RECORDS 8u
#define RL_LEASE_WORDS 8u /* 64 bytes: a cache line */
#define RL_LEASE_AREA_WORDS (7u + RL_LEASE_WORDS * (1u + RL_LEASE_RECORDS))
#define RL_LEASE_MAX_CALLS 255u         /* fits 8 bits */
#define RL_LEASE_MAX_BYTES (256u << 10) /* fits 19 bits */
#define RL_LEASE_IDLE_NS 8000000u       /* 8 ms of CLOCK_MONOTONIC */

/* Word 0 of a record: calls left (bits 0-7), calls spent (8-15), bytes
 * left (16-34), bytes spent (35-53), generation (54-63, never 0 while the
 * record is held). */
#define RL_LEASE_CL_SHIFT 0
#define RL_LEASE_CS_SHIFT 8
#define RL_LEASE_BL_SHIFT 16
#define RL_LEASE_BS_SHIFT 35
#define RL_LEASE_GEN_SHIFT 54
#define RL_LEASE_GEN_MASK 0x3ffull
#define RL_LEASE_C_MASK 0xffull
#define RL_LEASE_B_MASK 0x7ffffull

struct rl_lease_units {
    uint64_t left[RL_KIND_COUNT]; /* [RL_KIND_SEND], [RL_KIND_SEND_BYTES] */
    uint64_t spent[RL_KIND_COUNT];
};

static inline void rl_lease_unpack(uint64_t w, struct rl_lease_units *u)
{
    /* Only sends are leased: the other kinds' units are none. */
    u->left[RL_KIND_CONNECT] = u->spent[RL_KIND_CONNECT] = 0;
    u->left[RL_KIND_REQUEST] = u->spent[RL_KIND_REQUEST] = 0;
    u->left[RL_KIND_SEND] = (w >> RL_LEASE_CL_SHIFT) & RL_LEASE_C_MASK;
    u->spent[RL_KIND_SEND] = (w >> RL_LEASE_CS_SHIFT) & RL_LEASE_C_MASK;
    u->left[RL_KIND_SEND_BYTES] = (w >> RL_LEASE_BL_SHIFT) & RL_LEASE_B_MASK;
    u->spent[RL_KIND_SEND_BYTES] = (w >> RL_LEASE_BS_SHIFT) & RL_LEASE_B_MASK;
}

static inline uint64_t rl_lease_pack(uint64_t gen,
                                     const struct rl_lease_units *u)
{
    return gen << RL_LEASE_GEN_SHIFT |
           u->left[RL_KIND_SEND] << RL_LEASE_CL_SHIFT |
           u->spent[RL_KIND_SEND] << RL_LEASE_CS_SHIFT |
           u->left[RL_KIND_SEND_BYTES] << RL_LEASE_BL_SHIFT |
           u->spent[RL_KIND_SEND_BYTES] << RL_LEASE_BS_SHIFT;
}

/* Can this rule's sends be leased (its layout has a lease area)? Each of
 * send and send_bytes at most one token bucket, one of them limited, and
 * every burst deep enough to share out (128 units at least). */
bool rl_budget_leasable(const struct rl_rule *rule);

/* The lease area of a slot whose state words start at `words` (laid out
 * by l, l->lease != 0): its bitmap word; record i is at
 * rl_budget_lease_bitmap(...) + RL_LEASE_WORDS * (1 + i). */
rl_atomic_u64 *rl_budget_lease_bitmap(const struct rl_budget_layout *l,
                                      rl_atomic_u64 *words);

/* Is a record stamped `last` idle at `now` (both CLOCK_MONOTONIC ns; the
 * stamp is no later than its holder's last call, lease.c)? */
static inline bool rl_lease_idle(uint64_t last, uint64_t now)
{
    return now >= last && now - last >= RL_LEASE_IDLE_NS;
}

/* For `rlshim stat`: the units spent in held records (not yet in the
 * counters) and the units left in records idle at `now`
 * (any new call takes them back), summed. Reads only. */
void rl_budget_lease_sum(const struct rl_budget_layout *l, rl_atomic_u64 *words,
                         uint64_t now, struct rl_lease_units *out);

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
