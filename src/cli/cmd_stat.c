/* cmd_stat.c — `rlshim stat [-c FILE] [--json] [--watch]`: the live
 * counters and budgets of the caller's uid, read from its segment.
 *
 * Reading never disturbs running processes: counters are read with
 * relaxed loads, and `available` asks each algorithm's stat_available(), which
 * reads state words without changing them. Budgets are shown only when the
 * config given here is the one the segment was made for (same hash):
 * otherwise the words would be read with the wrong layout. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cmd_state.h"
#include "cli/commands.h"
#include "cli/stat_prometheus.h"
#include "cli/stat_rows.h"
#include "policy/budget.h"
#include "policy/config.h"
#include "policy/dests.h"
#include "policy/gate_pause.h"
#include "policy/open.h"
#include "policy/pauses.h"
#include "state/store.h"
#include "util/clock.h"

static int show_slot(const struct rl_slot_info *info, struct rl_slot *slot,
                     void *arg)
{
    struct stat_view *v = arg;
    if (strcmp(info->label, RL_DESTS_LABEL) == 0) {
        /* The per-destination table: its entries, when its layout is
         * known (the config it was made for). */
        if (v->layout_ok && slot->words != NULL)
            (void)rl_dests_each(&v->dests, slot->words, slot->nwords,
                                stat_dest_row, v);
        return 0;
    }
    /* A max_open area (no counters): --prometheus read it before. */
    if (strncmp(info->label, RL_PROM_OPEN_PREFIX,
                strlen(RL_PROM_OPEN_PREFIX)) == 0)
        return 0;
    const char *user;
    const struct rl_rule *rule =
        v->cfg ? rl_budget_parse_label(v->cfg, info->label, &user) : NULL;
    struct rl_budget_layout l;
    char section[RL_STORE_LABEL_MAX];

    if (!rule) {
        const char *bar = strrchr(info->label, '|');
        size_t n = bar ? (size_t)(bar - info->label) : 0;

        memcpy(section, info->label, n);
        section[n] = '\0';
        user = bar ? bar + 1 : info->label;
    } else {
        snprintf(section, sizeof section, "%s", rule->section);
        rl_budget_layout(rule, &l);
        /* A named section's budget is labelled "SECTION|NAME", which the
         * store's label cuts when NAME is long (a cgroup path, SPEC §16):
         * the key is shown whole, from the config. */
        if (!rule->is_default && rule->user != NULL &&
            strchr(user, '|') == NULL &&
            strncmp(rule->user, user, strlen(user)) == 0)
            user = rule->user;
    }
    /* --prometheus: the overflow budget of a per-destination section
     * ("USER|(more destinations)", policy/dests.c) is a destination's
     * budget, its name in the dest label. */
    const char *dest = NULL;
    char who[RL_STORE_LABEL_MAX];
    const char *bar = rule && v->prom ? strchr(user, '|') : NULL;
    if (bar != NULL && rl_rule_per_dest(rule)) {
        snprintf(who, sizeof who, "%.*s", (int)(bar - user), user);
        dest = bar + 1;
        user = who;
    }
    /* Units spent from leases count as allowed before their holder folds
     * them in; units in idle leases are what the next call takes back. */
    struct rl_lease_units lu = {{0}, {0}};
    if (rule && v->layout_ok && slot->words && l.nwords <= slot->nwords)
        rl_budget_lease_sum(&l, slot->words, v->now, &lu);
    for (int k = 0; k < RL_KIND_COUNT; k++) {
        uint64_t c[RL_STORE_STATS_PER_KIND];
        memcpy(c, &info->counters[k * RL_STORE_STATS_PER_KIND], sizeof c);
        c[RL_STAT_ALLOWED] += lu.spent[k];
        bool used = c[0] || c[1] || c[2] || c[3] ||
                    (k == RL_KIND_REQUEST &&
                     (info->tls_unseen > 0 || info->responded > 0));
        const struct rl_algorithm *a = NULL;
        uint64_t avail = 0;
        bool has = false;

        if (rule && rule->nlimits[k]) {
            a = rl_algorithm_get(rule->limits[k][0].algo);
            /* Per destination: what is available is in each dest row. */
            if (v->layout_ok && !stat_avail_unknown(v, rule) &&
                (!rl_rule_per_dest(rule) || dest != NULL))
                has = stat_available(rule, &l, k, slot, v->now, &avail);
            if (has) {
                uint64_t burst = rule->limits[k][0].burst;
                avail += lu.left[k];
                if (rule->nlimits[k] == 1 && avail > burst)
                    avail = burst;
            }
        } else if (!used) {
            continue; /* not limited and never counted */
        }
        if (dest != NULL) {
            struct rl_prom_row pr = {
                user, section, rl_kind_name(k), dest, used ? c : NULL, has,
                avail, k == RL_KIND_REQUEST ? info->responded : 0};
            (void)rl_prom_add(&pr);
            continue;
        }
        v->tls_unseen = info->tls_unseen;
        v->responded = info->responded;
        stat_row(v, user, section, k, a ? a->name : NULL, c, has, avail);
        v->tls_unseen = 0;
        v->responded = 0;
    }
    /* Requests over TLS the shim cannot see (SPEC §11): said when any. */
    if (info->tls_unseen > 0 && dest == NULL) {
        if (v->prom)
            (void)rl_prom_tls_unseen(user, section, info->tls_unseen);
        else if (!v->json)
            fprintf(v->out, "%-16s %-18s TLS connections not counted: %llu "
                            "(requests over TLS the shim cannot see)\n",
                    user, section, (unsigned long long)info->tls_unseen);
    }
    if (v->prom && rule && v->layout_ok && rule->max_open > 0 && !dest)
        rl_prom_budget_open(info->index, rule, user);
    return 0;
}

static int show(struct rl_store *s, struct stat_view *v)
{
    v->rows = 0;
    v->now = rl_clock_now_ns();
    v->layout_ok = v->cfg && rl_store_config_hash(s) == rl_budget_hash(v->cfg);
    if (v->prom)
        rl_prom_segment(s);
    if (v->json) {
        fputc('[', v->out);
    } else if (!v->prom) {
        fprintf(v->out,
                "%-16s %-18s %-10s %-14s %10s %10s %10s %12s %10s %10s\n",
                "USER", "RULE", "LIMIT", "ALGORITHM", "ALLOWED", "DENIED",
                "DELAYED", "DELAYED_MS", "AVAILABLE", "RESPONDED");
    }
    rl_pauses_of(s, &v->pauses);
    v->has_pauses = true;
    rl_store_each(s, show_slot, v);
    /* The destinations paused in sections without a table of their own
     * (a per-destination budget's row says its own). */
    if (!v->prom && !v->json)
        rl_pauses_each(&v->pauses, v->now, stat_pause_row, v);
    v->has_pauses = false;
    if (v->json)
        fputs(v->rows ? "\n]\n" : "]\n", v->out);
    fflush(v->out);
    return 0;
}

/* --all (store part): every segment of the uid, one table each under a
 * line naming it and what it costs: the bytes of memory its file holds
 * (st_blocks * 512: a segment is sparse, paid for as its budgets are
 * first used) and its length (JSON: one object per segment, its rows in
 * "budgets"). */
struct all {
    struct stat_view *v;
    unsigned n;
    int status;
};

static int show_segment(uint64_t hash, void *arg)
{
    struct all *a = arg;
    struct rl_store *s = NULL;
    struct rl_store_desc d;
    char why[512];
    int r = rl_store_attach(&s, NULL, (uint32_t)getuid(), hash, why,
                            sizeof why);

    if (r < 0) {
        if (r != -ENOENT)
            fprintf(stderr, "rlshim: %s\n", why);
        return 0;
    }
    rl_store_describe(s, &d);
    double ago = (double)(rl_clock_now_ns() - d.last_used_ns) / 1e9;
    if (a->v->json)
        fprintf(a->v->out,
                "%s{\"config_hash\": \"%016llx\", \"last_used_s_ago\": "
                "%.1f, \"longest_period_s\": %.3f, \"allocated_bytes\": "
                "%llu, \"size_bytes\": %llu, \"budgets\": ",
                a->n ? ",\n " : "", (unsigned long long)hash, ago,
                (double)d.max_period_ns / 1e9,
                (unsigned long long)d.allocated_bytes,
                (unsigned long long)d.size_bytes);
    else if (!a->v->prom) /* its rows are merged into one exposition */
        fprintf(a->v->out,
                "%ssegment rlshim-%u-%016llx: used %.1f s ago, longest "
                "period %.3f s, %llu bytes allocated (of %llu)%s\n",
                a->n ? "\n" : "", (unsigned)getuid(),
                (unsigned long long)hash, ago, (double)d.max_period_ns / 1e9,
                (unsigned long long)d.allocated_bytes,
                (unsigned long long)d.size_bytes,
                a->v->cfg && rl_budget_hash(a->v->cfg) == hash ? " (this config)"
                                                         : "");
    /* Another config's segment: its words are read with no config, never
     * through this one's layout. */
    const struct rl_config *cfg = a->v->cfg;
    if (cfg && rl_budget_hash(cfg) != hash)
        a->v->cfg = NULL;
    show(s, a->v);
    a->v->cfg = cfg;
    if (a->v->json)
        fputs("}", a->v->out);
    rl_store_close(s);
    a->n++;
    return 0;
}

static int show_all(struct stat_view *v)
{
    struct all a = {v, 0, 0};

    if (v->json)
        fputc('[', v->out);
    int r = rl_store_each_segment(NULL, (uint32_t)getuid(), show_segment, &a);
    if (v->json)
        fputs("]\n", v->out);
    else if (v->prom)
        rl_prom_print(v->out);
    else if (a.n == 0 && r == 0)
        fprintf(stderr, "rlshim: nothing counted yet\n");
    if (r < 0) {
        fprintf(stderr, "rlshim: the state dir cannot be read: %s\n",
                strerror(-r));
        return 1;
    }
    return 0;
}

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
    (void)sig;
    stop = 1;
}

static void usage(FILE *f)
{
    fputs("usage: rlshim stat [-c FILE] [--json | --prometheus] [--watch] "
          "[--all]\n",
          f);
}

int rl_cli_load_optional(const char *opt, struct rl_config **cfg)
{
    struct rl_diag d = {0};
    const char *path = rl_cli_config_path(opt);
    int r;

    *cfg = NULL;
    if (!opt && !secure_getenv("RLSHIM_CONFIG") && access(path, F_OK) != 0)
        return 0;
    r = rl_config_load(path, cfg, &d);
    if (r < 0) {
        for (size_t i = 0; i < d.n; i++)
            fprintf(stderr, "rlshim: %s\n", d.msgs[i]);
        if (d.n == 0)
            fprintf(stderr, "rlshim: %s: %s\n", path, strerror(-r));
    }
    rl_diag_free(&d);
    return r;
}

int rl_cmd_stat(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"config", required_argument, NULL, 'c'},
        {"json", no_argument, NULL, 'j'},
        {"prometheus", no_argument, NULL, 'P'},
        {"watch", no_argument, NULL, 'w'},
        {"all", no_argument, NULL, 'a'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct stat_view v = {.out = stdout};
    struct rl_config *cfg = NULL;
    struct rl_store *s = NULL;
    const char *copt = NULL;
    bool watch = false, all = false;
    char why[512];
    int c, r, status = 0;

    optind = 1;
    opterr = 0; /* our own message, named after the command */
    while ((c = getopt_long(argc, argv, ":c:jwah", longopts, NULL)) != -1) {
        switch (c) {
        case 'a':
            all = true;
            break;
        case 'c':
            copt = optarg;
            break;
        case 'j':
            v.json = true;
            break;
        case 'P':
            v.prom = true;
            break;
        case 'w':
            watch = true;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default: /* ':' or '?' */
            return rl_cli_bad_option("stat", c, argv, usage);
        }
    }
    if (optind != argc) {
        usage(stderr);
        return 2;
    }
    if (rl_cli_load_optional(copt, &cfg) < 0)
        return 1;
    v.cfg = cfg;
    if (cfg && rl_dests_setup(&v.dests, cfg) < 0)
        return 1;
    if (cfg && cfg->state_mode == RL_STATE_PROCESS)
        fprintf(stderr,
                "rlshim: %s has state = process: each process keeps "
                "its own counters, none are shown here\n",
                cfg->path ? cfg->path : "the config");
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    if (all || !cfg) {
        /* Without a config, which segment is meant is unknown: all. */
        do {
            if (watch && !v.json && !v.prom)
                fputs("\033[H\033[2J", stdout);
            status = show_all(&v);
            if (watch)
                sleep(1);
        } while (watch && !stop && status == 0);
        goto out;
    }
    do {
        if (!s) {
            r = rl_store_attach(&s, NULL, (uint32_t)getuid(),
                                cfg ? rl_budget_hash(cfg) : 0, why,
                                sizeof why);
            if (r == -ENOENT && !watch) {
                /* Nothing has been counted yet: an empty table. */
                if (v.json)
                    fputs("[]\n", stdout);
                else if (v.prom)
                    rl_prom_print(stdout);
                else
                    fprintf(stderr, "rlshim: %s: nothing counted yet\n", why);
                goto out;
            }
            if (r < 0 && r != -ENOENT) {
                fprintf(stderr, "rlshim: %s\n", why);
                status = 1;
                goto out;
            }
        }
        if (watch && !v.json && !v.prom)
            fputs("\033[H\033[2J", stdout);
        if (s) {
            if (v.cfg && rl_store_config_hash(s) != rl_budget_hash(v.cfg) &&
                !watch)
                fprintf(stderr, "rlshim: the state was made for another "
                                "config: budgets are not shown\n");
            show(s, &v);
            if (v.prom)
                rl_prom_print(stdout);
            /* Replaced meanwhile: follow the new segment. */
            if (rl_store_is_stale(s)) {
                rl_store_close(s);
                s = NULL;
            }
        } else if (v.json) {
            fputs("[]\n", stdout);
        }
        if (watch)
            sleep(1);
    } while (watch && !stop);
out:
    rl_store_close(s);
    rl_dests_close(&v.dests);
    if (cfg)
        rl_config_free(cfg);
    return status;
}
