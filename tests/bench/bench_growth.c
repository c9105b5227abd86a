/* bench_growth — how a decision's cost grows with the work around it, one
 * run each, through the store and the limiter (what every budget decision
 * does once its slot is claimed; the gate above them is measured whole by
 * instructions.py and the wall-clock benchmarks):
 *
 *   - live users in one shared segment (1, 64, 1,024, 4,096 slots claimed,
 *     one per user, as the gate claims them): ns per decision of one user
 *     whose slot is cached while the others are live; of decisions that
 *     go to each live user in turn (slots cached: what one core sees when
 *     that many users' processes take turns on it); and of a decision that
 *     first finds its user's slot (rl_store_slot: a process's first call);
 *   - threads deciding on one budget (1, 2, 4, 8 threads on one slot's
 *     word, each its share of the decisions): wall ns per decision as each
 *     thread sees it, and decisions per second of them all.
 *
 * Rates never bind. Each figure is the median of ROUNDS rounds; users are
 * claimed as the counts grow, so each count's rounds run while exactly
 * that many are live. What the segment's memory costs per
 * user is users_growth.py's (real processes, real budgets). Prints and
 * never fails unless it cannot run. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "limit/limit.h"
#include "state/store.h"
#include "util/clock.h"

#define ROUNDS 9
#define PER_ROUND 200000
#define MAX_USERS 4096
#define MAX_THREADS 8

static const unsigned user_counts[] = {1, 64, 1024, 4096};
#define NCOUNTS (sizeof user_counts / sizeof user_counts[0])
static const unsigned thread_counts[] = {1, 2, 4, 8};
#define NTHREADS (sizeof thread_counts / sizeof thread_counts[0])

static struct rl_limit lim;
static struct rl_store *store;
static struct rl_slot slots[MAX_USERS];
static char labels[MAX_USERS][RL_STORE_LABEL_MAX];
static volatile uint64_t sink;

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp);
    return v[n / 2];
}

static uint64_t tag_of(unsigned user)
{
    return 0x9e3779b97f4a7c15ull * (user + 1);
}

static int claim(unsigned user, struct rl_slot *out)
{
    bool ovf = false;
    int r = rl_store_slot(store, tag_of(user), labels[user], 1, 1, out, &ovf);
    return r < 0 || ovf ? -1 : 0;
}

static uint64_t decide(const struct rl_slot *sl)
{
    if (rl_store_is_stale(store))
        abort();
    return rl_token_bucket.take(sl->words, &lim, rl_clock_now_ns(), 1, 1, 0)
        .granted;
}

/* ns per decision: one user's cached slot, while `live` are claimed. */
static double round_one(void)
{
    uint64_t t0 = rl_clock_now_ns(), got = 0;
    for (int i = 0; i < PER_ROUND; i++)
        got += decide(&slots[0]);
    sink += got;
    return (double)(rl_clock_now_ns() - t0) / PER_ROUND;
}

/* ns per decision, each to the next of `live` users in a scattered order
 * (a stride prime to every count: no neighbour in memory helps). */
static double round_spread(unsigned live)
{
    uint64_t t0 = rl_clock_now_ns(), got = 0;
    unsigned u = 0;
    for (int i = 0; i < PER_ROUND; i++) {
        got += decide(&slots[u]);
        u = (u + 2731) % live;
    }
    sink += got;
    return (double)(rl_clock_now_ns() - t0) / PER_ROUND;
}

/* ns per decision that first finds its user's slot. */
static double round_lookup(unsigned live)
{
    uint64_t t0 = rl_clock_now_ns(), got = 0;
    unsigned u = 0;
    struct rl_slot sl;
    for (int i = 0; i < PER_ROUND; i++) {
        if (claim(u, &sl) < 0)
            abort();
        got += decide(&sl);
        u = (u + 2731) % live;
    }
    sink += got;
    return (double)(rl_clock_now_ns() - t0) / PER_ROUND;
}

static void users(void)
{
    double one[NCOUNTS][ROUNDS], spread[NCOUNTS][ROUNDS],
        lookup[NCOUNTS][ROUNDS];
    unsigned claimed = 0;
    /* Users are claimed as the counts grow: the figures of a count are
     * taken while exactly that many are live. */
    for (size_t c = 0; c < NCOUNTS; c++) {
        for (; claimed < user_counts[c]; claimed++)
            if (claim(claimed, &slots[claimed]) < 0) {
                fprintf(stderr, "bench_growth: cannot claim user %u\n",
                        claimed);
                exit(1);
            }
        for (int r = 0; r < ROUNDS; r++) {
            one[c][r] = round_one();
            spread[c][r] = round_spread(user_counts[c]);
            lookup[c][r] = round_lookup(user_counts[c]);
        }
    }
    printf("decision ns vs live users in one shared segment (median of %d "
           "rounds of %d):\n",
           ROUNDS, PER_ROUND);
    printf("  %8s %14s %18s %20s\n", "users", "one user", "each in turn",
           "finding its slot");
    for (size_t c = 0; c < NCOUNTS; c++)
        printf("  %8u %14.1f %18.1f %20.1f\n", user_counts[c],
               median(one[c], ROUNDS), median(spread[c], ROUNDS),
               median(lookup[c], ROUNDS));
}

struct worker {
    pthread_t tid;
    long count;
    double ns;
};

static atomic_int go;

static void *work(void *arg)
{
    struct worker *w = arg;
    uint64_t got = 0;
    while (!atomic_load_explicit(&go, memory_order_acquire))
        ;
    uint64_t t0 = rl_clock_now_ns();
    for (long i = 0; i < w->count; i++)
        got += decide(&slots[0]);
    w->ns = (double)(rl_clock_now_ns() - t0) / (double)w->count;
    sink += got;
    return NULL;
}

/* The threads' mean ns per decision, and the decisions per second of all
 * of them (from the first start to the last end). */
static void round_threads(unsigned n, double *per, double *rate)
{
    struct worker w[MAX_THREADS];
    atomic_store(&go, 0);
    for (unsigned i = 0; i < n; i++) {
        w[i].count = PER_ROUND / (long)n;
        if (pthread_create(&w[i].tid, NULL, work, &w[i]) != 0)
            exit(1);
    }
    uint64_t t0 = rl_clock_now_ns();
    atomic_store_explicit(&go, 1, memory_order_release);
    double sum = 0;
    for (unsigned i = 0; i < n; i++) {
        pthread_join(w[i].tid, NULL);
        sum += w[i].ns;
    }
    *per = sum / n;
    *rate = (double)(w[0].count * n) * 1e9 / (double)(rl_clock_now_ns() - t0);
}

static void threads(void)
{
    double per[NTHREADS][ROUNDS], rate[NTHREADS][ROUNDS];
    for (int r = 0; r < ROUNDS; r++)
        for (size_t t = 0; t < NTHREADS; t++)
            round_threads(thread_counts[t], &per[t][r], &rate[t][r]);
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    printf("decision ns vs threads on one budget (one slot's word; median "
           "of %d rounds of %d decisions shared out; this machine has %ld "
           "CPUs: beyond %ld threads they take turns):\n",
           ROUNDS, PER_ROUND, cpus, cpus);
    printf("  %8s %22s %22s\n", "threads", "ns/decision (each)",
           "decisions/s (all)");
    for (size_t t = 0; t < NTHREADS; t++)
        printf("  %8u %22.1f %22.0f\n", thread_counts[t],
               median(per[t], ROUNDS), median(rate[t], ROUNDS));
}

int main(void)
{
    char dir[] = "/dev/shm/rlshim-bench-growth.XXXXXX";
    if (mkdtemp(dir) == NULL) {
        perror("bench_growth: mkdtemp");
        return 1;
    }
    struct rl_store_opts o = {
        .shared = true,
        .dir = dir,
        .uid = (uint32_t)getuid(),
        .config_hash = 42,
        .nslots = 2 * MAX_USERS,
    };
    char why[256] = "", path[512];
    if (rl_limit_prepare(&lim, RL_ALGO_TOKEN_BUCKET, 1000000000ull,
                         1000000000ull, 0) != 0 ||
        rl_store_open(&store, &o, why, sizeof why) < 0 ||
        !rl_store_is_shared(store)) {
        fprintf(stderr, "bench_growth: cannot open a shared store: %s\n", why);
        return 1;
    }
    for (unsigned u = 0; u < MAX_USERS; u++)
        snprintf(labels[u], sizeof labels[u], "u%u|default", u);
    users();
    threads();
    rl_store_close(store);
    rl_store_path(path, sizeof path, dir, (uint32_t)getuid(), 42);
    unlink(path);
    rmdir(dir);
    return 0;
}
