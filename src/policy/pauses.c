/* pauses.c — the pause table (see pauses.h and state/layout.h). */
#include "policy/pauses.h"

#include <string.h>

#include "state/layout.h"
#include "util/atomics.h"
#include "util/hash.h"
#include "util/ownerlock.h"

#define KEY_FREE 0u
#define KEY_BUSY 1u
#define KEY_MIN 2u
/* Entries looked at from a key's home: a key is always in its window. */
#define WINDOW 16u

void rl_pauses_of(struct rl_store *st, struct rl_pauses *out)
{
    out->store = st;
    out->head = rl_store_pauses(st, &out->n);
    out->e = (struct rl_seg_pause *)((unsigned char *)out->head +
                                     RL_SEG_PAUSES_HEAD_SIZE);
}

uint64_t rl_pauses_key(uint64_t rule, const char *user, const char *name,
                       size_t namelen)
{
    uint64_t k = rl_hash_u64(rl_hash_str(RL_HASH_INIT, "#pause"), rule);
    k = rl_hash_bytes(rl_hash_str(k, user), name, namelen);
    return k < KEY_MIN ? k + KEY_MIN : k;
}

static struct rl_seg_pause *at(const struct rl_pauses *p, uint64_t key,
                               uint32_t i)
{
    uint64_t home = key * 0x9e3779b97f4a7c15ull >> 20;
    return &p->e[(home + i) & (p->n - 1)];
}

/* An entry of `key` takes the first never-used entry of its window, or
 * one that was in use: the never-used entries of a window only ever come
 * after the used ones, so a look-up stops at the first. */
uint64_t rl_pauses_get(const struct rl_pauses *p, uint64_t key,
                       uint64_t *backoff)
{
    for (uint32_t i = 0; i < WINDOW; i++) {
        struct rl_seg_pause *e = at(p, key, i);
        /* Pairs with the release stores of set_key: the words read after
         * a key seen twice are that key's. */
        uint64_t k = rl_load_acquire_u64(&e->key);
        if (k == KEY_FREE)
            return 0;
        if (k != key)
            continue;
        uint64_t u = rl_load_acquire_u64(&e->until);
        uint64_t b = rl_load_relaxed_u64(&e->backoff);
        if (rl_load_acquire_u64(&e->key) != key)
            return 0; /* re-keyed meanwhile: its pause gave way */
        if (backoff != NULL)
            *backoff = b;
        return u;
    }
    return 0;
}

static uint64_t end_of(uint64_t word)
{
    return word & ~1ull;
}

/* When a crawl word (limit/adapt.h) expires, ns of the clock. */
static uint64_t crawl_end(uint64_t crawl)
{
    return (crawl >> 32) * 1000000000ull;
}

/* Until when entry e says something (0: it carries nothing now, and goes
 * first): its pause's end, its Crawl-delay's expiry, and while adapted by
 * latency, its last turn (the table keeps the destinations in use). */
static uint64_t worth(struct rl_seg_pause *e, uint64_t now)
{
    uint64_t end = end_of(rl_load_relaxed_u64(&e->until));
    uint64_t crawl = crawl_end(rl_load_relaxed_u64(&e->crawl));
    if (crawl > end)
        end = crawl;
    if (rl_load_relaxed_u64(&e->latency) != 0) {
        uint64_t last = rl_load_relaxed_u64(&e->last);
        if (last > end)
            end = last != 0 ? last : 1;
    }
    if (end <= now && rl_load_relaxed_u64(&e->backoff) == 0)
        return 0;
    return end;
}

/* Under the lock: the entry of s->key, or a new one for it (the first
 * never used, else one whose pause and backoff are over, else the one
 * whose pause ends first), re-keyed. */
static struct rl_seg_pause *find_or_make(struct rl_pauses *p,
                                         const struct rl_pause_set *s)
{
    struct rl_seg_pause *victim = NULL;
    uint64_t victim_end = UINT64_MAX;
    for (uint32_t i = 0; i < WINDOW; i++) {
        struct rl_seg_pause *e = at(p, s->key, i);
        uint64_t k = rl_load_relaxed_u64(&e->key);
        if (k == s->key)
            return e;
        if (k == KEY_FREE) {
            victim = e;
            break;
        }
        uint64_t end = worth(e, s->now);
        if (end < victim_end) {
            victim = e;
            victim_end = end;
        }
    }
    /* Busy first, its words next (a reader that saw the old key and
     * loads them finds the key changed after), then the new key. */
    rl_store_relaxed_u64(&victim->key, KEY_BUSY);
    rl_store_release_u64(&victim->until, 0);
    rl_store_relaxed_u64(&victim->backoff, 0);
    rl_store_relaxed_u64(&victim->rule, s->rule);
    rl_store_relaxed_u64(&victim->latency, 0);
    rl_store_relaxed_u64(&victim->crawl, 0);
    rl_store_relaxed_u64(&victim->last, 0);
    uint64_t lw[RL_SEG_PAUSE_LABEL / 8] = {0};
    size_t l = strlen(s->label);
    memcpy(lw, s->label, l < sizeof lw - 1 ? l : sizeof lw - 1);
    for (unsigned j = 0; j < RL_SEG_PAUSE_LABEL / 8; j++)
        rl_store_relaxed_u64(&victim->label[j], lw[j]);
    rl_store_release_u64(&victim->key, s->key);
    return victim;
}

int rl_pauses_set(struct rl_pauses *p, const struct rl_pause_set *s,
                  uint64_t *n)
{
    rl_atomic_u64 *lock = p->head->lock;
    if (rl_ownerlock_lock(lock) == RL_OWNERLOCK_BUSY)
        return -1;
    struct rl_seg_pause *e = find_or_make(p, s);
    if (s->count) {
        uint64_t b = rl_pauses_backoff_count(rl_load_relaxed_u64(&e->backoff));
        if (b < UINT32_MAX)
            b++;
        rl_store_relaxed_u64(&e->backoff,
                             b | (uint64_t)(s->cause & 0xffffu) << 32);
        if (n != NULL)
            *n = b - 1;
    }
    bool moved = false;
    if (s->until != 0 &&
        end_of(rl_load_relaxed_u64(&e->until)) < end_of(s->until)) {
        rl_store_release_u64(&e->until, s->until);
        moved = true;
    }
    rl_ownerlock_unlock(lock);
    /* The segment is not removed as unused while the pause runs (SPEC
     * §5): it is not a budget that refills. */
    if (moved)
        rl_store_hold(p->store, end_of(s->until));
    return moved ? 1 : 0;
}

bool rl_pauses_pace(const struct rl_pauses *p, uint64_t key,
                    struct rl_adapt *out)
{
    memset(out, 0, sizeof *out);
    for (uint32_t i = 0; i < WINDOW; i++) {
        struct rl_seg_pause *e = at(p, key, i);
        uint64_t k = rl_load_acquire_u64(&e->key);
        if (k == KEY_FREE)
            return false;
        if (k != key)
            continue;
        struct rl_adapt a = {
            .latency = rl_load_acquire_u64(&e->latency),
            .crawl = rl_load_acquire_u64(&e->crawl),
            .last = rl_load_acquire_u64(&e->last),
        };
        if (rl_load_acquire_u64(&e->key) != key)
            return false; /* re-keyed meanwhile: its pace gave way */
        *out = a;
        return true;
    }
    return false;
}

static rl_atomic_u64 *pace_word(struct rl_seg_pause *e, enum rl_pace_word w)
{
    switch (w) {
    case RL_PACE_LATENCY:
        return &e->latency;
    case RL_PACE_CRAWL:
        return &e->crawl;
    default:
        return &e->last;
    }
}

int rl_pauses_pace_cas(struct rl_pauses *p, const struct rl_pause_set *s,
                       enum rl_pace_word w, uint64_t old, uint64_t new)
{
    rl_atomic_u64 *lock = p->head->lock;
    if (rl_ownerlock_lock(lock) == RL_OWNERLOCK_BUSY)
        return -1;
    struct rl_seg_pause *e = find_or_make(p, s);
    rl_atomic_u64 *word = pace_word(e, w);
    bool moved = rl_load_relaxed_u64(word) == old;
    if (moved)
        rl_store_release_u64(word, new);
    rl_ownerlock_unlock(lock);
    /* A Crawl-delay holds for a day (SPEC §14): the segment is not
     * removed as unused before it expires (SPEC §5), as for a pause. */
    if (moved && w == RL_PACE_CRAWL && new != 0)
        rl_store_hold(p->store, crawl_end(new));
    return moved ? 1 : 0;
}

void rl_pauses_backoff_end(struct rl_pauses *p, uint64_t key)
{
    uint64_t b = 0;
    rl_pauses_get(p, key, &b);
    if (b == 0)
        return; /* the common case: nothing to end, no lock */
    rl_atomic_u64 *lock = p->head->lock;
    if (rl_ownerlock_lock(lock) == RL_OWNERLOCK_BUSY)
        return;
    for (uint32_t i = 0; i < WINDOW; i++) {
        struct rl_seg_pause *e = at(p, key, i);
        uint64_t k = rl_load_relaxed_u64(&e->key);
        if (k == KEY_FREE)
            break;
        if (k == key) {
            rl_store_relaxed_u64(&e->backoff, 0);
            break;
        }
    }
    rl_ownerlock_unlock(lock);
}

void rl_pauses_each(const struct rl_pauses *p, uint64_t now,
                    void (*fn)(uint64_t rule, const char *label,
                               uint64_t until, uint64_t backoff, void *arg),
                    void *arg)
{
    for (uint32_t i = 0; i < p->n; i++) {
        struct rl_seg_pause *e = &p->e[i];
        uint64_t k = rl_load_acquire_u64(&e->key);
        if (k < KEY_MIN)
            continue;
        uint64_t u = rl_load_acquire_u64(&e->until);
        uint64_t rule = rl_load_relaxed_u64(&e->rule);
        uint64_t b = rl_load_relaxed_u64(&e->backoff);
        uint64_t lw[RL_SEG_PAUSE_LABEL / 8 + 1] = {0};
        for (unsigned j = 0; j < RL_SEG_PAUSE_LABEL / 8; j++)
            lw[j] = rl_load_relaxed_u64(&e->label[j]);
        if (rl_load_acquire_u64(&e->key) != k || end_of(u) <= now)
            continue;
        char label[sizeof lw];
        memcpy(label, lw, sizeof lw);
        label[sizeof label - 1] = '\0';
        fn(rule, label, u, b, arg);
    }
}
