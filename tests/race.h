/* race.h — what the store's multi-process race shares between the unit
 * tests (tests/unit/test_store.c) and the second program they exec
 * (tests/integration/helpers/store_racer.c): the page both map, and the
 * thread that races on one rep's budget. */
#ifndef RL_TESTS_RACE_H
#define RL_TESTS_RACE_H

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "limit/limit.h"
#include "state/store.h"
#include "util/clock.h"

#define RACE_MAX_REPS 128
#define RACE_MAX_GO 256 /* kept grants recorded per rep (give-back race) */
#define RACE_HOUR 3600000000000ull

struct race_page {
    pthread_barrier_t start;   /* every process, before it opens */
    pthread_barrier_t barrier; /* every thread, before each rep */
    uint64_t tag0;
    uint64_t config_hash;
    _Atomic uint64_t admitted[RACE_MAX_REPS];
    _Atomic uint64_t errors;
    _Atomic uint64_t attempts;
    /* Give-back race (set before the racers start): each thread reserves
     * its turn (waiting up to 2 h) and gives every second grant back at
     * once; the turns of the grants kept are recorded. */
    uint32_t giveback;
    _Atomic uint64_t ngo[RACE_MAX_REPS];
    uint64_t go[RACE_MAX_REPS][RACE_MAX_GO];
};

struct racer {
    struct rl_store *store;
    struct race_page *page;
    unsigned reps;
    uint64_t limit;
    const struct rl_algorithm *algo; /* NULL: the CAS counter */
    struct rl_limit lim;
    uint32_t nwords;
};

/* One unit from a counter limited to `limit`: the smallest real limiter. */
static inline bool take_one(rl_atomic_u64 *w, uint64_t limit)
{
    uint64_t v = rl_load_relaxed_u64(w);

    while (v < limit)
        if (rl_cas_acq_rel_u64(w, &v, v + 1))
            return true;
    return false;
}

/* A racing thread: at each rep, wait for every thread of every process,
 * then take one unit of that rep's budget. */
static inline void *race_thread(void *arg)
{
    struct racer *r = arg;

    for (unsigned rep = 0; rep < r->reps; rep++) {
        struct rl_slot slot;
        bool ovf;
        bool ok;

        pthread_barrier_wait(&r->page->barrier);
        if (rl_store_slot(r->store, r->page->tag0 + rep, "race|racer",
                          r->nwords, 1, &slot, &ovf) < 0 ||
            ovf) {
            atomic_fetch_add(&r->page->errors, 1);
            continue;
        }
        atomic_fetch_add(&r->page->attempts, 1);
        if (r->algo && r->page->giveback) {
            uint64_t now = rl_clock_now_ns();
            struct rl_verdict v =
                r->algo->take(slot.words, &r->lim, now, 1, 1, 2 * RACE_HOUR);
            if (v.granted == 0)
                continue;
            if (rep % 2 == (unsigned)(now & 1)) {
                /* Let others take in between, as a second budget
                 * asked before the give-back would. */
                sched_yield();
                r->algo->refund(slot.words, &r->lim, now, &v, 1);
                continue;
            }
            uint64_t i = atomic_fetch_add(&r->page->ngo[rep], 1);
            if (i < RACE_MAX_GO)
                r->page->go[rep][i] = now + v.wait_ns;
            atomic_fetch_add(&r->page->admitted[rep], 1);
            continue;
        }
        if (r->algo)
            ok = r->algo->take(slot.words, &r->lim, rl_clock_now_ns(), 1, 1, 0)
                     .granted == 1;
        else
            ok = take_one(&slot.words[0], r->limit);
        if (ok)
            atomic_fetch_add(&r->page->admitted[rep], 1);
    }
    return NULL;
}

#endif
