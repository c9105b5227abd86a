/* test_fleet_pipe.c — one pipelined connection shared by many threads, on
 * a real redis-server started on a free port (and, where Redis must
 * answer late, behind tests/integration/servers/delay_proxy.py, which
 * hands every reply byte over DELAY_MS after it came). */
#include <criterion/criterion.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../redis_server.h"
#include "fleet/fleet_addr.h"
#include "fleet/fleet_pipe.h"
#include "util/clock.h"

#define MS 1000000ull

static struct redis R;
static pid_t proxy_pid;
static int proxy_port;
static char dir[64];

static void setup(void)
{
    snprintf(dir, sizeof dir, "/tmp/rlshim-pipe-XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
}

static void teardown(void)
{
    if (proxy_pid > 0) {
        kill(proxy_pid, SIGKILL);
        waitpid(proxy_pid, NULL, 0);
    }
    redis_kill(&R);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
}

TestSuite(fleet_pipe, .init = setup, .fini = teardown, .timeout = 60);

static void start_redis(void)
{
    if (!redis_have())
        cr_skip_test("redis-server is not installed");
    cr_assert(redis_start(&R), "redis-server did not start");
}

/* delay_proxy.py in front of R, replies `ms` late. */
static void start_proxy(int ms)
{
    int p[2];
    cr_assert_eq(pipe(p), 0);
    proxy_pid = fork();
    cr_assert_neq(proxy_pid, -1);
    if (proxy_pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        dup2(p[1], 1);
        close(p[0]);
        char to[16], delay[16], script[512], log[128];
        snprintf(to, sizeof to, "%d", R.port);
        snprintf(delay, sizeof delay, "%d", ms);
        const char *src = getenv("RLSHIM_SRC");
        snprintf(script, sizeof script,
                 "%s/tests/integration/servers/delay_proxy.py",
                 src != NULL ? src : ".");
        snprintf(log, sizeof log, "%s/proxy.log", dir);
        setenv("DELAY_TO", to, 1);
        setenv("DELAY_MS", delay, 1);
        execlp("python3", "python3", script, log, (char *)NULL);
        _exit(127);
    }
    close(p[1]);
    char buf[64] = "";
    size_t n = 0;
    while (n < sizeof buf - 1 && read(p[0], buf + n, 1) == 1 && buf[n] != '\n')
        n++;
    close(p[0]);
    cr_assert_eq(sscanf(buf, "PORT %d", &proxy_port), 1, "proxy: '%s'", buf);
}

/* ---- the commands --------------------------------------------------- */

/* EVAL of a script that answers its two arguments: each reply says
 * whose it is. */
struct echo {
    uint64_t a, b;
};

static void build_echo(struct rl_fleet_conn *c, const char (*sha)[41],
                       void *ctx)
{
    (void)sha;
    const struct echo *e = ctx;
    rl_fleet_cmd_start(c, 5);
    rl_fleet_cmd_str(c, "EVAL");
    rl_fleet_cmd_str(c, "return {tonumber(ARGV[1]), tonumber(ARGV[2])}");
    rl_fleet_cmd_u64(c, 0);
    rl_fleet_cmd_u64(c, e->a);
    rl_fleet_cmd_u64(c, e->b);
}

static _Atomic int late_calls, late_lost;
static _Atomic int64_t late_a, late_w;

static void on_late(void *ctx, const struct rl_fleet_result *r,
                    const struct rl_fleet_late *late)
{
    cr_assert_eq(ctx, &late_calls);
    atomic_fetch_add(&late_calls, 1);
    if (r->err != 0) {
        atomic_fetch_add(&late_lost, 1);
        return;
    }
    atomic_store(&late_a, r->v[0]);
    atomic_store(&late_w, (int64_t)late->w[0]);
}

static struct rl_fleet_pipe pipe_; /* 30 KiB: not on the stack */

static void pipe_to(int port)
{
    char url[64];
    struct rl_fleet_addr a;
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", port);
    cr_assert_null(rl_fleet_addr_parse(url, &a));
    memset(&pipe_, 0, sizeof pipe_);
    rl_fleet_pipe_init(&pipe_, &a, on_late, &late_calls);
    atomic_store(&late_calls, 0);
    atomic_store(&late_lost, 0);
}

/* One echo on the pipe, waited for until `wait_ns`: 0 and the reply's
 * integers, or the error. */
static int echo(uint64_t a, uint64_t b, uint64_t wait_ns, int64_t v[2])
{
    uint64_t deadline = rl_clock_now_ns() + wait_ns;
    int r = rl_fleet_pipe_enter(&pipe_, NULL, 500 * MS, deadline);
    if (r < 0)
        return r;
    struct echo e = {a, b};
    uint64_t k;
    struct rl_fleet_wait w = {deadline, deadline, 0};
    r = rl_fleet_pipe_send(&pipe_, build_echo, &e, 0, false, &w, &k);
    if (r == 0) {
        struct rl_fleet_result res;
        r = rl_fleet_pipe_wait(&pipe_, k, &w, &res);
        if (r == -ETIMEDOUT) {
            struct rl_fleet_late late = {{a}};
            rl_fleet_pipe_abandon(&pipe_, k, &late);
        } else if (res.err != 0) {
            r = res.err;
        } else if (res.type != RL_FLEET_REPLY_INTS || res.n != 2) {
            r = -EPROTO;
        } else {
            v[0] = res.v[0];
            v[1] = res.v[1];
        }
    }
    rl_fleet_pipe_leave(&pipe_);
    return r;
}

/* ---- many threads --------------------------------------------------- */

struct worker {
    int id, n;
    uint64_t wait_ns;
    int ok, wrong, timeouts, errors;
    uint64_t slowest;
};

static void *work(void *arg)
{
    struct worker *w = arg;
    for (int i = 0; i < w->n; i++) {
        int64_t v[2] = {-1, -1};
        uint64_t t0 = rl_clock_now_ns();
        int r = echo((uint64_t)w->id, (uint64_t)i, w->wait_ns, v);
        uint64_t took = rl_clock_now_ns() - t0;
        if (took > w->slowest)
            w->slowest = took;
        if (r == -ETIMEDOUT)
            w->timeouts++;
        else if (r < 0) {
            w->errors++;
            if (getenv("PIPE_DEBUG"))
                fprintf(stderr, "error %d %s\n", r, strerror(-r));
        } else if (v[0] != w->id || v[1] != i)
            w->wrong++;
        else
            w->ok++;
    }
    return NULL;
}

static void run_threads(int nthreads, int each, uint64_t wait_ns,
                        struct worker *w)
{
    pthread_t t[64];
    for (int i = 0; i < nthreads; i++) {
        w[i] = (struct worker){.id = i, .n = each, .wait_ns = wait_ns};
        cr_assert_eq(pthread_create(&t[i], NULL, work, &w[i]), 0);
    }
    for (int i = 0; i < nthreads; i++)
        pthread_join(t[i], NULL);
}

/* Clients Redis has connected now (the pipe's, and redis-cli's own). */
static long clients(void)
{
    char out[256];
    redis_cli(&R, "CLIENT LIST", out, sizeof out);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "redis-cli -p %d CLIENT LIST | wc -l", R.port);
    FILE *p = popen(cmd, "r");
    long n = -1;
    if (p != NULL && fscanf(p, "%ld", &n) != 1)
        n = -1;
    if (p != NULL)
        pclose(p);
    return n;
}

Test(fleet_pipe, thirty_two_threads_share_one_connection_each_gets_its_reply)
{
    start_redis();
    pipe_to(R.port);
    static struct worker w[32];
    run_threads(32, 300, 2000 * MS, w);
    int ok = 0, wrong = 0, bad = 0;
    for (int i = 0; i < 32; i++) {
        ok += w[i].ok;
        wrong += w[i].wrong;
        bad += w[i].timeouts + w[i].errors;
    }
    printf("pipe: %d replies, %d to the wrong thread, %d failed\n", ok, wrong,
           bad);
    cr_expect_eq(wrong, 0);
    cr_expect_eq(bad, 0);
    cr_expect_eq(ok, 32 * 300);
    cr_expect_geq(pipe_.c.fd, 0, "the connection closed");
    /* The pipe's connection and redis-cli's. */
    cr_expect_eq(clients(), 2, "one connection for 32 threads");
    cr_expect_eq(redis_calls(&R, "eval"), 32 * 300);
}

/* Redis 30 ms away: 32 threads' calls are all in flight at once, so 32
 * threads making 20 calls each take about as long as one thread making
 * 20 (the control, measured the same way in the same run); one
 * connection behind a lock would take 32 times as long. */
Test(fleet_pipe, a_redis_30_ms_late_keeps_32_threads_in_flight_at_once)
{
    start_redis();
    start_proxy(30);
    pipe_to(proxy_port);
    /* Opened first, with a wait of its own (a handshake is a round trip
     * too). */
    int64_t v[2];
    cr_assert_eq(echo(99, 0, 500 * MS, v), 0);
    static struct worker w[32];
    uint64_t t0 = rl_clock_now_ns();
    run_threads(1, 20, 500 * MS, w);
    double one = (double)(rl_clock_now_ns() - t0) / 1e9;
    t0 = rl_clock_now_ns();
    run_threads(32, 20, 500 * MS, w);
    double secs = (double)(rl_clock_now_ns() - t0) / 1e9;
    int ok = 0, timeouts = 0, errors = 0, wrong = 0;
    uint64_t slowest = 0;
    for (int i = 0; i < 32; i++) {
        ok += w[i].ok;
        timeouts += w[i].timeouts;
        errors += w[i].errors;
        wrong += w[i].wrong;
        slowest = w[i].slowest > slowest ? w[i].slowest : slowest;
    }
    printf("pipe 30 ms late: 1 thread x 20 calls in %.2f s, 32 threads x 20 "
           "in %.2f s (%.1fx; %d timeouts, %d errors), slowest %.1f ms\n",
           one, secs, secs / one, timeouts, errors, (double)slowest / 1e6);
    cr_expect_eq(timeouts, 0);
    cr_expect_eq(errors, 0);
    cr_expect_eq(wrong, 0);
    cr_expect_eq(ok, 32 * 20);
    cr_expect_lt(secs, 3 * one, "32 threads took %.1f times one", secs / one);
}

/* A reply that comes after its owner left is handed, once, to the pipe's
 * late function with what the owner left: read by the next thread that
 * waits on the pipe. */
Test(fleet_pipe, a_late_reply_is_settled_once_by_the_next_reader)
{
    start_redis();
    start_proxy(80);
    pipe_to(proxy_port);
    int64_t v[2];
    cr_assert_eq(echo(99, 0, 1000 * MS, v), 0); /* opened */
    cr_expect_eq(echo(7, 1, 20 * MS, v), -ETIMEDOUT);
    cr_expect_eq(atomic_load(&late_calls), 0);
    cr_assert_eq(echo(8, 2, 1000 * MS, v), 0);
    cr_expect_eq(v[0], 8, "the second caller got %lld", (long long)v[0]);
    cr_expect_eq(atomic_load(&late_calls), 1);
    cr_expect_eq(atomic_load(&late_a), 7, "the late reply was %lld's",
                 (long long)atomic_load(&late_a));
    cr_expect_eq(atomic_load(&late_w), 7, "with what its owner left");
    cr_expect_eq(atomic_load(&late_lost), 0);
}

/* The owner of a timed-out ticket is still deciding without it when
 * another thread reads its reply: the owner settles it as it leaves. */
struct racer {
    int r;
    int64_t v[2];
};

static void *slow_second(void *arg)
{
    struct racer *x = arg;
    usleep(5000);
    x->r = echo(8, 2, 1000 * MS, x->v);
    return NULL;
}

Test(fleet_pipe, a_reply_read_while_its_owner_decides_is_settled_by_it)
{
    start_redis();
    start_proxy(80);
    pipe_to(proxy_port);
    int64_t v[2];
    cr_assert_eq(echo(99, 0, 1000 * MS, v), 0);
    uint64_t deadline = rl_clock_now_ns() + 20 * MS;
    cr_assert_eq(rl_fleet_pipe_enter(&pipe_, NULL, 500 * MS, deadline), 0);
    struct echo e = {7, 1};
    uint64_t k;
    struct rl_fleet_wait w = {deadline, deadline, 0};
    cr_assert_eq(rl_fleet_pipe_send(&pipe_, build_echo, &e, 0, false, &w, &k),
                 0);
    struct rl_fleet_result res;
    cr_assert_eq(rl_fleet_pipe_wait(&pipe_, k, &w, &res), -ETIMEDOUT);
    /* Deciding without it, while another thread reads both replies. */
    pthread_t t;
    struct racer x = {0};
    pthread_create(&t, NULL, slow_second, &x);
    pthread_join(t, NULL);
    cr_expect_eq(x.r, 0);
    cr_expect_eq(x.v[0], 8);
    cr_expect_eq(atomic_load(&late_calls), 0, "settled before its owner left");
    struct rl_fleet_late late = {{7}};
    rl_fleet_pipe_abandon(&pipe_, k, &late);
    rl_fleet_pipe_leave(&pipe_);
    cr_expect_eq(atomic_load(&late_calls), 1);
    cr_expect_eq(atomic_load(&late_a), 7);
    cr_expect_eq(atomic_load(&late_w), 7);
}

/* Redis killed with replies owed: every waiter gets an error, every given
 * up ticket is settled as lost, and the pipe opens again once Redis is
 * back (the last thread out closed the dead one). */
Test(fleet_pipe, a_dead_connection_fails_what_it_owed_and_opens_again)
{
    start_redis();
    start_proxy(200);
    pipe_to(proxy_port);
    int64_t v[2];
    cr_assert_eq(echo(99, 0, 2000 * MS, v), 0);
    /* Three tickets given up, their replies 200 ms away. */
    for (int i = 0; i < 3; i++)
        cr_expect_eq(echo(10 + (uint64_t)i, 0, 10 * MS, v), -ETIMEDOUT);
    /* The proxy dies with them (the connection resets). */
    kill(proxy_pid, SIGKILL);
    waitpid(proxy_pid, NULL, 0);
    proxy_pid = 0;
    int r = echo(20, 0, 500 * MS, v);
    cr_expect(r == -ECONNRESET || r == -EPIPE, "%d (%s)", r, strerror(-r));
    cr_expect_eq(atomic_load(&late_calls), 3);
    cr_expect_eq(atomic_load(&late_lost), 3);
    cr_expect_eq(pipe_.c.fd, -1, "the dead connection not closed");
    /* The proxy back (on another port: a new pipe to it). */
    start_proxy(0);
    struct rl_fleet_addr a;
    char url[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", proxy_port);
    cr_assert_null(rl_fleet_addr_parse(url, &a));
    pipe_.addr = a;
    cr_expect_eq(echo(21, 0, 1000 * MS, v), 0);
    cr_expect_eq(v[0], 21);
}

/* ---- late, or away (SPEC §8) ----------------------------------------- */

/* One echo sent at once and waited for as `w` allows (its bounds from
 * now): the wait's result, how long it took in *took. With `answered`,
 * the wait begins once the reply is in the socket: Redis answered, only
 * no thread of ours read it (a loaded machine may keep Redis itself from
 * answering within the quiet span, which is Redis away, not this). */
static int echo_waited(uint64_t quiet, uint64_t late_ns, bool answered,
                       uint64_t *took)
{
    uint64_t t0 = rl_clock_now_ns();
    struct rl_fleet_wait w = {t0 + quiet, t0 + late_ns, quiet};
    cr_assert_eq(rl_fleet_pipe_enter(&pipe_, NULL, 500 * MS, w.late), 0);
    struct echo e = {5, 5};
    uint64_t k;
    cr_assert_eq(rl_fleet_pipe_send(&pipe_, build_echo, &e, 0, false, &w, &k),
                 0);
    if (answered) {
        struct pollfd pf = {.fd = pipe_.c.fd, .events = POLLIN};
        cr_assert_eq(poll(&pf, 1, 5000), 1, "Redis did not answer in 5 s");
    }
    struct rl_fleet_result res;
    int r = rl_fleet_pipe_wait(&pipe_, k, &w, &res);
    *took = rl_clock_now_ns() - t0;
    if (r == -ETIMEDOUT) {
        struct rl_fleet_late none = {{0}};
        rl_fleet_pipe_abandon(&pipe_, k, &none);
    }
    rl_fleet_pipe_leave(&pipe_);
    return r;
}

static void *release_read_side(void *arg)
{
    (void)arg;
    usleep(200000);
    atomic_store(&pipe_.read_lock, 0);
    return NULL;
}

/* A reply that came while no thread of ours could read it (the read side
 * held by a thread the machine does not run, here for 200 ms) is late,
 * not Redis away: waited for past the 50 ms, and taken once the read side
 * is free; and the node was heard meanwhile. */
Test(fleet_pipe, a_reply_no_thread_read_yet_is_waited_for)
{
    start_redis();
    pipe_to(R.port);
    int64_t v[2];
    cr_assert_eq(echo(1, 1, 1000 * MS, v), 0);
    atomic_store(&pipe_.read_lock, 1);
    pthread_t t;
    pthread_create(&t, NULL, release_read_side, NULL);
    uint64_t took;
    int r = echo_waited(50 * MS, 5000 * MS, true, &took);
    pthread_join(t, NULL);
    cr_expect_eq(r, 0, "%d after %llu ms", r, (unsigned long long)(took / MS));
    cr_expect_geq(took, 150 * MS, "took %llu ms",
                  (unsigned long long)(took / MS));
    cr_expect_eq(atomic_load(&late_calls), 0);
}

/* A Redis that says nothing (stopped) ends the wait once it has been
 * quiet for the span, not at the late bound; a reply that then comes is
 * settled late. */
Test(fleet_pipe, a_stopped_redis_ends_the_wait_after_its_quiet_span)
{
    start_redis();
    pipe_to(R.port);
    int64_t v[2];
    cr_assert_eq(echo(1, 1, 1000 * MS, v), 0);
    kill(R.pid, SIGSTOP);
    uint64_t took;
    int r = echo_waited(50 * MS, 2000 * MS, false, &took);
    kill(R.pid, SIGCONT);
    cr_expect_eq(r, -ETIMEDOUT);
    cr_expect_geq(took, 50 * MS);
    /* Well before the 2 s bound: a machine 3 times slower than one that
     * takes the 50 ms span and one look past it still ends here. */
    cr_expect_lt(took, 1000 * MS, "took %llu ms",
                 (unsigned long long)(took / MS));
    cr_expect_eq(echo(2, 2, 1000 * MS, v), 0);
    cr_expect_eq(v[0], 2);
    cr_expect_eq(atomic_load(&late_calls), 1);
}
