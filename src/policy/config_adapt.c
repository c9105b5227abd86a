/* config_adapt.c — the values of SPEC §14's keys that no other key
 * shares a form with: adapt_factor (a decimal number), jitter (a
 * percentage) and backoff_on (a list of causes). */
#include <ctype.h>
#include <stdint.h>
#include <string.h>

#include "policy/config_int.h"

/* "2", "1.5", "0.25": a decimal number in thousandths (at most three
 * places); -1 when it is not one. */
static int64_t thousandths(const char *v)
{
    uint64_t whole = 0, frac = 0;
    unsigned places = 0;
    const char *s = v;
    if (!isdigit((unsigned char)*s))
        return -1;
    for (; isdigit((unsigned char)*s); s++) {
        whole = whole * 10 + (uint64_t)(*s - '0');
        if (whole > 1000000)
            return -1;
    }
    if (*s == '.') {
        s++;
        if (!isdigit((unsigned char)*s))
            return -1;
        for (; isdigit((unsigned char)*s); s++) {
            if (++places > 3)
                return -1;
            frac = frac * 10 + (uint64_t)(*s - '0');
        }
    }
    if (*s != '\0')
        return -1;
    while (places++ < 3)
        frac *= 10;
    return (int64_t)(whole * 1000 + frac);
}

void rl_cfg_p_factor(struct pstate *ps, const struct key *k, void *field,
                     const char *v)
{
    int64_t m = thousandths(v);
    if (m < 1000 || (uint64_t)m > k->max)
        rl_cfg_err(ps, ps->lineno,
                   "'%s' in [%s] must be a number from 1 to %llu (at most "
                   "three decimals), not '%s'",
                   k->name, sect_name(ps), (unsigned long long)k->max / 1000,
                   v);
    else
        *(uint32_t *)field = (uint32_t)m;
}

void rl_cfg_p_percent(struct pstate *ps, const struct key *k, void *field,
                      const char *v)
{
    size_t n = strlen(v);
    uint64_t u = 0;
    if (n < 2 || v[n - 1] != '%' || rl_parse_u64_n(v, (unsigned)(n - 1), &u) != 0 ||
        u > k->max)
        rl_cfg_err(ps, ps->lineno,
                   "'%s' in [%s] must be a percentage from 0%% to %llu%%, not "
                   "'%s'",
                   k->name, sect_name(ps), (unsigned long long)k->max, v);
    else
        *(uint32_t *)field = (uint32_t)u;
}

static const struct {
    const char *name;
    uint32_t bit;
} causes[] = {
    {"429", RL_BACKOFF_429},     {"503", RL_BACKOFF_503},
    {"5xx", RL_BACKOFF_5XX},     {"reset", RL_BACKOFF_RESET},
    {"timeout", RL_BACKOFF_TIMEOUT},
};

void rl_cfg_p_backoff_on(struct pstate *ps, const struct key *k, void *field,
                         const char *v)
{
    uint32_t bits = 0;
    const char *s = v;
    while (*s != '\0') {
        while (*s == ' ' || *s == '\t')
            s++;
        size_t n = strcspn(s, ", \t");
        const char *end = s + n;
        while (*end == ' ' || *end == '\t')
            end++;
        unsigned i = 0;
        while (i < sizeof causes / sizeof causes[0] &&
               (strlen(causes[i].name) != n ||
                strncmp(causes[i].name, s, n) != 0))
            i++;
        if (n == 0 || i == sizeof causes / sizeof causes[0] ||
            (*end != ',' && *end != '\0')) {
            rl_cfg_err(ps, ps->lineno,
                       "'%s' in [%s] is a list of 429, 503, 5xx, reset and "
                       "timeout, not '%s'",
                       k->name, sect_name(ps), v);
            return;
        }
        bits |= causes[i].bit;
        s = *end == ',' ? end + 1 : end;
        if (*end == ',' && *s == '\0') {
            rl_cfg_err(ps, ps->lineno, "'%s' in [%s] ends with a comma: '%s'",
                       k->name, sect_name(ps), v);
            return;
        }
    }
    if (bits == 0) {
        rl_cfg_err(ps, ps->lineno, "'%s' in [%s] is empty", k->name,
                   sect_name(ps));
        return;
    }
    *(uint32_t *)field = bits;
}

void rl_cfg_adapt_settle(struct rl_config *cfg)
{
    uint64_t least = 0;
    for (size_t i = 0; i < cfg->nrules; i++) {
        const struct rl_rule *r = &cfg->rules[i];
        /* Only a section that obeys servers pauses (gate_pause.c). */
        if (r->retry_after != RL_RETRY_AFTER_OBEY ||
            r->nlimits[RL_KIND_REQUEST] == 0 ||
            !(r->backoff_on & RL_BACKOFF_TIMEOUT))
            continue;
        uint64_t t = r->response_timeout_ns > 0 ? r->response_timeout_ns : 1;
        if (least == 0 || t < least)
            least = t;
    }
    cfg->response_timeout_ns = least;
}
