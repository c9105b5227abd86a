/* config_values.c — a key's value, checked, into its field of the table
 * (the parsers that config.c's key table names; see config_int.h). Each
 * reports what is wrong with file:line and leaves the field as it was. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "policy/config_int.h"
#include "fleet/fleet_addr.h"
#include "util/parse.h"

static const char *why_number(int rc)
{
    switch (rc) {
    case -ERANGE:
        return "too large";
    case -EDOM:
        return "bad unit";
    case -E2BIG:
        return "too many values";
    default:
        return "bad number";
    }
}

/* The value of one word of `w`, or -1 (and an error). */
static int word(struct pstate *ps, const char *key, const char *v,
                const struct words *w)
{
    char list[128] = "";
    unsigned n = w->n;

    for (unsigned i = 0; i < n; i++) {
        if (strcmp(v, w->names[i]) == 0)
            return w->values != NULL ? w->values[i] : (int)i;
    }
    for (unsigned i = 0; i < n; i++) {
        strncat(list, w->names[i], sizeof list - strlen(list) - 1);
        strncat(list,
                i + 2 < n   ? ", "
                : i + 1 < n ? " or "
                            : "",
                sizeof list - strlen(list) - 1);
    }
    rl_cfg_err(ps, ps->lineno, "bad value '%s' for '%s' in [%s] (use %s)", v,
               key, sect_name(ps), list);
    return -1;
}

void rl_cfg_p_word(struct pstate *ps, const struct key *k, void *field,
                   const char *v)
{
    int i = word(ps, k->name, v, k->words);
    if (i >= 0)
        *(int *)field = i;
}

void rl_cfg_p_algorithm(struct pstate *ps, const struct key *k, void *field,
                        const char *v)
{
    int i = word(ps, k->name, v, k->words);
    if (i >= 0)
        *(uint32_t *)field =
            i == 0 ? RL_ALGO_TOKEN_BUCKET : RL_ALGO_SLIDING_WINDOW;
}

void rl_cfg_p_bool(struct pstate *ps, const struct key *k, void *field,
                   const char *v)
{
    bool b;

    if (rl_parse_bool(v, &b) == 0) {
        *(bool *)field = b;
        return;
    }
    rl_cfg_err(ps, ps->lineno,
               "bad value '%s' for '%s' in [%s] (use yes or no)", v, k->name,
               sect_name(ps));
}

void rl_cfg_p_duration(struct pstate *ps, const struct key *k, void *field,
                       const char *v)
{
    uint64_t ns;
    int rc = rl_parse_duration(v, &ns);

    /* Every duration key has the one cap (config.h); past 2^64 ns is over
     * it too: one message for both. */
    if ((rc == 0 && ns > RL_CONFIG_DURATION_MAX_NS) || rc == -ERANGE)
        rl_cfg_err(ps, ps->lineno, "%s '%s' in [%s] is over the cap of %s",
                   k->name, v, sect_name(ps), RL_CONFIG_DURATION_MAX_TEXT);
    else if (rc == 0)
        *(uint64_t *)field = ns;
    else if (rc == -EDOM)
        rl_cfg_err(
            ps, ps->lineno,
            "bad unit in '%s' for '%s' in [%s] (use ns, us, ms, s, min or h)",
            v, k->name, sect_name(ps));
    else if (v[0] == '-')
        rl_cfg_err(ps, ps->lineno, "negative value '%s' for '%s' in [%s]", v,
                   k->name, sect_name(ps));
    else
        rl_cfg_err(ps, ps->lineno, "%s '%s' for '%s' in [%s]", why_number(rc),
                   v, k->name, sect_name(ps));
}

void rl_cfg_p_log(struct pstate *ps, const struct key *k, void *field,
                  const char *v)
{
    struct rl_config *cfg = ps->cfg;
    int *target = field;

    (void)k;
    if (strcmp(v, "off") == 0) {
        *target = RL_LOG_OFF;
    } else if (strcmp(v, "stderr") == 0) {
        *target = RL_LOG_STDERR;
    } else if (strcmp(v, "syslog") == 0) {
        *target = RL_LOG_SYSLOG;
    } else if (v[0] == '/') {
        free(cfg->log_path);
        cfg->log_path = strdup(v);
        if (cfg->log_path == NULL)
            ps->nomem = true;
        *target = RL_LOG_FILE;
    } else {
        rl_cfg_err(ps, ps->lineno,
                   "bad value '%s' for 'log' in [rlshim] (use off, stderr, "
                   "syslog or an absolute path)",
                   v);
    }
}

/* SPEC §9: one JSON line per decision; absolute, like `log`. */
void rl_cfg_p_decision_log(struct pstate *ps, const struct key *k, void *field,
                           const char *v)
{
    char **path = field;

    (void)k;
    if (strcmp(v, "off") == 0) {
        free(*path);
        *path = NULL;
        return;
    }
    if (v[0] != '/') {
        rl_cfg_err(
            ps, ps->lineno,
            "bad value '%s' for 'decision_log' in [rlshim] (use off or an "
            "absolute path)",
            v);
        return;
    }
    free(*path);
    *path = strdup(v);
    if (*path == NULL)
        ps->nomem = true;
}

/* A count: 1 to k->max, into a uint32_t. */
void rl_cfg_p_count(struct pstate *ps, const struct key *k, void *field,
                    const char *v)
{
    uint64_t u;
    int rc = rl_parse_u64(v, &u);

    if (rc == 0 && (u == 0 || u > k->max))
        rl_cfg_err(ps, ps->lineno,
                   "'%s' in [%s] must be from 1 to %llu, not %s", k->name,
                   sect_name(ps), (unsigned long long)k->max, v);
    else if (rc < 0)
        rl_cfg_err(ps, ps->lineno, "%s '%s' for '%s' in [%s]", why_number(rc),
                   v, k->name, sect_name(ps));
    else
        *(uint32_t *)field = (uint32_t)u;
}

/* Does a comma-separated list have an empty element ("a,,b", "a,")? */
static bool empty_element(const char *v)
{
    bool empty = true; /* the element being read, so far */

    for (; *v; v++) {
        if (*v == ',') {
            if (empty)
                return true;
            empty = true;
        } else if (!is_space(*v)) {
            empty = false;
        }
    }
    return empty;
}

void rl_cfg_p_rates(struct pstate *ps, const struct key *key, void *field,
                    const char *v)
{
    struct raw_kind *rk = &ps->sects[ps->cur].raw[key->kind];
    bool sizes = rl_kinds[key->kind].sizes;
    unsigned bad;
    int rc = rl_parse_rate_list(v, sizes, rk->rates, RL_MAX_RATES, &rk->nrates,
                                &bad);
    const char *k = key->name;

    (void)field;
    if (rc == -E2BIG) {
        rl_cfg_err(ps, ps->lineno, "more than %d rates for '%s' in [%s]",
                   RL_MAX_RATES, k, sect_name(ps));
    } else if (rc == -EINVAL && empty_element(v)) {
        rl_cfg_err(ps, ps->lineno,
                   "empty rate in the list '%s' for '%s' in [%s]", v, k,
                   sect_name(ps));
    } else if (rc == -EDOM) {
        rl_cfg_err(
            ps, ps->lineno,
            "bad unit in '%s' for '%s' in [%s] (use %sN/ms, N/s, N/min or "
            "N/h)",
            v, k, sect_name(ps),
            sizes ? "a size in B, KB, MB, GB, KiB, MiB or GiB per period: "
                  : "");
    } else if (rc < 0 && strchr(v, '-') != NULL) {
        rl_cfg_err(ps, ps->lineno, "negative rate '%s' for '%s' in [%s]", v, k,
                   sect_name(ps));
    } else if (rc < 0) {
        rl_cfg_err(ps, ps->lineno, "%s in '%s' for '%s' in [%s]",
                   why_number(rc), v, k, sect_name(ps));
    } else {
        for (unsigned i = 0; i < rk->nrates; i++) {
            if (rk->rates[i].count == 0) {
                rl_cfg_err(ps, ps->lineno, "zero rate in '%s' for '%s' in [%s]",
                           v, k, sect_name(ps));
                rk->nrates = 0;
                return;
            }
        }
        rk->rate_line = ps->lineno;
        return;
    }
    rk->nrates = 0;
}

void rl_cfg_p_bursts(struct pstate *ps, const struct key *key, void *field,
                     const char *v)
{
    struct raw_kind *rk = &ps->sects[ps->cur].raw[key->kind];
    const char *k = key->name;
    const char *p = v;
    unsigned n = 0;

    (void)field;
    for (;;) {
        const char *end = strchr(p, ',');
        const char *a = p, *b = end ? end : p + strlen(p);
        char one[RL_CONFIG_LINE_MAX + 1];
        int rc;

        while (a < b && is_space(*a))
            a++;
        while (b > a && is_space(b[-1]))
            b--;
        if (n == RL_MAX_RATES) {
            rl_cfg_err(ps, ps->lineno, "more than %d bursts for '%s' in [%s]",
                       RL_MAX_RATES, k, sect_name(ps));
            return;
        }
        memcpy(one, a, (size_t)(b - a));
        one[b - a] = '\0';
        if (rl_kinds[key->kind].sizes)
            rc = rl_parse_size(one, &rk->bursts[n]);
        else
            rc = rl_parse_u64(one, &rk->bursts[n]);
        if (rc == 0 && rk->bursts[n] == 0) {
            rl_cfg_err(ps, ps->lineno, "zero burst in '%s' for '%s' in [%s]", v,
                       k, sect_name(ps));
            return;
        }
        if (rc < 0) {
            if (one[0] == '-')
                rl_cfg_err(ps, ps->lineno,
                           "negative burst '%s' for '%s' in [%s]", v, k,
                           sect_name(ps));
            else
                rl_cfg_err(ps, ps->lineno, "%s in '%s' for '%s' in [%s]",
                           why_number(rc), v, k, sect_name(ps));
            return;
        }
        n++;
        if (end == NULL)
            break;
        p = end + 1;
    }
    rk->nbursts = n;
    rk->burst_line = ps->lineno;
}

void rl_cfg_p_to(struct pstate *ps, const struct key *k, void *field,
                 const char *v)
{
    struct rl_rule *r = cur_rule(ps);
    const char *p = v;
    struct rl_dest *list = NULL;
    size_t n = 0;

    (void)k;
    (void)field; /* r->to, set with r->nto */
    for (;;) {
        const char *end = strchr(p, ',');
        const char *a = p, *b = end ? end : p + strlen(p);
        char one[RL_CONFIG_LINE_MAX + 1];
        struct rl_dest d, *nl;
        const char *why;

        while (a < b && is_space(*a))
            a++;
        while (b > a && is_space(b[-1]))
            b--;
        memcpy(one, a, (size_t)(b - a));
        one[b - a] = '\0';
        /* An empty entry is never parsed: d must still be safe to clear
         * (the fuzzer's "to = , 10.0.13.0/24" freed a stack pointer). */
        memset(&d, 0, sizeof d);
        why = one[0] ? rl_dest_parse(one, &d) : "empty entry";
        if (why != NULL) {
            rl_cfg_err(ps, ps->lineno,
                       "bad destination '%s' in 'to' of [%s]: %s", one,
                       sect_name(ps), why);
            rl_dest_clear(&d);
            rl_dests_free(list, n);
            return;
        }
        nl = realloc(list, (n + 1) * sizeof *nl);
        if (nl == NULL) {
            ps->nomem = true;
            rl_dest_clear(&d);
            rl_dests_free(list, n);
            return;
        }
        list = nl;
        list[n++] = d;
        if (end == NULL)
            break;
        p = end + 1;
    }
    r->to = list;
    r->nto = n;
}

void rl_cfg_p_fleet(struct pstate *ps, const struct key *k, void *field,
                    const char *v)
{
    struct rl_fleet_addr a;
    const char *why;

    (void)k;
    if (strcmp(v, "off") == 0) {
        free(*(char **)field);
        *(char **)field = NULL;
        return;
    }
    why = rl_fleet_addr_parse(v, &a);
    if (why != NULL) {
        rl_cfg_err(ps, ps->lineno, "bad value '%s' for 'fleet' in [rlshim]: %s",
                   v, why);
        return;
    }
    free(*(char **)field);
    *(char **)field = strdup(v);
    if (*(char **)field == NULL)
        ps->nomem = true;
}

/* A file that holds the password, never the password itself: absolute,
 * a regular file, mode 0600 or 0640 (or stricter). */
void rl_cfg_p_fleet_password(struct pstate *ps, const struct key *k,
                             void *field, const char *v)
{
    struct stat st;

    (void)k;
    if (strcmp(v, "none") == 0) {
        free(*(char **)field);
        *(char **)field = NULL;
        return;
    }
    if (v[0] != '/') {
        rl_cfg_err(
            ps, ps->lineno,
            "'fleet_password' in [rlshim] must be the absolute path of a "
            "file holding the password, not '%s'",
            v);
        return;
    }
    if (stat(v, &st) != 0) {
        rl_cfg_err(ps, ps->lineno,
                   "'fleet_password' in [rlshim]: cannot read '%s': %s", v,
                   strerror(errno));
        return;
    }
    if (!S_ISREG(st.st_mode) || (st.st_mode & 0137) != 0) {
        rl_cfg_err(
            ps, ps->lineno,
            "'fleet_password' in [rlshim]: '%s' must be a regular file of "
            "mode 0600 or 0640, not %04o",
            v, (unsigned)(st.st_mode & 07777));
        return;
    }
    free(*(char **)field);
    *(char **)field = strdup(v);
    if (*(char **)field == NULL)
        ps->nomem = true;
}
