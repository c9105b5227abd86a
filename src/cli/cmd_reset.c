/* cmd_reset.c — `rlshim reset [-c FILE] [USER]`: forget the budgets and
 * counters of every user of the caller's uid, or of one.
 *
 * Running processes are not disturbed: each state word is zeroed with one
 * store, which is what a never-used budget looks like. With the config the
 * segment was made for, a sliding window's lock word is left alone (a
 * process may hold it this very moment; zeroing it would let a second
 * process in beside it): its head, newest stamp and ring are cleared. */
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
    const struct rl_config *cfg; /* NULL: no config */
    bool layout_ok;              /* cfg is the segment's config */
    const char *user;            /* NULL: all */
    struct rl_store *store;
    unsigned done;
};

static void reset_rule_words(struct reset *r, uint32_t index,
                             const struct rl_rule *rule)
{
    struct rl_budget_layout l;

    rl_budget_layout(rule, &l);
    /* Leases are zeroed before and after the buckets (policy/lease.c):
     * units a thread took from the old bucket are never spent beside a
     * full new one. */
    if (l.lease)
        rl_store_reset_words(r->store, index, l.lease, l.nwords - l.lease);
    for (int k = 0; k < RL_KIND_COUNT; k++) {
        for (unsigned i = 0; i < rule->nlimits[k] && i < RL_MAX_RATES; i++) {
            const struct rl_limit *lim = &rule->limits[k][i];
            const struct rl_algorithm *a = rl_algorithm_get(lim->algo);
            uint32_t n = a ? a->state_words(lim) : 0;
            uint32_t skip = lim->algo == RL_ALGO_SLIDING_WINDOW ? 1 : 0;

            if (n > skip)
                rl_store_reset_words(r->store, index, l.offset[k][i] + skip,
                                     n - skip);
        }
    }
    if (l.lease)
        rl_store_reset_words(r->store, index, l.lease, l.nwords - l.lease);
}

static int reset_slot(const struct rl_slot_info *info, struct rl_slot *slot,
                      void *arg)
{
    struct reset *r = arg;
    const char *user;
    const struct rl_rule *rule =
        rl_budget_parse_label(r->cfg, info->label, &user);

    (void)slot;
    if (r->user && strcmp(user, r->user) != 0)
        return 0;
    if (rule && r->layout_ok) {
        reset_rule_words(r, info->index, rule);
        rl_store_reset_counters(r->store, info->index);
    } else {
        rl_store_reset_slot(r->store, info->index);
    }
    r->done++;
    return 0;
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
        case ':':
            fprintf(stderr, "rlshim reset: option '%s' needs a value\n",
                    argv[optind - 1]);
            usage(stderr);
            return 2;
        default:
            fprintf(stderr, "rlshim reset: unknown option '%s'\n",
                    argv[optind - 1]);
            usage(stderr);
            return 2;
        }
    }
    if (argc - optind > 1) {
        usage(stderr);
        return 2;
    }
    r.user = optind < argc ? argv[optind] : NULL;
    if (rl_cli_load_optional(copt, &cfg) < 0)
        return 1;
    r.cfg = cfg;
    e = rl_store_attach(&r.store, NULL, (uint32_t)getuid(), why, sizeof why);
    if (e == -ENOENT) {
        printf("rlshim: nothing to reset (%s)\n", why);
        goto out;
    }
    if (e < 0) {
        fprintf(stderr, "rlshim: %s\n", why);
        status = 1;
        goto out;
    }
    r.layout_ok = cfg && rl_store_config_hash(r.store) == rl_budget_hash(cfg);
    rl_store_each(r.store, reset_slot, &r);
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
