/* report.c — the exit report (report.h). */
#include "policy/report.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "policy/dest.h"
#include "policy/gate_int.h"
#include "policy/proc.h"
#include "policy/sites.h"
#include "util/log.h"

/* Section sec's counts: a site's own, else the rule's. */
static struct rl_report_counts *counts_of(struct rl_report *r,
                                          const struct rl_rule *sec)
{
    if (sec != NULL && sec->site != NULL && r->sections != NULL &&
        sec >= r->rules && sec < r->rules + r->nrules)
        return &r->sections[sec - r->rules];
    return &r->mine;
}

void rl_report_add_in(struct rl_report *r, const struct rl_rule *sec,
                      int kind, int stat, uint64_t n)
{
    if (r->on && n != 0)
        rl_add_relaxed_u64(&counts_of(r, sec)->n[kind][stat], n);
}

void rl_report_sub_in(struct rl_report *r, const struct rl_rule *sec,
                      int kind, int stat, uint64_t n)
{
    if (r->on && n != 0)
        rl_sub_sat_u64(&counts_of(r, sec)->n[kind][stat], n);
}

void rl_report_add_responded(struct rl_report *r, const struct rl_rule *sec,
                             uint64_t n)
{
    if (r->on && n != 0)
        rl_add_relaxed_u64(&counts_of(r, sec)->responded, n);
}

void rl_report_add(struct rl_report *r, int kind, int stat, uint64_t n)
{
    rl_report_add_in(r, NULL, kind, stat, n);
}

void rl_report_sub(struct rl_report *r, int kind, int stat, uint64_t n)
{
    rl_report_sub_in(r, NULL, kind, stat, n);
}

int rl_report_setup(struct rl_report *r, const struct rl_config *cfg)
{
    bool sites = false;
    for (size_t i = 0; i < cfg->nrules; i++)
        sites |= cfg->rules[i].site != NULL;
    if (!sites || r->sections != NULL)
        return 0;
    struct rl_report_counts *s = calloc(cfg->nrules, sizeof *s);
    if (s == NULL)
        return -ENOMEM;
    r->rules = cfg->rules;
    r->nrules = cfg->nrules;
    r->sections = s;
    return 0;
}

/* One more in budget b's segment count and in section sec's report. */
static void count_unseen(struct rl_report *r, const struct rl_rule *sec,
                         struct budget *b)
{
    rl_add_relaxed_u64(&counts_of(r, sec)->tls_unseen, 1);
    if (b != NULL && b->slot.counters != NULL)
        rl_store_count_tls_unseen(&b->slot);
}

bool rl_report_tls_unseen(struct rl_proc *p, const void *sa, unsigned salen)
{
    struct rl_gen *G = rl_proc_gen(p);
    struct rl_gate *g = &G->gate;
    const struct rl_rule *rule = g->rule;
    struct rl_peer peer;
    char name[RL_NAME_MAX + 1];
    /* Not known: only sections without `to` cover it (as a request with
     * no destination, gate_charges.c). */
    if (sa == NULL || !rl_peer_from_addr(&p->names, sa, salen, &peer))
        memset(&peer, 0, sizeof peer);
    /* Pairs with the release stores of the gate's cur in gate.c: the
     * budget in use (a replaced segment is the next decision's to re-open;
     * a site's slot may be claimed here, as a request's decision would). */
    struct budget *b = atomic_load_explicit(&g->cur, memory_order_acquire);
    bool covered = false;
    if (rule != NULL && rule->nlimits[RL_KIND_REQUEST] > 0 &&
        rl_dests_cover_peer(rule->to, rule->nto, &peer, name)) {
        count_unseen(&g->report, rule, b != NULL && b->rule == rule ? b : NULL);
        covered = true;
    }
    int si = rl_sites_pick_peer(&G->sites, &peer, name);
    const struct rl_rule *site = rl_sites_rule(&G->sites, si);
    if (site != NULL && site->nlimits[RL_KIND_REQUEST] > 0) {
        count_unseen(&g->report, site,
                     b != NULL ? rl_sites_budget(&G->sites, si, b->store)
                               : NULL);
        covered = true;
    }
    return covered && rl_add_relaxed_u64(&g->report.tls_unseen, 1) == 0;
}

/* One section's lines: each kind it limits (and any it counted), and its
 * TLS connections not counted. Returns the calls it saw. */
static uint64_t write_section(const struct rl_gate *g,
                              struct rl_report_counts *c,
                              const char *what, const char *sec,
                              const bool shown[RL_KIND_COUNT])
{
    int pid = (int)getpid();
    uint64_t seen_all = 0;
    for (int k = 0; k < RL_KIND_COUNT; k++) {
        uint64_t a = rl_load_relaxed_u64(&c->n[k][RL_STAT_ALLOWED]);
        uint64_t d = rl_load_relaxed_u64(&c->n[k][RL_STAT_DENIED]);
        uint64_t w = rl_load_relaxed_u64(&c->n[k][RL_STAT_DELAYED]);
        /* Requests answered in the process: refused, not denied. */
        uint64_t r = k == RL_KIND_REQUEST
                         ? rl_load_relaxed_u64(&c->responded)
                         : 0;
        if (!shown[k] && a + d + w + r == 0)
            continue;
        seen_all += a + d + r;
        char resp[48] = "";
        if (r > 0)
            snprintf(resp, sizeof resp, ", responded %llu",
                     (unsigned long long)r);
        rl_log_stderr("report: pid %d user %s %s [%s]: %s seen %llu, "
                      "allowed %llu, denied %llu, delayed %llu%s",
                      pid, g->user, what, sec, rl_kind_name(k),
                      (unsigned long long)(a + d + r), (unsigned long long)a,
                      (unsigned long long)d, (unsigned long long)w, resp);
    }
    uint64_t unseen = rl_load_relaxed_u64(&c->tls_unseen);
    if (unseen > 0)
        rl_log_stderr("report: pid %d user %s %s [%s]: %llu TLS "
                      "connections: requests not counted (TLS the shim "
                      "cannot see)",
                      pid, g->user, what, sec, (unsigned long long)unseen);
    return seen_all + unseen;
}

/* Did this process's calls meet the section of these counts? */
static bool site_used(struct rl_report_counts *c)
{
    if (rl_load_relaxed_u64(&c->tls_unseen) != 0 ||
        rl_load_relaxed_u64(&c->responded) != 0)
        return true;
    for (int k = 0; k < RL_KIND_COUNT; k++)
        for (int s = 0; s < RL_STORE_STATS_PER_KIND; s++)
            if (rl_load_relaxed_u64(&c->n[k][s]) != 0)
                return true;
    return false;
}

void rl_report_write(struct rl_proc *p)
{
    struct rl_gen *G = rl_proc_gen(p);
    const struct rl_gate *g = &G->gate;
    struct rl_report *r = &G->gate.report;
    const struct rl_config *cfg = g->cfg;
    int pid = (int)getpid();
    uint64_t seen = 0;
    bool sites = rl_sites_any(&G->sites);

    if (g->rule != NULL || g->deny_all) {
        const char *sec =
            g->rule != NULL ? g->rule->section : "none, unknown = deny";
        bool shown[RL_KIND_COUNT];
        for (int k = 0; k < RL_KIND_COUNT; k++)
            shown[k] = g->rule != NULL ? g->rule->nlimits[k] != 0
                       : k == RL_KIND_REQUEST ? g->counts_requests
                                              : k != RL_KIND_SEND_BYTES;
        seen += write_section(g, &r->mine, "rule", sec, shown);
    }
    /* A site's lines when this process's calls met it: its budgets, as
     * the rule's, under its own name. */
    for (size_t i = 0; r->sections != NULL && i < r->nrules; i++) {
        const struct rl_rule *s = &cfg->rules[i];
        if (s->site == NULL || !site_used(&r->sections[i]))
            continue;
        bool shown[RL_KIND_COUNT];
        for (int k = 0; k < RL_KIND_COUNT; k++)
            shown[k] = s->nlimits[k] != 0;
        seen += write_section(g, &r->sections[i], "site", s->section, shown);
    }
    if (seen != 0)
        return;
    if (g->rule == NULL && !g->deny_all)
        rl_log_stderr("report: pid %d user %s: no %ssection of %s applies "
                      "(unknown = allow)%s: nothing was throttled",
                      pid, g->user, sites ? "user " : "", cfg->path,
                      sites ? " and no call went to a destination of a site"
                            : "");
    else
        rl_log_stderr("report: pid %d user %s rule [%s]: no call went to a "
                      "destination of the rule%s: nothing was throttled",
                      pid, g->user,
                      g->rule != NULL ? g->rule->section
                                      : "none, unknown = deny",
                      sites ? " or of a site" : "");
}
