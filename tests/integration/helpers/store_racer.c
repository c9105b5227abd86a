/* store_racer — a second program for the store's multi-process tests.
 *
 *   store_racer DIR MEMFD NTHREADS REPS LIMIT ALGO
 *
 * Opens the uid's segment in DIR as a separate program would, maps the
 * test's shared page from the inherited descriptor MEMFD (struct
 * race_page, defined identically in tests/unit/test_store.c), and runs
 * NTHREADS threads that, REPS times, wait at the page's process-shared
 * barrier and then take one unit of the rep's budget (tag page->tag0 +
 * rep) from a limit of LIMIT per hour with ALGO (counter: a bare CAS
 * counter; token_bucket; sliding_window). Admissions are added to
 * page->admitted[rep]. All processes wait at page->start before they
 * open the store. Exit status 0, or 1 on any error. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "limit/limit.h"
#include "state/store.h"
#include "util/clock.h"

#define RACE_MAX_REPS 128

struct race_page {
    pthread_barrier_t start;   /* every process, before it opens */
    pthread_barrier_t barrier; /* every thread, before each rep */
    uint64_t tag0;
    uint64_t config_hash;
    _Atomic uint64_t admitted[RACE_MAX_REPS];
    _Atomic uint64_t errors;
    _Atomic uint64_t attempts;
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

static unsigned long parse(const char *s)
{
    char *end;
    unsigned long v;

    errno = 0;
    v = strtoul(s, &end, 10);
    if (errno || end == s || *end) {
        fprintf(stderr, "store_racer: bad number '%s'\n", s);
        exit(1);
    }
    return v;
}

/* One unit from a counter limited to `limit`: the smallest real limiter. */
static bool take(rl_atomic_u64 *w, uint64_t limit)
{
    uint64_t v = rl_load_relaxed_u64(w);

    while (v < limit)
        if (rl_cas_acq_rel_u64(w, &v, v + 1))
            return true;
    return false;
}

static void *run(void *arg)
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
        if (r->algo)
            ok = r->algo->take(slot.words, &r->lim, rl_clock_now_ns(), 1, 1, 0)
                     .granted == 1;
        else
            ok = take(&slot.words[0], r->limit);
        if (ok)
            atomic_fetch_add(&r->page->admitted[rep], 1);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    struct rl_store_opts o = {0};
    struct racer r;
    pthread_t th[64];
    unsigned long nthreads;
    char why[256];
    int fd;

    if (argc != 7) {
        fprintf(stderr, "usage: store_racer DIR MEMFD NTHREADS REPS LIMIT "
                        "ALGO\n");
        return 1;
    }
    fd = (int)parse(argv[2]);
    nthreads = parse(argv[3]);
    r.reps = (unsigned)parse(argv[4]);
    r.limit = parse(argv[5]);
    r.algo = NULL;
    r.nwords = 1;
    if (strcmp(argv[6], "counter") != 0) {
        uint32_t id = strcmp(argv[6], "token_bucket") == 0
                          ? RL_ALGO_TOKEN_BUCKET
                          : RL_ALGO_SLIDING_WINDOW;
        r.algo = rl_algorithm_get(id);
        if (rl_limit_prepare(&r.lim, id, r.limit, 3600000000000ull, 0) != 0)
            return 1;
        r.nwords = r.algo->state_words(&r.lim);
    }
    if (nthreads == 0 || nthreads > 64 || r.reps > RACE_MAX_REPS)
        return 1;
    r.page =
        mmap(NULL, sizeof *r.page, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (r.page == MAP_FAILED)
        return 1;
    pthread_barrier_wait(&r.page->start);
    o.shared = true;
    o.dir = argv[1];
    o.uid = (uint32_t)getuid();
    o.config_hash = r.page->config_hash;
    o.nslots = 256;
    o.arena_words = 4096;
    o.noverflow = 4;
    o.overflow_words = 64;
    if (rl_store_open(&r.store, &o, why, sizeof why) < 0 ||
        !rl_store_is_shared(r.store)) {
        fprintf(stderr, "store_racer: %s\n", why);
        atomic_fetch_add(&r.page->errors, 1);
    }
    for (unsigned long i = 0; i < nthreads; i++)
        if (pthread_create(&th[i], NULL, run, &r) != 0)
            return 1;
    for (unsigned long i = 0; i < nthreads; i++)
        pthread_join(th[i], NULL);
    rl_store_close(r.store);
    return 0;
}
