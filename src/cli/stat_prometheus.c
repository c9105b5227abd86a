/* stat_prometheus.c — see stat_prometheus.h.
 *
 *   rlshim_calls_total{user,rule,limit,verdict}   counter
 *       verdict: allow (went at once), delay (went after a sleep), deny.
 *       allow + delay is the `allowed` of `rlshim stat`; the units are
 *       the limit's (calls, or bytes for send_bytes).
 *   rlshim_delayed_seconds_total{user,rule,limit} counter
 *   rlshim_available{user,rule,limit}             gauge (only when known)
 *
 * Counters are monotonic except that a refund (the kernel took fewer bytes
 * than were granted) lowers `allowed`; a scraper sees that as a reset. */
#include "cli/stat_prometheus.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "state/store.h"

struct prow {
    char *user, *rule, *limit;
    uint64_t c[RL_STORE_STATS_PER_KIND];
    bool has_avail;
    uint64_t avail;
};

static struct prow *rows;
static size_t nrows;

int rl_prom_add(const char *user, const char *rule, const char *limit,
                const uint64_t *counters, bool has_avail, uint64_t avail)
{
    /* The same labels from another segment (--all: an older config's):
     * one series, counted together; a series appears once. */
    for (size_t i = 0; i < nrows; i++) {
        struct prow *r = &rows[i];
        if (strcmp(r->user, user) != 0 || strcmp(r->rule, rule) != 0 ||
            strcmp(r->limit, limit) != 0)
            continue;
        for (int k = 0; k < RL_STORE_STATS_PER_KIND; k++)
            r->c[k] += counters[k];
        if (has_avail && !r->has_avail) {
            r->has_avail = true;
            r->avail = avail;
        }
        return 0;
    }
    struct prow *nr = realloc(rows, (nrows + 1) * sizeof *nr);
    if (nr == NULL)
        return -ENOMEM;
    rows = nr;
    struct prow *r = &rows[nrows];
    r->user = strdup(user);
    r->rule = strdup(rule);
    r->limit = strdup(limit);
    if (r->user == NULL || r->rule == NULL || r->limit == NULL) {
        free(r->user);
        free(r->rule);
        free(r->limit);
        return -ENOMEM;
    }
    memcpy(r->c, counters, sizeof r->c);
    r->has_avail = has_avail;
    r->avail = avail;
    nrows++;
    return 0;
}

/* A label value: backslash, double quote and newline escaped. */
static void label(FILE *f, const char *name, const char *v, bool first)
{
    fprintf(f, "%s%s=\"", first ? "" : ",", name);
    for (; *v; v++) {
        if (*v == '\\')
            fputs("\\\\", f);
        else if (*v == '"')
            fputs("\\\"", f);
        else if (*v == '\n')
            fputs("\\n", f);
        else
            fputc(*v, f);
    }
    fputc('"', f);
}

static void labels(FILE *f, const struct prow *r)
{
    label(f, "user", r->user, true);
    label(f, "rule", r->rule, false);
    label(f, "limit", r->limit, false);
}

void rl_prom_print(FILE *f)
{
    fputs("# HELP rlshim_calls_total Units decided by rlshim (calls, or bytes "
          "for limit send_bytes), by verdict.\n"
          "# TYPE rlshim_calls_total counter\n",
          f);
    for (size_t i = 0; i < nrows; i++) {
        const struct prow *r = &rows[i];
        uint64_t allowed = r->c[RL_STAT_ALLOWED];
        uint64_t delayed = r->c[RL_STAT_DELAYED];
        const struct {
            const char *v;
            uint64_t n;
        } vs[] = {
            {"allow", allowed > delayed ? allowed - delayed : 0},
            {"delay", delayed},
            {"deny", r->c[RL_STAT_DENIED]},
        };
        for (size_t k = 0; k < 3; k++) {
            fputs("rlshim_calls_total{", f);
            labels(f, r);
            label(f, "verdict", vs[k].v, false);
            fprintf(f, "} %llu\n", (unsigned long long)vs[k].n);
        }
    }
    fputs("# HELP rlshim_delayed_seconds_total Time calls were held back "
          "before they went.\n"
          "# TYPE rlshim_delayed_seconds_total counter\n",
          f);
    for (size_t i = 0; i < nrows; i++) {
        fputs("rlshim_delayed_seconds_total{", f);
        labels(f, &rows[i]);
        fprintf(f, "} %.9f\n", (double)rows[i].c[RL_STAT_DELAYED_NS] / 1e9);
    }
    fputs("# HELP rlshim_available Units that could be spent now.\n"
          "# TYPE rlshim_available gauge\n",
          f);
    for (size_t i = 0; i < nrows; i++) {
        if (!rows[i].has_avail)
            continue;
        fputs("rlshim_available{", f);
        labels(f, &rows[i]);
        fprintf(f, "} %llu\n", (unsigned long long)rows[i].avail);
    }
    for (size_t i = 0; i < nrows; i++) {
        free(rows[i].user);
        free(rows[i].rule);
        free(rows[i].limit);
    }
    free(rows);
    rows = NULL;
    nrows = 0;
}
