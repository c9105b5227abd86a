/* cpu_stats.h — what the C benchmarks share: this thread's CPU time and
 * the median of a round's figures. Header-only. */
#ifndef RL_BENCH_CPU_STATS_H
#define RL_BENCH_CPU_STATS_H

#include <stdlib.h>
#include <time.h>

/* CPU time of the calling thread, in ns: time spent descheduled on a
 * shared machine is not counted. */
static inline double cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static inline int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of v[0..n) (sorts v). */
static inline double median_of(double *v, unsigned n)
{
    qsort(v, n, sizeof *v, cmp_double);
    return v[n / 2];
}

#endif
