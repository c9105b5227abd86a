/* test_prometheus.c — `rlshim stat --prometheus` on a real segment: the
 * text exposition format checked by a strict parser of our own, and by
 * `promtool check metrics` when Debian's prometheus package is there. */
#include <criterion/criterion.h>
#include <ctype.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "limit/limit.h"
#include "policy/budget.h"
#include "policy/config.h"
#include "state/store.h"
#include "util/clock.h"

static char dir[64];
static char cfg_path[128];
static struct rl_config *cfg;
static struct rl_store *store;

static const char cfg_text[] = "[rlshim]\n"
                               "max_users = 16\n"
                               "[user:al\"ice]\n"
                               "connect = 2/h\n"
                               "send = 10/h\n"
                               "request = 3/h\n";

static void setup(void)
{
    struct rl_diag d = {0};
    strcpy(dir, "/dev/shm/rlprom-test.XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
    snprintf(cfg_path, sizeof cfg_path, "%s/cfg.ini", dir);
    FILE *f = fopen(cfg_path, "w");
    cr_assert_not_null(f);
    fputs(cfg_text, f);
    fclose(f);
    cr_assert_eq(rl_config_load(cfg_path, &cfg, &d), 0);
    setenv("RLSHIM_STATE_DIR", dir, 1);
    unsetenv("RLSHIM_CONFIG");
    struct rl_store_opts o = {
        .shared = true,
        .dir = dir,
        .uid = (uint32_t)getuid(),
        .config_hash = rl_budget_hash(cfg),
        .nslots = 32,
        .arena_words = 1024,
    };
    cr_assert_eq(rl_store_open(&store, &o, NULL, 0), 0);
}

static void teardown(void)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char p[512];
    if (store)
        rl_store_close(store);
    while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        unlink(p);
    }
    if (d)
        closedir(d);
    rmdir(dir);
    rl_config_free(cfg);
}

TestSuite(prometheus, .init = setup, .fini = teardown, .timeout = 20);

/* Spend n connects as the gate would; one of them "delayed" 1.5 s. */
static void spend_in(struct rl_store *st, unsigned n);
static void spend(unsigned n)
{
    spend_in(store, n);
}

static void spend_in(struct rl_store *st, unsigned n)
{
    const struct rl_rule *rule = &cfg->rules[0];
    struct rl_budget_layout l;
    struct rl_slot sl;
    char label[RL_STORE_LABEL_MAX];
    bool ovf;
    rl_budget_layout(rule, &l);
    uint64_t tag = rl_budget_label(rule, rl_budget_user(rule, "0"), label,
                                   sizeof label);
    cr_assert_eq(rl_store_slot(st, tag, label, l.nwords,
                               rl_budget_overflow_tag(rule), &sl, &ovf),
                 0);
    const struct rl_limit *lim = &rule->limits[RL_KIND_CONNECT][0];
    for (unsigned i = 0; i < n; i++) {
        struct rl_verdict v = rl_algorithm_get(lim->algo)->take(
            sl.words + l.offset[RL_KIND_CONNECT][0], lim, rl_clock_now_ns(),
            1, 1, 0);
        rl_store_count(&sl, RL_KIND_CONNECT,
                       v.granted ? RL_STAT_ALLOWED : RL_STAT_DENIED, 1);
    }
    rl_store_count(&sl, RL_KIND_CONNECT, RL_STAT_DELAYED, 1);
    rl_store_count(&sl, RL_KIND_CONNECT, RL_STAT_DELAYED_NS, 1500000000u);
}

static int run(const char *args, char *out, size_t len)
{
    const char *build = getenv("RLSHIM_BUILD");
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s/rlshim %s", build ? build : "build", args);
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p);
    size_t n = fread(out, 1, len - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* ---- a strict reader of the text format (0.0.4) ------------------------ */

static bool name_ok(const char *s, size_t n, bool metric)
{
    if (n == 0)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        bool ok = isalpha((unsigned char)c) || c == '_' ||
                  (metric && c == ':') || (i > 0 && isdigit((unsigned char)c));
        if (!ok)
            return false;
    }
    return true;
}

struct family {
    char name[64];
    char type[16];
    bool help, done;
};

/* Checks: HELP and TYPE before a family's samples, each family's samples
 * together, names and label names valid, label values escaped, values
 * numbers, counters named *_total, no label set twice. Returns the number
 * of samples; fails the test on anything else. */
static int check_exposition(const char *text, const char *want_sample)
{
    struct family fam[8] = {0};
    int nfam = 0, samples = 0;
    char seen[64][256];
    int nseen = 0;
    bool found = want_sample == NULL;
    struct family *cur = NULL;
    char *copy = strdup(text), *save = NULL;
    cr_assert_not_null(copy);
    cr_assert(text[0] == '\0' || text[strlen(text) - 1] == '\n');
    for (char *line = strtok_r(copy, "\n", &save); line;
         line = strtok_r(NULL, "\n", &save)) {
        if (line[0] == '#') {
            char kw[8], name[64], rest[256] = "";
            cr_assert_geq(sscanf(line, "# %7s %63s %255[^\n]", kw, name, rest),
                          2, "%s", line);
            struct family *f = NULL;
            for (int i = 0; i < nfam; i++)
                if (strcmp(fam[i].name, name) == 0)
                    f = &fam[i];
            if (f == NULL) {
                cr_assert_lt(nfam, 8);
                f = &fam[nfam++];
                snprintf(f->name, sizeof f->name, "%s", name);
            }
            cr_assert_not(f->done, "family %s split", name);
            if (cur != NULL && cur != f)
                cur->done = true;
            cur = f;
            if (strcmp(kw, "HELP") == 0) {
                cr_assert_not(f->help, "two HELP for %s", name);
                f->help = true;
            } else {
                cr_assert_str_eq(kw, "TYPE", "%s", line);
                cr_assert(strcmp(rest, "counter") == 0 ||
                              strcmp(rest, "gauge") == 0,
                          "%s", line);
                snprintf(f->type, sizeof f->type, "%s", rest);
            }
            continue;
        }
        const char *p = line;
        size_t n = strcspn(p, "{ ");
        cr_assert(name_ok(p, n, true), "%s", line);
        cr_assert_not_null(cur, "sample before TYPE: %s", line);
        cr_assert(strlen(cur->name) == n && strncmp(cur->name, p, n) == 0,
                  "sample of another family: %s", line);
        cr_assert(cur->type[0], "no TYPE for %s", cur->name);
        if (strcmp(cur->type, "counter") == 0)
            cr_assert(n > 6 && strncmp(p + n - 6, "_total", 6) == 0,
                      "counter not *_total: %s", line);
        p += n;
        if (*p == '{') {
            p++;
            while (*p != '}') {
                size_t ln = strcspn(p, "=");
                cr_assert(name_ok(p, ln, false), "label in %s", line);
                p += ln;
                cr_assert_eq(*p++, '=', "%s", line);
                cr_assert_eq(*p++, '"', "%s", line);
                while (*p != '"') {
                    cr_assert_neq(*p, '\0', "%s", line);
                    if (*p == '\\') {
                        p++;
                        cr_assert(*p == '\\' || *p == '"' || *p == 'n',
                                  "bad escape in %s", line);
                    }
                    p++;
                }
                p++;
                if (*p == ',')
                    p++;
                else
                    cr_assert_eq(*p, '}', "%s", line);
            }
            p++;
        }
        size_t keylen = (size_t)(p - line);
        cr_assert_lt(keylen, sizeof seen[0]);
        for (int i = 0; i < nseen; i++)
            cr_assert(strncmp(seen[i], line, keylen) != 0 ||
                          seen[i][keylen] != '\0',
                      "twice: %s", line);
        cr_assert_lt(nseen, 64);
        memcpy(seen[nseen], line, keylen);
        seen[nseen++][keylen] = '\0';
        cr_assert_eq(*p++, ' ', "%s", line);
        char *end;
        strtod(p, &end);
        cr_assert(end != p && *end == '\0', "value in %s", line);
        if (want_sample && strcmp(line, want_sample) == 0)
            found = true;
        samples++;
    }
    free(copy);
    for (int i = 0; i < nfam; i++)
        cr_assert(fam[i].help && fam[i].type[0], "%s", fam[i].name);
    cr_assert(found, "no line '%s' in:\n%s", want_sample, text);
    return samples;
}

static void promtool(const char *text)
{
    if (system("command -v promtool >/dev/null 2>&1") != 0) {
        fprintf(stderr, "prometheus: promtool not installed, only our own "
                        "parser checked the format\n");
        return;
    }
    FILE *p = popen("promtool check metrics >/dev/null 2>&1", "w");
    cr_assert_not_null(p);
    fputs(text, p);
    cr_assert_eq(pclose(p), 0, "promtool refuses:\n%s", text);
}

Test(prometheus, counters_in_the_text_format)
{
    spend(3); /* 2/h: two allowed, one denied; one of them delayed */
    char out[16384], args[256];
    snprintf(args, sizeof args, "stat --prometheus -c %s", cfg_path);
    cr_assert_eq(run(args, out, sizeof out), 0, "%s", out);
    const char *lbl = "user=\"al\\\"ice\",rule=\"user:al\\\"ice\",limit=\"connect\"";
    char want[512];
    snprintf(want, sizeof want, "rlshim_calls_total{%s,verdict=\"allow\"} 1",
             lbl);
    check_exposition(out, want);
    snprintf(want, sizeof want, "rlshim_calls_total{%s,verdict=\"delay\"} 1",
             lbl);
    check_exposition(out, want);
    snprintf(want, sizeof want, "rlshim_calls_total{%s,verdict=\"deny\"} 1",
             lbl);
    check_exposition(out, want);
    snprintf(want, sizeof want, "rlshim_delayed_seconds_total{%s} 1.500000000",
             lbl);
    check_exposition(out, want);
    snprintf(want, sizeof want, "rlshim_available{%s} 0", lbl);
    /* Per limit (connect, send, request): 3 verdicts (a request's
     * respond too), delayed seconds, available. */
    cr_assert_eq(check_exposition(out, want), 3 * 3 + 1 + 3 + 3);
    cr_expect_null(strstr(out, "tls_connections"), "none: none seen\n%s", out);
    promtool(out);
}

Test(prometheus, nothing_counted_yet_is_still_valid)
{
    char out[16384], args[256];
    rl_store_close(store);
    store = NULL;
    /* No segment at all in this state dir. */
    setenv("RLSHIM_STATE_DIR", "/dev/shm/rlprom-none-such", 1);
    snprintf(args, sizeof args, "stat --prometheus -c %s", cfg_path);
    cr_assert_eq(run(args, out, sizeof out), 0, "%s", out);
    cr_assert_eq(check_exposition(out, NULL), 0);
    cr_assert(strstr(out, "# TYPE rlshim_calls_total counter\n") != NULL);
    promtool(out);
}

/* --all: another config's segment of the same user and rule is one series
 * with this one's (counted together), in one exposition. */
Test(prometheus, all_segments_make_one_exposition)
{
    spend(3);
    struct rl_store *old = NULL;
    struct rl_store_opts o = {
        .shared = true,
        .dir = dir,
        .uid = (uint32_t)getuid(),
        .config_hash = rl_budget_hash(cfg) ^ 1,
        .nslots = 32,
        .arena_words = 1024,
    };
    cr_assert_eq(rl_store_open(&old, &o, NULL, 0), 0);
    spend_in(old, 1);
    char out[16384], args[256];
    snprintf(args, sizeof args, "stat --prometheus --all -c %s", cfg_path);
    cr_assert_eq(run(args, out, sizeof out), 0, "%s", out);
    rl_store_close(old);
    const char *lbl = "user=\"al\\\"ice\",rule=\"user:al\\\"ice\",limit=\"connect\"";
    char want[512];
    /* allowed 2 + 1, of which delayed 1 + 1 */
    snprintf(want, sizeof want, "rlshim_calls_total{%s,verdict=\"allow\"} 1",
             lbl);
    check_exposition(out, want);
    snprintf(want, sizeof want, "rlshim_calls_total{%s,verdict=\"delay\"} 2",
             lbl);
    check_exposition(out, want);
    snprintf(want, sizeof want, "rlshim_delayed_seconds_total{%s} 3.000000000",
             lbl);
    check_exposition(out, want);
    promtool(out);
}

/* Requests (SPEC §11): their counters like every kind's, and the TLS
 * connections whose requests could not be counted, when there were any. */
Test(prometheus, request_counters_and_tls_not_counted)
{
    spend(1);
    const struct rl_rule *rule = &cfg->rules[0];
    struct rl_budget_layout l;
    struct rl_slot sl;
    char label[RL_STORE_LABEL_MAX];
    bool ovf;
    rl_budget_layout(rule, &l);
    uint64_t tag = rl_budget_label(rule, rl_budget_user(rule, "0"), label,
                                   sizeof label);
    cr_assert_eq(rl_store_slot(store, tag, label, l.nwords,
                               rl_budget_overflow_tag(rule), &sl, &ovf),
                 0);
    rl_store_count(&sl, RL_KIND_REQUEST, RL_STAT_ALLOWED, 2);
    rl_store_count(&sl, RL_KIND_REQUEST, RL_STAT_DENIED, 4);
    rl_store_count_responded(&sl, 5);
    for (int i = 0; i < 3; i++)
        rl_store_count_tls_unseen(&sl);
    char out[16384], args[256];
    snprintf(args, sizeof args, "stat --prometheus -c %s", cfg_path);
    cr_assert_eq(run(args, out, sizeof out), 0, "%s", out);
    const char *lbl = "user=\"al\\\"ice\",rule=\"user:al\\\"ice\",limit=\"request\"";
    char want[512];
    snprintf(want, sizeof want, "rlshim_calls_total{%s,verdict=\"allow\"} 2",
             lbl);
    check_exposition(out, want);
    snprintf(want, sizeof want, "rlshim_calls_total{%s,verdict=\"deny\"} 4",
             lbl);
    check_exposition(out, want);
    /* Answered in the process (SPEC §15): a verdict of its own, not in
     * deny. */
    snprintf(want, sizeof want, "rlshim_calls_total{%s,verdict=\"respond\"} 5",
             lbl);
    check_exposition(out, want);
    snprintf(want, sizeof want,
             "rlshim_tls_connections_not_counted_total{%s} 3", lbl);
    check_exposition(out, want);
    cr_expect_not_null(
        strstr(out, "# TYPE rlshim_tls_connections_not_counted_total counter\n"),
        "%s", out);
    promtool(out);
}
