/* bench_limit.c — ns per limiter decision, beside the cost of one clock
 * read measured in the same run.
 *
 * A decision is what the gate does per call: read CLOCK_MONOTONIC once and
 * take one unit, on the allow path (the limits are set so that every call
 * is allowed; the table shows the share that was). Cases, for both
 * algorithms: 1 thread on one user; 2 threads on one user (one state, the
 * contended case); 2 threads on two users (states on separate cache lines).
 * ns per decision is the CPU time one thread spends per call (the threads
 * are pinned to distinct CPUs; time spent descheduled on a shared machine
 * is not counted, neither for the clock read). Rounds alternate
 * between all cases, and each figure is the median over rounds, so that a
 * burst of load from elsewhere on the machine moves one round, not a case.
 *
 * Usage: bench_limit [ROUNDS [DECISIONS_PER_THREAD]]; exit status 0 unless
 * the benchmark itself could not run (targets are reported, not enforced:
 * the machine is shared). */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "limit/limit.h"
#include "util/clock.h"

#define LINE 128 /* two cache lines: the adjacent-line prefetcher pairs them */
#define MAX_ROUNDS 99

struct bench_case {
    const char *label;
    const struct rl_algorithm *alg;
    unsigned threads;
    unsigned users; /* 1: the threads share one state */
    double ns[MAX_ROUNDS];   /* CPU time per decision */
    double wall[MAX_ROUNDS]; /* wall time per decision, for reference */
    double allowed[MAX_ROUNDS];
};

struct worker {
    pthread_t th;
    const struct rl_algorithm *alg;
    const struct rl_limit *lim;
    rl_word *st;
    unsigned cpu;
    uint64_t iters, granted, elapsed, wall;
    pthread_barrier_t *go;
};

static unsigned ncpu;

static void pin(unsigned cpu)
{
    cpu_set_t set;

    if (ncpu < 2)
        return;
    CPU_ZERO(&set);
    CPU_SET(cpu % ncpu, &set);
    pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

/* CPU time of the calling thread: time spent descheduled (the machine is
 * shared) is not charged to the code measured. */
static uint64_t cpu_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void *run_worker(void *arg)
{
    struct worker *w = arg;
    uint64_t i, granted = 0, t0, t1, w0, w1;

    pin(w->cpu);
    pthread_barrier_wait(w->go);
    w0 = rl_clock_now_ns();
    t0 = cpu_ns();
    for (i = 0; i < w->iters; i++)
        granted += w->alg->take(w->st, w->lim, rl_clock_now_ns(), 1, 1, 0)
                       .granted;
    t1 = cpu_ns();
    w1 = rl_clock_now_ns();
    w->granted = granted;
    w->elapsed = t1 - t0;
    w->wall = w1 - w0;
    return NULL;
}

static double clock_cost(uint64_t iters)
{
    volatile uint64_t sink = 0;
    uint64_t i, t0, t1;

    pin(0);
    t0 = cpu_ns();
    for (i = 0; i < iters; i++)
        sink += rl_clock_now_ns();
    t1 = cpu_ns();
    (void)sink;
    return (double)(t1 - t0) / (double)iters;
}

static rl_word *new_state(const struct rl_algorithm *alg,
                          const struct rl_limit *lim)
{
    size_t bytes = alg->state_words(lim) * sizeof(rl_word);
    rl_word *st;

    bytes = (bytes + LINE - 1) / LINE * LINE;
    st = aligned_alloc(LINE, bytes);
    if (st)
        memset(st, 0, bytes);
    return st;
}

static int run_case(struct bench_case *c, const struct rl_limit *lim,
                    uint64_t iters, unsigned round)
{
    struct worker w[2];
    rl_word *st[2] = {NULL, NULL};
    pthread_barrier_t go;
    uint64_t elapsed = 0, wall = 0, granted = 0;
    unsigned i;
    int rc = -1;

    pthread_barrier_init(&go, NULL, c->threads);
    for (i = 0; i < c->users; i++) {
        st[i] = new_state(c->alg, lim);
        if (!st[i])
            goto out;
    }
    for (i = 0; i < c->threads; i++) {
        w[i] = (struct worker){.alg = c->alg, .lim = lim,
                               .st = st[i % c->users], .cpu = i,
                               .iters = iters, .go = &go};
        if (pthread_create(&w[i].th, NULL, run_worker, &w[i]) != 0) {
            c->threads = i; /* join those started */
            break;
        }
    }
    for (i = 0; i < c->threads; i++) {
        pthread_join(w[i].th, NULL);
        elapsed += w[i].elapsed;
        wall += w[i].wall;
        granted += w[i].granted;
    }
    if (i == 0)
        goto out;
    c->ns[round] = (double)elapsed / (double)(iters * c->threads);
    c->wall[round] = (double)wall / (double)(iters * c->threads);
    c->allowed[round] = (double)granted / (double)(iters * c->threads);
    rc = 0;
out:
    pthread_barrier_destroy(&go);
    free(st[0]);
    free(st[1]);
    return rc;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

static double median(double *v, unsigned n)
{
    double s[MAX_ROUNDS];

    memcpy(s, v, n * sizeof(*v));
    qsort(s, n, sizeof(*s), by_value);
    return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

/* A positive integer argument, or `def`. */
static unsigned long arg_or(int argc, char **argv, int i, unsigned long def,
                            unsigned long max)
{
    char *end;
    unsigned long v;

    if (argc <= i)
        return def;
    v = strtoul(argv[i], &end, 10);
    if (end == argv[i] || *end || v == 0 || v > max) {
        fprintf(stderr, "bench_limit: bad argument '%s'\n", argv[i]);
        exit(2);
    }
    return v;
}

int main(int argc, char **argv)
{
    struct bench_case cases[] = {
        {"token_bucket", &rl_token_bucket, 1, 1, {0}, {0}, {0}},
        {"token_bucket", &rl_token_bucket, 2, 1, {0}, {0}, {0}},
        {"token_bucket", &rl_token_bucket, 2, 2, {0}, {0}, {0}},
        {"sliding_window", &rl_sliding_window, 1, 1, {0}, {0}, {0}},
        {"sliding_window", &rl_sliding_window, 2, 1, {0}, {0}, {0}},
        {"sliding_window", &rl_sliding_window, 2, 2, {0}, {0}, {0}},
    };
    const unsigned ncases = sizeof(cases) / sizeof(cases[0]);
    unsigned rounds = (unsigned)arg_or(argc, argv, 1, 9, MAX_ROUNDS);
    uint64_t iters = arg_or(argc, argv, 2, 200000, 100000000);
    struct rl_limit tb, sw;
    double clk[MAX_ROUNDS], c, ns, tb1, tb2;
    cpu_set_t set;
    unsigned r, i;

    if (sched_getaffinity(0, sizeof(set), &set) == 0)
        ncpu = (unsigned)CPU_COUNT(&set);
    /* Limits no caller here can exhaust, so every decision is an allow:
     * 16 units/ns with a deep bucket; a window of 4096 per microsecond
     * (its oldest stamp is always long expired). */
    if (rl_limit_prepare(&tb, RL_ALGO_TOKEN_BUCKET, 16, 1, 1u << 30) != 0 ||
        rl_limit_prepare(&sw, RL_ALGO_SLIDING_WINDOW, 4096, 1000, 0) != 0) {
        fprintf(stderr, "bench_limit: cannot prepare the limits\n");
        return 1;
    }
    clock_cost(iters); /* warm up */
    for (r = 0; r < rounds; r++) {
        clk[r] = clock_cost(iters);
        for (i = 0; i < ncases; i++)
            if (run_case(&cases[i],
                         cases[i].alg == &rl_token_bucket ? &tb : &sw,
                         iters, r) != 0) {
                fprintf(stderr, "bench_limit: cannot run a case\n");
                return 1;
            }
    }
    c = median(clk, rounds);
    printf("limiter decisions (clock read + take of 1, allow path); "
           "median of %u rounds x %llu per thread, %u CPUs\n",
           rounds, (unsigned long long)iters, ncpu);
    printf("one clock_gettime(CLOCK_MONOTONIC): %.1f ns\n\n", c);
    printf("%-16s %7s %6s %12s %8s %10s %8s\n", "algorithm", "threads",
           "users", "ns/decision", "x clock", "(wall ns)", "allowed");
    for (i = 0; i < ncases; i++) {
        ns = median(cases[i].ns, rounds);
        printf("%-16s %7u %6u %12.1f %8.2f %10.1f %7.1f%%\n",
               cases[i].label, cases[i].threads, cases[i].users, ns, ns / c,
               median(cases[i].wall, rounds),
               100.0 * median(cases[i].allowed, rounds));
    }
    tb1 = median(cases[0].ns, rounds);
    tb2 = median(cases[1].ns, rounds);
    printf("\ntargets (token bucket): 1 thread <= 2x clock: %s (%.2fx); "
           "2 threads one user <= 120 ns: %s (%.1f ns)\n",
           tb1 <= 2 * c ? "met" : "MISSED", tb1 / c,
           tb2 <= 120 ? "met" : "MISSED", tb2);
    return 0;
}
