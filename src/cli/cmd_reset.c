/* cmd_reset.c — `rlshim reset [-c FILE] [USER]`: forget the budgets and
 * counters of every user of the caller's uid, or of one.
 *
 * Running processes are not disturbed. With a config, its segment (named
 * after the config's hash) is reset budget by budget: a token bucket's
 * word with one store, which is what a never-used budget looks like; a
 * sliding window under its own lock (a process may be inside it this very
 * moment: its ring is emptied between two decisions, never under one).
 * Without a config the layout of the words is unknown, so each segment of
 * the uid is renewed whole instead: a fresh one takes its place and the
 * processes using the old one move over at their next decision. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/cmd_state.h"
#include "cli/commands.h"
#include "policy/budget.h"
#include "state/store.h"

struct reset {
    const struct rl_config *cfg;
    const char *user; /* NULL: all */
    struct rl_store *store;
    unsigned done;
    unsigned busy; /* windows whose lock could not be had */
};

/* Every limit of the rule through its algorithm's reset (limit.h). */
static void reset_rule_words(struct reset *r, const struct rl_rule *rule,
                             struct rl_slot *slot)
{
    struct rl_budget_layout l;

    rl_budget_layout(rule, &l);
    if (!slot->words || l.nwords > slot->nwords)
        return;
    /* Leases are zeroed before and after the buckets (policy/lease.c):
     * units a thread took from the old bucket are never spent beside a
     * full new one. */
    if (l.lease)
        rl_store_reset_words(r->store, slot->index, l.lease,
                             l.nwords - l.lease);
    for (int k = 0; k < RL_KIND_COUNT; k++) {
        for (unsigned i = 0; i < rule->nlimits[k] && i < RL_MAX_RATES; i++) {
            const struct rl_limit *lim = &rule->limits[k][i];
            const struct rl_algorithm *a = rl_algorithm_get(lim->algo);

            if (a && a->reset(slot->words + l.offset[k][i], lim) < 0)
                r->busy++;
        }
    }
    if (l.lease)
        rl_store_reset_words(r->store, slot->index, l.lease,
                             l.nwords - l.lease);
}

static int reset_slot(const struct rl_slot_info *info, struct rl_slot *slot,
                      void *arg)
{
    struct reset *r = arg;
    const char *user;
    const struct rl_rule *rule =
        rl_budget_parse_label(r->cfg, info->label, &user);

    if (r->user && strcmp(user, r->user) != 0)
        return 0;
    if (rule)
        reset_rule_words(r, rule, slot);
    rl_store_reset_counters(r->store, info->index);
    r->done++;
    return 0;
}

struct renew {
    unsigned done;
    int status;
};

/* One segment of the uid, renewed whole (see the top). */
static int renew_one(uint64_t hash, void *arg)
{
    struct renew *w = arg;
    struct rl_store *s = NULL;
    char why[512];
    int e = rl_store_attach(&s, NULL, (uint32_t)getuid(), hash, why,
                            sizeof why);

    if (e == 0)
        e = rl_store_renew(s, NULL, (uint32_t)getuid(), why, sizeof why);
    rl_store_close(s);
    if (e == 0)
        w->done++;
    else if (e != -ENOENT) {
        fprintf(stderr, "rlshim: %s\n", why);
        w->status = 1;
    }
    return 0;
}

static int reset_all_segments(const char *user)
{
    struct renew w = {0, 0};
    int e;

    if (user) {
        fprintf(stderr, "rlshim: one user's budgets are reset with the "
                        "config they were made for (-c FILE)\n");
        return 1;
    }
    e = rl_store_each_segment(NULL, (uint32_t)getuid(), renew_one, &w);
    if (e < 0) {
        fprintf(stderr, "rlshim: the state dir cannot be read: %s\n",
                strerror(-e));
        return 1;
    }
    if (w.done == 0 && w.status == 0)
        printf("rlshim: nothing to reset\n");
    else
        printf("rlshim: reset %u segment%s\n", w.done, w.done == 1 ? "" : "s");
    return w.status;
}

static void usage(FILE *f)
{
    fputs("usage: rlshim reset [-c FILE] [USER]\n", f);
}

int rl_cmd_reset(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"config", required_argument, NULL, 'c'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct reset r = {0};
    struct rl_config *cfg = NULL;
    const char *copt = NULL;
    char why[512];
    int c, e, status = 0;

    optind = 1;
    opterr = 0; /* our own message, named after the command */
    while ((c = getopt_long(argc, argv, ":c:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'c':
            copt = optarg;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default: /* ':' or '?' */
            return rl_cli_bad_option("reset", c, argv, usage);
        }
    }
    if (argc - optind > 1) {
        usage(stderr);
        return 2;
    }
    r.user = optind < argc ? argv[optind] : NULL;
    if (rl_cli_load_optional(copt, &cfg) < 0)
        return 1;
    if (!cfg)
        return reset_all_segments(r.user);
    r.cfg = cfg;
    e = rl_store_attach(&r.store, NULL, (uint32_t)getuid(), rl_budget_hash(cfg), why,
                        sizeof why);
    if (e == -ENOENT) {
        printf("rlshim: nothing to reset (%s)\n", why);
        goto out;
    }
    if (e < 0) {
        fprintf(stderr, "rlshim: %s\n", why);
        status = 1;
        goto out;
    }
    rl_store_each(r.store, reset_slot, &r);
    if (r.busy) {
        fprintf(stderr,
                "rlshim: %u window%s not reset: %s lock was held for over "
                "a second (a stopped process?)\n",
                r.busy, r.busy == 1 ? "" : "s", r.busy == 1 ? "its" : "their");
        status = 1;
    }
    if (r.user && r.done == 0) {
        fprintf(stderr, "rlshim: no budget for user '%s'\n", r.user);
        status = 1;
    } else {
        printf("rlshim: reset %u budget%s\n", r.done, r.done == 1 ? "" : "s");
    }
out:
    rl_store_close(r.store);
    if (cfg)
        rl_config_free(cfg);
    return status;
}
