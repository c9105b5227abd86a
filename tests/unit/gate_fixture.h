/* gate_fixture.h — what the suites that decide through policy/gate.h
 * share: a state directory of the test's own (each Criterion test runs in
 * its own process, so a segment never leaks into the next test) and a gate
 * set up from config text for one user key. Included once per test file. */
#ifndef RL_TESTS_GATE_FIXTURE_H
#define RL_TESTS_GATE_FIXTURE_H

#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "policy/config.h"
#include "policy/gate.h"
#include "policy/identity.h"
#include "policy/proc.h"

static char fixture_dir[64];

/* The process state the suite decides through (a test makes another of
 * its own where it needs two). */
static struct rl_proc proc;

/* A fresh RLSHIM_STATE_DIR under /tmp, named after the suite. */
static inline void fixture_state_dir(const char *suite)
{
    snprintf(fixture_dir, sizeof fixture_dir, "/tmp/rlshim-%s-XXXXXX", suite);
    cr_assert_not_null(mkdtemp(fixture_dir));
    setenv("RLSHIM_STATE_DIR", fixture_dir, 1);
}

static inline void fixture_state_dir_remove(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", fixture_dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", fixture_dir);
}

/* The gate of p, for the user `key`, under config `text`. */
static inline void fixture_gate(struct rl_proc *p, const char *key,
                                const char *text)
{
    struct rl_config *cfg = NULL;
    struct rl_diag diag = {0};
    int r = rl_config_load_string(text, "test.ini", &cfg, &diag);
    cr_assert_eq(r, 0, "config: %s", diag.n ? diag.msgs[0] : "?");
    rl_diag_free(&diag);
    struct rl_identity id = {.has_key = true, .uid = (uint32_t)getuid()};
    snprintf(id.key, sizeof id.key, "%s", key);
    char why[256] = "";
    cr_assert_eq(rl_gate_init(p, cfg, &id, why, sizeof why), 0, "%s", why);
}

#endif
