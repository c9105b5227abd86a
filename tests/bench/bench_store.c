/* bench_store — ns per token-bucket decision through the shared segment
 * versus process-local memory, measured in one run.
 *
 * A decision here is what the gate does per call once its slot is claimed:
 * one relaxed load of the segment's stale word, one take() on the slot's
 * state word. Both stores are made through the same code (rl_store_open,
 * shared or not); the only difference is the memory behind them (a tmpfs
 * file mapping versus anonymous memory). Rounds alternate between the two
 * so that frequency scaling and neighbours hit both alike; the medians
 * are compared. A second pair of figures includes the slot look-up
 * (rl_store_slot) in every decision, the cost a gate without a cached
 * slot would pay. A third figure is the bare limiter on a heap word, no
 * store at all, for scale. The target (a ratio of the cached-slot
 * decision <= 1.3) is reported, not enforced: the machine is shared. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "limit/limit.h"
#include "state/store.h"
#include "util/clock.h"

#define ROUNDS 21
#define PER_ROUND 200000

struct side {
    struct rl_store *store;
    struct rl_slot slot;
    double ns[ROUNDS];
    double ns_lookup[ROUNDS];
};

static struct rl_limit lim;
static volatile uint64_t sink;

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return x < y ? -1 : x > y;
}

static double median(double *v)
{
    qsort(v, ROUNDS, sizeof *v, cmp);
    return v[ROUNDS / 2];
}

static double round_plain(struct side *s)
{
    uint64_t t0 = rl_clock_now_ns(), got = 0;

    for (int i = 0; i < PER_ROUND; i++) {
        if (rl_store_is_stale(s->store))
            abort();
        got += rl_token_bucket
                   .take(s->slot.words, &lim, rl_clock_now_ns(), 1, 1, 0)
                   .granted;
    }
    sink += got;
    return (double)(rl_clock_now_ns() - t0) / PER_ROUND;
}

static double round_lookup(struct side *s)
{
    uint64_t t0 = rl_clock_now_ns(), got = 0;
    struct rl_slot sl;
    bool ovf;

    for (int i = 0; i < PER_ROUND; i++) {
        if (rl_store_is_stale(s->store) ||
            rl_store_slot(s->store, 12345, "bench|user", 1, 1, &sl, &ovf) < 0)
            abort();
        got += rl_token_bucket.take(sl.words, &lim, rl_clock_now_ns(), 1, 1, 0)
                   .granted;
    }
    sink += got;
    return (double)(rl_clock_now_ns() - t0) / PER_ROUND;
}

static double round_bare(rl_word *w)
{
    uint64_t t0 = rl_clock_now_ns(), got = 0;

    for (int i = 0; i < PER_ROUND; i++)
        got +=
            rl_token_bucket.take(w, &lim, rl_clock_now_ns(), 1, 1, 0).granted;
    sink += got;
    return (double)(rl_clock_now_ns() - t0) / PER_ROUND;
}

static int open_side(struct side *s, bool shared, const char *dir)
{
    struct rl_store_opts o = {
        .shared = shared,
        .dir = dir,
        .uid = (uint32_t)getuid(),
        .config_hash = 42,
        .nslots = 4096,
    };
    char why[256];
    bool ovf;

    if (rl_store_open(&s->store, &o, why, sizeof why) < 0 ||
        rl_store_is_shared(s->store) != shared) {
        fprintf(stderr, "bench_store: cannot open store: %s\n", why);
        return -1;
    }
    return rl_store_slot(s->store, 12345, "bench|user", 1, 1, &s->slot, &ovf);
}

int main(void)
{
    char dir[] = "/dev/shm/rlshim-bench.XXXXXX";
    char path[512];
    struct side shm = {0}, local = {0};
    double a, b, al, bl, ratio, ratio_l, bare[ROUNDS];
    rl_word *heap = calloc(1, sizeof *heap);

    if (!mkdtemp(dir))
        return 1;
    /* Never runs dry: a billion per second. */
    if (rl_limit_prepare(&lim, RL_ALGO_TOKEN_BUCKET, 1000000000ull,
                         1000000000ull, 0) != 0 ||
        open_side(&shm, true, dir) < 0 || open_side(&local, false, dir) < 0)
        return 1;
    if (!heap)
        return 1;
    for (int r = 0; r < ROUNDS; r++) {
        bare[r] = round_bare(heap);
        /* Alternate which goes first, too. */
        if (r % 2) {
            shm.ns[r] = round_plain(&shm);
            local.ns[r] = round_plain(&local);
            shm.ns_lookup[r] = round_lookup(&shm);
            local.ns_lookup[r] = round_lookup(&local);
        } else {
            local.ns[r] = round_plain(&local);
            shm.ns[r] = round_plain(&shm);
            local.ns_lookup[r] = round_lookup(&local);
            shm.ns_lookup[r] = round_lookup(&shm);
        }
    }
    a = median(shm.ns);
    b = median(local.ns);
    al = median(shm.ns_lookup);
    bl = median(local.ns_lookup);
    ratio = a / b;
    ratio_l = al / bl;
    printf("token bucket decision, cached slot: shared %.1f ns, "
           "process-local %.1f ns, ratio %.2f\n",
           a, b, ratio);
    printf("bar: token bucket decision, shared / process-local: %.2f "
           "(target <= 1.30): %s\n",
           ratio, ratio <= 1.3 ? "met" : "NOT MET");
    printf("token bucket decision with slot look-up: shared %.1f ns, "
           "process-local %.1f ns, ratio %.2f\n",
           al, bl, ratio_l);
    printf("bare token bucket on a heap word (no store): %.1f ns\n",
           median(bare));
    rl_store_close(shm.store);
    rl_store_close(local.store);
    rl_store_path(path, sizeof path, dir, (uint32_t)getuid(), 42);
    unlink(path);
    rmdir(dir);
    free(heap);
    return 0;
}
