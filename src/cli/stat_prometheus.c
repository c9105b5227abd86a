/* stat_prometheus.c — see stat_prometheus.h.
 *
 *   rlshim_calls_total{user,rule,limit,verdict}    counter
 *       verdict: allow (went at once), delay (went after a sleep), deny,
 *       and for limit "request" respond (answered in the process, SPEC §15).
 *       allow + delay is the `allowed` of `rlshim stat`; the units are
 *       the limit's (calls, or bytes for send_bytes). A per-destination
 *       section's are counted per user, every destination together: no
 *       dest label.
 *   rlshim_delayed_seconds_total{user,rule,limit}  counter
 *   rlshim_available{user,rule[,dest],limit}       gauge (only when known:
 *       not for scope = fleet, whose budgets are in Redis)
 *   rlshim_open_connections{user,rule[,dest]}      gauge (max_open)
 *   rlshim_max_open_connections{user,rule[,dest]}  gauge (max_open)
 *   rlshim_tls_connections_not_counted_total{user,rule,limit="request"}
 *       counter: TLS connections whose requests the shim could not see
 *       (SPEC §11); only for budgets that had one.
 *
 * Counters are monotonic except that a refund (the kernel took fewer bytes
 * than were granted) lowers `allowed`; a scraper sees that as a reset. */
#include "cli/stat_prometheus.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "policy/config.h"
#include "state/store.h"

struct prow {
    char *user, *rule, *dest; /* dest NULL: not per destination */
    char *limit;              /* NULL: a max_open row */
    bool has_counters;
    uint64_t c[RL_STORE_STATS_PER_KIND];
    bool has_avail;
    uint64_t avail;
    uint64_t open;
    uint32_t max;
    uint64_t tls_unseen; /* limit "request" rows */
    uint64_t responded;  /* likewise */
};

static struct prow *rows;
static size_t nrows;

static bool same(const char *a, const char *b)
{
    return a == NULL || b == NULL ? a == b : strcmp(a, b) == 0;
}

static char *dup_or_null(const char *s, bool *failed)
{
    if (s == NULL)
        return NULL;
    char *d = strdup(s);
    if (d == NULL)
        *failed = true;
    return d;
}

static void prow_free(struct prow *r)
{
    free(r->user);
    free(r->rule);
    free(r->dest);
    free(r->limit);
}

/* The row of these labels: found, or a new one zeroed; NULL: no memory. */
static struct prow *find(const char *user, const char *rule, const char *dest,
                         const char *limit)
{
    /* The same labels from another segment (--all: an older config's):
     * one series, counted together; a series appears once. */
    for (size_t i = 0; i < nrows; i++) {
        struct prow *r = &rows[i];
        if (strcmp(r->user, user) == 0 && strcmp(r->rule, rule) == 0 &&
            same(r->dest, dest) && same(r->limit, limit))
            return r;
    }
    struct prow *nr = realloc(rows, (nrows + 1) * sizeof *nr);
    if (nr == NULL)
        return NULL;
    rows = nr;
    struct prow *r = &rows[nrows];
    bool failed = false;
    memset(r, 0, sizeof *r);
    r->user = dup_or_null(user, &failed);
    r->rule = dup_or_null(rule, &failed);
    r->dest = dup_or_null(dest, &failed);
    r->limit = dup_or_null(limit, &failed);
    if (failed) {
        prow_free(r);
        return NULL;
    }
    nrows++;
    return r;
}

int rl_prom_add(const struct rl_prom_row *row)
{
    struct prow *r = find(row->user, row->rule, row->dest, row->limit);
    if (r == NULL)
        return -ENOMEM;
    if (row->counters != NULL) {
        r->has_counters = true;
        for (int k = 0; k < RL_STORE_STATS_PER_KIND; k++)
            r->c[k] += row->counters[k];
        r->responded += row->responded;
    }
    if (row->has_avail && !r->has_avail) {
        r->has_avail = true;
        r->avail = row->avail;
    }
    return 0;
}

int rl_prom_open(const char *user, const char *rule, const char *dest,
                 uint64_t open, uint32_t max)
{
    struct prow *r = find(user, rule, dest, NULL);
    if (r == NULL)
        return -ENOMEM;
    r->open += open;
    if (max > r->max)
        r->max = max;
    return 0;
}

int rl_prom_tls_unseen(const char *user, const char *rule, uint64_t n)
{
    struct prow *r = find(user, rule, NULL, rl_kind_name(RL_KIND_REQUEST));
    if (r == NULL)
        return -ENOMEM;
    r->tls_unseen += n;
    return 0;
}

/* The max_open areas of the segment being read. */
struct area {
    char section[RL_STORE_LABEL_MAX];
    uint32_t budget; /* the budget's slot index */
    uint64_t open;
};
static struct area *areas;
static size_t nareas;

/* The name policy/dests.c gives a per-destination section's overflow
 * budget (destinations that found no room in the table). */
#define OVERFLOW_DEST "(more destinations)"

static int find_area(const struct rl_slot_info *info, struct rl_slot *slot,
                     void *arg)
{
    (void)arg;
    size_t np = strlen(RL_PROM_OPEN_PREFIX);
    const char *bar = strrchr(info->label, '|');
    char *end;
    if (strncmp(info->label, RL_PROM_OPEN_PREFIX, np) != 0 ||
        bar < info->label + np || slot->words == NULL || slot->nwords == 0)
        return 0;
    unsigned long n = strtoul(bar + 1, &end, 10);
    if (end == bar + 1 || *end != '\0' || n > UINT32_MAX)
        return 0;
    struct area *a = realloc(areas, (nareas + 1) * sizeof *a);
    if (a == NULL)
        return 0; /* shown as none open */
    areas = a;
    a = &areas[nareas++];
    snprintf(a->section, sizeof a->section, "%.*s",
             (int)(bar - info->label - (ptrdiff_t)np), info->label + np);
    a->budget = (uint32_t)n;
    a->open = rl_load_relaxed_u64(&slot->words[0]);
    return 0;
}

void rl_prom_segment(struct rl_store *s)
{
    free(areas);
    areas = NULL;
    nareas = 0;
    rl_store_each(s, find_area, NULL);
}

void rl_prom_budget_open(uint32_t index, const struct rl_rule *rule,
                         const char *user)
{
    /* A per-destination section's budget has an area of its own only for
     * the destinations that found no room in the table: theirs. */
    bool per_dest = rl_rule_per_dest(rule);
    for (size_t i = 0; i < nareas; i++)
        if (areas[i].budget == index &&
            strcmp(areas[i].section, rule->section) == 0) {
            (void)rl_prom_open(user, rule->section,
                               per_dest ? OVERFLOW_DEST : NULL, areas[i].open,
                               rule->max_open);
            return;
        }
    if (!per_dest)
        (void)rl_prom_open(user, rule->section, NULL, 0, rule->max_open);
}

/* The length of the UTF-8 sequence at s (1 to 4), or 0 when it is not
 * one: the format wants label values in UTF-8, and a key or a name cut
 * to fit a label may be anything. */
static size_t utf8_len(const unsigned char *s)
{
    size_t n;
    unsigned lo = 0x80, hi = 0xbf;
    if (s[0] < 0x80)
        return 1;
    if (s[0] >= 0xc2 && s[0] <= 0xdf)
        n = 2;
    else if (s[0] >= 0xe0 && s[0] <= 0xef)
        n = 3;
    else if (s[0] >= 0xf0 && s[0] <= 0xf4)
        n = 4;
    else
        return 0;
    /* No overlong forms, no surrogates, nothing above U+10FFFF. */
    if (s[0] == 0xe0)
        lo = 0xa0;
    else if (s[0] == 0xed)
        hi = 0x9f;
    else if (s[0] == 0xf0)
        lo = 0x90;
    else if (s[0] == 0xf4)
        hi = 0x8f;
    if (s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 2; i < n; i++)
        if (s[i] < 0x80 || s[i] > 0xbf)
            return 0;
    return n;
}

/* A label value: backslash, double quote and newline escaped; a byte that
 * is not UTF-8 becomes U+FFFD. */
static void label(FILE *f, const char *name, const char *v, bool first)
{
    fprintf(f, "%s%s=\"", first ? "" : ",", name);
    const unsigned char *p = (const unsigned char *)v;
    while (*p) {
        size_t n = utf8_len(p);
        if (n == 0) {
            fputs("\xef\xbf\xbd", f);
            p++;
            continue;
        }
        if (*p == '\\')
            fputs("\\\\", f);
        else if (*p == '"')
            fputs("\\\"", f);
        else if (*p == '\n')
            fputs("\\n", f);
        else
            fwrite(p, 1, n, f);
        p += n;
    }
    fputc('"', f);
}

static void labels(FILE *f, const struct prow *r)
{
    label(f, "user", r->user, true);
    label(f, "rule", r->rule, false);
    if (r->dest != NULL)
        label(f, "dest", r->dest, false);
    if (r->limit != NULL)
        label(f, "limit", r->limit, false);
}

static void family(FILE *f, const char *name, const char *type,
                   const char *help)
{
    fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

void rl_prom_print(FILE *f)
{
    family(f, "rlshim_calls_total", "counter",
           "Units decided by rlshim (calls, or bytes for limit send_bytes), "
           "by verdict.");
    for (size_t i = 0; i < nrows; i++) {
        const struct prow *r = &rows[i];
        if (!r->has_counters)
            continue;
        uint64_t allowed = r->c[RL_STAT_ALLOWED];
        uint64_t delayed = r->c[RL_STAT_DELAYED];
        const struct {
            const char *v;
            uint64_t n;
        } vs[] = {
            {"allow", allowed > delayed ? allowed - delayed : 0},
            {"delay", delayed},
            {"deny", r->c[RL_STAT_DENIED]},
            {"respond", r->responded},
        };
        /* Only a request can be answered in the process (SPEC §15). */
        bool request = r->limit != NULL &&
                       strcmp(r->limit, rl_kind_name(RL_KIND_REQUEST)) == 0;
        for (size_t k = 0; k < (request ? 4u : 3u); k++) {
            fputs("rlshim_calls_total{", f);
            labels(f, r);
            label(f, "verdict", vs[k].v, false);
            fprintf(f, "} %llu\n", (unsigned long long)vs[k].n);
        }
    }
    family(f, "rlshim_delayed_seconds_total", "counter",
           "Time calls were held back before they went.");
    for (size_t i = 0; i < nrows; i++) {
        if (!rows[i].has_counters)
            continue;
        fputs("rlshim_delayed_seconds_total{", f);
        labels(f, &rows[i]);
        fprintf(f, "} %.9f\n", (double)rows[i].c[RL_STAT_DELAYED_NS] / 1e9);
    }
    family(f, "rlshim_available", "gauge",
           "Units that could be spent now (per destination: to that "
           "destination; none for scope = fleet: the fleet's are in Redis).");
    for (size_t i = 0; i < nrows; i++) {
        if (!rows[i].has_avail)
            continue;
        fputs("rlshim_available{", f);
        labels(f, &rows[i]);
        fprintf(f, "} %llu\n", (unsigned long long)rows[i].avail);
    }
    family(f, "rlshim_open_connections", "gauge",
           "Connections open now in a budget with max_open.");
    for (size_t i = 0; i < nrows; i++) {
        if (rows[i].limit != NULL)
            continue;
        fputs("rlshim_open_connections{", f);
        labels(f, &rows[i]);
        fprintf(f, "} %llu\n", (unsigned long long)rows[i].open);
    }
    family(f, "rlshim_max_open_connections", "gauge",
           "The max_open of a budget: connections open at once at most.");
    for (size_t i = 0; i < nrows; i++) {
        if (rows[i].limit != NULL)
            continue;
        fputs("rlshim_max_open_connections{", f);
        labels(f, &rows[i]);
        fprintf(f, "} %u\n", rows[i].max);
    }
    bool any = false;
    for (size_t i = 0; i < nrows; i++) {
        if (rows[i].tls_unseen == 0)
            continue;
        if (!any)
            family(f, "rlshim_tls_connections_not_counted_total", "counter",
                   "TLS connections whose requests rlshim could not count "
                   "(TLS built into the program).");
        any = true;
        fputs("rlshim_tls_connections_not_counted_total{", f);
        labels(f, &rows[i]);
        fprintf(f, "} %llu\n", (unsigned long long)rows[i].tls_unseen);
    }
    for (size_t i = 0; i < nrows; i++)
        prow_free(&rows[i]);
    free(rows);
    rows = NULL;
    nrows = 0;
    free(areas);
    areas = NULL;
    nareas = 0;
}
