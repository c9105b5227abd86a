/* suggest.c — edit distance and the closest candidate (see suggest.h). */
#include "policy/suggest.h"

#include <string.h>

unsigned rl_edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    unsigned d[RL_SUGGEST_WORD_MAX + 1][RL_SUGGEST_WORD_MAX + 1];

    if (la > RL_SUGGEST_WORD_MAX || lb > RL_SUGGEST_WORD_MAX)
        return RL_SUGGEST_FAR;
    for (size_t i = 0; i <= la; i++)
        d[i][0] = (unsigned)i;
    for (size_t j = 0; j <= lb; j++)
        d[0][j] = (unsigned)j;
    for (size_t i = 1; i <= la; i++) {
        for (size_t j = 1; j <= lb; j++) {
            unsigned cost = a[i - 1] != b[j - 1];
            unsigned v = d[i - 1][j - 1] + cost;
            if (d[i - 1][j] + 1 < v)
                v = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < v)
                v = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] &&
                a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < v)
                v = d[i - 2][j - 2] + 1;
            d[i][j] = v;
        }
    }
    return d[la][lb];
}

void rl_suggest_init(struct rl_suggest *s, const char *word, unsigned max_edits)
{
    s->word = word;
    s->len = strlen(word);
    s->bestd = max_edits + 1;
    s->best = NULL;
}

void rl_suggest_offer(struct rl_suggest *s, const char *candidate)
{
    unsigned d = rl_edit_distance(s->word, candidate);

    if (d < s->bestd && d < s->len) {
        s->bestd = d;
        s->best = candidate;
    }
}
