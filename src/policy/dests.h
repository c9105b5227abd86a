/* dests.h — budgets per destination name (`per = destination`, SPEC §3).
 *
 * Every section with `per = destination` gives each destination name it
 * covers a budget of its own of the section's limits, per budget user.
 * They live in one bounded table per segment (`[rlshim] max_destinations`
 * live entries), itself the state words of one store slot, so that every
 * process of the uid shares them and nothing in state/ changes:
 *
 *   header (16 words): live entries, "overflow said", a cursor, the
 *                      insert lock (a robust mutex, util/ownerlock.h)
 *   entries (cap of them, a power of two, >= 2 x max_destinations):
 *     key   hash of (section, user, name); 0 = never used, 1 = busy
 *     rule  index of the section in the config, + 1
 *     state the section's limiter words (stride: the largest of them)
 *
 * A look-up of a known destination is lock-free: hash, then a short linear
 * probe comparing one word per entry. A new destination takes the insert
 * lock (a robust process-shared mutex: a holder killed inside is taken
 * over) so that two processes never make two budgets for one name. An entry is
 * never emptied, only re-used: when no free entry is near, an entry whose
 * budget is full (token buckets only: a full bucket carries no
 * information; a server's pause of the name is not the budget's but the
 * pause table's, policy/pauses.h) is re-used for the new name. When
 * nothing can be re-used, the call is charged to the section's overflow budget (one per section
 * and user, shared by every destination that found no room), and the
 * first process to see that says so once. A window's budget is never
 * re-used (its state has a lock a holder may be in).
 *
 * A decision that took from an entry checks afterwards that the entry
 * still holds its name (its key word, read back): when it was re-used meanwhile,
 * what was taken fell on the other name (which then admits less, never
 * more) and the caller looks the name up again. */
#ifndef RL_POLICY_DESTS_H
#define RL_POLICY_DESTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "limit/limit.h"
#include "policy/config.h"
#include "policy/names.h"
#include "policy/regdomain.h"
#include "state/store.h"

/* One per-destination budget, as a decision holds it. */
struct rl_dest_entry {
    rl_atomic_u64 *key_word; /* NULL for the overflow budget */
    uint64_t key;
    rl_word *states[RL_KIND_COUNT][RL_MAX_RATES];
    rl_atomic_u64 *open; /* the section's max_open area (policy/open.h),
                            NULL when it has none */
    bool overflow;
};

/* The longest probe (entries looked at from a name's home). */
#define RL_DESTS_PROBE 32u

struct rl_dests_table;    /* dests.c: the table in one store */
struct rl_dests_overflow; /* dests.c: an overflow budget */

/* The process's view of the per-destination sections (a member of struct
 * rl_proc; `rlshim stat` makes its own): the table's geometry, learnt
 * once from the config, and the table and overflow budgets of the store
 * in use. All zero: no section is per destination. */
struct rl_dests {
    const struct rl_config *cfg;
    bool any;
    uint32_t stride;   /* words per entry: key, rule, state, open, label */
    uint32_t label_at; /* where an entry's label ("USER|NAME", cut to
                          RL_DESTS_LABEL_WORDS words) starts */
    uint32_t open_at;  /* where an entry's open area starts; 0: none */
    uint64_t cap;      /* entries, a power of two */
    uint64_t max_live; /* max_destinations */
    uint32_t table_words;
    _Atomic(struct rl_dests_table *) cur;
    _Atomic(struct rl_dests_overflow *) *ovf; /* per rule index */
    struct rl_budget_layout *layouts;         /* per rule index */
    struct rl_regdomain psl; /* per = domain: libpsl, loaded at set-up */
};

/* Learn the per-destination sections of `cfg` into d. Returns 0 or
 * -ENOMEM. Writes nothing when no section is per destination. A section
 * with `per = domain` loads libpsl (policy/regdomain.h); when it cannot
 * be loaded, one line says so and such sections are keyed by the name,
 * as `per = destination` does. */
int rl_dests_setup(struct rl_dests *d, const struct rl_config *cfg);

/* Free what rl_dests_setup and the look-ups allocated, for a process that
 * uses d no more (the CLI at its end; the shim never: a thread may still
 * hold a table). */
void rl_dests_close(struct rl_dests *d);

/* Does any section of the config have `per = destination`? */
bool rl_dests_any(const struct rl_dests *d);

/* State words the table and the overflow budgets need (for sizing the
 * store's arena; d set up for cfg), and the slots (one for the table, one
 * overflow budget per section and user). */
uint64_t rl_dests_arena_words(const struct rl_dests *d,
                              const struct rl_config *cfg);
uint32_t rl_dests_slots(const struct rl_config *cfg);

/* The name a destination is charged under: the name the process resolved
 * the address from, else the address literal ("10.0.0.1", "::1"). Into
 * buf (RL_NAME_MAX + 1 bytes); returns its length, 0 for another family. */
size_t rl_dests_name(struct rl_names *names, const void *sa, unsigned salen,
                     char *buf);

/* rl_dests_name with its port, as a message names the destination, into
 * `host` of any size: "?" and port 0 when `sa` is not an inet address (or
 * NULL). */
void rl_dests_name_port(struct rl_names *names, const void *sa,
                        unsigned salen, char *host, size_t hostlen,
                        unsigned *port);

/* The same for a peer taken apart already (its name looked up once). */
struct rl_peer;
size_t rl_dests_peer_name(struct rl_peer *p, char *buf);

/* The key a section with `per` (enum rl_per) charges destination p to,
 * from its name (rl_dests_peer_name's, namelen bytes), into `key`
 * (RL_NAME_MAX + 1 bytes, not `name`): the name itself (user,
 * destination), its registrable domain (domain: the name as it is when
 * libpsl is not loaded), or the address the connection went to (address:
 * the name when the connection's address is not known). Budgets, pauses
 * and the pace are all keyed by it. Returns its length. */
size_t rl_dests_key(const struct rl_dests *d, int per,
                    const struct rl_peer *p, const char *name,
                    size_t namelen, char *key);

/* The budget of section `rule` for (user, name) in store `st`: found,
 * made, or the overflow budget. `now` decides whether a budget is full.
 * Returns 0, or -ENOSPC when not even the overflow budget could be had. */
int rl_dests_find(struct rl_dests *d, struct rl_store *st,
                  const struct rl_rule *rule, const char *user,
                  const char *name, size_t namelen, uint64_t now,
                  struct rl_dest_entry *out);

/* The same without making anything: a budget the table already holds
 * for (user, name), found lock-free with no allocation (what a signal
 * handler may do), or -ENOENT (not made yet, or only the overflow budget
 * would do). */
int rl_dests_lookup(struct rl_dests *d, struct rl_store *st,
                    const struct rl_rule *rule, const char *user,
                    const char *name, size_t namelen,
                    struct rl_dest_entry *out);

/* Words of an entry's label "USER|NAME" (cut to fit), for `rlshim stat`. */
#define RL_DESTS_LABEL_WORDS 8u

/* For `rlshim stat`: call fn for every live entry of the table whose slot
 * words are `words` (a config set up with rl_dests_setup, the one the
 * segment was made for), with its section, its label and its budget.
 * -EINVAL when the slot is not such a table. */
int rl_dests_each(struct rl_dests *d, rl_atomic_u64 *words, uint32_t nwords,
                  void (*fn)(const struct rl_rule *rule, const char *label,
                             struct rl_dest_entry *e, void *arg),
                  void *arg);

/* The label of the table's slot (what `rlshim stat` shows for it). */
#define RL_DESTS_LABEL "#destinations|*"

#endif
