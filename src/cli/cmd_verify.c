/* cmd_verify.c — `rlshim verify LOG --limit KIND=RATE[,burst=N]
 * [--per user|destination] [--window] [--slack DURATION]
 * [--obeyed-retry-after]`: do the allowed units of a decision log obey a
 * limit (and did no request go during a server's pause: verify_pause.c)?
 *
 * Units count when the verdict is allow or delay, at the time they went:
 * mono_ns + wait_ns (a delayed call sleeps, then goes). Exit 0 when they
 * obey it, 1 with the worst interval and its lines when not, 2 on a usage
 * or read error. The check itself is limit/conform.c. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/logfile.h"
#include "cli/verify_pause.h"
#include "limit/conform.h"
#include "model/kinds.h"
#include "util/declog.h"
#include "util/parse.h"

#define SHOW_MAX 40 /* lines of the worst interval printed */

enum per { PER_ALL, PER_USER, PER_DEST };

struct item {
    const char *key; /* the group: "" for all */
    uint64_t t;
    uint64_t units;
    size_t line;     /* index into the log */
};

struct spec {
    char kind[16];
    const char *text; /* as given, for messages */
    struct rl_rate rate;
    uint64_t burst;
    bool window;
    uint64_t slack_ns;
};

static void usage(FILE *f)
{
    fputs("usage: rlshim verify LOG --limit KIND=RATE[,burst=N] "
          "[--per user|destination]\n"
          "                     [--window] [--slack DURATION]\n"
          "       rlshim verify LOG --obeyed-retry-after [--slack DURATION]\n"
          "  KIND is connect, send, send_bytes or request; RATE is N/PERIOD (5/s, "
          "100/min, 1MiB/s).\n"
          "  Exit 0: the allowed units obey the limit; 1: they do not (the "
          "worst interval\n"
          "  is printed with its lines); 2: usage or read error.\n"
          "  --obeyed-retry-after: 1 when a request of a destination went "
          "while a 429/503\n"
          "  had paused it (both checks when both are given).\n",
          f);
}

static int parse_limit(const char *s, struct spec *sp)
{
    const char *eq = strchr(s, '=');
    if (eq == NULL || (size_t)(eq - s) >= sizeof sp->kind)
        return -EINVAL;
    memcpy(sp->kind, s, (size_t)(eq - s));
    sp->kind[eq - s] = '\0';
    int kind = rl_kind_by_name(sp->kind);
    if (kind < 0)
        return -EINVAL;
    bool bytes = rl_kinds[kind].sizes;
    char rate[128];
    const char *comma = strchr(eq + 1, ',');
    size_t rl = comma ? (size_t)(comma - eq - 1) : strlen(eq + 1);
    if (rl >= sizeof rate)
        return -EINVAL;
    memcpy(rate, eq + 1, rl);
    rate[rl] = '\0';
    if (rl_parse_rate(rate, bytes, &sp->rate) < 0 || sp->rate.count == 0)
        return -EINVAL;
    sp->burst = sp->rate.count; /* the config's default burst */
    if (comma != NULL) {
        if (strncmp(comma + 1, "burst=", 6) != 0)
            return -EINVAL;
        int r = bytes ? rl_parse_size(comma + 7, &sp->burst)
                      : rl_parse_u64(comma + 7, &sp->burst);
        if (r < 0 || sp->burst == 0)
            return -EINVAL;
    }
    sp->text = s;
    return 0;
}

static int by_key_then_time(const void *a, const void *b)
{
    const struct item *x = a, *y = b;
    int c = strcmp(x->key, y->key);
    if (c != 0)
        return c;
    if (x->t != y->t)
        return x->t < y->t ? -1 : 1;
    return x->line < y->line ? -1 : x->line > y->line;
}

struct worst {
    bool have;
    struct rl_conform_result res;
    size_t from; /* index into items of the group's first event */
    const char *key;
};

/* Is result a worse than b? By how far over (or under) the limit. */
static double badness(const struct rl_conform_result *r)
{
    return (double)r->units - (double)r->allowed;
}

static void check_group(const struct item *it, size_t n, const struct spec *sp,
                        struct worst *w, size_t from)
{
    struct rl_conform_ev *ev = malloc((n ? n : 1) * sizeof *ev);
    struct rl_conform_result res;
    if (ev == NULL) {
        perror("rlshim verify");
        exit(2);
    }
    for (size_t i = 0; i < n; i++)
        ev[i] = (struct rl_conform_ev){it[i].t, it[i].units};
    if (sp->window)
        rl_conform_window(ev, n, sp->rate.count, sp->rate.period_ns,
                          sp->slack_ns, &res);
    else
        rl_conform_bucket(ev, n, sp->rate.count, sp->rate.period_ns,
                          sp->burst, sp->slack_ns, &res);
    free(ev);
    if (!w->have || (!res.ok && w->res.ok) ||
        (res.ok == w->res.ok && badness(&res) > badness(&w->res))) {
        w->have = true;
        w->res = res;
        w->from = from;
        w->key = it[0].key;
    }
}

static void print_worst(FILE *f, const struct worst *w, const struct item *it,
                        const struct rl_logfile *lf, const struct spec *sp,
                        enum per per)
{
    const struct item *a = &it[w->from + w->res.first];
    const struct item *b = &it[w->from + w->res.last];
    double span_ms = (double)(b->t - a->t) / 1e6;
    size_t nl = w->res.last - w->res.first + 1;
    fprintf(f, "%s interval%s%s%s: %llu %s unit%s in %.3f ms "
               "(%zu line%s), the limit allows %llu%s\n",
            w->res.ok ? "worst" : "over the limit in",
            per == PER_ALL ? "" : " of ",
            per == PER_ALL ? "" : (per == PER_USER ? "user " : "destination "),
            per == PER_ALL ? "" : w->key, (unsigned long long)w->res.units,
            sp->kind, w->res.units == 1 ? "" : "s", span_ms, nl,
            nl == 1 ? "" : "s",
            (unsigned long long)w->res.allowed,
            sp->window ? " in any window" : "");
    if (w->res.ok)
        return;
    size_t n = w->res.last - w->res.first + 1;
    for (size_t i = 0; i < n && i < SHOW_MAX; i++) {
        const struct rl_logline *l = &lf->v[a[i].line];
        fprintf(f, "  %zu: %s\n", l->lineno, l->raw);
    }
    if (n > SHOW_MAX)
        fprintf(f, "  ... and %zu more lines\n", n - SHOW_MAX);
}

int rl_cmd_verify(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"limit", required_argument, NULL, 'l'},
        {"per", required_argument, NULL, 'p'},
        {"window", no_argument, NULL, 'w'},
        {"slack", required_argument, NULL, 's'},
        {"obeyed-retry-after", no_argument, NULL, 'r'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct spec sp = {.slack_ns = 1000};
    enum per per = PER_ALL;
    bool have_limit = false, pauses = false;
    int c;

    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":l:p:ws:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'l':
            if (parse_limit(optarg, &sp) < 0) {
                fprintf(stderr, "rlshim verify: bad --limit '%s' (want "
                                "KIND=N/PERIOD[,burst=N])\n", optarg);
                return 2;
            }
            have_limit = true;
            break;
        case 'p':
            if (strcmp(optarg, "user") == 0)
                per = PER_USER;
            else if (strcmp(optarg, "destination") == 0)
                per = PER_DEST;
            else {
                fprintf(stderr, "rlshim verify: --per takes user or "
                                "destination, not '%s'\n", optarg);
                return 2;
            }
            break;
        case 'w':
            sp.window = true;
            break;
        case 'r':
            pauses = true;
            break;
        case 's':
            if (rl_parse_duration(optarg, &sp.slack_ns) < 0) {
                fprintf(stderr, "rlshim verify: bad --slack '%s'\n", optarg);
                return 2;
            }
            break;
        case 'h':
            usage(stdout);
            return 0;
        default: /* ':' or '?' */
            return rl_cli_bad_option("verify", c, argv, usage);
        }
    }
    if (optind != argc - 1 || (!have_limit && !pauses)) {
        usage(stderr);
        return 2;
    }
    if (have_limit && sp.window && strchr(sp.text, ',') != NULL) {
        fprintf(stderr, "rlshim verify: a window has no burst: at most N in "
                        "any PERIOD\n");
        return 2;
    }

    struct rl_logfile lf;
    if (rl_logfile_read("verify", argv[optind], &lf) < 0)
        return 2;
    int paused = pauses ? rl_verify_pauses(&lf, sp.slack_ns, stdout) : 0;
    if (!have_limit) {
        rl_logfile_free(&lf);
        return paused;
    }
    struct item *it = malloc((lf.n ? lf.n : 1) * sizeof *it);
    size_t n = 0, lines = 0;
    if (it == NULL) {
        perror("rlshim verify");
        rl_logfile_free(&lf);
        return 2;
    }
    for (size_t i = 0; i < lf.n; i++) {
        const struct rl_declog_entry *e = &lf.v[i].e;
        if (strcmp(e->limit, sp.kind) != 0 || e->verdict == RL_DECLOG_PAUSE)
            continue;
        lines++;
        if (e->verdict == RL_DECLOG_DENY || e->verdict == RL_DECLOG_RESPOND ||
            e->units == 0)
            continue;
        it[n++] = (struct item){
            .key = per == PER_USER ? e->user : per == PER_DEST ? e->dest : "",
            .t = e->mono_ns + e->wait_ns,
            .units = e->units,
            .line = i,
        };
    }
    qsort(it, n, sizeof *it, by_key_then_time);

    struct worst w = {0};
    uint64_t total = 0;
    size_t groups = 0;
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j < n && strcmp(it[j].key, it[i].key) == 0)
            total += it[j++].units;
        check_group(it + i, j - i, &sp, &w, i);
        groups++;
        i = j;
    }
    int status = w.have && !w.res.ok ? 1 : 0;
    FILE *out = stdout;
    if (n == 0)
        fprintf(stderr, "rlshim verify: %s: no allowed %s in %zu lines of "
                        "%s: nothing to check\n",
                argv[optind], sp.kind, lines, sp.kind);
    fprintf(out, "rlshim verify: %s: %llu %s unit%s allowed in %zu line%s, "
                 "%zu group%s: %s %s\n",
            status ? "FAIL" : "ok", (unsigned long long)total, sp.kind,
            total == 1 ? "" : "s", n, n == 1 ? "" : "s", groups,
            groups == 1 ? "" : "s",
            status ? "do not obey" : "obey", sp.text);
    if (w.have)
        print_worst(out, &w, it, &lf, &sp, per);
    free(it);
    rl_logfile_free(&lf);
    return status | paused;
}
