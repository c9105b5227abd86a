/* A fork while other threads resolve names (SPEC §1: fork keeps the
 * names; issue 19): the pre-fork pattern of python's multiprocessing,
 * gunicorn and crawlers' workers. A child forked while another thread was
 * noting a name must never wait for that thread (it has none). Measured
 * against the same program bare, in the same run: glibc's own resolver
 * has a lock that a fork can inherit held (resolv_conf.c; the child blocks
 * in a futex wait, bare or not), so some children hang either way. */
#include "harness.h"

TestSuite(fork_names, .init = h_setup, .fini = h_teardown, .timeout = 240);

#define CHILDREN "2000"

struct storm {
    long children, exited, failed, stuck, spinning;
};

static void storm(bool preload, struct storm *s)
{
    char helper[512];
    char *argv[] = {(char *)h_helper("fork_resolve", helper, sizeof helper),
                    "3", CHILDREN, "3000", "localhost", NULL};
    struct run r;
    h_run(&r, preload, 200, argv);
    cr_assert_eq(r.status, 0, "fork_resolve (%s): status %d: %s",
                 preload ? "shim" : "bare", r.status, r.out);
    s->children = h_out_long(&r, "children", -1);
    s->exited = h_out_long(&r, "exited", -1);
    s->failed = h_out_long(&r, "failed", -1);
    s->stuck = h_out_long(&r, "stuck", -1);
    s->spinning = h_out_long(&r, "spinning", -1);
    cr_log_info("%s: %s", preload ? "shim" : "bare", r.out);
    cr_assert_eq(s->children, atol(CHILDREN), "%s", r.out);
    /* A name that does not resolve is never noted: nothing tested. */
    cr_assert_eq(s->failed, 0, "children failed to resolve localhost: %s",
                 r.out);
}

/* Three threads resolve localhost in a loop while 2000 children each
 * resolve it once and exit. None of the shim's children spins (none of
 * the bare ones does: glibc's hang is a futex wait), and no more of them
 * hang than chance allows beside the bare count (two Poisson counts of
 * one rate differ by 3 of their standard deviations one time in 700). */
Test(fork_names, children_of_resolving_threads_never_hang)
{
    h_config_write("[default]\n"
                   "connect = 1000/s\n"
                   "to = localhost\n");
    struct storm bare, shim;
    storm(false, &bare);
    storm(true, &shim);
    cr_expect_leq(shim.spinning, bare.spinning,
                  "children spinning for ever: %ld under the shim, %ld bare "
                  "(stuck: %ld and %ld of " CHILDREN ")",
                  shim.spinning, bare.spinning, shim.stuck, bare.stuck);
    long sd = 0; /* the square root of the two counts, rounded up */
    while (sd * sd < bare.stuck + shim.stuck)
        sd++;
    cr_expect_leq(shim.stuck, bare.stuck + 3 * sd + 3,
                  "children stuck: %ld under the shim, %ld bare (of " CHILDREN
                  "; %ld and %ld spinning)",
                  shim.stuck, bare.stuck, shim.spinning, bare.spinning);
}
