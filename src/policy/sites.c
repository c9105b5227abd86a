/* sites.c — site sections' budgets (see sites.h).
 *
 * Per site (struct rl_site, in the array of the process's struct
 * rl_sites): its rule, the slot's label and tag for this user, and the
 * budget claimed in the store the gate uses now. When the gate moves to a
 * replaced segment, the next call claims the site's slot there; the old
 * budget is never freed (another thread may still be deciding in it). */
#include "policy/sites.h"
#include "policy/gate_int.h"
#include "policy/names.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct rl_site {
    const struct rl_rule *rule;
    struct rl_budget_layout layout;
    uint64_t tag, overflow_tag;
    char label[RL_STORE_LABEL_MAX];
    _Atomic(struct budget *) cur;
};

int rl_sites_setup(struct rl_sites *ss, const struct rl_config *c,
                   const char *user)
{
    unsigned n = 0;

    ss->cfg = c;
    for (size_t i = 0; i < c->nrules; i++)
        n += c->rules[i].site != NULL;
    if (n == 0)
        return 0;
    struct rl_site *s = calloc(n, sizeof *s);
    if (s == NULL)
        return -ENOMEM;
    n = 0;
    for (size_t i = 0; i < c->nrules; i++) {
        const struct rl_rule *r = &c->rules[i];
        if (r->site == NULL)
            continue;
        s[n].rule = r;
        rl_budget_layout(r, &s[n].layout);
        s[n].tag = rl_budget_label(r, user, s[n].label, sizeof s[n].label);
        s[n].overflow_tag = rl_budget_overflow_tag(r);
        ss->sends |=
            r->nlimits[RL_KIND_SEND] > 0 || r->nlimits[RL_KIND_SEND_BYTES] > 0;
        n++;
    }
    ss->sites = s;
    ss->nsites = n;
    return 0;
}

bool rl_sites_any(const struct rl_sites *ss)
{
    return ss->nsites > 0;
}

bool rl_sites_charge_sends(const struct rl_sites *ss)
{
    return ss->sends;
}

uint64_t rl_sites_arena_words(const struct rl_config *c)
{
    uint64_t words = 0;
    for (size_t i = 0; i < c->nrules; i++) {
        if (c->rules[i].site == NULL)
            continue;
        struct rl_budget_layout l;
        rl_budget_layout(&c->rules[i], &l);
        words += (uint64_t)l.nwords * (c->max_users + 1);
    }
    return words;
}

int rl_sites_pick(const struct rl_sites *ss, struct rl_names *names,
                  const void *sa, unsigned salen)
{
    struct rl_peer p;
    char name[RL_NAME_MAX + 1];
    if (ss->nsites == 0 || !rl_peer_from_addr(names, sa, salen, &p))
        return -1;
    return rl_sites_pick_peer(ss, &p, name);
}

int rl_sites_pick_peer(const struct rl_sites *ss, struct rl_peer *p, char *name)
{
    if (ss->nsites == 0)
        return -1;
    const struct rl_rule *r = rl_config_find_site_peer(ss->cfg, p, name);
    if (r == NULL)
        return -1;
    for (unsigned i = 0; i < ss->nsites; i++)
        if (ss->sites[i].rule == r)
            return (int)i;
    return -1;
}

const struct rl_rule *rl_sites_rule(const struct rl_sites *ss, int i)
{
    return i >= 0 && (unsigned)i < ss->nsites ? ss->sites[i].rule : NULL;
}

struct budget *rl_sites_budget_now(struct rl_sites *ss, int i,
                                   struct rl_store *st)
{
    if (i < 0 || (unsigned)i >= ss->nsites || st == NULL)
        return NULL;
    /* Pairs with the release CAS of rl_sites_budget. */
    struct budget *b =
        atomic_load_explicit(&ss->sites[i].cur, memory_order_acquire);
    return b != NULL && b->store == st ? b : NULL;
}

struct budget *rl_sites_budget(struct rl_sites *ss, int i, struct rl_store *st)
{
    if (i < 0 || (unsigned)i >= ss->nsites || st == NULL)
        return NULL;
    struct rl_site *s = &ss->sites[i];
    /* Pairs with the release CAS below. */
    struct budget *b = atomic_load_explicit(&s->cur, memory_order_acquire);
    if (b != NULL && b->store == st)
        return b;
    struct budget *nb = calloc(1, sizeof *nb);
    bool overflowed = false;
    if (nb == NULL)
        return NULL;
    if (rl_store_slot(st, s->tag, s->label, s->layout.nwords, s->overflow_tag,
                      &nb->slot, &overflowed) < 0) {
        free(nb);
        return NULL;
    }
    nb->rule = s->rule;
    nb->layout = s->layout;
    nb->store = st;
    for (int k = 0; k < RL_KIND_COUNT; k++)
        for (unsigned j = 0; j < s->rule->nlimits[k]; j++)
            nb->states[k][j] = nb->slot.words + s->layout.offset[k][j];
    nb->replaced = b;
    if (atomic_compare_exchange_strong_explicit(&s->cur, &b, nb,
                                                memory_order_release,
                                                memory_order_acquire))
        return nb; /* the old one stays allocated: see the file comment */
    /* Another thread published first: use its (same slot) and drop ours. */
    free(nb);
    return b != NULL && b->store == st ? b : rl_sites_budget(ss, i, st);
}
