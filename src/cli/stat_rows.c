/* stat_rows.c — `rlshim stat`'s rows (see stat_rows.h): one per limit of
 * a budget, one per destination of the per-destination table, as a table
 * line, a JSON object, or a Prometheus sample (stat_prometheus.c). */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cli/pace_show.h"
#include "cli/stat_prometheus.h"
#include "cli/stat_rows.h"
#include "policy/budget.h"
#include "policy/gate_crawl.h"
#include "policy/gate_pause.h"
#include "policy/open.h"
#include "policy/pauses.h"
#include "state/store.h"

static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;

        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

/* What could be spent now: the least of the kind's rates. */
bool stat_available(const struct rl_rule *rule,
                    const struct rl_budget_layout *l, int k,
                    struct rl_slot *slot, uint64_t now, uint64_t *out)
{
    uint64_t least = UINT64_MAX;

    if (!slot->words || l->nwords > slot->nwords || rule->nlimits[k] == 0)
        return false;
    for (unsigned i = 0; i < rule->nlimits[k] && i < RL_MAX_RATES; i++) {
        const struct rl_limit *lim = &rule->limits[k][i];
        const struct rl_algorithm *a = rl_algorithm_get(lim->algo);
        uint64_t v;

        if (!a)
            return false;
        v = a->available(slot->words + l->offset[k][i], lim, now);
        if (v < least)
            least = v;
    }
    *out = least;
    return true;
}

/* --prometheus: a fleet budget's state is in Redis; the host's words are
 * only what it falls back on while Redis is away, not what is available. */
bool stat_avail_unknown(const struct stat_view *v, const struct rl_rule *rule)
{
    return v->prom && rule->scope == RL_SCOPE_FLEET && v->cfg->fleet != NULL;
}

void stat_row(struct stat_view *v, const char *user, const char *rule_name,
              int k, const char *algo, const uint64_t *c, bool has_avail,
              uint64_t avail)
{
    FILE *f = v->out;

    if (v->prom) {
        struct rl_prom_row pr = {user,      rule_name, rl_kind_name(k), NULL, c,
                                 has_avail, avail,     v->responded};
        (void)rl_prom_add(&pr);
        v->rows++;
        return;
    }
    if (v->json) {
        fputs(v->rows ? ",\n  {" : "\n  {", f);
        fputs("\"user\": ", f);
        json_str(f, user);
        fputs(", \"rule\": ", f);
        json_str(f, rule_name);
        fprintf(f, ", \"limit\": \"%s\", \"algorithm\": ", rl_kind_name(k));
        if (algo)
            json_str(f, algo);
        else
            fputs("null", f);
        fprintf(f,
                ", \"allowed\": %llu, \"denied\": %llu, \"delayed\": %llu, "
                "\"delayed_ns\": %llu, \"available\": ",
                (unsigned long long)c[RL_STAT_ALLOWED],
                (unsigned long long)c[RL_STAT_DENIED],
                (unsigned long long)c[RL_STAT_DELAYED],
                (unsigned long long)c[RL_STAT_DELAYED_NS]);
        if (has_avail)
            fprintf(f, "%llu", (unsigned long long)avail);
        else
            fputs("null", f);
        if (k == RL_KIND_REQUEST)
            fprintf(f, ", \"responded\": %llu",
                    (unsigned long long)v->responded);
        if (k == RL_KIND_REQUEST && v->tls_unseen > 0)
            fprintf(f, ", \"tls_not_counted\": %llu",
                    (unsigned long long)v->tls_unseen);
        fputc('}', f);
    } else {
        char av[32] = "-", resp[32] = "-";

        if (has_avail)
            snprintf(av, sizeof av, "%llu", (unsigned long long)avail);
        /* Only a request can be answered in the process. */
        if (k == RL_KIND_REQUEST)
            snprintf(resp, sizeof resp, "%llu",
                     (unsigned long long)v->responded);
        fprintf(f,
                "%-16s %-18s %-10s %-14s %10llu %10llu %10llu %12.3f %10s "
                "%10s\n",
                user, rule_name, rl_kind_name(k), algo ? algo : "-",
                (unsigned long long)c[RL_STAT_ALLOWED],
                (unsigned long long)c[RL_STAT_DENIED],
                (unsigned long long)c[RL_STAT_DELAYED],
                (double)c[RL_STAT_DELAYED_NS] / 1e6, av, resp);
    }
    v->rows++;
}

/* A budget's pause (SPEC §12) while it lasts: "paused until
 * 2026-12-02T12:58:03Z (2.0 s more, retry_after)" into buf, false when
 * the word says no pause past now. The word is CLOCK_MONOTONIC of this
 * boot: shown as the wall-clock time it ends at. */
bool stat_pause_text(const struct stat_view *v, uint64_t word,
                     uint64_t backoff, char *buf, size_t len, uint64_t *left)
{
    uint64_t end = rl_pause_end(word);
    if (end <= v->now)
        return false;
    *left = end - v->now;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    time_t at =
        ts.tv_sec + (time_t)((*left + (uint64_t)ts.tv_nsec) / 1000000000u);
    struct tm tm;
    char when[32] = "?";
    if (gmtime_r(&at, &tm) != NULL)
        strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
    /* A backoff says what it backs off from, as SPEC §14 words it
     * ("backoff 503 x 3"). */
    char why[48];
    snprintf(why, sizeof why, "%s", rl_pause_reason(word));
    if (strcmp(why, "backoff") == 0 && rl_pauses_backoff_count(backoff) > 0) {
        const struct rl_adapt_shown shown = {
            .why = RL_ADAPT_BACKOFF,
            .errors = rl_pauses_backoff_count(backoff),
            .cause = rl_pauses_backoff_cause(backoff),
        };
        rl_adapt_format(&shown, why, sizeof why);
    }
    snprintf(buf, len, "paused until %s (%.1f s more, %s)", when,
             (double)*left / 1e9, why);
    return true;
}

void stat_pause_row(uint64_t rule, const char *label, uint64_t until,
                    uint64_t backoff, void *arg)
{
    struct stat_view *v = arg;
    const struct rl_rule *r = v->layout_ok && rule >= 1 &&
                                      rule <= v->cfg->nrules
                                  ? &v->cfg->rules[rule - 1]
                                  : NULL;
    if (r != NULL && rl_rule_per_dest(r))
        return;
    const char *bar = strchr(label, '|');
    char paused[96];
    uint64_t left;
    if (!stat_pause_text(v, until, backoff, paused, sizeof paused, &left))
        return;
    fprintf(v->out, "%-16.*s %-18s dest %s %s\n", bar ? (int)(bar - label) : 0,
            label, r != NULL ? r->section : "?", bar ? bar + 1 : label,
            paused);
}

/* A destination's pace (SPEC §14) while something sets it: "pace 800 ms
 * (latency 2 x 400 ms)" into buf, what set it into why ("latency 2 x
 * 400 ms") and its interval into *interval; false
 * when its limit alone paces it. */
static bool pace_text(const struct stat_view *v, const struct rl_rule *rule,
                      const char *user, const char *dest, char *buf,
                      size_t len, char *why, size_t wlen, uint64_t *interval)
{
    if (!v->has_pauses ||
        !rl_cli_pace(&v->pauses, v->cfg, rule, user, dest, v->now, interval,
                     why, wlen))
        return false;
    snprintf(buf, len, "pace %llu ms (%s)",
             (unsigned long long)(*interval / 1000000), why);
    return true;
}

/* One row per limit of a per-destination budget: no counters of its own
 * (they are the section's, in the user's row), what is available now, and
 * the connections it holds open. */
void stat_dest_row(const struct rl_rule *rule, const char *label,
                   struct rl_dest_entry *e, void *arg)
{
    struct stat_view *v = arg;
    FILE *f = v->out;
    const char *bar = strchr(label, '|');
    char user[RL_STORE_LABEL_MAX];
    snprintf(user, sizeof user, "%.*s", bar ? (int)(bar - label) : 0, label);
    const char *dest = bar ? bar + 1 : label;
    bool has_open = e->open != NULL;
    uint64_t open = has_open ? rl_load_relaxed_u64(&e->open[0]) : 0;
    char paused[96] = "";
    uint64_t paused_left = 0, pause_word = 0, backoff = 0;
    if (v->has_pauses && v->cfg != NULL && rl_pause_obeyed(rule))
        pause_word = rl_pauses_get(
            &v->pauses,
            rl_pauses_key((uint64_t)(rule - v->cfg->rules) + 1, user, dest,
                          strlen(dest)),
            &backoff);
    bool has_pause = stat_pause_text(v, pause_word, backoff, paused,
                                     sizeof paused, &paused_left);
    char pace[96] = "", pace_why[64] = "";
    uint64_t interval = 0;
    bool has_pace = pace_text(v, rule, user, dest, pace, sizeof pace,
                              pace_why, sizeof pace_why, &interval);
    if (v->prom && has_open)
        (void)rl_prom_open(user, rule->section, dest, open, rule->max_open);
    for (int k = 0; k < RL_KIND_COUNT; k++) {
        if (rule->nlimits[k] == 0 && !(k == 0 && has_open))
            continue;
        uint64_t least = UINT64_MAX;
        for (unsigned i = 0; i < rule->nlimits[k]; i++) {
            const struct rl_limit *lim = &rule->limits[k][i];
            uint64_t a = rl_algorithm_get(lim->algo)->available(e->states[k][i],
                                                                lim, v->now);
            if (a < least)
                least = a;
        }
        const char *algo = rule->nlimits[k]
                               ? rl_algorithm_get(rule->limits[k][0].algo)->name
                               : NULL;
        if (v->prom) {
            if (rule->nlimits[k] == 0)
                continue; /* the row of max_open alone: rl_prom_open */
            bool has = least != UINT64_MAX && !stat_avail_unknown(v, rule);
            struct rl_prom_row pr = {
                user, rule->section, rl_kind_name(k), dest, NULL, has, least,
                0};
            (void)rl_prom_add(&pr);
        } else if (v->json) {
            fputs(v->rows ? ",\n  {" : "\n  {", f);
            fputs("\"user\": ", f);
            json_str(f, user);
            fputs(", \"rule\": ", f);
            json_str(f, rule->section);
            fputs(", \"dest\": ", f);
            json_str(f, dest);
            fprintf(f, ", \"limit\": \"%s\", \"algorithm\": ", rl_kind_name(k));
            if (algo)
                json_str(f, algo);
            else
                fputs("null", f);
            fputs(", \"allowed\": null, \"denied\": null, \"delayed\": null, "
                  "\"delayed_ns\": null, \"available\": ",
                  f);
            if (least != UINT64_MAX)
                fprintf(f, "%llu", (unsigned long long)least);
            else
                fputs("null", f);
            if (has_pause && k == RL_KIND_REQUEST)
                fprintf(f, ", \"paused_ns\": %llu, \"pause_reason\": \"%s\"",
                        (unsigned long long)paused_left,
                        rl_pause_reason(pause_word));
            if (has_pace && k == RL_KIND_REQUEST) {
                fprintf(f, ", \"interval_ns\": %llu, \"pace\": ",
                        (unsigned long long)interval);
                json_str(f, pace_why);
            }
            if (has_open && k == 0)
                fprintf(f, ", \"open\": %llu, \"max_open\": %u}",
                        (unsigned long long)open, rule->max_open);
            else
                fputs("}", f);
        } else {
            char av[32] = "-", op[48 + sizeof paused + sizeof pace] = "";
            if (least != UINT64_MAX)
                snprintf(av, sizeof av, "%llu", (unsigned long long)least);
            if (has_open && k == 0)
                snprintf(op, sizeof op, " open %llu/%u",
                         (unsigned long long)open, rule->max_open);
            if (has_pause && k == RL_KIND_REQUEST) {
                size_t ol = strlen(op);
                snprintf(op + ol, sizeof op - ol, " %s", paused);
            }
            if (has_pace && k == RL_KIND_REQUEST) {
                size_t ol = strlen(op);
                snprintf(op + ol, sizeof op - ol, " %s", pace);
            }
            fprintf(f,
                    "%-16s %-18s %-10s %-14s %10s %10s %10s %12s %10s  dest "
                    "%s%s\n",
                    user, rule->section, rl_kind_name(k), algo ? algo : "-",
                    "-", "-", "-", "-", av, dest, op);
        }
        v->rows++;
    }
}
