/* config_sections.c — section kinds and headers, and what is settled once
 * the whole file is read (see config_int.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/config_int.h"
#include "policy/suggest.h"
#include "util/hash.h"

/* ---- section kinds ------------------------------------------------------*/

/* Messages list them in this order. A new kind is an enum value (and
 * RL_CFG_NSECT_KINDS) in config_int.h and a row here, then IN(kind) in the rows
 * of the keys it takes (and, when it makes a rule, what add_rule records of its
 * label). */
const struct sect_kind_row rl_cfg_sect_kinds[RL_CFG_NSECT_KINDS] = {
    [SK_RLSHIM] = {"rlshim", NULL, NULL, false},
    [SK_DEFAULT] = {"default", NULL, NULL, true},
    [SK_USER] = {"user", "user name", "NAME", true},
    [SK_SITE] = {"site", "site label", "LABEL", true},
};

_Static_assert(NELEM(rl_cfg_sect_kinds) == RL_CFG_NSECT_KINDS,
               "a row for each section kind");

/* inih's inline comments: ';' at the start or after a blank. */
static const char *comment_or_end(const char *p, const char *stop)
{
    bool was_space = true;
    for (; *p; p++) {
        if (stop != NULL && strchr(stop, *p))
            return p;
        if (*p == ';' && was_space)
            return p;
        was_space = is_space(*p);
    }
    return p;
}

/* "[rlshim], [default] or [user:NAME]": the section kinds in `mask`. */
void rl_cfg_list_sections(unsigned mask, char *buf, size_t len)
{
    size_t n = 0, total = 0, done = 0;

    for (size_t i = 0; i < RL_CFG_NSECT_KINDS; i++)
        total += (mask & IN(i)) != 0;
    buf[0] = '\0';
    for (size_t i = 0; i < RL_CFG_NSECT_KINDS && n < len; i++) {
        if (!(mask & IN(i)))
            continue;
        done++;
        const char *sep = done + 1 < total ? ", " : done < total ? " or " : "";
        int w = snprintf(
            buf + n, len - n, "[%s%s%s]%s", rl_cfg_sect_kinds[i].name,
            rl_cfg_sect_kinds[i].meta ? ":" : "",
            rl_cfg_sect_kinds[i].meta ? rl_cfg_sect_kinds[i].meta : "", sep);
        if (w < 0)
            break;
        n += (size_t)w;
    }
}

/* ---- sections -----------------------------------------------------------*/

static bool good_label(const char *u, size_t n)
{
    if (n == 0 || n > RL_CONFIG_USER_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)u[i];
        if (c <= ' ' || c == 0x7f || c == '|' || c == '[' || c == ']' ||
            c == ';')
            return false;
    }
    return true;
}

static int add_rule(struct pstate *ps, const char *section, enum sect_kind kind,
                    unsigned line)
{
    struct rl_config *cfg = ps->cfg;
    struct rl_rule *r = realloc(cfg->rules, (cfg->nrules + 1) * sizeof *r);

    if (r == NULL)
        return -ENOMEM;
    cfg->rules = r;
    r = &cfg->rules[cfg->nrules];
    memset(r, 0, sizeof *r);
    r->section = strdup(section);
    if (r->section == NULL)
        return -ENOMEM;
    if (kind == SK_USER) {
        r->user = strdup(section + strlen(rl_cfg_sect_kinds[kind].name) + 1);
        if (r->user == NULL) {
            free(r->section);
            return -ENOMEM;
        }
    }
    if (kind == SK_SITE) {
        r->site = strdup(section + strlen(rl_cfg_sect_kinds[kind].name) + 1);
        if (r->site == NULL) {
            free(r->section);
            return -ENOMEM;
        }
    }
    r->is_default = kind == SK_DEFAULT;
    r->algo = RL_ALGO_TOKEN_BUCKET;
    r->max_retry_after_ns = RL_MAX_RETRY_AFTER_DEFAULT_NS;
    r->adapt_factor_milli = RL_ADAPT_FACTOR_DEFAULT_MILLI;
    r->max_interval_ns = RL_MAX_INTERVAL_DEFAULT_NS;
    r->backoff_on = RL_BACKOFF_ON_DEFAULT;
    r->response_timeout_ns = RL_RESPONSE_TIMEOUT_DEFAULT_NS;
    r->max_crawl_delay_ns = RL_MAX_CRAWL_DELAY_DEFAULT_NS;
    r->line = line;
    cfg->nrules++;
    return 0;
}

/* The kind a section name spells: "rlshim", "user:alice". -1 when none;
 * *label is what follows the colon of a labelled kind. */
static int find_kind(const char *sec, const char **label)
{
    for (size_t i = 0; i < RL_CFG_NSECT_KINDS; i++) {
        size_t n = strlen(rl_cfg_sect_kinds[i].name);
        if (strncmp(sec, rl_cfg_sect_kinds[i].name, n) != 0)
            continue;
        if (rl_cfg_sect_kinds[i].label == NULL && sec[n] == '\0') {
            *label = NULL;
            return (int)i;
        }
        if (rl_cfg_sect_kinds[i].label != NULL && sec[n] == ':') {
            *label = sec + n + 1;
            return (int)i;
        }
    }
    return -1;
}

/* An unknown section: say what it might have meant, or what exists. */
static void unknown_section(struct pstate *ps, const char *sec)
{
    const char *colon = strchr(sec, ':');
    char list[128];

    if (colon != NULL && colon != sec) {
        /* "[usr:alice]": a labelled kind, misspelt, with a good label. */
        char head[16];
        size_t hl = (size_t)(colon - sec);
        if (hl < sizeof head) {
            memcpy(head, sec, hl);
            head[hl] = '\0';
            for (size_t i = 0; i < RL_CFG_NSECT_KINDS; i++) {
                if (rl_cfg_sect_kinds[i].label == NULL ||
                    rl_edit_distance(head, rl_cfg_sect_kinds[i].name) > 2 ||
                    !good_label(colon + 1, strlen(colon + 1)))
                    continue;
                rl_cfg_err(ps, ps->lineno,
                           "unknown section [%s] (did you mean [%s:%s]?)", sec,
                           rl_cfg_sect_kinds[i].name, colon + 1);
                return;
            }
        }
    } else if (colon == NULL) {
        /* "[rlshm]", "[defualt]"; "[user]" without its label. */
        const char *best = NULL, *label = "", *meta = "";
        for (size_t i = 0; i < RL_CFG_NSECT_KINDS && best == NULL; i++)
            if (rl_cfg_sect_kinds[i].label == NULL &&
                rl_edit_distance(sec, rl_cfg_sect_kinds[i].name) <= 2)
                best = rl_cfg_sect_kinds[i].name;
        for (size_t i = 0; i < RL_CFG_NSECT_KINDS && best == NULL; i++) {
            if (rl_cfg_sect_kinds[i].label != NULL &&
                strcmp(sec, rl_cfg_sect_kinds[i].name) == 0) {
                best = rl_cfg_sect_kinds[i].name;
                label = ":";
                meta = rl_cfg_sect_kinds[i].meta;
            }
        }
        if (best != NULL) {
            rl_cfg_err(ps, ps->lineno,
                       "unknown section [%s] (did you mean [%s%s%s]?)", sec,
                       best, label, meta);
            return;
        }
    }
    rl_cfg_list_sections(~0u, list, sizeof list);
    rl_cfg_err(ps, ps->lineno, "unknown section [%s] (use %s)", sec, list);
}

/* A "[...]" line: name is what stands between the brackets. */
static void start_section(struct pstate *ps, const char *name, size_t n)
{
    char sec[RL_CONFIG_LINE_MAX + 1];
    const char *label;
    int kind;
    struct sect *s;

    ps->cur = CUR_SKIP;
    memcpy(sec, name, n);
    sec[n] = '\0';

    kind = find_kind(sec, &label);
    if (kind < 0) {
        unknown_section(ps, sec);
        return;
    }
    if (label != NULL && !good_label(label, strlen(label))) {
        const char *what = rl_cfg_sect_kinds[kind].label;
        size_t ln = strlen(label);
        if (ln == 0)
            rl_cfg_err(ps, ps->lineno, "empty %s in [%s]", what, sec);
        else if (ln > RL_CONFIG_USER_MAX)
            rl_cfg_err(ps, ps->lineno,
                       "%s in [%.20s...] is longer than %d bytes", what, sec,
                       RL_CONFIG_USER_MAX);
        else
            rl_cfg_err(ps, ps->lineno,
                       "bad %s in [%s] (no blanks, ';', '|' or brackets)", what,
                       sec);
        return;
    }

    for (size_t i = 0; i < ps->nsects; i++) {
        const struct sect *o = &ps->sects[i];
        if (o->kind == (enum sect_kind)kind &&
            (label == NULL || strcmp(o->name, sec) == 0)) {
            rl_cfg_err(ps, ps->lineno,
                       "duplicate section [%s] (first at line %u)", sec,
                       o->line);
            return;
        }
    }

    s = realloc(ps->sects, (ps->nsects + 1) * sizeof *s);
    if (s == NULL) {
        ps->nomem = true;
        return;
    }
    ps->sects = s;
    s = &ps->sects[ps->nsects];
    memset(s, 0, sizeof *s);
    s->kind = (enum sect_kind)kind;
    s->name = rl_cfg_sect_kinds[kind].name;
    s->line = ps->lineno;
    if (rl_cfg_sect_kinds[kind].rule) {
        if (add_rule(ps, sec, s->kind, ps->lineno) < 0) {
            ps->nomem = true;
            return;
        }
        s->rule = ps->cfg->nrules - 1;
        s->name = ps->cfg->rules[s->rule].section;
    }
    ps->cur = (int)ps->nsects++;
}

/* A line whose first non-blank byte is '[' (p points at it). */
void rl_cfg_section_line(struct pstate *ps, const char *p)
{
    const char *end = comment_or_end(p + 1, "]");

    if (*end != ']') {
        rl_cfg_err(ps, ps->lineno, "missing ']' in section header");
        ps->cur = CUR_SKIP;
        return;
    }
    const char *rest = end + 1;
    while (is_space(*rest))
        rest++;
    if (*rest != '\0' && *rest != ';' && *rest != '#') {
        rl_cfg_err(ps, ps->lineno, "unexpected text after ']'");
        ps->cur = CUR_SKIP;
        return;
    }
    start_section(ps, p + 1, (size_t)(end - p - 1));
}

/* ---- settling -----------------------------------------------------------*/

/* Was the key that parses with `parse` for `kind` in the section (even
 * with a bad or empty value)? */
static bool kind_key_seen(const struct sect *s, key_parser *parse, int kind)
{
    for (size_t i = 0; i < RL_CFG_NKEYS; i++)
        if (rl_cfg_keys[i].parse == parse && rl_cfg_keys[i].kind == kind)
            return s->key_line[i] != 0;
    return false;
}

static void settle_rule(struct pstate *ps, struct sect *s)
{
    struct rl_config *cfg = ps->cfg;
    struct rl_rule *r = &cfg->rules[s->rule];
    bool window = r->algo == RL_ALGO_SLIDING_WINDOW;

    /* What a rule does not say, [rlshim] says (read after all of it). */
    for (size_t i = 0; i < RL_CFG_NKEYS; i++) {
        const struct key *k = &rl_cfg_keys[i];
        if (!s->key_line[i] && k->cfg_size != 0 && k->cfg_size == k->rule_size)
            memcpy((char *)r + k->rule_off, (char *)cfg + k->cfg_off,
                   k->rule_size);
    }

    for (int k = 0; k < RL_KIND_COUNT; k++) {
        struct raw_kind *rk = &s->raw[k];
        bool bad = false;

        if (window && rl_kinds[k].sizes && rk->nrates > 0) {
            rl_cfg_err(ps, rk->rate_line,
                       "'%s' needs algorithm = token_bucket in [%s]",
                       rl_kind_name(k), r->section);
            bad = true;
        }
        if (rk->nbursts > 0 && window) {
            rl_cfg_err(
                ps, rk->burst_line,
                "'%s_burst' needs algorithm = token_bucket in [%s] (a sliding "
                "window has no burst)",
                rl_kind_name(k), r->section);
            bad = true;
        } else if (rk->nbursts > 0 && rk->nrates == 0 &&
                   !kind_key_seen(s, rl_cfg_p_rates, k)) {
            rl_cfg_err(ps, rk->burst_line, "'%s_burst' without '%s' in [%s]",
                       rl_kind_name(k), rl_kind_name(k), r->section);
            bad = true;
        } else if (rk->nbursts > rk->nrates && rk->nrates > 0) {
            rl_cfg_err(ps, rk->burst_line,
                       "%u bursts for %u rates in '%s_burst' of [%s]",
                       rk->nbursts, rk->nrates, rl_kind_name(k), r->section);
            bad = true;
        }
        if (bad)
            continue;
        for (unsigned i = 0; i < rk->nrates; i++) {
            uint64_t burst = i < rk->nbursts ? rk->bursts[i] : 0;
            int rc;

            if (window && rk->rates[i].count > RL_WINDOW_MAX_COUNT) {
                rl_cfg_err(ps, rk->rate_line,
                           "rate %llu per period for '%s' in [%s] is over the "
                           "sliding_window cap of %u",
                           (unsigned long long)rk->rates[i].count,
                           rl_kind_name(k), r->section, RL_WINDOW_MAX_COUNT);
                break;
            }
            rc = rl_limit_prepare(&r->limits[k][i], r->algo, rk->rates[i].count,
                                  rk->rates[i].period_ns, burst);
            if (rc < 0) {
                rl_cfg_err(ps, rk->rate_line,
                           "rate for '%s' in [%s] cannot be held exactly (%s)",
                           rl_kind_name(k), r->section,
                           rc == -ERANGE ? "too large" : "out of range");
                break;
            }
            r->nlimits[k] = i + 1;
        }
    }
}

static unsigned key_line(const struct sect *s, const char *name)
{
    for (size_t i = 0; i < RL_CFG_NKEYS; i++)
        if (strcmp(rl_cfg_keys[i].name, name) == 0)
            return s->key_line[i];
    return 0;
}

/* Fleet keys that mean nothing without `fleet`: an error, since a budget
 * the user believes shared would be host-wide. */
static void settle_fleet(struct pstate *ps)
{
    for (size_t i = 0; i < ps->nsects; i++) {
        const struct sect *s = &ps->sects[i];
        if (ps->cfg->fleet != NULL)
            break;
        if (s->kind == SK_RLSHIM) {
            unsigned l = key_line(s, "fleet_password");
            if (l != 0 && ps->cfg->fleet_password != NULL)
                rl_cfg_err(ps, l,
                           "'fleet_password' without 'fleet' in [rlshim]");
        } else if (rl_cfg_sect_kinds[s->kind].rule &&
                   ps->cfg->rules[s->rule].scope == RL_SCOPE_FLEET) {
            rl_cfg_err(ps, key_line(s, "scope"),
                       "'scope = fleet' in [%s] needs 'fleet = redis://...' in "
                       "[rlshim]",
                       s->name);
        }
    }
}

static uint64_t hash_limit(uint64_t h, const struct rl_limit *l)
{
    h = rl_hash_u64(h, l->algo);
    h = rl_hash_u64(h, l->count);
    h = rl_hash_u64(h, l->period_ns);
    return rl_hash_u64(h, l->burst);
}

/* What shapes the shared budgets, never how it was written: the rules in
 * order, their algorithms and limits, and the table size. Comments, blanks
 * and key order do not change it, and neither do settings that only say
 * what a denied call gets or who is logged (on_deny, errno, dry_run, to,
 * log, report...): editing those keeps every user's budget. */
uint64_t rl_cfg_hash(const struct rl_config *c)
{
    uint64_t h = RL_HASH_INIT;

    h = rl_hash_u64(h, 3); /* version of this hash's recipe */
    h = rl_hash_u64(h, c->max_users);
    h = rl_hash_u64(h, c->max_destinations);
    h = rl_hash_u64(h, c->nrules);
    for (size_t i = 0; i < c->nrules; i++) {
        const struct rl_rule *r = &c->rules[i];
        h = rl_hash_str(h, r->section);
        h = rl_hash_u64(h, r->algo);
        h = rl_hash_u64(h, (uint64_t)r->per);
        h = rl_hash_u64(h, r->max_open);
        if (r->scope != RL_SCOPE_HOST) /* host budgets hash as before */
            h = rl_hash_u64(h, (uint64_t)r->scope);
        for (int k = 0; k < RL_KIND_COUNT; k++) {
            /* A rule without requests hashes as before the kind was. */
            if (k == RL_KIND_REQUEST && r->nlimits[k] == 0)
                continue;
            h = rl_hash_u64(h, r->nlimits[k]);
            for (unsigned j = 0; j < r->nlimits[k]; j++)
                h = hash_limit(h, &r->limits[k][j]);
        }
    }
    return h;
}

void rl_cfg_settle(struct pstate *ps)
{
    for (size_t i = 0; i < ps->nsects; i++)
        if (rl_cfg_sect_kinds[ps->sects[i].kind].rule)
            settle_rule(ps, &ps->sects[i]);
    settle_fleet(ps);
}
