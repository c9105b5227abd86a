/* check_diff.c — see check_diff.h.
 *
 * What a running process does with an edit (policy/reload.h): the same
 * budget-shaping hash opens the same segment, and every budget, pause and
 * adapted interval is found again. Another hash opens a new segment: a
 * user's own section whose limits are unchanged carries its token
 * buckets' spent units over; everything else there starts fresh. */
#include "cli/check_diff.h"

#include <stdio.h>
#include <string.h>

#include "policy/budget.h"
#include "policy/reload.h"

static const struct rl_rule *find(const struct rl_config *c, const char *sec)
{
    for (size_t i = 0; i < c->nrules; i++)
        if (strcmp(c->rules[i].section, sec) == 0)
            return &c->rules[i];
    return NULL;
}

static bool has_window(const struct rl_rule *r)
{
    for (int k = 0; k < RL_KIND_COUNT; k++)
        for (unsigned i = 0; i < r->nlimits[k]; i++)
            if (r->limits[k][i].algo != RL_ALGO_TOKEN_BUCKET)
                return true;
    return false;
}

/* What becomes of the budgets of `was` (the section in use) under `now`
 * (its edited form) when the segment changes. */
static const char *fate(const struct rl_rule *was, const struct rl_rule *now)
{
    if (!rl_reload_same_shape(was, now))
        return "restarts (its limits changed)";
    if (now->site != NULL)
        return "restarts (a site's budgets start fresh in a new segment)";
    if (rl_rule_per_dest(now))
        return "restarts (per-destination budgets start fresh in a new "
               "segment)";
    if (has_window(now))
        return "restarts (a sliding window starts fresh in a new segment)";
    return "keeps its spent units";
}

int rl_cli_check_diff(const struct rl_config *cur, const char *cur_path,
                      const struct rl_config *edited, const char *edited_path)
{
    bool same = rl_budget_hash(cur) == rl_budget_hash(edited);
    printf("%s against %s (the config in use):\n", edited_path, cur_path);
    if (same)
        printf("  no budget is reshaped: every budget keeps its state\n");
    for (size_t i = 0; i < edited->nrules; i++) {
        const struct rl_rule *now = &edited->rules[i];
        const struct rl_rule *was = find(cur, now->section);
        const char *what = was == NULL ? "new"
                           : same      ? "keeps its state"
                                       : fate(was, now);
        printf("  [%s]%*s %s\n", now->section,
               (int)(strlen(now->section) < 24 ? 24 - strlen(now->section)
                                               : 0),
               "", what);
    }
    for (size_t i = 0; i < cur->nrules; i++)
        if (find(edited, cur->rules[i].section) == NULL)
            printf("  [%s]%*s removed\n", cur->rules[i].section,
                   (int)(strlen(cur->rules[i].section) < 24
                             ? 24 - strlen(cur->rules[i].section)
                             : 0),
                   "");
    return 0;
}
