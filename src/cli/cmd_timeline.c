/* cmd_timeline.c — `rlshim timeline LOG [--bin 100ms] [--limit
 * KIND=RATE] [-c FILE] [--svg FILE]`: what a decision log says happened,
 * per destination and per bin: allowed, delayed and denied calls, as
 * terminal bars and, with --svg, as a standalone SVG (axes, legend, the
 * limit as a line).
 *
 * Each kind the log has is drawn, a chart of its own (connect, request,
 * send, send_bytes; a send charged to both send and send_bytes is two
 * lines); --limit draws its kind alone. Allowed and delayed calls are
 * placed when they went (mono_ns + wait_ns), denied ones when they were
 * refused. A destination's limit comes from --limit, else from the
 * config's sections its lines name (the rule, and the site: a site-only
 * log's rule is null), the tightest first rate among them that limits
 * the kind; when none is found, stderr says why. A destination's interval,
 * where its lines give it (SPEC §14), is drawn above (timeline_pace.c). */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cmd_state.h"
#include "cli/commands.h"
#include "cli/logfile.h"
#include "cli/timeline_pace.h"
#include "policy/config.h"
#include "util/declog.h"
#include "util/parse.h"

enum { V_ALLOW, V_DELAY, V_DENY, NV };

struct dest {
    char name[256];
    uint64_t *bins; /* nbins * NV counts */
    uint64_t total[NV];
    bool has_rate;
    struct rl_rate rate; /* its limit, when known */
    struct rl_tl_interval iv; /* its interval over the bins, if logged */
};

struct chart {
    char kind[16];
    uint64_t bin_ns, t0;
    size_t nbins;
    struct dest *d;
    size_t nd;
    bool has_rate;
    struct rl_rate rate; /* --limit's: every destination's */
};

/* The kinds a chart may draw, in the order they are drawn. */
static const char *const kinds[] = {"connect", "request", "send",
                                    "send_bytes"};
#define NKINDS 4

static void usage(FILE *f)
{
    fputs("usage: rlshim timeline LOG [--bin DURATION] [--limit KIND=RATE]\n"
          "                       [-c FILE] [--svg FILE]\n"
          "  Per destination and per bin (default 100ms): allowed (#), "
          "delayed (~) and\n"
          "  denied (x) calls. --svg writes the same chart as an SVG file.\n",
          f);
}

static int parse_limit(const char *s, struct chart *ch)
{
    const char *eq = strchr(s, '=');
    if (eq == NULL || (size_t)(eq - s) >= sizeof ch->kind)
        return -EINVAL;
    memcpy(ch->kind, s, (size_t)(eq - s));
    ch->kind[eq - s] = '\0';
    int k = rl_kind_by_name(ch->kind);
    if (k < 0)
        return -EINVAL;
    if (rl_parse_rate(eq + 1, rl_kinds[k].sizes, &ch->rate) < 0 ||
        ch->rate.count == 0)
        return -EINVAL;
    ch->has_rate = true;
    return 0;
}

static struct dest *dest_of(struct chart *ch, const char *name)
{
    for (size_t i = 0; i < ch->nd; i++)
        if (strcmp(ch->d[i].name, name) == 0)
            return &ch->d[i];
    struct dest *nd = realloc(ch->d, (ch->nd + 1) * sizeof *nd);
    if (nd == NULL)
        return NULL;
    ch->d = nd;
    struct dest *d = &ch->d[ch->nd];
    memset(d, 0, sizeof *d);
    snprintf(d->name, sizeof d->name, "%s", name);
    d->bins = calloc(ch->nbins * NV, sizeof *d->bins);
    if (d->bins == NULL)
        return NULL;
    ch->nd++;
    return d;
}

/* Is a a tighter rate than b (fewer per time)? */
static bool tighter(const struct rl_rate *a, const struct rl_rate *b)
{
    return (unsigned __int128)a->count * b->period_ns <
           (unsigned __int128)b->count * a->period_ns;
}

/* Section `name`'s first rate of kind k into *rate, tighter than what
 * *has says is there already. */
static bool section_rate(const struct rl_config *cfg, const char *name, int k,
                         struct rl_rate *rate, bool *has)
{
    for (size_t i = 0; i < cfg->nrules; i++) {
        const struct rl_rule *r = &cfg->rules[i];
        if (strcmp(r->section, name) != 0)
            continue;
        if (r->nlimits[k] == 0)
            return false;
        struct rl_rate x = {r->limits[k][0].count, r->limits[k][0].period_ns};
        if (!*has || tighter(&x, rate))
            *rate = x;
        *has = true;
        return true;
    }
    return false;
}

/* Each destination's limit from the config, when no --limit gave one:
 * the sections its lines name (rule, site). A rule named whose `to` did
 * not cover the destination cannot be told from the log: its rate counts
 * too, which can only draw the line lower. Says on stderr when a
 * destination's could not be found. */
static void rate_from_config(struct chart *ch, const struct rl_logfile *lf,
                             const struct rl_config *cfg, const char *why)
{
    int k = rl_kind_by_name(ch->kind);
    size_t none = 0;
    for (size_t j = 0; j < ch->nd; j++) {
        struct dest *d = &ch->d[j];
        for (size_t i = 0; cfg != NULL && i < lf->n; i++) {
            const struct rl_declog_entry *e = &lf->v[i].e;
            if (strcmp(e->limit, ch->kind) != 0 || strcmp(e->dest, d->name))
                continue;
            if (e->rule[0] != '\0')
                (void)section_rate(cfg, e->rule, k, &d->rate, &d->has_rate);
            if (e->site[0] != '\0') {
                char site[300];
                snprintf(site, sizeof site, "site:%s", e->site);
                (void)section_rate(cfg, site, k, &d->rate, &d->has_rate);
            }
        }
        none += !d->has_rate;
    }
    if (none > 0)
        fprintf(stderr,
                "rlshim timeline: no %s limit drawn for %zu of %zu "
                "destinations: %s (or give --limit %s=RATE)\n",
                ch->kind, none, ch->nd,
                cfg == NULL ? why
                            : "no section their lines name limits it in "
                              "the config",
                ch->kind);
}

static int by_name(const void *a, const void *b)
{
    return strcmp(((const struct dest *)a)->name,
                  ((const struct dest *)b)->name);
}

static int build(struct chart *ch, const struct rl_logfile *lf)
{
    uint64_t t0 = UINT64_MAX, t1 = 0;
    for (size_t i = 0; i < lf->n; i++) {
        const struct rl_declog_entry *e = &lf->v[i].e;
        /* A response's pause (SPEC §12) is not a call that went. */
        if (strcmp(e->limit, ch->kind) != 0 || e->verdict == RL_DECLOG_PAUSE)
            continue;
        bool no = e->verdict == RL_DECLOG_DENY || e->verdict == RL_DECLOG_RESPOND;
        uint64_t t = e->mono_ns + (no ? 0 : e->wait_ns);
        if (e->mono_ns < t0)
            t0 = e->mono_ns;
        if (t > t1)
            t1 = t;
    }
    if (t0 == UINT64_MAX)
        return -ENOENT;
    ch->t0 = t0;
    ch->nbins = (size_t)((t1 - t0) / ch->bin_ns) + 1;
    if (ch->nbins > 100000) {
        fprintf(stderr, "rlshim timeline: %zu bins: choose a larger --bin\n",
                ch->nbins);
        return -E2BIG;
    }
    for (size_t i = 0; i < lf->n; i++) {
        const struct rl_declog_entry *e = &lf->v[i].e;
        /* A response's pause (SPEC §12) is not a call that went. */
        if (strcmp(e->limit, ch->kind) != 0 || e->verdict == RL_DECLOG_PAUSE)
            continue;
        int v = e->verdict == RL_DECLOG_DENY || e->verdict == RL_DECLOG_RESPOND
                    ? V_DENY
                : e->verdict == RL_DECLOG_DELAY ? V_DELAY
                                                : V_ALLOW;
        uint64_t t = e->mono_ns + (v == V_DENY ? 0 : e->wait_ns);
        struct dest *d = dest_of(ch, e->dest);
        if (d == NULL)
            return -ENOMEM;
        size_t bin = (size_t)((t - t0) / ch->bin_ns);
        d->bins[bin * NV + (size_t)v]++;
        d->total[v]++;
        if (e->interval_ns > 0 && /* in force when it was decided */
            rl_tl_interval_note(&d->iv, ch->nbins, e->mono_ns - t0,
                                ch->bin_ns, e->interval_ns) < 0)
            return -ENOMEM;
    }
    for (size_t i = 0; i < ch->nd; i++)
        if (ch->d[i].iv.ns != NULL)
            rl_tl_interval_carry(&ch->d[i].iv);
    qsort(ch->d, ch->nd, sizeof *ch->d, by_name);
    for (size_t i = 0; ch->has_rate && i < ch->nd; i++) {
        ch->d[i].has_rate = true;
        ch->d[i].rate = ch->rate;
    }
    return 0;
}

/* The one limit every destination of the n charts has, if they all have
 * the same (then drawn once, in the legend and the chart's head). */
static bool one_rate(const struct chart *ch, size_t n, struct rl_rate *out)
{
    bool any = false;
    for (size_t c = 0; c < n; c++)
        for (size_t i = 0; i < ch[c].nd; i++) {
            const struct dest *d = &ch[c].d[i];
            if (!d->has_rate ||
                (any && (d->rate.count != out->count ||
                         d->rate.period_ns != out->period_ns)))
                return false;
            *out = d->rate;
            any = true;
        }
    return any;
}

static void terminal(FILE *f, const struct chart *ch)
{
    static const char mark[NV] = {'#', '~', 'x'};
    uint64_t most = 0;
    for (size_t i = 0; i < ch->nd; i++)
        for (size_t b = 0; b < ch->nbins; b++) {
            uint64_t s = 0;
            for (int v = 0; v < NV; v++)
                s += ch->d[i].bins[b * NV + (size_t)v];
            if (s > most)
                most = s;
        }
    /* One mark per call while a bin fits in 60 columns, else scaled. */
    double per = most > 60 ? (double)most / 60 : 1;
    fprintf(f, "%s calls per %.0f ms: # allowed, ~ delayed, x denied%s\n",
            ch->kind, (double)ch->bin_ns / 1e6,
            per > 1 ? " (scaled)" : "");
    struct rl_rate one;
    bool same = one_rate(ch, 1, &one);
    if (same)
        fprintf(f, "limit %llu per %.3f s: %.2f per bin\n",
                (unsigned long long)one.count, (double)one.period_ns / 1e9,
                (double)one.count * (double)ch->bin_ns /
                    (double)one.period_ns);
    for (size_t i = 0; i < ch->nd; i++) {
        const struct dest *d = &ch->d[i];
        fprintf(f, "\n%s: %llu allowed, %llu delayed, %llu denied\n", d->name,
                (unsigned long long)d->total[V_ALLOW],
                (unsigned long long)d->total[V_DELAY],
                (unsigned long long)d->total[V_DENY]);
        if (!same && d->has_rate)
            fprintf(f, "limit %llu per %.3f s: %.2f per bin\n",
                    (unsigned long long)d->rate.count,
                    (double)d->rate.period_ns / 1e9,
                    (double)d->rate.count * (double)ch->bin_ns /
                        (double)d->rate.period_ns);
        rl_tl_interval_terminal(f, &d->iv);
        uint64_t shown = 0;
        for (size_t b = 0; b < ch->nbins; b++) {
            const uint64_t *c = &d->bins[b * NV];
            char note[48];
            rl_tl_interval_row(&d->iv, b, &shown, note, sizeof note);
            if (c[0] + c[1] + c[2] == 0 && b % 10 != 0 && note[0] == '\0')
                continue;
            fprintf(f, "  %7.1fs  ", (double)b * (double)ch->bin_ns / 1e9);
            for (int v = 0; v < NV; v++) {
                size_t n = (size_t)((double)c[v] / per + 0.5);
                if (c[v] > 0 && n == 0)
                    n = 1;
                for (size_t k = 0; k < n; k++)
                    fputc(mark[v], f);
            }
            fprintf(f, "%s\n", note);
        }
    }
}

static void xml_text(FILE *f, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '&': fputs("&amp;", f); break;
        case '"': fputs("&quot;", f); break;
        default:
            if ((unsigned char)*s >= 0x20)
                fputc(*s, f);
        }
    }
}

/* A "nice" step for about `want` ticks up to `max`: 1, 2 or 5 times 10^k. */
static double nice_step(double max, int want)
{
    double raw = max / want, p = 1;
    while (p * 10 <= raw)
        p *= 10;
    while (p > raw && p > 1e-9)
        p /= 10;
    if (raw <= p)
        return p;
    if (raw <= 2 * p)
        return 2 * p;
    if (raw <= 5 * p)
        return 5 * p;
    return 10 * p;
}

#define W 900
#define PANEL_H 240
#define ML 64  /* left margin: y labels */
#define MR 24
#define MT 44  /* title and legend */
#define MB 40  /* x labels */

static void svg_panel(FILE *f, const struct chart *ch, const struct dest *d,
                      int y0)
{
    static const char *const cls[NV] = {"allowed", "delayed", "denied"};
    double pw = W - ML - MR, ph = PANEL_H - MT - MB;
    double limit_bin = d->has_rate ? (double)d->rate.count *
                                         (double)ch->bin_ns /
                                         (double)d->rate.period_ns
                                   : 0;
    uint64_t most = 0;
    for (size_t b = 0; b < ch->nbins; b++) {
        const uint64_t *c = &d->bins[b * NV];
        if (c[0] + c[1] + c[2] > most)
            most = c[0] + c[1] + c[2];
    }
    double ymax = (double)most > limit_bin ? (double)most : limit_bin;
    if (ymax < 1)
        ymax = 1;
    ymax *= 1.15;
    double bw = pw / (double)ch->nbins;
    double gap = bw > 4 ? 1 : 0;

    fprintf(f, "<g transform=\"translate(0,%d)\">\n", y0);
    fputs("<text class=\"title\" x=\"", f);
    fprintf(f, "%d\" y=\"18\">", ML);
    xml_text(f, d->name);
    fprintf(f, " — %s, %llu allowed, %llu delayed, %llu denied",
            ch->kind, (unsigned long long)d->total[V_ALLOW],
            (unsigned long long)d->total[V_DELAY],
            (unsigned long long)d->total[V_DENY]);
    if (d->has_rate)
        fprintf(f, ", limit %llu per %g s", (unsigned long long)d->rate.count,
                (double)d->rate.period_ns / 1e9);
    fputs("</text>\n", f);
    /* Bars: one rect per non-empty (bin, verdict), stacked. */
    for (size_t b = 0; b < ch->nbins; b++) {
        const uint64_t *c = &d->bins[b * NV];
        double base = 0;
        for (int v = 0; v < NV; v++) {
            if (c[v] == 0)
                continue;
            double h = (double)c[v] / ymax * ph;
            double y = MT + ph - (base + (double)c[v]) / ymax * ph;
            fprintf(f,
                    "<rect class=\"bar %s\" x=\"%.2f\" y=\"%.2f\" "
                    "width=\"%.2f\" height=\"%.2f\"><title>%.1f s: %llu "
                    "%s</title></rect>\n",
                    cls[v], ML + (double)b * bw + gap / 2, y, bw - gap, h,
                    (double)b * (double)ch->bin_ns / 1e9,
                    (unsigned long long)c[v], cls[v]);
            base += (double)c[v];
        }
    }
    /* Axes and ticks. */
    fprintf(f, "<line class=\"axis\" x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%.0f\"/>\n",
            ML, MT, ML, MT + ph);
    fprintf(f, "<line class=\"axis\" x1=\"%d\" y1=\"%.0f\" x2=\"%.0f\" "
               "y2=\"%.0f\"/>\n",
            ML, MT + ph, ML + pw, MT + ph);
    double ys = nice_step(ymax, 5);
    if (ys < 1)
        ys = 1;
    for (double y = 0; y <= ymax; y += ys) {
        double py = MT + ph - y / ymax * ph;
        fprintf(f, "<line class=\"tick\" x1=\"%d\" y1=\"%.2f\" x2=\"%d\" "
                   "y2=\"%.2f\"/><text class=\"yl\" x=\"%d\" y=\"%.2f\">%.0f"
                   "</text>\n",
                ML - 5, py, ML, py, ML - 8, py + 4, y);
    }
    double secs = (double)ch->nbins * (double)ch->bin_ns / 1e9;
    double xs = nice_step(secs, 10);
    for (double x = 0; x <= secs + 1e-9; x += xs) {
        double px = ML + x / secs * pw;
        fprintf(f, "<line class=\"tick\" x1=\"%.2f\" y1=\"%.0f\" x2=\"%.2f\" "
                   "y2=\"%.0f\"/><text class=\"xl\" x=\"%.2f\" y=\"%.0f\">"
                   "%g s</text>\n",
                px, MT + ph, px, MT + ph + 5, px, MT + ph + 20, x);
    }
    fprintf(f, "<text class=\"yt\" x=\"14\" y=\"%.0f\" transform=\"rotate(-90 "
               "14 %.0f)\">calls per %.0f ms</text>\n",
            MT + ph / 2, MT + ph / 2, (double)ch->bin_ns / 1e6);
    if (d->has_rate) {
        double py = MT + ph - limit_bin / ymax * ph;
        fprintf(f, "<line class=\"limit\" x1=\"%d\" y1=\"%.2f\" x2=\"%.0f\" "
                   "y2=\"%.2f\"/>\n",
                ML, py, ML + pw, py);
    }
    rl_tl_interval_svg(f, &d->iv, ML, bw, MT, ph);
    fputs("</g>\n", f);
}

/* The n charts, one panel per (chart, destination), into path. */
static int svg(const char *path, const struct chart *ch, size_t n)
{
    FILE *f = fopen(path, "w");
    if (f == NULL) {
        fprintf(stderr, "rlshim timeline: %s: %s\n", path, strerror(errno));
        return -errno;
    }
    size_t panels = 0;
    for (size_t c = 0; c < n; c++)
        panels += ch[c].nd;
    int h = (int)panels * PANEL_H + 36;
    fprintf(f,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" "
            "height=\"%d\" viewBox=\"0 0 %d %d\">\n"
            "<style>\n"
            "text { font: 12px sans-serif; fill: #222; }\n"
            ".title { font-weight: bold; font-size: 13px; }\n"
            ".yl { text-anchor: end; } .xl { text-anchor: middle; }\n"
            ".yt { text-anchor: middle; }\n"
            ".axis, .tick { stroke: #444; stroke-width: 1; }\n"
            ".allowed { fill: #3a9b48; } .delayed { fill: #e6a020; }\n"
            ".denied { fill: #d03a2f; }\n"
            ".limit { stroke: #1f4fbf; stroke-width: 2; "
            "stroke-dasharray: 6 4; }\n"
            ".interval { fill: none; stroke: #7b3fbf; stroke-width: 2; }\n"
            "</style>\n"
            "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
            W, h, W, h);
    /* The legend, once, at the top right. */
    static const char *const names[NV] = {"allowed", "delayed", "denied"};
    int lx = W - MR - 430;
    fputs("<g class=\"legend\">\n", f);
    for (int v = 0; v < NV; v++)
        fprintf(f, "<rect class=\"key %s\" x=\"%d\" y=\"10\" width=\"12\" "
                   "height=\"12\"/><text x=\"%d\" y=\"21\">%s</text>\n",
                names[v], lx + v * 90, lx + v * 90 + 16, names[v]);
    struct rl_rate one;
    bool any = false, paced = false;
    for (size_t c = 0; c < n; c++)
        for (size_t i = 0; i < ch[c].nd; i++) {
            any |= ch[c].d[i].has_rate;
            paced |= ch[c].d[i].iv.most > 0;
        }
    if (paced)
        rl_tl_interval_legend(f, lx - 110, 16);
    if (one_rate(ch, n, &one))
        fprintf(f, "<line class=\"limit\" x1=\"%d\" y1=\"16\" x2=\"%d\" "
                   "y2=\"16\"/><text x=\"%d\" y=\"21\">limit %llu per "
                   "%g s</text>\n",
                lx + 270, lx + 296, lx + 300, (unsigned long long)one.count,
                (double)one.period_ns / 1e9);
    else if (any) /* each panel's own, in its title */
        fprintf(f, "<line class=\"limit\" x1=\"%d\" y1=\"16\" x2=\"%d\" "
                   "y2=\"16\"/><text x=\"%d\" y=\"21\">limit</text>\n",
                lx + 270, lx + 296, lx + 300);
    fputs("</g>\n", f);
    int y = 30;
    for (size_t c = 0; c < n; c++)
        for (size_t i = 0; i < ch[c].nd; i++, y += PANEL_H)
            svg_panel(f, &ch[c], &ch[c].d[i], y);
    fputs("</svg>\n", f);
    if (fclose(f) != 0) {
        fprintf(stderr, "rlshim timeline: %s: %s\n", path, strerror(errno));
        return -EIO;
    }
    return 0;
}

int rl_cmd_timeline(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"bin", required_argument, NULL, 'b'},
        {"svg", required_argument, NULL, 's'},
        {"limit", required_argument, NULL, 'l'},
        {"config", required_argument, NULL, 'c'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct chart ch = {.bin_ns = 100000000u}, charts[NKINDS];
    size_t ncharts = 0;
    const char *svg_path = NULL, *copt = NULL;
    int c;

    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":b:s:l:c:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'b':
            if (rl_parse_duration(optarg, &ch.bin_ns) < 0 || ch.bin_ns == 0) {
                fprintf(stderr, "rlshim timeline: bad --bin '%s' (e.g. "
                                "100ms)\n", optarg);
                return 2;
            }
            break;
        case 's':
            svg_path = optarg;
            break;
        case 'l':
            if (parse_limit(optarg, &ch) < 0) {
                fprintf(stderr, "rlshim timeline: bad --limit '%s' (want "
                                "KIND=N/PERIOD)\n", optarg);
                return 2;
            }
            break;
        case 'c':
            copt = optarg;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default: /* ':' or '?' */
            return rl_cli_bad_option("timeline", c, argv, usage);
        }
    }
    if (optind != argc - 1) {
        usage(stderr);
        return 2;
    }
    struct rl_logfile lf;
    if (rl_logfile_read("timeline", argv[optind], &lf) < 0)
        return 2;
    /* --limit: its kind; else a chart for each kind the log has. */
    int status = 0;
    for (size_t k = 0; k < NKINDS && status == 0; k++) {
        if (ch.kind[0] != '\0' && strcmp(ch.kind, kinds[k]) != 0)
            continue;
        charts[ncharts] = ch;
        snprintf(charts[ncharts].kind, sizeof ch.kind, "%s", kinds[k]);
        int r = build(&charts[ncharts], &lf);
        if (r == 0 || charts[ncharts].nd > 0)
            ncharts++;
        if (r < 0 && r != -ENOENT)
            status = 2;
    }
    if (status == 0 && ncharts == 0) {
        fprintf(stderr, "rlshim timeline: %s: no %s lines\n", argv[optind],
                ch.kind[0] ? ch.kind : "decision");
        status = 1;
    }
    if (status == 0 && !ch.has_rate) {
        struct rl_config *cfg = NULL;
        const char *why = "no config (give -c FILE)";
        if (rl_cli_load_optional(copt, &cfg) < 0)
            why = "the config could not be read";
        for (size_t c = 0; c < ncharts; c++)
            rate_from_config(&charts[c], &lf, cfg, why);
        if (cfg != NULL)
            rl_config_free(cfg);
    }
    for (size_t c = 0; status == 0 && c < ncharts; c++) {
        if (c > 0)
            fputc('\n', stdout);
        terminal(stdout, &charts[c]);
    }
    if (status == 0 && svg_path != NULL && svg(svg_path, charts, ncharts) < 0)
        status = 2;
    for (size_t c = 0; c < ncharts; c++) {
        for (size_t i = 0; i < charts[c].nd; i++) {
            free(charts[c].d[i].bins);
            rl_tl_interval_free(&charts[c].d[i].iv);
        }
        free(charts[c].d);
    }
    rl_logfile_free(&lf);
    return status;
}
