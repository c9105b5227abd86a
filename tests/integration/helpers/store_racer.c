/* store_racer — a second program for the store's multi-process tests.
 *
 *   store_racer DIR MEMFD NTHREADS REPS LIMIT ALGO
 *
 * Opens the uid's segment in DIR as a separate program would, maps the
 * test's shared page from the inherited descriptor MEMFD (struct
 * race_page of tests/race.h), and runs
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

#include "../../race.h"

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
        if (pthread_create(&th[i], NULL, race_thread, &r) != 0)
            return 1;
    for (unsigned long i = 0; i < nthreads; i++)
        pthread_join(th[i], NULL);
    rl_store_close(r.store);
    return 0;
}
