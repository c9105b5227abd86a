/* budget.c — a (rule, user) pair as one store slot (budget.h).
 *
 * The tag hashes the whole "SECTION|USER" even when the printed label has
 * to be cut to fit the slot, so two long names never share a budget by
 * accident of truncation. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "fleet/fleet_lease.h"
#include "policy/budget.h"
#include "util/hash.h"

void rl_budget_layout(const struct rl_rule *rule, struct rl_budget_layout *out)
{
    uint32_t off = 0;

    memset(out, 0, sizeof *out);
    for (int k = 0; k < RL_KIND_COUNT; k++) {
        for (unsigned i = 0; i < rule->nlimits[k] && i < RL_MAX_RATES; i++) {
            const struct rl_limit *lim = &rule->limits[k][i];
            const struct rl_algorithm *a = rl_algorithm_get(lim->algo);

            out->offset[k][i] = off;
            /* An unknown algorithm cannot pass rl_config_load; give it no
             * words rather than guess. */
            if (a)
                off += a->state_words(lim);
        }
    }
    if (rl_budget_leasable(rule)) {
        out->lease = off;
        off += RL_LEASE_AREA_WORDS;
    }
    if (rl_fleet_leasable(rule)) {
        out->fleet = off;
        off += RL_FLEET_POOL_AREA_WORDS;
    }
    out->nwords = off;
}

/* Bumped whenever the words above are laid out otherwise. 2: lease
 * records after the limits; 3: a fleet budget's pool after them; 4: a
 * lease record's word 0 holds up to 255 calls. */
#define BUDGET_FORMAT 4u

uint64_t rl_budget_hash(const struct rl_config *cfg)
{
    uint64_t f = BUDGET_FORMAT;
    uint64_t h = rl_hash_bytes(RL_HASH_INIT, &f, sizeof f);
    h = rl_hash_bytes(h, &cfg->hash, sizeof cfg->hash);
    return h;
}

bool rl_budget_leasable(const struct rl_rule *rule)
{
    bool any = false;
    for (int k = RL_KIND_SEND; k <= RL_KIND_SEND_BYTES; k++) {
        if (rule->nlimits[k] == 0)
            continue;
        const struct rl_limit *l = &rule->limits[k][0];
        if (rule->nlimits[k] > 1 || l->algo != RL_ALGO_TOKEN_BUCKET ||
            l->burst < 128)
            return false;
        any = true;
    }
    return any;
}

rl_atomic_u64 *rl_budget_lease_bitmap(const struct rl_budget_layout *l,
                                      rl_atomic_u64 *words)
{
    uintptr_t p = (uintptr_t)(words + l->lease);
    return (rl_atomic_u64 *)((p + 63) & ~(uintptr_t)63);
}

void rl_budget_lease_sum(const struct rl_budget_layout *l, rl_atomic_u64 *words,
                         uint64_t now, struct rl_lease_units *out)
{
    memset(out, 0, sizeof *out);
    if (l->lease == 0)
        return;
    rl_atomic_u64 *area = rl_budget_lease_bitmap(l, words);
    for (unsigned i = 0; i < RL_LEASE_RECORDS; i++) {
        rl_atomic_u64 *rec = area + RL_LEASE_WORDS * (1 + i);
        uint64_t w = rl_load_relaxed_u64(&rec[0]);
        if (w == 0)
            continue;
        struct rl_lease_units u;
        rl_lease_unpack(w, &u);
        bool idle = rl_lease_idle(rl_load_relaxed_u64(&rec[1]), now);
        for (int k = RL_KIND_SEND; k <= RL_KIND_SEND_BYTES; k++) {
            out->spent[k] += u.spent[k];
            if (idle)
                out->left[k] += u.left[k];
        }
    }
}

const char *rl_budget_user(const struct rl_rule *rule, const char *caller)
{
    if (!rule->is_default && rule->user)
        return rule->user;
    return caller;
}

static uint64_t tag_of(const char *section, const char *user)
{
    uint64_t h = RL_HASH_INIT;

    h = rl_hash_bytes(h, section, strlen(section));
    h = rl_hash_bytes(h, "|", 1);
    h = rl_hash_bytes(h, user, strlen(user));
    return h ? h : 1; /* 0 marks a free slot */
}

uint64_t rl_budget_label(const struct rl_rule *rule, const char *user,
                         char *buf, size_t len)
{
    if (len)
        snprintf(buf, len, "%s|%s", rule->section, user);
    return tag_of(rule->section, user);
}

uint64_t rl_budget_overflow_tag(const struct rl_rule *rule)
{
    /* The store labels overflow slots "SECTION|*" (store.h). */
    return tag_of(rule->section, "*");
}

const struct rl_rule *rl_budget_parse_label(const struct rl_config *cfg,
                                            const char *label,
                                            const char **user)
{
    const struct rl_rule *best = NULL;
    size_t best_len = 0;
    const char *bar = strrchr(label, '|');

    *user = bar ? bar + 1 : label;
    for (size_t i = 0; cfg && i < cfg->nrules; i++) {
        const char *sec = cfg->rules[i].section;
        size_t n = strlen(sec);

        if (strncmp(label, sec, n) == 0 && label[n] == '|' &&
            (!best || n > best_len)) {
            best = &cfg->rules[i];
            best_len = n;
        }
    }
    if (best)
        *user = label + best_len + 1;
    return best;
}
