/* open.c — connections open at once (see open.h). */
#include "policy/open.h"

#include <errno.h>
#include <linux/futex.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "util/clock.h"
#include "util/ownerlock.h"
#include "util/sys.h"

#define W_OPEN 0u
#define W_WAITERS 1u
#define W_SEQ 2u
#define W_REC 3u

void rl_open_enable(struct rl_open *o)
{
    o->on = true;
}

/* ---- who holds: pid and start time -----------------------------------*/

uint64_t rl_open_start_of(int pid)
{
    return rl_pid_start(pid, NULL);
}

/* The holder this thread acts for (the --seccomp supervisor), or NULL. */
static __thread const struct rl_open_holder *acting
    __attribute__((tls_model("initial-exec")));

void rl_open_act_for(const struct rl_open_holder *h)
{
    acting = h;
}

/* This process's (pid, start time), re-read after a fork; or the holder
 * this thread acts for. */
static void me(struct rl_open *o, uint32_t *pid, uint64_t *start)
{
    if (acting != NULL) {
        *pid = acting->pid;
        *start = acting->start;
        return;
    }
    uint32_t p = (uint32_t)getpid();
    if (atomic_load_explicit(&o->me_cache, memory_order_acquire) !=
        ((uint64_t)p << 32 | 1)) {
        atomic_store_explicit(&o->me_start, rl_pid_start((int)p, NULL),
                              memory_order_relaxed);
        atomic_store_explicit(&o->me_cache, (uint64_t)p << 32 | 1,
                              memory_order_release);
    }
    *pid = p;
    *start = atomic_load_explicit(&o->me_start, memory_order_relaxed);
}

void rl_open_holder_now(struct rl_open *o, uint32_t *pid, uint64_t *start)
{
    me(o, pid, start);
}

/* Take back the connections of holders that are gone: true when some
 * came back. */
static bool reclaim(rl_atomic_u64 *area)
{
    bool any = false;
    for (unsigned i = 0; i < RL_OPEN_HOLDERS; i++) {
        rl_atomic_u64 *r = &area[W_REC + 2 * i];
        uint64_t w = rl_load_acquire_u64(&r[0]);
        uint64_t start = rl_load_relaxed_u64(&r[1]);
        if (w == 0 || !rl_pid_gone((uint32_t)(w >> 32), start))
            continue;
        if (!atomic_compare_exchange_strong_explicit(
                &r[0], &w, 0, memory_order_acq_rel, memory_order_relaxed))
            continue;
        uint64_t n = w & 0xffffffffu, v = rl_load_relaxed_u64(&area[W_OPEN]);
        while (!atomic_compare_exchange_weak_explicit(
            &area[W_OPEN], &v, v > n ? v - n : 0, memory_order_acq_rel,
            memory_order_relaxed))
            ;
        any |= n > 0;
    }
    return any;
}

/* Our record in area (made when missing): NULL when every record is
 * another live process's. */
static rl_atomic_u64 *record(struct rl_open *o, rl_atomic_u64 *area)
{
    uint32_t pid;
    uint64_t start;
    me(o, &pid, &start);
    for (unsigned i = 0; i < RL_OPEN_HOLDERS; i++) {
        rl_atomic_u64 *r = &area[W_REC + 2 * i];
        uint64_t w = rl_load_acquire_u64(&r[0]);
        if (w >> 32 == pid && rl_load_relaxed_u64(&r[1]) == start)
            return r;
    }
    for (unsigned i = 0; i < RL_OPEN_HOLDERS; i++) {
        rl_atomic_u64 *r = &area[W_REC + 2 * i];
        uint64_t zero = 0;
        /* Start first: a record is read as ours only with both. */
        if (rl_load_relaxed_u64(&r[0]) != 0)
            continue;
        rl_store_relaxed_u64(&r[1], start);
        if (atomic_compare_exchange_strong_explicit(
                &r[0], &zero, (uint64_t)pid << 32, memory_order_acq_rel,
                memory_order_relaxed))
            return r;
    }
    return NULL;
}

int rl_open_acquire(struct rl_open *o, rl_atomic_u64 *area, uint32_t max,
                    uint32_t *seq)
{
    rl_atomic_u64 *rec = record(o, area);
    for (int pass = 0; pass < 2; pass++) {
        *seq = (uint32_t)rl_load_acquire_u64(&area[W_SEQ]);
        uint64_t v = rl_load_relaxed_u64(&area[W_OPEN]);
        while (rec != NULL && v < max) {
            if (atomic_compare_exchange_weak_explicit(&area[W_OPEN], &v, v + 1,
                                                      memory_order_acq_rel,
                                                      memory_order_relaxed)) {
                rl_add_relaxed_u64(&rec[0], 1);
                return 0;
            }
        }
        if (pass == 1)
            break;
        reclaim(area); /* full: perhaps of the dead */
        if (rec == NULL)
            rec = record(o, area); /* a record the dead left */
    }
    return -EAGAIN;
}

/* One connection fewer open in `area`, and its waiters woken. */
static void area_release(rl_atomic_u64 *area);

void rl_open_release(struct rl_open *o, rl_atomic_u64 *area)
{
    rl_atomic_u64 *rec = record(o, area);
    if (rec != NULL) {
        uint64_t w = rl_load_relaxed_u64(&rec[0]);
        while ((w & 0xffffffffu) != 0 &&
               !atomic_compare_exchange_weak_explicit(&rec[0], &w, w - 1,
                                                      memory_order_acq_rel,
                                                      memory_order_relaxed))
            ;
    }
    area_release(area);
}

static void area_release(rl_atomic_u64 *area)
{
    uint64_t v = rl_load_relaxed_u64(&area[W_OPEN]);
    while (v > 0 && !atomic_compare_exchange_weak_explicit(
                        &area[W_OPEN], &v, v - 1, memory_order_acq_rel,
                        memory_order_relaxed))
        ;
    rl_add_relaxed_u64(&area[W_SEQ], 1);
    if (rl_load_acquire_u64(&area[W_WAITERS]) != 0) {
        int saved = errno;
        rl_sys.futex((uint32_t *)&area[W_SEQ], FUTEX_WAKE, 1u << 30, NULL);
        errno = saved;
    }
}

void rl_open_release_as(rl_atomic_u64 *area, const struct rl_open_holder *h)
{
    for (unsigned i = 0; i < RL_OPEN_HOLDERS; i++) {
        rl_atomic_u64 *r = &area[W_REC + 2 * i];
        uint64_t w = rl_load_acquire_u64(&r[0]);
        if (w >> 32 != h->pid || rl_load_relaxed_u64(&r[1]) != h->start)
            continue;
        /* Only what the record still counts: the CAS fails when a
         * decision took the record back meanwhile (it took the count off
         * the area itself). */
        while ((w & 0xffffffffu) != 0 && w >> 32 == h->pid &&
               !atomic_compare_exchange_weak_explicit(&r[0], &w, w - 1,
                                                      memory_order_acq_rel,
                                                      memory_order_relaxed))
            ;
        if ((w & 0xffffffffu) == 0 || w >> 32 != h->pid)
            return;
        area_release(area);
        return;
    }
}

bool rl_open_freed(rl_atomic_u64 *area, uint32_t seq)
{
    return (uint32_t)rl_load_acquire_u64(&area[W_SEQ]) != seq || reclaim(area);
}

void rl_open_wait(rl_atomic_u64 *area, uint32_t seq, uint64_t deadline_ns)
{
    uint64_t now = rl_clock_now_ns();
    if (now >= deadline_ns)
        return;
    uint64_t left = deadline_ns - now;
    if (left > 100000000u)
        left = 100000000u;
    struct timespec ts = {(time_t)(left / 1000000000u),
                          (long)(left % 1000000000u)};
    rl_add_relaxed_u64(&area[W_WAITERS], 1);
    int saved = errno;
    /* The low half of the sequence word (little-endian): a release in
     * between changes it and the wait returns at once. */
    rl_sys.futex((uint32_t *)&area[W_SEQ], FUTEX_WAIT, seq, &ts);
    errno = saved;
    rl_add_relaxed_u64(&area[W_WAITERS], (uint64_t)-1);
}

uint32_t rl_open_seq(rl_atomic_u64 *area)
{
    return (uint32_t)rl_load_acquire_u64(&area[W_SEQ]);
}

uint32_t rl_open_held(struct rl_open *o, rl_atomic_u64 *area)
{
    rl_atomic_u64 *rec = record(o, area);
    return rec == NULL ? 0 : (uint32_t)(rl_load_relaxed_u64(&rec[0]));
}

/* ---- this process's connections --------------------------------------*/

#define NCONN RL_OPEN_CONNS
#define MAXFD (1u << 20)

#define FREEING 0xffffffffu
#define REFS(s) ((uint32_t)(s))
#define GEN16(s) ((uint32_t)((s) >> 32) & 0xffffu)
/* A map entry: the record's gen (low 16 bits) << 16 | its index + 1. */
#define ENTRY(gen16, i) ((gen16) << 16 | ((i) + 1u))
#define ENTRY_ID(e) ((e) & 0xffffu)
#define ENTRY_GEN(e) ((e) >> 16)
_Static_assert(NCONN < 0xffffu, "a record index fits in an entry");

static _Atomic uint32_t *map(struct rl_open *o)
{
    _Atomic uint32_t *m = atomic_load_explicit(&o->fdmap, memory_order_acquire);
    if (m != NULL)
        return m;
    void *p = mmap(NULL, MAXFD * sizeof(uint32_t), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    _Atomic uint32_t *expect = NULL;
    if (atomic_compare_exchange_strong_explicit(
            &o->fdmap, &expect, p, memory_order_acq_rel, memory_order_acquire))
        return p;
    munmap(p, MAXFD * sizeof(uint32_t));
    return expect;
}

static void give_back(struct rl_open *o, struct rl_open_conn *c)
{
    for (unsigned i = 0; i < c->n; i++)
        rl_open_release(o, c->areas[i]);
}

static void raise_top(struct rl_open *o, unsigned fd)
{
    unsigned top = atomic_load_explicit(&o->fd_top, memory_order_relaxed);
    while (fd + 1 > top && !atomic_compare_exchange_weak_explicit(
                               &o->fd_top, &top, fd + 1, memory_order_relaxed,
                               memory_order_relaxed))
        ;
}

/* One fd fewer refers to the connection of map entry `e` (whose reference
 * the caller took out of the map). The last one gives the areas back
 * before the record can be claimed again, under a new gen. */
static void unref(struct rl_open *o, uint32_t e)
{
    struct rl_open_conn *c = &o->conns[ENTRY_ID(e) - 1];
    uint64_t s = atomic_load_explicit(&c->state, memory_order_acquire);
    for (;;) {
        uint32_t r = REFS(s);
        if (r == 0 || r == FREEING)
            return;
        uint64_t to = r == 1 ? (s & ~0xffffffffull) | FREEING : s - 1;
        if (atomic_compare_exchange_weak_explicit(
                &c->state, &s, to, memory_order_acq_rel, memory_order_acquire))
            break;
    }
    if (REFS(s) != 1)
        return;
    give_back(o, c);
    c->n = 0;
    /* Pairs with the acquire loads of bind and dup: a record seen free is
     * one whose areas went back. */
    atomic_store_explicit(&c->state, ((s >> 32) + 1) << 32,
                          memory_order_release);
}

void rl_open_bind(struct rl_open *o, int fd, rl_atomic_u64 *const *areas,
                  unsigned n)
{
    _Atomic uint32_t *m = map(o);
    if (n == 0)
        return;
    if (m == NULL || fd < 0 || (unsigned)fd >= MAXFD)
        goto untracked;
    for (unsigned i = 0; i < NCONN; i++) {
        struct rl_open_conn *c = &o->conns[i];
        uint64_t s = atomic_load_explicit(&c->state, memory_order_acquire);
        if (REFS(s) != 0 ||
            !atomic_compare_exchange_strong_explicit(&c->state, &s, s | 1,
                                                     memory_order_acq_rel,
                                                     memory_order_relaxed))
            continue;
        c->n = n < RL_OPEN_MAX_AREAS ? n : RL_OPEN_MAX_AREAS;
        for (unsigned j = 0; j < c->n; j++)
            c->areas[j] = areas[j];
        uint32_t old = atomic_exchange_explicit(&m[fd], ENTRY(GEN16(s), i),
                                                memory_order_acq_rel);
        if (old != 0)
            unref(o, old); /* a number reused after a close we never saw */
        raise_top(o, (unsigned)fd);
        return;
    }
untracked:
    for (unsigned j = 0; j < n; j++)
        rl_open_release(o, areas[j]);
}

void rl_open_forget(struct rl_open *o, int fd)
{
    _Atomic uint32_t *m = atomic_load_explicit(&o->fdmap, memory_order_acquire);
    if (m == NULL || fd < 0 || (unsigned)fd >= MAXFD)
        return;
    if (atomic_load_explicit(&m[fd], memory_order_relaxed) == 0)
        return;
    uint32_t e = atomic_exchange_explicit(&m[fd], 0, memory_order_acq_rel);
    if (e != 0)
        unref(o, e);
}

void rl_open_forget_range(struct rl_open *o, unsigned first, unsigned last)
{
    unsigned top = atomic_load_explicit(&o->fd_top, memory_order_relaxed);
    if (last >= top)
        last = top == 0 ? 0 : top - 1;
    for (unsigned fd = first; top != 0 && fd <= last; fd++)
        rl_open_forget(o, (int)fd);
}

/* The dup hook calls this after the real dup; the close hook forgets
 * `from` before the real close, so the two may meet here in any order. A
 * reference is added only to a connection that still has one (the same
 * gen, refs neither 0 nor FREEING): once its last close has begun giving
 * its areas back, the dup sees it gone and `to` is not tracked (a program
 * that dups an fd while another thread closes it gets an untracked fd,
 * never a count taken from another connection). Issue 19: an unchecked
 * increment wrapped FREEING to 0, the record was claimed by the next
 * connection, and the dup's close gave that one's place back. */
void rl_open_dup(struct rl_open *o, int from, int to)
{
    _Atomic uint32_t *m = atomic_load_explicit(&o->fdmap, memory_order_acquire);
    if (m == NULL || to < 0 || (unsigned)to >= MAXFD)
        return;
    rl_open_forget(o, to);
    if (from < 0 || (unsigned)from >= MAXFD)
        return;
    uint32_t e = atomic_load_explicit(&m[from], memory_order_acquire);
    if (e == 0)
        return;
    struct rl_open_conn *c = &o->conns[ENTRY_ID(e) - 1];
    uint64_t s = atomic_load_explicit(&c->state, memory_order_acquire);
    do {
        if (GEN16(s) != ENTRY_GEN(e) || REFS(s) == 0 || REFS(s) == FREEING)
            return; /* gone, or going */
    } while (!atomic_compare_exchange_weak_explicit(
        &c->state, &s, s + 1, memory_order_acq_rel, memory_order_acquire));
    uint32_t old = atomic_exchange_explicit(&m[to], e, memory_order_acq_rel);
    if (old != 0)
        unref(o, old); /* another thread bound `to` meanwhile */
    raise_top(o, (unsigned)to);
}
