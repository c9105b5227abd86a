/* test_verify.c — `rlshim verify` and `rlshim timeline` as a user runs
 * them (build/rlshim in a subprocess) on decision logs made by hand. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define MS 1000000ull

struct ev {
    uint64_t us; /* mono_ns / 1000, from an origin */
    unsigned units;
    const char *verdict;
    const char *dest;
    const char *user;
    uint64_t wait_us;
    uint64_t moved_us; /* the turn it gave up (a pause moved it); 0: none */
    uint64_t interval_ms; /* its destination's interval (SPEC §14); 0: none */
};

static const char *build_dir(void)
{
    const char *b = getenv("RLSHIM_BUILD");
    return b != NULL ? b : "build";
}

/* ",\"moved_ns\":N" for an event that gave up a turn, else "". */
/* A line's optional fields: moved_ns, interval_ns. */
static const char *moved(const struct ev *e)
{
    static char buf[96];
    buf[0] = '\0';
    if (e->moved_us != 0)
        snprintf(buf, sizeof buf, ",\"moved_ns\":%llu",
                 (unsigned long long)(e->moved_us * 1000 + 5000000000ull));
    if (e->interval_ms != 0)
        snprintf(buf + strlen(buf), sizeof buf - strlen(buf),
                 ",\"interval_ns\":%llu",
                 (unsigned long long)e->interval_ms * 1000000);
    return buf;
}

static char *write_log(const struct ev *ev, size_t n, const char *limit)
{
    static char path[64];
    strcpy(path, "/tmp/rlshim-vlog-XXXXXX");
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    FILE *f = fdopen(fd, "w");
    for (size_t i = 0; i < n; i++)
        fprintf(f,
                "{\"t\":\"2026-12-01T00:00:00.000000Z\",\"mono_ns\":%llu,"
                "\"pid\":1,\"tid\":1,\"user\":\"%s\",\"rule\":\"r\","
                "\"site\":null,\"dest\":{\"name\":\"%s\",\"port\":80},"
                "\"call\":\"connect\",\"limit\":\"%s\",\"units\":%u,"
                "\"verdict\":\"%s\",\"wait_ns\":%llu%s}\n",
                (unsigned long long)(ev[i].us * 1000 + 5000000000ull),
                ev[i].user ? ev[i].user : "u", ev[i].dest ? ev[i].dest : "h",
                limit, ev[i].units ? ev[i].units : 1,
                ev[i].verdict ? ev[i].verdict : "allow",
                (unsigned long long)ev[i].wait_us * 1000, moved(&ev[i]));
    fclose(f);
    return path;
}

/* Run `rlshim ARGS...`; returns the exit status, stdout+stderr in out. */
static int rlshim(char *out, size_t outlen, const char *const *args)
{
    char bin[4096];
    snprintf(bin, sizeof bin, "%s/rlshim", build_dir());
    char o[] = "/tmp/rlshim-vout-XXXXXX";
    int fo = mkstemp(o);
    cr_assert_geq(fo, 0);
    unlink(o);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        const char *argv[16] = {"rlshim"};
        int n = 1;
        for (; args[n - 1] != NULL && n < 15; n++)
            argv[n] = args[n - 1];
        argv[n] = NULL;
        dup2(fo, 1);
        dup2(fo, 2); /* messages too: shown when a test fails */
        execv(bin, (char *const *)argv);
        _exit(127);
    }
    int st;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    ssize_t r = pread(fo, out, outlen - 1, 0);
    out[r > 0 ? r : 0] = '\0';
    close(fo);
    cr_assert(WIFEXITED(st), "signal");
    return WEXITSTATUS(st);
}

static int verify(char *out, size_t len, const char *log, const char *a1,
                  const char *a2, const char *a3)
{
    const char *args[] = {"verify", log, "--limit", a1, a2, a3, NULL};
    return rlshim(out, len, args);
}

/* 2/s, burst 1: one per 500 ms at the limit, one over, one under. */
Test(verify, exactly_at_the_limit_is_ok)
{
    struct ev ev[] = {{0}, {500000}, {1000000}, {1500000}, {2000000}};
    char *log = write_log(ev, 5, "connect");
    char out[8192];
    cr_assert_eq(verify(out, sizeof out, log, "connect=2/s,burst=1", NULL,
                        NULL),
                 0, "%s", out);
    cr_assert(strstr(out, "ok: 5 connect units") != NULL, "%s", out);
    unlink(log);
}

Test(verify, one_over_fails_and_shows_the_interval)
{
    struct ev ev[] = {{0}, {500000}, {999000}, {1500000}, {2000000}};
    char *log = write_log(ev, 5, "connect");
    char out[8192];
    cr_assert_eq(verify(out, sizeof out, log, "connect=2/s,burst=1", NULL,
                        NULL),
                 1, "%s", out);
    cr_assert(strstr(out, "FAIL") != NULL, "%s", out);
    /* The worst interval: lines 2 and 3, 499 ms apart. */
    cr_assert(strstr(out, "2 connect units in 499.000 ms (2 lines)") != NULL,
              "%s", out);
    cr_assert(strstr(out, "  2: {") != NULL && strstr(out, "  3: {") != NULL,
              "%s", out);
    cr_assert(strstr(out, "  1: {") == NULL, "%s", out);
    unlink(log);
}

Test(verify, one_under_is_ok_burst_counts)
{
    /* burst 3: three at once, then 2/s. One fewer than allowed. */
    struct ev ev[] = {{0, 2}, {500000}, {1000000}};
    char *log = write_log(ev, 3, "connect");
    char out[8192];
    cr_assert_eq(verify(out, sizeof out, log, "connect=2/s,burst=3", NULL,
                        NULL),
                 0, "%s", out);
    struct ev over[] = {{0, 4}, {500000}, {1000000}};
    log = write_log(over, 3, "connect");
    cr_assert_eq(verify(out, sizeof out, log, "connect=2/s,burst=3", NULL,
                        NULL),
                 1, "%s", out);
    unlink(log);
}

Test(verify, denied_lines_do_not_count_delayed_ones_count_when_they_went)
{
    struct ev ev[] = {
        {0},
        {100000, 1, "deny"},
        /* decided at 200 ms, went at 500 ms */
        {200000, 1, "delay", NULL, NULL, 300000},
        {1000000},
    };
    char *log = write_log(ev, 4, "connect");
    char out[8192];
    cr_assert_eq(verify(out, sizeof out, log, "connect=2/s,burst=1", NULL,
                        NULL),
                 0, "%s", out);
    ev[2].wait_us = 200000; /* went at 400 ms: too early */
    log = write_log(ev, 4, "connect");
    cr_assert_eq(verify(out, sizeof out, log, "connect=2/s,burst=1", NULL,
                        NULL),
                 1, "%s", out);
    unlink(log);
}

Test(verify, two_destinations_interleaved)
{
    /* a and b each at 2/s, together 4/s. */
    struct ev ev[] = {
        {0, 1, NULL, "a"},       {250000, 1, NULL, "b"},
        {500000, 1, NULL, "a"},  {750000, 1, NULL, "b"},
        {1000000, 1, NULL, "a"}, {1250000, 1, NULL, "b"},
    };
    char *log = write_log(ev, 6, "connect");
    char out[8192];
    cr_assert_eq(verify(out, sizeof out, log, "connect=2/s,burst=1", "--per",
                        "destination"),
                 0, "%s", out);
    cr_assert(strstr(out, "2 groups") != NULL, "%s", out);
    /* Together they are twice the rate. */
    cr_assert_eq(verify(out, sizeof out, log, "connect=2/s,burst=1", NULL,
                        NULL),
                 1, "%s", out);
    cr_assert_eq(verify(out, sizeof out, log, "connect=4/s,burst=1", NULL,
                        NULL),
                 0, "%s", out);
    /* b too fast: named in the report. */
    ev[3].us = 600000;
    log = write_log(ev, 6, "connect");
    cr_assert_eq(verify(out, sizeof out, log, "connect=2/s,burst=1", "--per",
                        "destination"),
                 1, "%s", out);
    cr_assert(strstr(out, "of destination b:") != NULL, "%s", out);
    unlink(log);
}

Test(verify, per_user_and_window)
{
    struct ev ev[] = {
        {0, 1, NULL, NULL, "x"},      {10000, 1, NULL, NULL, "y"},
        {20000, 1, NULL, NULL, "x"},  {30000, 1, NULL, NULL, "y"},
        {1020000, 1, NULL, NULL, "x"},
    };
    char *log = write_log(ev, 5, "send");
    char out[8192];
    const char *a[] = {"verify", log, "--limit", "send=2/s", "--window",
                       "--per", "user", NULL};
    cr_assert_eq(rlshim(out, sizeof out, a), 0, "%s", out);
    const char *b[] = {"verify", log, "--limit", "send=3/s", "--window", NULL};
    cr_assert_eq(rlshim(out, sizeof out, b), 1, "%s", out);
    cr_assert(strstr(out, "4 send units") != NULL, "%s", out);
    /* Other limits' lines are not counted. */
    const char *c[] = {"verify", log, "--limit", "connect=1/s", NULL};
    cr_assert_eq(rlshim(out, sizeof out, c), 0, "%s", out);
    unlink(log);
}

Test(verify, usage_errors_exit_2)
{
    char out[8192];
    const char *a[] = {"verify", "/nonexistent", "--limit", "connect=1/s",
                       NULL};
    cr_assert_eq(rlshim(out, sizeof out, a), 2);
    const char *b[] = {"verify", "/dev/null", "--limit", "bogus=1/s", NULL};
    cr_assert_eq(rlshim(out, sizeof out, b), 2);
    const char *c[] = {"verify", "/dev/null", NULL};
    cr_assert_eq(rlshim(out, sizeof out, c), 2);
    const char *d[] = {"verify", "/dev/null", "--limit", "connect=1/s,burst=2",
                       "--window", NULL};
    cr_assert_eq(rlshim(out, sizeof out, d), 2);
}

/* The SVG is well-formed XML (python3's parser says so) with one bar per
 * non-empty (destination, bin, verdict). */
/* A new file for --svg to write: its path into svg (32 bytes). */
static void svg_file(char *svg)
{
    strcpy(svg, "/tmp/rlshim-svg-XXXXXX");
    int fd = mkstemp(svg);
    cr_assert_geq(fd, 0);
    close(fd);
}

/* How many <tag> elements of the SVG file (it must parse as XML) have a
 * class starting with `cls`. */
static int svg_count(const char *svg, const char *tag, const char *cls)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd,
             "python3 -c 'import sys, xml.etree.ElementTree as E; "
             "r = E.parse(sys.argv[1]).getroot(); "
             "print(sum(1 for e in r.iter(\"{http://www.w3.org/2000/svg}\" "
             "+ sys.argv[2]) if e.get(\"class\", \"\").startswith("
             "sys.argv[3])))' %s %s '%s'",
             svg, tag, cls);
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p);
    int n = -1;
    cr_assert_eq(fscanf(p, "%d", &n), 1);
    cr_assert_eq(pclose(p), 0);
    return n;
}

Test(timeline, svg_is_xml_with_one_bar_per_cell)
{
    struct ev ev[] = {
        {0, 1, NULL, "a"},
        {10000, 1, "deny", "a"},
        {20000, 1, "deny", "a"},
        {50000, 1, "delay", "a", NULL, 100000}, /* went at 150 ms */
        {250000, 1, NULL, "b<&>"},
        {260000, 1, NULL, "b<&>"},
    };
    /* a: bin 0 allowed + denied, bin 1 delayed; b: bin 2 allowed = 4. */
    char *log = write_log(ev, 6, "connect");
    char svg[32];
    svg_file(svg);
    char out[8192];
    const char *a[] = {"timeline", log,         "--bin", "100ms", "--svg",
                       svg,        "--limit",   "connect=5/s", NULL};
    cr_assert_eq(rlshim(out, sizeof out, a), 0, "%s", out);
    cr_assert(strstr(out, "a: 1 allowed, 1 delayed, 2 denied") != NULL, "%s",
              out);
    cr_assert(strstr(out, "0.0s  #xx\n") != NULL, "%s", out);
    cr_assert(strstr(out, "0.1s  ~\n") != NULL, "%s", out);
    int bars = svg_count(svg, "rect", "bar "), limits = svg_count(svg, "line",
                                                                  "limit");
    cr_assert_eq(bars, 4);
    /* The limit in each of the two panels, and in the legend. */
    cr_assert_eq(limits, 3);
    unlink(svg);
    unlink(log);
}

/* ---- property: the command agrees with a brute-force check ------------ */

__extension__ typedef unsigned __int128 u128;

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* Every pair of allowed lines (at mono + wait) of one destination, checked
 * against burst + rate * span: the definition, in O(n^2). */
static bool brute(const struct ev *ev, size_t n, uint64_t count,
                  uint64_t period, uint64_t burst, const char *dest)
{
    for (size_t i = 0; i < n; i++) {
        if (strcmp(ev[i].dest, dest) != 0 || strcmp(ev[i].verdict, "deny") == 0)
            continue;
        uint64_t ti = (ev[i].us + ev[i].wait_us) * 1000;
        for (size_t j = 0; j < n; j++) {
            if (strcmp(ev[j].dest, dest) != 0 ||
                strcmp(ev[j].verdict, "deny") == 0)
                continue;
            uint64_t tj = (ev[j].us + ev[j].wait_us) * 1000;
            if (tj < ti)
                continue;
            /* units of the dest's allowed lines in [ti, tj] */
            uint64_t sum = 0;
            for (size_t k = 0; k < n; k++) {
                uint64_t tk = (ev[k].us + ev[k].wait_us) * 1000;
                if (strcmp(ev[k].dest, dest) == 0 &&
                    strcmp(ev[k].verdict, "deny") != 0 && tk >= ti && tk <= tj)
                    sum += ev[k].units;
            }
            /* sum * P > burst * P + count * (span + 1 us of slack) */
            if ((u128)sum * period >
                (u128)burst * period + (u128)count * (tj - ti + 1000))
                return false;
        }
    }
    return true;
}

Test(verify, property_agrees_with_brute_force_on_random_logs)
{
    static const char *const dests[] = {"a", "b", "c"};
    static const char *const verdicts[] = {"allow", "allow", "delay", "deny"};
    struct ev ev[40];
    int oks = 0, fails = 0;
    for (int round = 0; round < 120; round++) {
        uint64_t count = 1 + next() % 6, burst = 1 + next() % 4;
        size_t n = 1 + next() % 40;
        uint64_t t = 0;
        for (size_t i = 0; i < n; i++) {
            t += next() % 3 == 0 ? 0 : next() % 400000; /* up to 400 ms */
            ev[i] = (struct ev){
                .us = t,
                .units = 1 + (unsigned)(next() % 2),
                .verdict = verdicts[next() % 4],
                .dest = dests[next() % 3],
            };
            if (strcmp(ev[i].verdict, "delay") == 0)
                ev[i].wait_us = next() % 300000;
        }
        /* Lines in any order: processes append as they decide. */
        for (size_t i = n; i > 1; i--) {
            size_t j = next() % i;
            struct ev tmp = ev[i - 1];
            ev[i - 1] = ev[j];
            ev[j] = tmp;
        }
        char *log = write_log(ev, n, "connect");
        char limit[64], out[16384];
        snprintf(limit, sizeof limit, "connect=%llu/s,burst=%llu",
                 (unsigned long long)count, (unsigned long long)burst);
        int st = verify(out, sizeof out, log, limit, "--per", "destination");
        bool want = true;
        for (size_t d = 0; d < 3; d++)
            want = want && brute(ev, n, count, 1000000000ull, burst, dests[d]);
        cr_assert_eq(st, want ? 0 : 1, "round %d (%s):\n%s", round, limit,
                     out);
        want ? oks++ : fails++;
        unlink(log);
    }
    cr_assert_gt(oks, 10);
    cr_assert_gt(fails, 10);
}

/* ---- requests (SPEC §11) ---------------------------------------------- */

#include "util/declog.h"

/* A log as the shim writes it for requests (rl_declog_format): per host,
 * one request a second, the hosts 100 ms apart, and between them connect
 * lines far faster (not requests: never counted against request=...). */
static char *write_request_log(unsigned per_host)
{
    static char path[64];
    strcpy(path, "/tmp/rlshim-vreq-XXXXXX");
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    FILE *f = fdopen(fd, "w");
    static const char *const hosts[] = {"a.example", "b.example"};
    for (unsigned i = 0; i < per_host; i++)
        for (unsigned h = 0; h < 2; h++) {
            uint64_t t = 5000000000ull + i * 1000 * MS + h * 100 * MS;
            struct rl_declog_rec r = {
                .mono_ns = t, .user = "crawler", .rule = "site:every-host",
                .site = "every-host", .dest = hosts[h], .port = 443,
                .call = "SSL_write", .limit = "request", .units = 1,
                .verdict = RL_DECLOG_ALLOW, .method = "GET",
                .target = "/page?x=\"1\"",
            };
            char line[RL_DECLOG_LINE_MAX];
            fwrite(line, 1, rl_declog_format(line, sizeof line, &r, 0, 1, 1),
                   f);
            r.mono_ns = t + MS;
            r.call = r.limit = "connect";
            r.method = r.target = NULL;
            fwrite(line, 1, rl_declog_format(line, sizeof line, &r, 0, 1, 1),
                   f);
        }
    fclose(f);
    return path;
}

Test(verify, checks_requests_per_destination)
{
    char *log = write_request_log(4);
    char out[16384];
    cr_assert_eq(verify(out, sizeof out, log, "request=1/s,burst=1",
                        "--per", "destination"),
                 0, "%s", out);
    cr_assert(strstr(out, "ok: 8 request units") != NULL, "%s", out);
    /* Both hosts together go twice as fast (the connect lines, faster
     * still, are not requests: 8 lines). */
    cr_assert_eq(verify(out, sizeof out, log, "request=1/s,burst=1", NULL,
                        NULL),
                 1, "%s", out);
    cr_assert(strstr(out, "FAIL: 8 request units allowed in 8 lines") != NULL,
              "%s", out);
    /* The lines shown are the log's, method and target included. */
    cr_assert(strstr(out, "\"target\":\"/page?x=\\\"1\\\"\"") != NULL, "%s",
              out);
    unlink(log);
}

Test(timeline, draws_requests_when_the_log_has_no_connect_limit)
{
    char *log = write_request_log(3);
    char out[16384];
    const char *a[] = {"timeline", log, "--limit", "request=1/s", NULL};
    cr_assert_eq(rlshim(out, sizeof out, a), 0, "%s", out);
    cr_assert(strstr(out, "a.example: 3 allowed, 0 delayed, 0 denied") != NULL,
              "%s", out);
    cr_assert(strstr(out, "interval") == NULL, "no interval logged: %s", out);
    unlink(log);
}

/* SPEC §14: a destination whose interval rose from 100 ms to 800 ms (a
 * slow server) and fell back by halves, as its request lines give it, is
 * drawn above its bins: a sparkline and the rows where it changed in the
 * terminal, a step line (and its legend) in the SVG. */
Test(timeline, draws_the_interval_above_the_bins)
{
    struct ev ev[] = {
        {0, 1, NULL, "a.example", NULL, 0, 0, 100},
        {100000, 1, NULL, "a.example", NULL, 0, 0, 100},
        {300000, 1, "delay", "a.example", NULL, 700000, 0, 800},
        {1000000, 1, "delay", "a.example", NULL, 800000, 0, 800},
        {2600000, 1, NULL, "a.example", NULL, 0, 0, 400},
        {3000000, 1, NULL, "a.example", NULL, 0, 0, 200},
    };
    char *log = write_log(ev, 6, "request");
    char svg[32];
    svg_file(svg);
    char out[16384];
    const char *a[] = {"timeline", log,     "--limit", "request=10/s",
                       "--svg",    svg,     "--bin",   "100ms",
                       NULL};
    cr_assert_eq(rlshim(out, sizeof out, a), 0, "%s", out);
    /* Each at its decision: 800 ms from the one at 0.3 s (it went at
     * 1.0 s), 100 ms before. */
    cr_expect(strstr(out, "\ninterval  ▁▁▁███") != NULL, "%s", out);
    cr_expect(strstr(out, "  100 ms to 800 ms\n") != NULL, "%s", out);
    cr_expect(strstr(out, "0.0s  #  interval 100 ms\n") != NULL, "%s", out);
    cr_expect(strstr(out, "0.3s    interval 800 ms\n") != NULL, "%s", out);
    cr_expect(strstr(out, "1.0s  ~\n") != NULL, "%s", out);
    cr_expect(strstr(out, "2.6s  #  interval 400 ms\n") != NULL, "%s", out);
    cr_expect(strstr(out, "3.0s  #  interval 200 ms\n") != NULL, "%s", out);
    int lines = svg_count(svg, "polyline", "interval"),
        legend = svg_count(svg, "line", "interval");
    cr_expect_eq(lines, 1, "the interval's line in the panel");
    cr_expect_eq(legend, 1, "and in the legend");
    unlink(svg);
    unlink(log);
}

/* --obeyed-retry-after (SPEC §12): a pause line (a 429 at 1 s that paused
 * h for 2 s) and the requests of h decided after it. */
static int obeyed(char *out, size_t len, const char *log)
{
    const char *args[] = {"verify", log, "--obeyed-retry-after", NULL};
    return rlshim(out, len, args);
}

Test(verify, a_request_held_to_the_end_of_a_pause_obeys_it)
{
    struct ev ev[] = {
        {0},                                       /* before the 429 */
        {1000000, 0, "pause", NULL, NULL, 2000000}, /* paused 1 s .. 3 s */
        {1100000, 0, "delay", NULL, NULL, 1900000}, /* went at 3 s */
        {1200000, 0, "allow", "other", NULL, 0},    /* another destination */
        {1300000, 0, "deny"},                       /* refused: never went */
    };
    char *log = write_log(ev, 5, "request");
    char out[8192];
    cr_assert_eq(obeyed(out, sizeof out, log), 0, "%s", out);
    cr_assert(strstr(out, "ok: 1 pause by 429/503, 1 request decided during "
                          "them") != NULL,
              "%s", out);
    unlink(log);
}

Test(verify, a_request_that_went_during_a_pause_fails_and_is_shown)
{
    struct ev ev[] = {
        {1000000, 0, "pause", NULL, NULL, 2000000},
        {1100000, 0, "delay", NULL, NULL, 1800000}, /* went at 2.9 s */
    };
    char *log = write_log(ev, 2, "request");
    char out[8192];
    cr_assert_eq(obeyed(out, sizeof out, log), 1, "%s", out);
    cr_assert(strstr(out, "FAIL") != NULL, "%s", out);
    cr_assert(strstr(out, "  2: {") != NULL && strstr(out, "paused by 1:") !=
                                                   NULL,
              "%s", out);
    unlink(log);
}

/* A request decided before the answer came that went before it, and one
 * decided after the pause ended, are not its. */
Test(verify, requests_gone_before_or_decided_after_a_pause_are_not_its)
{
    struct ev ev[] = {
        {900000, 0, "delay", NULL, NULL, 50000}, /* went at 0.95 s */
        {1000000, 0, "pause", NULL, NULL, 2000000},
        {3000000, 0, "allow"},                   /* at the end: went */
    };
    char *log = write_log(ev, 3, "request");
    char out[8192];
    cr_assert_eq(obeyed(out, sizeof out, log), 0, "%s", out);
    /* And a pause line is no unit of a rate check. */
    cr_assert_eq(verify(out, sizeof out, log, "request=1/s,burst=1", NULL,
                        NULL),
                 0, "%s", out);
    cr_assert(strstr(out, "2 request units allowed in 2 lines") != NULL, "%s",
              out);
    unlink(log);
}

/* A request given its turn before the answer came, a turn inside the
 * pause, is held too (SPEC §12): going at that turn breaks the pause
 * (what a queued request did before the shim held it). */
Test(verify, a_queued_request_that_went_at_its_turn_inside_a_pause_fails)
{
    struct ev ev[] = {
        {900000, 0, "delay", NULL, NULL, 600000}, /* its turn: 1.5 s */
        {1000000, 0, "pause", NULL, NULL, 2000000},
    };
    char *log = write_log(ev, 2, "request");
    char out[8192];
    cr_assert_eq(obeyed(out, sizeof out, log), 1, "%s", out);
    cr_assert(strstr(out, "  1: {") != NULL, "%s", out);
    unlink(log);
}

/* Decided again at that turn and moved past the pause (its line's
 * moved_ns is the turn it gave up): the first turn did not go. */
Test(verify, a_queued_request_moved_past_the_pause_obeys_it)
{
    struct ev ev[] = {
        {900000, 0, "delay", NULL, NULL, 600000}, /* its turn: 1.5 s */
        {1000000, 0, "pause", NULL, NULL, 2000000},
        {1500000, 0, "delay", NULL, NULL, 1500000, 1500000}, /* at 3 s */
    };
    char *log = write_log(ev, 3, "request");
    char out[8192];
    cr_assert_eq(obeyed(out, sizeof out, log), 0, "%s", out);
    /* Moved to a turn still inside the pause: broken again. */
    ev[2].wait_us = 1000000;
    log = write_log(ev, 3, "request");
    cr_assert_eq(obeyed(out, sizeof out, log), 1, "%s", out);
    cr_assert(strstr(out, "  3: {") != NULL, "%s", out);
    unlink(log);
}
