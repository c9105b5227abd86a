/* suggest.h — "did you mean ...?" for names a user got slightly wrong.
 *
 * The distance is optimal string alignment (an insertion, deletion,
 * substitution or swap of two neighbours costs 1): "conect", "connetc" and
 * "connnect" are each one edit from "connect". No allocation, no I/O. */
#ifndef RL_POLICY_SUGGEST_H
#define RL_POLICY_SUGGEST_H

#include <stddef.h>

/* Words longer than this are never close to anything. */
#define RL_SUGGEST_WORD_MAX 32

/* The edits from a to b; RL_SUGGEST_FAR when either is longer than
 * RL_SUGGEST_WORD_MAX bytes. */
#define RL_SUGGEST_FAR 99u
unsigned rl_edit_distance(const char *a, const char *b);

/* The closest of a set of candidates, offered one at a time:
 *
 *     struct rl_suggest s;
 *     rl_suggest_init(&s, typed, 2);
 *     for (...) rl_suggest_offer(&s, candidate);
 *     if (s.best != NULL) ... "did you mean '%s'?", s.best
 *
 * A candidate is kept when it is at most `max_edits` away, closer than
 * every earlier one (ties go to the first offered), and fewer edits away
 * than the typed word has bytes (so "xy" never suggests an unrelated
 * two-letter name). */
struct rl_suggest {
    const char *word;
    size_t len;
    unsigned bestd; /* the best distance so far; max_edits + 1 at first */
    const char *best;
};

void rl_suggest_init(struct rl_suggest *s, const char *word,
                     unsigned max_edits);
void rl_suggest_offer(struct rl_suggest *s, const char *candidate);

#endif
