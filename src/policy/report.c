/* report.c — the exit report (report.h). */
#include "policy/report.h"

#include <unistd.h>

#include "policy/gate_int.h"
#include "policy/proc.h"
#include "util/log.h"

void rl_report_add(struct rl_report *r, int kind, int stat, uint64_t n)
{
    if (r->on && n != 0)
        rl_add_relaxed_u64(&r->mine[kind][stat], n);
}

void rl_report_sub(struct rl_report *r, int kind, int stat, uint64_t n)
{
    if (r->on && n != 0)
        rl_sub_sat_u64(&r->mine[kind][stat], n);
}

bool rl_report_tls_unseen(struct rl_proc *p)
{
    uint64_t before = rl_add_relaxed_u64(&p->gate.report.tls_unseen, 1);
    /* The rule's budget: the one slot every process of the user shares
     * (a site's or a destination's budget is not known here). */
    /* Pairs with the release stores of the gate's cur in gate.c; never
     * rl_gate_budget(), which may re-open a replaced segment. */
    struct budget *b = atomic_load_explicit(&p->gate.cur, memory_order_acquire);
    if (b != NULL && b->slot.counters != NULL)
        rl_store_count_tls_unseen(&b->slot);
    return before == 0;
}

void rl_report_write(struct rl_proc *p)
{
    const struct rl_gate *g = &p->gate;
    struct rl_report *r = &p->gate.report;
    int pid = (int)getpid();

    if (g->rule == NULL && !g->deny_all) {
        rl_log_stderr("report: pid %d user %s: no section of %s applies "
                      "(unknown = allow): nothing was throttled",
                      pid, g->user, g->cfg->path);
        return;
    }
    const char *sec =
        g->rule != NULL ? g->rule->section : "none, unknown = deny";
    uint64_t seen_all = 0;
    for (int k = 0; k < RL_KIND_COUNT; k++) {
        /* Requests: when the rule or a site limits them (a site's
         * requests are counted with the rule's, as for every kind). */
        bool shown = k == RL_KIND_REQUEST ? g->counts_requests
                     : g->rule != NULL    ? g->rule->nlimits[k] != 0
                                          : k != RL_KIND_SEND_BYTES;
        if (!shown)
            continue;
        uint64_t a = rl_load_relaxed_u64(&r->mine[k][RL_STAT_ALLOWED]);
        uint64_t d = rl_load_relaxed_u64(&r->mine[k][RL_STAT_DENIED]);
        uint64_t w = rl_load_relaxed_u64(&r->mine[k][RL_STAT_DELAYED]);
        seen_all += a + d;
        rl_log_stderr("report: pid %d user %s rule [%s]: %s seen %llu, "
                      "allowed %llu, denied %llu, delayed %llu",
                      pid, g->user, sec, rl_kind_name(k),
                      (unsigned long long)(a + d), (unsigned long long)a,
                      (unsigned long long)d, (unsigned long long)w);
    }
    uint64_t unseen = rl_load_relaxed_u64(&r->tls_unseen);
    if (unseen > 0)
        rl_log_stderr("report: pid %d user %s rule [%s]: %llu TLS "
                      "connections: requests not counted (TLS the shim "
                      "cannot see)",
                      pid, g->user, sec, (unsigned long long)unseen);
    if (seen_all == 0)
        rl_log_stderr("report: pid %d user %s rule [%s]: no call went to a "
                      "destination of the rule: nothing was throttled",
                      pid, g->user, sec);
}
