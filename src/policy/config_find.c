/* config_find.c — what callers ask of a loaded table (the rule of a
 * caller, the site of a destination, limits as the file spells them) and
 * of a failed load (its messages, the host program's one line). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/cgroup.h"
#include "policy/config_int.h"
#include "policy/names.h"
#include "util/parse.h"

/* ---- diagnostics --------------------------------------------------------*/

void rl_diag_free(struct rl_diag *d)
{
    if (d == NULL)
        return;
    for (size_t i = 0; i < d->n; i++)
        free(d->msgs[i]);
    free(d->msgs);
    d->msgs = NULL;
    d->n = 0;
}

size_t rl_config_error_line(const struct rl_diag *d, bool strict, char *buf,
                            size_t len)
{
    const char *first = d->n ? d->msgs[0] : "config error";
    const char *tail = strict ? "exiting with status 78 (RLSHIM_STRICT=1)"
                              : "nothing is throttled";
    int n;

    if (len == 0)
        return 0;
    if (d->n > 1)
        n = snprintf(buf, len,
                     "rlshim: %s (and %zu more: run 'rlshim check'); %s\n",
                     first, d->n - 1, tail);
    else
        n = snprintf(buf, len, "rlshim: %s; %s\n", first, tail);
    if (n < 0) {
        buf[0] = '\0';
        return 0;
    }
    if ((size_t)n >= len) {
        /* Keep the line a line: end it with a newline even when cut. */
        if (len >= 2)
            buf[len - 2] = '\n';
        return len - 1;
    }
    return (size_t)n;
}

/* ---- look-ups -----------------------------------------------------------*/

static const struct rl_rule *find_user(const struct rl_config *cfg,
                                       const char *user)
{
    for (size_t i = 0; i < cfg->nrules; i++)
        if (cfg->rules[i].user != NULL && strcmp(cfg->rules[i].user, user) == 0)
            return &cfg->rules[i];
    return NULL;
}

/* An exact section has been looked for already: of the wildcards that
 * cover the key, the longest (the most specific), whatever the file's
 * order. */
const struct rl_rule *rl_config_find_cgroup_wildcard(const struct rl_config *cfg,
                                                     const char *key)
{
    const struct rl_rule *best = NULL;
    size_t best_len = 0;
    for (size_t i = 0; i < cfg->nrules; i++) {
        const char *u = cfg->rules[i].user;
        size_t len = u != NULL && rl_cgroup_is_wildcard(u)
                         ? rl_cgroup_covers(u, key)
                         : 0;
        if (len > best_len) {
            best = &cfg->rules[i];
            best_len = len;
        }
    }
    return best;
}

const struct rl_rule *rl_config_find_rule(const struct rl_config *cfg,
                                          const char *key, uint32_t uid,
                                          const char *login)
{
    const struct rl_rule *r = NULL;
    char num[16];

    if (key != NULL)
        r = find_user(cfg, key);
    if (r == NULL && key != NULL)
        r = rl_config_find_cgroup_wildcard(cfg, key);
    if (r == NULL) {
        snprintf(num, sizeof num, "%u", uid);
        r = find_user(cfg, num);
    }
    if (r == NULL && login != NULL)
        r = find_user(cfg, login);
    for (size_t i = 0; r == NULL && i < cfg->nrules; i++)
        if (cfg->rules[i].is_default)
            r = &cfg->rules[i];
    return r;
}

const struct rl_rule *rl_config_find_site(struct rl_names *names,
                                          const struct rl_config *cfg,
                                          const void *sa, unsigned salen)
{
    struct rl_peer p;
    char name[RL_NAME_MAX + 1];

    if (!rl_peer_from_addr(names, sa, salen, &p))
        return NULL;
    return rl_config_find_site_peer(cfg, &p, name);
}

const struct rl_rule *rl_config_find_site_peer(const struct rl_config *cfg,
                                               struct rl_peer *p, char *name)
{
    for (size_t i = 0; i < cfg->nrules; i++) {
        const struct rl_rule *r = &cfg->rules[i];
        if (r->site != NULL && rl_dests_cover_peer(r->to, r->nto, p, name))
            return r;
    }
    return NULL;
}

bool rl_config_has_sites(const struct rl_config *cfg)
{
    for (size_t i = 0; i < cfg->nrules; i++)
        if (cfg->rules[i].site != NULL)
            return true;
    return false;
}

/* ---- formatting ---------------------------------------------------------*/

int rl_config_format_rate(int kind, const struct rl_limit *lim, char *buf,
                          size_t len)
{
    static const struct {
        const char *name;
        uint64_t ns;
    } per[] = {{"h", RL_NS_PER_H},
               {"min", RL_NS_PER_MIN},
               {"s", RL_NS_PER_S},
               {"ms", RL_NS_PER_MS}};
    static const struct {
        const char *name;
        uint64_t mul;
    } sz[] = {{"GiB", 1ull << 30},   {"MiB", 1ull << 20}, {"KiB", 1ull << 10},
              {"GB", 1000000000ull}, {"MB", 1000000ull},  {"KB", 1000ull}};
    const char *unit = NULL;
    uint64_t count = lim->count;
    const char *szu = "";

    for (size_t i = 0; i < NELEM(per); i++)
        if (lim->period_ns == per[i].ns)
            unit = per[i].name;
    if (rl_kinds[kind].sizes) {
        szu = "B";
        for (size_t i = 0; i < NELEM(sz); i++) {
            if (count >= sz[i].mul && count % sz[i].mul == 0) {
                count /= sz[i].mul;
                szu = sz[i].name;
                break;
            }
        }
    }
    if (unit == NULL)
        return snprintf(buf, len, "%llu%s/%lluns", (unsigned long long)count,
                        szu, (unsigned long long)lim->period_ns);
    return snprintf(buf, len, "%llu%s/%s", (unsigned long long)count, szu,
                    unit);
}
