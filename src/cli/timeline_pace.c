/* timeline_pace.c — see timeline_pace.h. */
#include <errno.h>
#include <stdlib.h>

#include "cli/timeline_pace.h"

int rl_tl_interval_note(struct rl_tl_interval *iv, size_t nbins,
                        uint64_t at, uint64_t bin_ns, uint64_t ns)
{
    size_t b = (size_t)(at / bin_ns);
    if (iv->ns == NULL) {
        iv->ns = calloc(nbins, sizeof *iv->ns);
        if (iv->ns == NULL)
            return -ENOMEM;
        iv->nbins = nbins;
    }
    if (b < iv->nbins && ns > iv->ns[b])
        iv->ns[b] = ns;
    return 0;
}

void rl_tl_interval_carry(struct rl_tl_interval *iv)
{
    iv->least = UINT64_MAX;
    iv->most = 0;
    for (size_t b = 0; b < iv->nbins; b++) {
        if (iv->ns[b] == 0 && b > 0)
            iv->ns[b] = iv->ns[b - 1];
        if (iv->ns[b] == 0)
            continue;
        if (iv->ns[b] < iv->least)
            iv->least = iv->ns[b];
        if (iv->ns[b] > iv->most)
            iv->most = iv->ns[b];
    }
}

/* "800 ms", "1.5 s". */
static void duration(uint64_t ns, char *buf, size_t len)
{
    if (ns >= 1000000000u)
        snprintf(buf, len, "%g s", (double)ns / 1e9);
    else
        snprintf(buf, len, "%llu ms", (unsigned long long)(ns / 1000000u));
}

void rl_tl_interval_terminal(FILE *f, const struct rl_tl_interval *iv)
{
    /* Eight heights, the sparkline's usual blocks; a blank: not known. */
    static const char *const level[] = {"▁", "▂", "▃", "▄",
                                        "▅", "▆", "▇", "█"};
    if (iv->ns == NULL || iv->most == 0)
        return;
    size_t cols = iv->nbins < 60 ? iv->nbins : 60;
    fputs("interval  ", f);
    for (size_t c = 0; c < cols; c++) {
        uint64_t v = 0;
        for (size_t b = c * iv->nbins / cols; b < (c + 1) * iv->nbins / cols;
             b++)
            if (iv->ns[b] > v)
                v = iv->ns[b];
        if (v == 0) {
            fputc(' ', f);
            continue;
        }
        uint64_t span = iv->most - iv->least;
        size_t l = span == 0 ? 0 : (size_t)((v - iv->least) * 7 / span);
        fputs(level[l], f);
    }
    char lo[32], hi[32];
    duration(iv->least, lo, sizeof lo);
    duration(iv->most, hi, sizeof hi);
    fprintf(f, "  %s to %s\n", lo, hi);
}

void rl_tl_interval_row(const struct rl_tl_interval *iv, size_t b,
                        uint64_t *shown, char *buf, size_t len)
{
    buf[0] = '\0';
    if (iv->ns == NULL || b >= iv->nbins || iv->ns[b] == 0 ||
        iv->ns[b] == *shown)
        return;
    *shown = iv->ns[b];
    char d[32];
    duration(iv->ns[b], d, sizeof d);
    snprintf(buf, len, "  interval %s", d);
}

void rl_tl_interval_svg(FILE *f, const struct rl_tl_interval *iv, double x0,
                        double bw, double top, double h)
{
    if (iv->ns == NULL || iv->most == 0)
        return;
    /* Its own scale: the most at the plot's top, 0 at its bottom; a
     * point only where it steps, so a long chart stays small. */
    fputs("<polyline class=\"interval\" points=\"", f);
    double last = -1;
    size_t b = 0;
    for (; b < iv->nbins; b++) {
        if (iv->ns[b] == 0)
            continue;
        double y = top + h - (double)iv->ns[b] / (double)iv->most * h;
        if (y == last)
            continue;
        double x = x0 + (double)b * bw;
        if (last >= 0) /* the level before, up to this bin */
            fprintf(f, "%.2f,%.2f ", x, last);
        fprintf(f, "%.2f,%.2f ", x, y);
        last = y;
    }
    fprintf(f, "%.2f,%.2f\"/>\n", x0 + (double)b * bw, last);
    char hi[32];
    duration(iv->most, hi, sizeof hi);
    fprintf(f, "<text class=\"interval-label\" x=\"%.2f\" y=\"%.2f\">"
               "interval %s</text>\n",
            x0 + 4, top + 12, hi);
}

void rl_tl_interval_legend(FILE *f, int x, int y)
{
    fprintf(f, "<line class=\"interval\" x1=\"%d\" y1=\"%d\" x2=\"%d\" "
               "y2=\"%d\"/><text x=\"%d\" y=\"%d\">interval</text>\n",
            x, y, x + 26, y, x + 30, y + 5);
}

void rl_tl_interval_free(struct rl_tl_interval *iv)
{
    free(iv->ns);
    iv->ns = NULL;
}
