/* store_slot.c — slots: claiming one for a tag, its storage (label,
 * counters, state words) allocated as it is claimed, the CLI's view of
 * them, and the budgets that found the state dir full.
 *
 * A slot's storage is carved from its arena (address space only) and
 * allocated before it is published: its meta word goes 0 -> PENDING ->
 * READY (layout.h), and only READY storage is ever touched. Every process
 * allocates (again: a no-op, one madvise) the storage of a slot before it
 * first touches it, so no process faults on a page of the sparse file
 * that was never made, even in a segment someone scribbled on.
 *
 * When the allocation fails (the state dir is full), that budget, in this
 * process only, lives in the process's own memory: one stderr line says
 * so, and its other budgets stay shared. The slot stays PENDING|NOSPACE,
 * so that the next process to claim it tries again. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "state/store_int.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/sys.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif

/* A budget kept in this process: anonymous shared memory (a forked child
 * shares it, as it shares a process-mode store), found again by its tag so
 * that every thread of the process spends one budget. */
struct rl_local {
    struct rl_local *next;
    uint64_t tag;
    uint32_t nwords;
    size_t len;
    struct rl_seg_store *head; /* then the state words */
};

/* ---- allocating ranges ------------------------------------------------ */

int rl_seg_populate(void *p, uint64_t len)
{
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t a, e;

    a = (uintptr_t)p & ~(page - 1);
    e = ((uintptr_t)p + len + page - 1) & ~(page - 1);
    /* A write fault for every page, answered with an error instead of a
     * SIGBUS when tmpfs has none to give (EFAULT). Pages already there
     * cost a page-table walk. */
    for (;;) {
        if (madvise((void *)a, e - a, MADV_POPULATE_WRITE) == 0)
            return 0;
        if (errno != EINTR && errno != EAGAIN)
            break;
    }
    if (errno == EFAULT)
        return -ENOSPC;
    if (errno == EINVAL || errno == ENOSYS || errno == EPERM)
        return -EOPNOTSUPP;
    return -errno;
}

int rl_seg_alloc(struct rl_store *s, void *p, uint64_t len)
{
    struct stat st;
    int r = rl_seg_populate(p, len);
    int fd;

    if (r != -EOPNOTSUPP)
        return r;
    /* Anonymous memory (process mode) is committed when mapped: no page
     * of it can be refused later. */
    if (!s->shared)
        return 0;
    /* A kernel before 5.14: allocate the range through the file, when the
     * file at the path is still ours (else the segment was replaced or
     * removed, and its users move on at their next decision). */
    fd = rl_sys.openat(AT_FDCWD, s->path,
                       O_RDWR | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0);
    if (fd < 0)
        return -errno;
    if (fstat(fd, &st) < 0 || st.st_dev != s->dev || st.st_ino != s->ino) {
        rl_sys.close(fd);
        return -ESTALE;
    }
    r = posix_fallocate(fd, (off_t)((unsigned char *)p - (unsigned char *)s->hdr),
                        (off_t)len);
    rl_sys.close(fd);
    return -r;
}


/* ---- slots ------------------------------------------------------------- */

/* Start of the probe sequence: the tag is a hash already, but fold its
 * high bits in so that tags differing only there spread too. */
static uint32_t home(uint64_t tag, uint32_t n)
{
    return (uint32_t)((tag ^ (tag >> 29) ^ (tag >> 47)) % n);
}

/* The storage that a carved meta word (PENDING or READY) names, or NULL
 * when it names none inside its arena (a meta word we would not write). */
static struct rl_seg_store *storage(struct rl_store *s, uint32_t index,
                                    uint64_t meta, uint64_t *bytes)
{
    bool ovf = index >= s->nslots;
    uint64_t off = meta & RL_META_OFF_MASK;
    uint64_t n = (meta >> RL_META_NWORDS_SHIFT) & RL_META_NWORDS_MAX;
    uint64_t cap = ovf ? s->overflow_words : s->arena_words;
    uint64_t need = rl_seg_carve(n);

    if (meta & RL_META_FULL)
        return NULL;
    if (off > cap || need > cap - off)
        return NULL;
    *bytes = need * 8;
    return (struct rl_seg_store *)((ovf ? s->oarena : s->arena) + off);
}

/* Turn a READY meta word into `out`. -ENOSPC when the slot got no words
 * (its users overflow); -EINVAL when it has fewer than asked. Touches
 * nothing. */
static int resolve(struct rl_store *s, uint32_t index, uint64_t meta,
                   uint32_t nwords, struct rl_slot *out)
{
    uint64_t n = (meta >> RL_META_NWORDS_SHIFT) & RL_META_NWORDS_MAX;
    uint64_t bytes;
    struct rl_seg_store *st;

    if (!(meta & RL_META_READY))
        return -EINVAL;
    if (meta & RL_META_FULL)
        return -ENOSPC;
    if (n < nwords)
        return -EINVAL;
    st = storage(s, index, meta, &bytes);
    if (!st)
        return -EINVAL; /* not a meta word we would write */
    out->index = index;
    out->counters = st->counters;
    out->words = (rl_atomic_u64 *)(st + 1);
    out->nwords = (uint32_t)n;
    out->local = false;
    return 0;
}

/* Resolve and make sure the storage exists before anyone here touches it.
 * -ENOSPC with *nospace set when it cannot be allocated. */
static int resolve_alloc(struct rl_store *s, uint32_t index, uint64_t meta,
                         uint32_t nwords, struct rl_slot *out, int *nospace)
{
    uint64_t bytes = 0;
    unsigned char bit = (unsigned char)(1u << (index % 8));
    int r = resolve(s, index, meta, nwords, out);

    if (r < 0)
        return r;
    if (s->sure && (atomic_load_explicit(&s->sure[index / 8],
                                         memory_order_relaxed) & bit))
        return 0;
    struct rl_seg_store *st = storage(s, index, meta, &bytes);
    r = rl_seg_alloc(s, st, bytes);
    if (r < 0) {
        *nospace = r;
        return -ENOSPC;
    }
    if (s->sure)
        atomic_fetch_or_explicit(&s->sure[index / 8], bit,
                                 memory_order_relaxed);
    return 0;
}

/* Carve storage for `nwords` from the slot's arena: a PENDING meta word,
 * or READY|FULL when the arena is spent (its users overflow). Address
 * space only: nothing is allocated, nothing touched. */
static uint64_t carve(struct rl_store *s, uint32_t index, uint32_t nwords)
{
    bool ovf = index >= s->nslots;
    rl_atomic_u64 *used = ovf ? &s->hdr->overflow_used : &s->hdr->arena_used;
    uint64_t cap = ovf ? s->overflow_words : s->arena_words;
    uint64_t need = rl_seg_carve(nwords);

    if (nwords <= RL_META_NWORDS_MAX && need <= cap) {
        /* Relaxed: the carved range is nobody else's, and the meta CAS
         * publishes the offset. */
        uint64_t off = rl_add_relaxed_u64(used, need);
        if (off <= cap - need)
            return RL_META_PENDING |
                   ((uint64_t)nwords << RL_META_NWORDS_SHIFT) | off;
    }
    return RL_META_READY | RL_META_FULL;
}

static void write_label(struct rl_seg_store *st, const char *label,
                        bool overflow)
{
    size_t n = 0;
    size_t cut = 0;

    if (!label)
        return;
    while (label[n] && n < RL_STORE_LABEL_MAX - 2) {
        if (label[n] == '|')
            cut = n + 1;
        n++;
    }
    if (overflow) {
        memcpy(st->label, label, cut);
        st->label[cut] = '*';
        n = cut + 1;
    } else {
        memcpy(st->label, label, n);
    }
    st->label[n] = '\0';
}

/* Allocate the storage of a PENDING slot, label it and publish it.
 * Returns the meta word now in the slot (READY, or another process's
 * change that got there first), or 0 with *nospace set when the storage
 * cannot be allocated (the slot is left PENDING|NOSPACE for the next
 * claimer). */
static uint64_t finish(struct rl_store *s, uint32_t index, uint64_t pending,
                       const char *label, bool overflow, int *nospace)
{
    rl_atomic_u64 *m = &s->slots[index].meta;
    uint64_t bytes, seen = pending;
    struct rl_seg_store *st = storage(s, index, pending, &bytes);
    int r;

    if (!st)
        return RL_META_READY | RL_META_FULL; /* scribbled on: overflow */
    r = rl_seg_alloc(s, st, bytes);
    if (r < 0) {
        /* Acq_rel: pairs with the loads in settle. When another process
         * got there first (it took over, and its allocation worked), its
         * READY is what to use. */
        if (!rl_cas_strong_acq_rel_u64(m, &seen, pending | RL_META_NOSPACE))
            return seen;
        *nospace = r;
        return 0;
    }
    /* Whoever finishes writes the same label (the tag's); a claimer that
     * was taken over may still be writing it too. */
    write_label(st, label, overflow);
    /* Release: the label is visible to whoever acquires READY (settle,
     * rl_store_each). */
    uint64_t ready = (pending & ~RL_META_PENDING) | RL_META_READY;
    if (rl_cas_strong_acq_rel_u64(m, &seen, ready))
        return ready;
    return seen;
}

/* The slot at `index` holds our tag: bring its meta word to READY (or
 * wait for whoever is doing that) and resolve it. `mine`: we claimed the
 * tag just now, so nobody else is carving. A carver or allocator that
 * sits longer than RL_STORE_CLAIM_WAIT_NS (it may have died) is taken
 * over. */
static int settle(struct rl_store *s, uint32_t index, uint32_t nwords,
                  const char *label, bool overflow, bool mine,
                  struct rl_slot *out, int *nospace)
{
    rl_atomic_u64 *m = &s->slots[index].meta;
    /* Pairs with the CAS (release) in finish. */
    uint64_t seen = rl_load_acquire_u64(m);
    uint64_t since = 0;
    unsigned spin = 0;

    for (;;) {
        if (seen & RL_META_READY)
            return resolve_alloc(s, index, seen, nwords, out, nospace);
        if (seen != 0 && !(seen & RL_META_PENDING))
            return -EINVAL; /* not a meta word we would write */
        bool act = mine || (seen & RL_META_NOSPACE);
        if (!act && spin < 200) {
            spin++;
            rl_cpu_relax();
        } else if (!act) {
            uint64_t now = rl_clock_now_ns();
            if (since == 0)
                since = now;
            else if (now - since > RL_STORE_CLAIM_WAIT_NS)
                act = true;
            if (!act)
                sched_yield();
        }
        if (!act) {
            /* Pairs with the CAS (release) in finish. */
            uint64_t again = rl_load_acquire_u64(m);
            if (again != seen) {
                since = 0;
                spin = 0;
                seen = again;
            }
            continue;
        }
        mine = false;
        since = 0;
        spin = 0;
        if (seen == 0) {
            uint64_t next = carve(s, index, nwords);
            /* Acq_rel, from 0: the first carver wins; a loser's range is
             * address space left unused, never memory. */
            if (!rl_cas_strong_acq_rel_u64(m, &seen, next))
                continue;
            seen = next;
            if (seen & RL_META_READY)
                continue; /* FULL */
        }
        if (seen & RL_META_NOSPACE) {
            uint64_t again = seen & ~RL_META_NOSPACE;
            if (!rl_cas_strong_acq_rel_u64(m, &seen, again))
                continue;
            seen = again;
        }
        uint64_t now_meta = finish(s, index, seen, label, overflow, nospace);
        if (now_meta == 0)
            return -ENOSPC;
        seen = now_meta;
    }
}

/* Find or claim `tag` in slots [base, base + n). */
static int find_or_claim(struct rl_store *s, uint32_t base, uint32_t n,
                         uint64_t tag, const char *label, uint32_t nwords,
                         bool overflow, struct rl_slot *out, int *nospace)
{
    uint32_t h = home(tag, n);

    for (uint32_t i = 0; i < n; i++) {
        uint32_t index = base + (h + i) % n;
        struct rl_seg_slot *sl = &s->slots[index];
        /* Pairs with the CAS below in another claimer. */
        uint64_t cur = rl_load_acquire_u64(&sl->tag);
        bool mine = false;

        if (cur == 0) {
            mine = rl_cas_strong_acq_rel_u64(&sl->tag, &cur, tag);
            if (mine)
                cur = tag;
            /* else cur now holds the winner's tag. */
        }
        if (cur != tag)
            continue;
        return settle(s, index, nwords, label, overflow, mine, out, nospace);
    }
    return -ENOSPC;
}

/* ---- budgets kept in this process -------------------------------------- */

static void local_out(struct rl_local *l, struct rl_slot *out)
{
    out->index = UINT32_MAX;
    out->counters = l->head->counters;
    out->words = (rl_atomic_u64 *)(l->head + 1);
    out->nwords = l->nwords;
    out->local = true;
}

/* The budget `tag` in this process's own memory: the one made before, or
 * a new one (saying so in one line). */
static int local_slot(struct rl_store *s, uint64_t tag, const char *label,
                      uint32_t nwords, int why, struct rl_slot *out)
{
    /* Pairs with the release CAS below. */
    struct rl_local *head = atomic_load_explicit(&s->locals,
                                                 memory_order_acquire);
    struct rl_local *stop = NULL, *mk = NULL;

    for (;;) {
        for (struct rl_local *l = head; l != stop; l = l->next) {
            if (l->tag != tag)
                continue;
            if (mk) {
                munmap(mk->head, mk->len);
                free(mk);
            }
            if (l->nwords < nwords)
                return -EINVAL;
            local_out(l, out);
            return 0;
        }
        if (!mk) {
            mk = calloc(1, sizeof *mk);
            if (!mk)
                return -ENOMEM;
            mk->tag = tag;
            mk->nwords = nwords;
            mk->len = sizeof(struct rl_seg_store) + (size_t)nwords * 8;
            /* Committed when mapped (no MAP_NORESERVE): never a fault. */
            mk->head = mmap(NULL, mk->len, PROT_READ | PROT_WRITE,
                            MAP_SHARED | MAP_ANONYMOUS, -1, 0);
            if (mk->head == MAP_FAILED) {
                free(mk);
                return -ENOMEM;
            }
            write_label(mk->head, label, false);
        }
        mk->next = head;
        stop = head;
        /* Release: the node is complete for whoever acquires the list;
         * on failure only the nodes pushed since are searched again. */
        if (atomic_compare_exchange_strong_explicit(&s->locals, &head, mk,
                                                    memory_order_release,
                                                    memory_order_acquire))
            break;
    }
    char dir[RL_SEG_PATH_MAX];
    const char *slash = strrchr(s->path, '/');
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - s->path) : 0,
             s->path);
    rl_log_stderr("state dir %s has no room for budget %s (%s): it is kept "
                  "in this process only",
                  dir, label ? label : "?", strerror(-why));
    local_out(mk, out);
    return 0;
}

void rl_seg_init_slots(struct rl_store *s)
{
    s->sure = calloc(((size_t)s->nslots + s->noverflow + 7) / 8, 1);
}

void rl_seg_free_locals(struct rl_store *s)
{
    free((void *)s->sure);
    s->sure = NULL;
    struct rl_local *l = atomic_exchange_explicit(&s->locals, NULL,
                                                  memory_order_acquire);

    while (l) {
        struct rl_local *next = l->next;
        munmap(l->head, l->len);
        free(l);
        l = next;
    }
}

int rl_store_slot(struct rl_store *s, uint64_t tag, const char *label,
                  uint32_t nwords, uint64_t overflow_tag, struct rl_slot *out,
                  bool *overflowed)
{
    int nospace = 0;
    int r;

    if (overflowed)
        *overflowed = false;
    if (tag == 0 || overflow_tag == 0)
        return -EINVAL;
    r = find_or_claim(s, 0, s->nslots, tag, label, nwords, false, out,
                      &nospace);
    if (r == -ENOSPC && !nospace) {
        r = find_or_claim(s, s->nslots, s->noverflow, overflow_tag, label,
                          nwords, true, out, &nospace);
        if (r == 0 && overflowed)
            *overflowed = true;
    }
    if (r == -ENOSPC && nospace && s->shared)
        return local_slot(s, tag, label, nwords, nospace, out);
    return r;
}

/* ---- the CLI's view ---------------------------------------------------- */

int rl_store_each(struct rl_store *s,
                  int (*fn)(const struct rl_slot_info *info,
                            struct rl_slot *slot, void *arg),
                  void *arg)
{
    uint32_t total = s->nslots + s->noverflow;

    for (uint32_t i = 0; i < total; i++) {
        struct rl_seg_slot *sl = &s->slots[i];
        struct rl_slot_info info;
        struct rl_slot slot;
        struct rl_seg_store *st;
        uint64_t tag = rl_load_acquire_u64(&sl->tag);
        /* Pairs with the CAS (release) in finish: label is complete. */
        uint64_t meta = rl_load_acquire_u64(&sl->meta);
        int nospace = 0;
        int r;

        /* Not published, or published with no storage: nothing counted. */
        if (tag == 0 ||
            resolve_alloc(s, i, meta, 0, &slot, &nospace) < 0)
            continue;
        st = (struct rl_seg_store *)((unsigned char *)slot.counters -
                                     offsetof(struct rl_seg_store, counters));
        memset(&info, 0, sizeof info);
        info.index = i;
        info.tag = tag;
        info.overflow = i >= s->nslots;
        memcpy(info.label, st->label, RL_STORE_LABEL_MAX);
        info.label[RL_STORE_LABEL_MAX - 1] = '\0';
        for (unsigned c = 0; c < RL_STORE_COUNTERS; c++)
            info.counters[c] = rl_load_relaxed_u64(&slot.counters[c]);
        info.tls_unseen = rl_load_relaxed_u64(&st->tls_unseen);
        info.responded = rl_load_relaxed_u64(&st->responded);
        info.nwords = slot.nwords;
        r = fn(&info, &slot, arg);
        if (r)
            return r;
    }
    return 0;
}

/* The published slot at `index`, allocated; false when there is none. */
static bool slot_at(struct rl_store *s, uint32_t index, struct rl_slot *out)
{
    int nospace = 0;

    if (index >= s->nslots + s->noverflow)
        return false;
    /* Pairs with the CAS (release) in finish. */
    return resolve_alloc(s, index, rl_load_acquire_u64(&s->slots[index].meta),
                         0, out, &nospace) == 0;
}

void rl_store_reset_counters(struct rl_store *s, uint32_t index)
{
    struct rl_slot slot;

    if (!slot_at(s, index, &slot))
        return;
    for (unsigned c = 0; c < RL_STORE_COUNTERS; c++)
        rl_store_relaxed_u64(&slot.counters[c], 0);
    rl_store_relaxed_u64(&slot.counters[RL_STORE_TLS_UNSEEN], 0);
    rl_store_relaxed_u64(&slot.counters[RL_STORE_RESPONDED], 0);
}

void rl_store_reset_words(struct rl_store *s, uint32_t index, uint32_t first,
                          uint32_t n)
{
    struct rl_slot slot;

    if (!slot_at(s, index, &slot))
        return;
    if (first > slot.nwords || n > slot.nwords - first)
        return;
    for (uint32_t w = first; w < first + n; w++)
        rl_store_relaxed_u64(&slot.words[w], 0);
}

void rl_store_reset_slot(struct rl_store *s, uint32_t index)
{
    struct rl_slot slot;

    if (slot_at(s, index, &slot))
        rl_store_reset_words(s, index, 0, slot.nwords);
    rl_store_reset_counters(s, index);
}
