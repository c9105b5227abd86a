/* A fork while other threads resolve names (SPEC §1: fork keeps the
 * names; issue 19): the pre-fork pattern of python's multiprocessing,
 * gunicorn and crawlers' workers. A child forked while another thread was
 * noting a name must never wait for that thread (it has none). Measured
 * against the same program bare, in the same run: glibc's own resolver
 * has a lock that a fork can inherit held (resolv_conf.c; the child blocks
 * in a futex wait, bare or not), so some children hang either way. */
#include "harness.h"

TestSuite(fork_names, .init = h_setup, .fini = h_teardown, .timeout = 240);

struct storm {
    long children, exited, failed, stuck, spinning, in_libc, elsewhere;
};

/* Children per run: an ASan build forks ten times slower, and a tenth of
 * its children hang bare (in its allocator's lock, and glibc's), each
 * costing the timeout; there the test looks for spins and memory errors
 * more than for the rare race. */
static long children(void)
{
    const char *san = getenv("RLSHIM_SANITIZER");
    return san != NULL && strcmp(san, "address") == 0 ? 200 : 2000;
}

static void storm(bool preload, struct storm *s)
{
    char helper[512], n[16];
    snprintf(n, sizeof n, "%ld", children());
    char *argv[] = {(char *)h_helper("fork_resolve", helper, sizeof helper),
                    "3", n, "3000", "localhost", NULL};
    struct run r;
    h_run(&r, preload, 110, argv);
    cr_assert_eq(r.status, 0, "fork_resolve (%s): status %d: %s",
                 preload ? "shim" : "bare", r.status, r.out);
    s->children = h_out_long(&r, "children", -1);
    s->exited = h_out_long(&r, "exited", -1);
    s->failed = h_out_long(&r, "failed", -1);
    s->stuck = h_out_long(&r, "stuck", -1);
    s->spinning = h_out_long(&r, "spinning", -1);
    s->in_libc = h_out_long(&r, "in_libc", -1);
    s->elsewhere = h_out_long(&r, "elsewhere", -1);
    cr_log_info("%s: %s", preload ? "shim" : "bare", r.out);
    cr_assert_eq(s->children, children(), "%s", r.out);
    cr_assert_eq(s->stuck, s->spinning + s->in_libc + s->elsewhere, "%s",
                 r.out);
    /* A name that does not resolve is never noted: nothing tested. */
    cr_assert_eq(s->failed, 0, "children failed to resolve localhost: %s",
                 r.out);
}

/* Three threads resolve localhost in a loop while 2000 children each
 * resolve it once and exit. None of the shim's children spins (no bare
 * one does), and no more of them block elsewhere than in libc's own lock
 * than chance allows beside the bare count (two Poisson counts of one
 * rate differ by 3 of their standard deviations one time in 700; 0 and 0
 * in a plain build, where only an ASan runtime's lock adds some). Those
 * blocked in libc's resolver lock, bare or not, are glibc's: their count
 * varies with the load from run to run (8 to 45 of 2000 bare, seen), so
 * it is logged, not compared. Measured before the fix, on 2 loaded
 * cores: 11 spinning and 34 stuck under the shim, 8 stuck bare. */
Test(fork_names, children_of_resolving_threads_never_hang)
{
    h_config_write("[default]\n"
                   "connect = 1000/s\n"
                   "to = localhost\n");
    struct storm bare, shim;
    storm(false, &bare);
    storm(true, &shim);
    cr_log_info("stuck in libc's lock: %ld under the shim, %ld bare",
                shim.in_libc, bare.in_libc);
    cr_expect_leq(shim.spinning, bare.spinning,
                  "children spinning for ever: %ld under the shim, %ld bare "
                  "(stuck: %ld and %ld of %ld)",
                  shim.spinning, bare.spinning, shim.stuck, bare.stuck,
                  children());
    long sd = 0; /* the square root of the two counts, rounded up */
    while (sd * sd < bare.elsewhere + shim.elsewhere)
        sd++;
    cr_expect_leq(shim.elsewhere, bare.elsewhere + 3 * sd,
                  "children blocked outside libc's lock: %ld under the shim, "
                  "%ld bare (of %ld; %ld and %ld spinning)",
                  shim.elsewhere, bare.elsewhere, children(), shim.spinning,
                  bare.spinning);
}
