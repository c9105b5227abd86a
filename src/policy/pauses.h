/* pauses.h — the pause table (SPEC §12, §14): each entry one
 * destination's pace; a server's 429/503 pauses the
 * destination its request was charged by, for one section and user, in a
 * bounded table of the segment's own (state/layout.h's struct
 * rl_seg_pauses), apart from every budget: a pause never holds another
 * destination, even one that shares the budget, and never keeps a
 * budget of the per-destination table from being re-used.
 *
 * Reads are lock-free (a key, then its words, then the key again); every
 * write is made under the table's robust lock. When the entries near a
 * key's home are all taken, the one whose pause ends first gives way: a
 * site answering 429 under many names can lose its own pauses, never
 * pause another name. */
#ifndef RL_POLICY_PAUSES_H
#define RL_POLICY_PAUSES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "limit/adapt.h"
#include "state/store.h"
#include "util/atomics.h"

/* The pause table of one store. */
struct rl_pauses {
    struct rl_seg_pauses *head;
    struct rl_seg_pause *e;
    uint32_t n;         /* entries, a power of two */
    struct rl_store *store; /* its segment, kept while a pause runs */
};

void rl_pauses_of(struct rl_store *st, struct rl_pauses *out);

/* The key of the pause of section `rule` (its index + 1) for (user, name);
 * never 0 nor 1. */
uint64_t rl_pauses_key(uint64_t rule, const char *user, const char *name,
                       size_t namelen);

/* The paused-until word of `key` (gate_pause.c's form: ns, lowest bit the
 * reason), and its backoff word into *backoff (may be NULL); 0: none. */
uint64_t rl_pauses_get(const struct rl_pauses *p, uint64_t key,
                       uint64_t *backoff);

/* A backoff word: bits 0-31 the errors in a row (saturating), 32-47 the
 * last one's cause (an HTTP status or limit/adapt.h's RL_ADAPT_CAUSE_*),
 * for `rlshim stat`'s "backoff 503 x 3". 0: no run. */
static inline uint32_t rl_pauses_backoff_count(uint64_t word)
{
    return (uint32_t)word;
}

static inline uint32_t rl_pauses_backoff_cause(uint64_t word)
{
    return (uint32_t)(word >> 32) & 0xffffu;
}

/* What an error does to the entry of `key` (made when it has none, with
 * `rule` and the label "USER|NAME" for `rlshim stat`): when `count`, one
 * more in a row of the backoff, `cause` its last (*n: how many came
 * before it); then the
 * pause moved to `until` (a paused-until word) unless it already ends as
 * late (`until` 0: not moved). Returns 1 when the pause moved, 0 when
 * not, -1 when the lock could not be had (a stopped holder). */
struct rl_pause_set {
    uint64_t key, rule;
    const char *label;
    bool count;
    uint32_t cause; /* with count: what the error was */
    uint64_t until;
    uint64_t now; /* an entry whose pause ended before it is free */
};
int rl_pauses_set(struct rl_pauses *p, const struct rl_pause_set *s,
                  uint64_t *n);

/* A success ends the doubling of `key`'s backoff. */
void rl_pauses_backoff_end(struct rl_pauses *p, uint64_t key);

/* The pace words of `key` (limit/adapt.h's latency, crawl and last; its
 * `pause` left 0: the pause is until and backoff above) into *out, all
 * zero when it has no entry; false then. */
bool rl_pauses_pace(const struct rl_pauses *p, uint64_t key,
                    struct rl_adapt *out);

/* The pace words an update may write (limit/adapt.h says which update
 * writes which). */
enum rl_pace_word { RL_PACE_LATENCY, RL_PACE_CRAWL, RL_PACE_LAST };

/* Word `w` of the entry of s->key (made when it has none, with s->rule
 * and s->label) from `old` to `new`, under the lock, when it still holds
 * `old`: 1 written, 0 not (another process moved it first: read it again
 * and compute again), -1 the lock could not be had (a stopped holder).
 * s->until, s->count are not used. */
int rl_pauses_pace_cas(struct rl_pauses *p, const struct rl_pause_set *s,
                       enum rl_pace_word w, uint64_t old, uint64_t new);

/* For `rlshim stat`: fn for each entry whose pause lasts past `now`, with
 * its backoff word. */
void rl_pauses_each(const struct rl_pauses *p, uint64_t now,
                    void (*fn)(uint64_t rule, const char *label,
                               uint64_t until, uint64_t backoff, void *arg),
                    void *arg);

#endif
