/* test_reload.c — a process follows its config file (policy/reload.h):
 * an edit is applied from the next decision, the config it replaces is
 * kept (a thread may be deciding on it), a broken edit keeps the config,
 * the number of edits followed is bounded, and sections are told apart
 * by the shape of their budgets. Each Criterion test runs in a worker
 * process of its own, so the environment set here touches nothing else. */
#include <criterion/criterion.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "policy/config.h"
#include "policy/proc.h"
#include "policy/reload.h"
#include "proc_new.h"
#include "reload_dir.h"

TestSuite(reload, .init = reload_dir_make, .fini = reload_dir_remove);

static struct rl_proc *set_up(void)
{
    char line[512];
    struct rl_proc *p = proc_new();
    rl_proc_init(p);
    cr_assert_eq(rl_proc_set_up(p, RL_PROC_AT_FIRST_CALL, line, sizeof line),
                 RL_PROC_READY, "%s", line);
    return p;
}

/* A second on: the next look is due now. */
static enum rl_proc_state look_now(struct rl_proc *p)
{
    atomic_store(&p->watch.w.next_look, 1);
    cr_assert(rl_reload_due(p));
    return rl_reload_look(p);
}

static uint64_t connect_rate(const struct rl_config *c)
{
    return c->rules[0].limits[RL_KIND_CONNECT][0].count;
}

Test(reload, an_edit_is_applied_and_the_old_config_kept)
{
    put("[default]\nconnect = 5/s\n");
    struct rl_proc *p = set_up();
    struct rl_config *old = p->cfg;
    put("[default]\nconnect = 7/s\n");
    cr_assert_eq(look_now(p), RL_PROC_READY);
    cr_assert_neq(p->cfg, old);
    cr_assert_eq(connect_rate(p->cfg), 7);
    cr_assert_eq(rl_proc_gen(p)->gate.rule, &p->cfg->rules[0]);
    /* Retired, not freed: a thread deciding on it still reads it. */
    cr_assert_eq(p->watch.nretired, 1);
    cr_assert_eq(p->watch.retired[0], old);
    cr_assert_eq(connect_rate(old), 5);
}

Test(reload, no_look_between_seconds)
{
    put("[default]\nconnect = 5/s\n");
    struct rl_proc *p = set_up();
    put("[default]\nconnect = 7/s\n");
    cr_assert_not(rl_reload_due(p)); /* read just now */
    cr_assert_eq(rl_reload_look(p), RL_PROC_READY);
    cr_assert_eq(connect_rate(p->cfg), 5);
}

Test(reload, a_broken_edit_keeps_the_config)
{
    put("[default]\nconnect = 5/s\n");
    struct rl_proc *p = set_up();
    struct rl_config *old = p->cfg;
    put("[default]\nconect = 7/s\n");
    cr_assert_eq(look_now(p), RL_PROC_READY);
    cr_assert_eq(p->cfg, old);
    cr_assert_eq(p->watch.nretired, 0);
    cr_assert(p->watch.said);
    /* Fixed: followed. */
    put("[default]\nconnect = 9/s\n");
    cr_assert_eq(look_now(p), RL_PROC_READY);
    cr_assert_eq(connect_rate(p->cfg), 9);
}

Test(reload, a_removed_file_throttles_nothing)
{
    put("[default]\nconnect = 5/s\n");
    struct rl_proc *p = set_up();
    cr_assert_eq(unlink(path), 0);
    cr_assert_eq(look_now(p), RL_PROC_OFF);
    cr_assert_null(rl_proc_gen(p)->gate.rule);
    put("[default]\nconnect = 3/s\n");
    cr_assert_eq(look_now(p), RL_PROC_READY);
    cr_assert_eq(connect_rate(p->cfg), 3);
}

/* An in-place write truncates, then writes: a look between the two sees
 * an empty file. Followed at once, it would throttle nothing, and a
 * broken edit written next would keep that. */
Test(reload, an_emptied_file_waits_for_a_second_look)
{
    put("[default]\nconnect = 5/s\n");
    struct rl_proc *p = set_up();
    struct rl_config *old = p->cfg;
    FILE *f = fopen(path, "w"); /* truncated: the write is to come */
    cr_assert_not_null(f);
    cr_assert_eq(look_now(p), RL_PROC_READY);
    cr_assert_eq(p->cfg, old, "an empty file followed at its first look");
    /* The write comes, and it is broken: the config read first stays. */
    fputs("[default]\nconect = 7/s\n", f);
    fclose(f);
    cr_assert_eq(look_now(p), RL_PROC_READY);
    cr_assert_eq(p->cfg, old);
    cr_assert_eq(connect_rate(p->cfg), 5);
    /* Emptied for good: followed at the second look that finds it so. */
    f = fopen(path, "w");
    cr_assert_not_null(f);
    fclose(f);
    cr_assert_eq(look_now(p), RL_PROC_READY);
    cr_assert_eq(p->cfg, old);
    cr_assert_eq(look_now(p), RL_PROC_OFF);
    cr_assert_null(rl_proc_gen(p)->gate.rule);
}

Test(reload, the_edits_followed_are_bounded)
{
    put("[default]\nconnect = 5/s\n");
    struct rl_proc *p = set_up();
    for (unsigned i = 0; i < RL_RELOAD_MAX + 3; i++) {
        char text[64];
        snprintf(text, sizeof text, "[default]\nconnect = %u/s\n", 10 + i);
        put(text);
        cr_assert_eq(look_now(p), RL_PROC_READY);
    }
    cr_assert_eq(p->watch.nretired, RL_RELOAD_MAX);
    cr_assert_eq(connect_rate(p->cfg), 10 + RL_RELOAD_MAX - 1);
    cr_assert(p->watch.said);
}

Test(reload, sections_are_told_apart_by_their_budgets_shape)
{
    struct rl_config *a = NULL, *b = NULL;
    struct rl_diag d = {0};
    cr_assert_eq(rl_config_load_string(
                     "[default]\nconnect = 5/s\non_deny = delay\n"
                     "[user:x]\nconnect = 1/s\n",
                     "a", &a, &d),
                 0);
    cr_assert_eq(rl_config_load_string(
                     "[default]\nconnect = 5/s\n"
                     "[user:x]\nconnect = 1/s\nconnect_burst = 2\n",
                     "b", &b, &d),
                 0);
    cr_assert(rl_reload_same_shape(&a->rules[0], &b->rules[0]),
              "on_deny shapes no budget");
    cr_assert_not(rl_reload_same_shape(&a->rules[1], &b->rules[1]),
                  "a burst does");
    rl_config_free(a);
    rl_config_free(b);
}
