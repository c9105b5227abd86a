/* verify_pause.c — `rlshim verify LOG --obeyed-retry-after`: did any
 * request of a destination go while a server's 429/503 had paused it
 * (SPEC §12)?
 *
 * A pause is a line with verdict "pause" (call = response: the status
 * and the Retry-After, or the backoff, that paused its budget from
 * mono_ns for wait_ns). A request breaks it when it names the same
 * destination, was decided after the pause began (a request already
 * decided, asleep for its turn, is not held back by a later answer) and
 * went (mono_ns + wait_ns) before the pause ended, less the slack. Hosts
 * of a fleet compare their monotonic clocks: one machine's log only. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cli/verify_pause.h"

#define SHOW_MAX 20

static bool went(const struct rl_declog_entry *e)
{
    return strcmp(e->limit, "request") == 0 && e->units > 0 &&
           (e->verdict == RL_DECLOG_ALLOW || e->verdict == RL_DECLOG_DELAY);
}

int rl_verify_pauses(const struct rl_logfile *lf, uint64_t slack_ns,
                     FILE *out)
{
    size_t pauses = 0, held = 0, broken = 0;
    for (size_t i = 0; i < lf->n; i++) {
        const struct rl_declog_entry *p = &lf->v[i].e;
        if (p->verdict != RL_DECLOG_PAUSE)
            continue;
        pauses++;
        uint64_t end = p->mono_ns + p->wait_ns;
        end = end > slack_ns ? end - slack_ns : 0;
        for (size_t j = 0; j < lf->n; j++) {
            const struct rl_declog_entry *e = &lf->v[j].e;
            if (!went(e) || strcmp(e->dest, p->dest) != 0 ||
                e->mono_ns < p->mono_ns)
                continue;
            if (e->mono_ns + e->wait_ns >= end) {
                held += e->mono_ns < end; /* decided inside, went after */
                continue;
            }
            if (broken++ == 0)
                fprintf(out, "requests that went during a pause:\n");
            if (broken > SHOW_MAX)
                continue;
            fprintf(out, "  %zu: %s\n    paused by %zu: %s\n",
                    lf->v[j].lineno, lf->v[j].raw, lf->v[i].lineno,
                    lf->v[i].raw);
        }
    }
    if (broken > SHOW_MAX)
        fprintf(out, "  ... and %zu more\n", broken - SHOW_MAX);
    fprintf(out,
            "rlshim verify: %s: %zu pause%s by 429/503, %zu request%s "
            "decided during them %s\n",
            broken ? "FAIL" : "ok", pauses, pauses == 1 ? "" : "s",
            held + broken, held + broken == 1 ? "" : "s",
            broken ? "went before the end" : "all waited for the end");
    return broken ? 1 : 0;
}
