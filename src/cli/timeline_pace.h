/* timeline_pace.h — `rlshim timeline`'s line of a destination's interval
 * over time (SPEC §14): the decision log's request lines carry the
 * interval their destination's requests were spaced by (interval_ns), so
 * a user sees the adaptation above the bins, as a sparkline in the
 * terminal and a step line in the SVG. */
#ifndef RL_CLI_TIMELINE_PACE_H
#define RL_CLI_TIMELINE_PACE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* One destination's interval, per bin of its chart. */
struct rl_tl_interval {
    uint64_t *ns; /* per bin: the largest noted in it (after carry: else
                     the bin's before), 0: not known yet; NULL: none */
    size_t nbins;
    uint64_t least, most; /* over the bins that have one */
};

/* Note an interval of `ns` at `at` ns into a chart of nbins bins of
 * bin_ns each. 0 or -ENOMEM. */
int rl_tl_interval_note(struct rl_tl_interval *iv, size_t nbins,
                        uint64_t at, uint64_t bin_ns, uint64_t ns);

/* A bin without a line keeps the interval of the bin before it (the
 * interval holds until a decision says otherwise); sets least and most. */
void rl_tl_interval_carry(struct rl_tl_interval *iv);

/* The terminal's line above the bins: "interval  ▁▁▅██▃▁  100 ms to
 * 800 ms" (at most 60 columns, each the largest of its bins); nothing
 * when none was noted. */
void rl_tl_interval_terminal(FILE *f, const struct rl_tl_interval *iv);

/* Bin b's interval as a row's note (" interval 800 ms") into buf when it
 * differs from `*shown` (then updated), else "". */
void rl_tl_interval_row(const struct rl_tl_interval *iv, size_t b,
                        uint64_t *shown, char *buf, size_t len);

/* The SVG's step line over a plot at x0 (bw per bin), its top at `top`,
 * `h` high, scaled to its own most (labelled at the line's top); nothing
 * when none was noted. */
void rl_tl_interval_svg(FILE *f, const struct rl_tl_interval *iv, double x0,
                        double bw, double top, double h);

/* The legend's key for the line, its left end at (x, y). */
void rl_tl_interval_legend(FILE *f, int x, int y);

void rl_tl_interval_free(struct rl_tl_interval *iv);

#endif
