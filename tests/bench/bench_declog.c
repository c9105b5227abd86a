/* bench_declog.c — what the decision log costs per logged decision, beside
 * a limiter decision (clock read + token-bucket take) measured in the same
 * run: the log is paid only while it is on, and this says how much.
 *
 * Cases: format only (building the JSON line, no I/O); a whole line
 * written (rl_declog_write: one write(2) to the fd the log keeps, opened
 * O_APPEND at the first line) to a file in /tmp and, when it exists, in
 * /dev/shm (tmpfs, so the file system's own cost is apart). Before the fd
 * was kept, a line was an open, a write and a close. Figures are CPU ns
 * per line (the writer's thread), median over rounds that alternate
 * between the cases.
 *
 * Target (issue 24): a whole line written in at most 1 us.
 *
 * Usage: bench_declog [ROUNDS [LINES]]; exit 0 unless it could not run. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cpu_stats.h"
#include "limit/limit.h"
#include "util/clock.h"
#include "util/declog.h"

/* The decision log under test (a process's is a member of its struct
 * rl_proc). */
static struct rl_declog dlog;

#define MAX_ROUNDS 31


static const struct rl_declog_rec rec = {
    .user = "1000",
    .rule = "scrape",
    .dest = "127.0.0.1",
    .port = 8080,
    .call = "connect",
    .limit = "connect",
    .units = 1,
    .verdict = RL_DECLOG_ALLOW,
};

static double run_format(unsigned n)
{
    char buf[RL_DECLOG_LINE_MAX];
    volatile size_t sink = 0;
    struct rl_declog_rec r = rec;
    double t0 = cpu_ns();
    for (unsigned i = 0; i < n; i++) {
        r.mono_ns = rl_clock_now_ns();
        sink += rl_declog_format(buf, sizeof buf, &r, r.mono_ns, 1, 1);
    }
    (void)sink;
    return (cpu_ns() - t0) / n;
}

static double run_write(const char *path, unsigned n)
{
    rl_declog_setup(&dlog, path);
    struct rl_declog_rec r = rec;
    double t0 = cpu_ns();
    for (unsigned i = 0; i < n; i++) {
        r.mono_ns = rl_clock_now_ns();
        rl_declog_write(&dlog, &r);
    }
    double ns = (cpu_ns() - t0) / n;
    rl_declog_setup(&dlog, NULL);
    unlink(path);
    return ns;
}

static double run_decision(unsigned n)
{
    struct rl_limit lim;
    rl_word st[4] = {0};
    if (rl_limit_prepare(&lim, RL_ALGO_TOKEN_BUCKET, 1000000000ull, 1000000000ull,
                         1000000000ull) < 0)
        return -1;
    volatile uint64_t sink = 0;
    double t0 = cpu_ns();
    for (unsigned i = 0; i < n; i++)
        sink += rl_token_bucket.take(st, &lim, rl_clock_now_ns(), 1, 1, 0)
                    .granted;
    (void)sink;
    return (cpu_ns() - t0) / n;
}

int main(int argc, char **argv)
{
    unsigned rounds = argc > 1 ? (unsigned)atoi(argv[1]) : 9;
    unsigned n = argc > 2 ? (unsigned)atoi(argv[2]) : 20000;
    if (rounds == 0 || rounds > MAX_ROUNDS || n == 0) {
        fprintf(stderr, "bench_declog: usage: bench_declog [ROUNDS<=%d "
                        "[LINES]]\n", MAX_ROUNDS);
        return 2;
    }
    struct stat sb;
    bool shm = stat("/dev/shm", &sb) == 0 && S_ISDIR(sb.st_mode);
    char tmp[64], shmp[64];
    snprintf(tmp, sizeof tmp, "/tmp/rlshim-bench-declog-%d", (int)getpid());
    snprintf(shmp, sizeof shmp, "/dev/shm/rlshim-bench-declog-%d",
             (int)getpid());
    double dec[MAX_ROUNDS], fmt[MAX_ROUNDS], wtmp[MAX_ROUNDS],
        wshm[MAX_ROUNDS];
    for (unsigned r = 0; r < rounds; r++) {
        dec[r] = run_decision(n);
        fmt[r] = run_format(n);
        wtmp[r] = run_write(tmp, n);
        wshm[r] = shm ? run_write(shmp, n) : 0;
        if (dec[r] < 0)
            return 1;
    }
    qsort(dec, rounds, sizeof dec[0], cmp_double);
    qsort(fmt, rounds, sizeof fmt[0], cmp_double);
    qsort(wtmp, rounds, sizeof wtmp[0], cmp_double);
    qsort(wshm, rounds, sizeof wshm[0], cmp_double);
    double d = dec[rounds / 2];
    printf("decision log: CPU ns per line, median of %u rounds of %u lines\n",
           rounds, n);
    printf("%-34s %10s %12s\n", "case", "ns/line", "x decision");
    printf("%-34s %10.1f %12.2f\n", "limiter decision (for scale)", d, 1.0);
    printf("%-34s %10.1f %12.2f\n", "format the line only",
           fmt[rounds / 2], fmt[rounds / 2] / d);
    printf("%-34s %10.1f %12.2f\n", "line written (kept fd), /tmp",
           wtmp[rounds / 2], wtmp[rounds / 2] / d);
    if (shm)
        printf("%-34s %10.1f %12.2f\n", "line written (kept fd), /dev/shm",
               wshm[rounds / 2], wshm[rounds / 2] / d);
    printf("(paid only while decision_log is on; off, the gate tests one "
           "bool per decision)\n");
    printf("bar: decision log, CPU ns per line written to /tmp: %.0f "
           "(target <= 1000): %s\n",
           wtmp[rounds / 2], wtmp[rounds / 2] <= 1000 ? "met" : "NOT MET");
    return 0;
}
