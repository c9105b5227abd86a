/* dests.c — the per-destination table (see dests.h). */
#include "policy/dests.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "policy/budget.h"
#include "policy/dest.h"
#include "policy/identity.h"
#include "policy/open.h"
#include "state/layout.h"
#include "util/atomics.h"
#include "util/declog.h"
#include "util/hash.h"
#include "util/log.h"
#include "util/ownerlock.h"

#define HEADER 16u
#define H_LIVE 0u
#define H_SAID 1u
#define H_CURSOR 3u
#define H_LOCK 8u /* RL_OWNERLOCK_WORDS words: a robust lock */
_Static_assert(H_LOCK + RL_OWNERLOCK_WORDS <= HEADER, "the lock fits");
#define KEY_FREE 0u
#define KEY_BUSY 1u
#define KEY_TOMB 2u  /* emptied: not live, re-usable, chains go on past it */
#define KEY_MIN 3u   /* the smallest key of a name */
#define EVICT_SCAN 2048u /* entries an insert looks at for a full budget */

/* The process's view of the table in one store (struct rl_dests's cur). */
struct rl_dests_table {
    struct rl_store *store;
    rl_atomic_u64 *w; /* the slot's words: header, then entries */
};

/* An overflow budget of one section, for this process's users. */
struct rl_dests_overflow {
    struct rl_store *store;
    struct rl_slot slot;
};

static bool per_dest(const struct rl_rule *r)
{
    return rl_rule_per_dest(r);
}

int rl_dests_setup(struct rl_dests *d, const struct rl_config *c)
{
    uint32_t w = 0;

    d->cfg = c;
    for (size_t i = 0; i < c->nrules; i++) {
        if (c->rules[i].per != RL_PER_DOMAIN)
            continue;
        /* Once a process (a test may have tried another library). */
        if (!rl_regdomain_tried(&d->psl))
            rl_regdomain_load(&d->psl, RL_REGDOMAIN_LIB);
        if (!rl_regdomain_ready(&d->psl))
            rl_log_stderr("per = domain in [%s]: %s: its destinations are "
                          "keyed by name (as per = destination)",
                          c->rules[i].section, rl_regdomain_source(&d->psl));
        break;
    }
    for (size_t i = 0; i < c->nrules; i++) {
        if (!per_dest(&c->rules[i]))
            continue;
        struct rl_budget_layout l;
        rl_budget_layout(&c->rules[i], &l);
        /* The limiters' words only: nothing is leased per destination. */
        uint32_t n = l.lease != 0 ? l.lease : l.nwords;
        if (n > w)
            w = n;
        d->any = true;
    }
    if (!d->any)
        return 0;
    bool open = false;
    for (size_t i = 0; i < c->nrules; i++)
        open |= per_dest(&c->rules[i]) && c->rules[i].max_open > 0;
    d->layouts = calloc(c->nrules, sizeof *d->layouts);
    d->ovf = calloc(c->nrules, sizeof *d->ovf);
    if (d->layouts == NULL || d->ovf == NULL)
        return -ENOMEM;
    for (size_t i = 0; i < c->nrules; i++)
        rl_budget_layout(&c->rules[i], &d->layouts[i]);
    d->stride = 2 + w;
    if (open) {
        d->open_at = d->stride;
        d->stride += RL_OPEN_WORDS;
    }
    d->label_at = d->stride;
    d->stride += RL_DESTS_LABEL_WORDS;
    d->max_live = c->max_destinations;
    d->cap = 1;
    while (d->cap < 2 * d->max_live)
        d->cap <<= 1;
    /* One slot's words are bounded (layout.h): a huge table of windows
     * gets fewer entries than asked rather than none. */
    while (d->cap > 64 && HEADER + d->cap * d->stride > RL_META_NWORDS_MAX)
        d->cap >>= 1;
    if (d->max_live > d->cap / 2)
        d->max_live = d->cap / 2;
    d->table_words = (uint32_t)(HEADER + d->cap * d->stride);
    return 0;
}

bool rl_dests_any(const struct rl_dests *d)
{
    return d->any;
}

uint64_t rl_dests_arena_words(const struct rl_dests *d,
                              const struct rl_config *c)
{
    uint64_t words = 0;
    bool some = false;
    for (size_t i = 0; i < c->nrules; i++) {
        if (!per_dest(&c->rules[i]))
            continue;
        struct rl_budget_layout l;
        rl_budget_layout(&c->rules[i], &l);
        words += (uint64_t)l.nwords * (c->max_users + 1); /* overflows */
        some = true;
    }
    return some ? words + d->table_words : 0;
}

uint32_t rl_dests_slots(const struct rl_config *c)
{
    uint32_t n = 0;
    for (size_t i = 0; i < c->nrules; i++)
        n += per_dest(&c->rules[i]);
    return n == 0 ? 0 : 1 + n * c->max_users;
}

size_t rl_dests_name(struct rl_names *names, const void *sa, unsigned salen,
                     char *buf)
{
    struct rl_peer p;
    if (!rl_peer_from_addr(names, sa, salen, &p))
        return 0;
    return rl_dests_peer_name(&p, buf);
}

void rl_dests_name_port(struct rl_names *names, const void *sa,
                        unsigned salen, char *host, size_t hostlen,
                        unsigned *port)
{
    char name[RL_NAME_MAX + 1];
    rl_declog_dest(sa, salen, host, hostlen, port);
    size_t n = rl_dests_name(names, sa, salen, name);
    if (n > 0 && n < hostlen)
        memcpy(host, name, n + 1);
}

size_t rl_dests_peer_name(struct rl_peer *p, char *buf)
{
    if (rl_peer_name(p, buf) > 0) {
        if (p->name != buf)
            memcpy(buf, p->name, (size_t)p->namelen + 1);
        return (size_t)p->namelen;
    }
    if (p->family != AF_INET && p->family != AF_INET6) {
        memcpy(buf, "-", 2); /* a request to a destination not known */
        return 1;
    }
    inet_ntop(p->family, p->addr, buf, RL_NAME_MAX + 1);
    return strlen(buf);
}

size_t rl_dests_key(const struct rl_dests *d, int per,
                    const struct rl_peer *p, const char *name,
                    size_t namelen, char *key)
{
    if (per == RL_PER_DOMAIN)
        return rl_regdomain_of(&d->psl, name, namelen, key);
    if (per == RL_PER_ADDRESS &&
        (p->family == AF_INET || p->family == AF_INET6) &&
        inet_ntop(p->family, p->addr, key, RL_NAME_MAX + 1) != NULL)
        return strlen(key);
    memcpy(key, name, namelen);
    key[namelen] = '\0';
    return namelen;
}

void rl_dests_close(struct rl_dests *d)
{
    rl_regdomain_close(&d->psl);
    free(atomic_exchange(&d->cur, NULL));
    if (d->ovf != NULL && d->cfg != NULL)
        for (size_t i = 0; i < d->cfg->nrules; i++)
            free(atomic_exchange(&d->ovf[i], NULL));
    free(d->ovf);
    free(d->layouts);
    d->ovf = NULL;
    d->layouts = NULL;
}

static struct rl_dests_table *table_in(struct rl_dests *d, struct rl_store *st)
{
    /* Pairs with the release CAS below. */
    struct rl_dests_table *t =
        atomic_load_explicit(&d->cur, memory_order_acquire);
    if (t != NULL && t->store == st)
        return t;
    struct rl_dests_table *nt = calloc(1, sizeof *nt);
    struct rl_slot slot;
    bool overflowed = false;
    if (nt == NULL)
        return NULL;
    if (rl_store_slot(st, rl_hash_str(RL_HASH_INIT, RL_DESTS_LABEL),
                      RL_DESTS_LABEL, d->table_words,
                      rl_hash_str(RL_HASH_INIT, "#destinations-full"), &slot,
                      &overflowed) < 0 ||
        overflowed || slot.nwords < d->table_words) {
        free(nt);
        return NULL; /* no room for the table: every call overflows */
    }
    nt->store = st;
    nt->w = slot.words;
    if (atomic_compare_exchange_strong_explicit(
            &d->cur, &t, nt, memory_order_release, memory_order_acquire))
        return nt; /* an older one stays allocated: a thread may use it */
    free(nt);
    return t != NULL && t->store == st ? t : NULL;
}

static rl_atomic_u64 *entry(struct rl_dests *d, struct rl_dests_table *t,
                            uint64_t i)
{
    return t->w + HEADER + (i & (d->cap - 1)) * d->stride;
}

static void fill(struct rl_dests *d, struct rl_dest_entry *out,
                 const struct rl_rule *rule, rl_word *words,
                 rl_atomic_u64 *key_word, uint64_t key)
{
    const struct rl_budget_layout *l = &d->layouts[rule - d->cfg->rules];
    memset(out, 0, sizeof *out);
    out->key_word = key_word;
    out->key = key;
    if (d->open_at != 0 && rule->max_open > 0 && key_word != NULL)
        out->open = (rl_atomic_u64 *)words - 2 + d->open_at;
    for (int k = 0; k < RL_KIND_COUNT; k++)
        for (unsigned j = 0; j < rule->nlimits[k]; j++)
            out->states[k][j] = words + l->offset[k][j];
}

/* Is the budget in `words` of section `rule` full (token buckets only)
 * and holding no open connection? (A pause is not the budget's: it lives
 * in the pause table, policy/pauses.h, and outlives the budget's re-use.) */
static bool full(struct rl_dests *d, const struct rl_rule *rule, rl_word *words,
                 uint64_t now)
{
    const struct rl_budget_layout *l = &d->layouts[rule - d->cfg->rules];
    if (d->open_at != 0 &&
        rl_load_acquire_u64((rl_atomic_u64 *)words - 2 + d->open_at) != 0)
        return false;
    for (int k = 0; k < RL_KIND_COUNT; k++) {
        for (unsigned j = 0; j < rule->nlimits[k]; j++) {
            const struct rl_limit *lim = &rule->limits[k][j];
            if (lim->algo != RL_ALGO_TOKEN_BUCKET)
                return false;
            const struct rl_algorithm *a = rl_algorithm_get(lim->algo);
            if (a->available(words + l->offset[k][j], lim, now) < lim->burst)
                return false;
        }
    }
    return true;
}

/* The insert lock: a robust process-shared mutex
 * (util/ownerlock.h): waiters sleep, a holder killed inside is taken over.
 * false when it could not be had (a stopped holder kept it too long). */
static bool lock(struct rl_dests_table *t)
{
    return rl_ownerlock_lock(&t->w[H_LOCK]) != RL_OWNERLOCK_BUSY;
}

static void unlock(struct rl_dests_table *t)
{
    rl_ownerlock_unlock(&t->w[H_LOCK]);
}

/* Look `key` up from its home: the entry, or NULL. *free_at is the first
 * entry met that a new name may take (never used, or emptied), or NULL.
 * The chain ends at a never-used entry. */
static rl_atomic_u64 *probe(struct rl_dests *d, struct rl_dests_table *t,
                            uint64_t key, rl_atomic_u64 **free_at)
{
    uint64_t home = key * 0x9e3779b97f4a7c15ull >> 20;
    *free_at = NULL;
    for (uint64_t i = 0; i < RL_DESTS_PROBE; i++) {
        rl_atomic_u64 *e = entry(d, t, home + i);
        /* Pairs with the release store that publishes a key. */
        uint64_t k = rl_load_acquire_u64(&e[0]);
        if (k == key)
            return e;
        if ((k == KEY_FREE || k == KEY_TOMB) && *free_at == NULL)
            *free_at = e;
        if (k == KEY_FREE)
            return NULL;
    }
    return NULL;
}

/* Take entry e from its name when its budget is full: true, with e busy
 * and its state words zero (the caller publishes a key, or KEY_TOMB). */
static bool take_full(struct rl_dests *d, rl_atomic_u64 *e, uint64_t now)
{
    uint64_t k = rl_load_acquire_u64(&e[0]);
    uint64_t ri = rl_load_relaxed_u64(&e[1]);
    if (k < KEY_MIN || ri == 0 || ri > d->cfg->nrules)
        return false;
    const struct rl_rule *r = &d->cfg->rules[ri - 1];
    if (!full(d, r, (rl_word *)(e + 2), now))
        return false;
    /* Busy first, then full again: a take that landed before the CAS
     * shows; one after it finds the key changed (the gate checks the key word after
     * taking: gate_take.c). */
    if (!atomic_compare_exchange_strong_explicit(
            &e[0], &k, KEY_BUSY, memory_order_acq_rel, memory_order_relaxed))
        return false;
    if (!full(d, r, (rl_word *)(e + 2), now)) {
        rl_store_release_u64(&e[0], k);
        return false;
    }
    for (uint32_t j = 2; j < d->stride; j++)
        rl_store_relaxed_u64(&e[j], 0);
    return true;
}

/* Re-use a full budget near the key's home for it: the entry (busy), or
 * NULL. */
static rl_atomic_u64 *reuse(struct rl_dests *d, struct rl_dests_table *t,
                            uint64_t key, uint64_t now)
{
    uint64_t home = key * 0x9e3779b97f4a7c15ull >> 20;
    for (uint64_t i = 0; i < RL_DESTS_PROBE; i++) {
        rl_atomic_u64 *e = entry(d, t, home + i);
        if (rl_load_relaxed_u64(&e[0]) == KEY_FREE)
            return NULL; /* the chain ends here: a look-up stops too */
        if (take_full(d, e, now))
            return e;
    }
    return NULL;
}

/* Empty one full budget anywhere (from a cursor that goes round the
 * table), so that a live entry can be made elsewhere: true when one was. */
static bool evict(struct rl_dests *d, struct rl_dests_table *t, uint64_t now)
{
    uint64_t at = rl_load_relaxed_u64(&t->w[H_CURSOR]);
    for (uint64_t i = 0; i < EVICT_SCAN && i < d->cap; i++) {
        rl_atomic_u64 *e = entry(d, t, at + i);
        if (!take_full(d, e, now))
            continue;
        rl_store_relaxed_u64(&e[1], 0);
        rl_store_release_u64(&e[0], KEY_TOMB);
        rl_store_relaxed_u64(&t->w[H_CURSOR], at + i + 1);
        rl_add_relaxed_u64(&t->w[H_LIVE], (uint64_t)-1);
        return true;
    }
    rl_store_relaxed_u64(&t->w[H_CURSOR], at + EVICT_SCAN);
    return false;
}

static int overflow_budget(struct rl_dests *d, struct rl_store *st,
                           const struct rl_rule *rule, const char *user,
                           struct rl_dest_entry *out)
{
    size_t ri = (size_t)(rule - d->cfg->rules);
    struct rl_dests_overflow *o =
        atomic_load_explicit(&d->ovf[ri], memory_order_acquire);
    if (o == NULL || o->store != st) {
        char label[RL_STORE_LABEL_MAX];
        /* Whole, not cut to a label's length: the tag is a hash of it,
         * and two long users cut alike would share one budget. */
        char who[RL_IDENTITY_MAX + sizeof "|(more destinations)"];
        snprintf(who, sizeof who, "%s|(more destinations)", user);
        uint64_t tag = rl_budget_label(rule, who, label, sizeof label);
        struct rl_dests_overflow *no = calloc(1, sizeof *no);
        bool overflowed = false;
        if (no == NULL)
            return -ENOMEM;
        int r =
            rl_store_slot(st, tag, label, d->layouts[ri].nwords,
                          rl_budget_overflow_tag(rule), &no->slot, &overflowed);
        if (r < 0) {
            free(no);
            return r;
        }
        no->store = st;
        /* A racing thread's copy claims the same slot: either will do. */
        atomic_store_explicit(&d->ovf[ri], no, memory_order_release);
        o = no;
    }
    fill(d, out, rule, o->slot.words, NULL, 0);
    out->overflow = true;
    return 0;
}

int rl_dests_find(struct rl_dests *d, struct rl_store *st,
                  const struct rl_rule *rule, const char *user,
                  const char *name, size_t namelen, uint64_t now,
                  struct rl_dest_entry *out)
{
    uint64_t ri = (uint64_t)(rule - d->cfg->rules) + 1;
    uint64_t key = rl_hash_u64(RL_HASH_INIT, ri);
    key = rl_hash_bytes(rl_hash_str(key, user), name, namelen);
    if (key < KEY_MIN)
        key += KEY_MIN;
    struct rl_dests_table *t = table_in(d, st);
    if (t == NULL)
        return overflow_budget(d, st, rule, user, out);
    rl_atomic_u64 *free_at, *e = probe(d, t, key, &free_at);
    if (e != NULL) {
        fill(d, out, rule, (rl_word *)(e + 2), &e[0], key);
        return 0;
    }
    if (!lock(t))
        return overflow_budget(d, st, rule, user, out); /* never more */
    e = probe(d, t, key, &free_at); /* made by another while we waited? */
    if (e != NULL) {
        unlock(t);
        fill(d, out, rule, (rl_word *)(e + 2), &e[0], key);
        return 0;
    }
    if (free_at != NULL && rl_load_relaxed_u64(&t->w[H_LIVE]) < d->max_live) {
        e = free_at;
        rl_add_relaxed_u64(&t->w[H_LIVE], 1);
    } else {
        e = reuse(d, t, key, now); /* a full budget near home: live stays */
        if (e == NULL && free_at != NULL && evict(d, t, now)) {
            e = free_at;
            rl_add_relaxed_u64(&t->w[H_LIVE], 1);
        }
    }
    if (e == NULL) {
        unlock(t);
        uint64_t said = 0;
        if (atomic_compare_exchange_strong_explicit(&t->w[H_SAID], &said, 1,
                                                    memory_order_relaxed,
                                                    memory_order_relaxed))
            rl_log_stderr("the per-destination table is full "
                          "(max_destinations = %llu, none idle): further "
                          "destinations of [%s] share one budget",
                          (unsigned long long)d->max_live, rule->section);
        return overflow_budget(d, st, rule, user, out);
    }
    rl_store_relaxed_u64(&e[1], ri);
    /* Its label, for `rlshim stat` (the key is what identifies it). */
    char label[RL_DESTS_LABEL_WORDS * 8] = "";
    uint64_t lw[RL_DESTS_LABEL_WORDS];
    snprintf(label, sizeof label, "%s|%.*s", user, (int)namelen, name);
    memcpy(lw, label, sizeof lw);
    for (unsigned j = 0; j < RL_DESTS_LABEL_WORDS; j++)
        rl_store_relaxed_u64(&e[d->label_at + j], lw[j]);
    /* Publishes the entry (its words are zero: never used, or emptied by
     * reuse); pairs with the acquire loads in probe. */
    rl_store_release_u64(&e[0], key);
    unlock(t);
    fill(d, out, rule, (rl_word *)(e + 2), &e[0], key);
    return 0;
}

int rl_dests_lookup(struct rl_dests *d, struct rl_store *st,
                    const struct rl_rule *rule, const char *user,
                    const char *name, size_t namelen, struct rl_dest_entry *out)
{
    uint64_t ri = (uint64_t)(rule - d->cfg->rules) + 1;
    uint64_t key = rl_hash_u64(RL_HASH_INIT, ri);
    key = rl_hash_bytes(rl_hash_str(key, user), name, namelen);
    if (key < KEY_MIN)
        key += KEY_MIN;
    /* Pairs with the release CAS of table_in. */
    struct rl_dests_table *t =
        atomic_load_explicit(&d->cur, memory_order_acquire);
    rl_atomic_u64 *free_at, *e;
    if (t == NULL || t->store != st || (e = probe(d, t, key, &free_at)) == NULL)
        return -ENOENT;
    fill(d, out, rule, (rl_word *)(e + 2), &e[0], key);
    return 0;
}

int rl_dests_each(struct rl_dests *d, rl_atomic_u64 *words, uint32_t nwords,
                  void (*fn)(const struct rl_rule *rule, const char *label,
                             struct rl_dest_entry *e, void *arg),
                  void *arg)
{
    if (!d->any || nwords < d->table_words)
        return -EINVAL; /* made for another config */
    struct rl_dests_table t = {.store = NULL, .w = words};
    for (uint64_t i = 0; i < d->cap; i++) {
        rl_atomic_u64 *e = entry(d, &t, i);
        uint64_t k = rl_load_acquire_u64(&e[0]);
        uint64_t ri = rl_load_relaxed_u64(&e[1]);
        if (k < KEY_MIN || ri == 0 || ri > d->cfg->nrules)
            continue;
        const struct rl_rule *r = &d->cfg->rules[ri - 1];
        uint64_t lw[RL_DESTS_LABEL_WORDS + 1] = {0};
        for (unsigned j = 0; j < RL_DESTS_LABEL_WORDS; j++)
            lw[j] = rl_load_relaxed_u64(&e[d->label_at + j]);
        char label[sizeof lw];
        memcpy(label, lw, sizeof lw);
        label[sizeof label - 1] = '\0';
        struct rl_dest_entry de;
        fill(d, &de, r, (rl_word *)(e + 2), &e[0], k);
        fn(r, label, &de, arg);
    }
    return 0;
}
