/* verify_pause.c — `rlshim verify LOG --obeyed-retry-after`: did any
 * request of a destination go while a server's 429/503 had paused it
 * (SPEC §12)?
 *
 * A pause is a line with verdict "pause" (call = response: the status
 * and the Retry-After, or the backoff, that paused its destination from
 * mono_ns for wait_ns). A request breaks it when it names the same
 * destination and went (mono_ns + wait_ns) inside the pause, less the
 * slack: decided during it and gone before its end, or decided before it
 * with a turn that came during it (a request queued for its turn is held
 * too, SPEC §12). A request whose turn a pause moved is decided again at
 * that turn, on a line whose moved_ns is the turn it gave up: the line
 * of that turn (same pid and destination) did not go. Hosts of a fleet
 * compare their monotonic clocks: one machine's log only. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/verify_pause.h"
#include "model/kinds.h"

#define SHOW_MAX 20

static bool went(const struct rl_declog_entry *e)
{
    return strcmp(e->limit, rl_kind_name(RL_KIND_REQUEST)) == 0 &&
           e->units > 0 &&
           (e->verdict == RL_DECLOG_ALLOW || e->verdict == RL_DECLOG_DELAY);
}

/* A request of p's destination asked after the shim answered p with its
 * own 429 (verdict respond) and before the end of the wait it gave. */
static bool asked_again(const struct rl_declog_entry *e,
                        const struct rl_declog_entry *p, uint64_t end)
{
    bool asked = went(e) || (e->verdict == RL_DECLOG_RESPOND &&
                             strcmp(e->limit, "request") == 0 && e->units > 0);
    return asked && strcmp(e->dest, p->dest) == 0 && e->pid == p->pid &&
           e->mono_ns > p->mono_ns && e->mono_ns < end;
}

/* Which lines are turns given up: a later line of the same process and
 * destination says it moved that turn (NULL: out of memory, none are). */
static bool *moved_turns(const struct rl_logfile *lf)
{
    bool *moved = calloc(lf->n ? lf->n : 1, sizeof *moved);
    for (size_t i = 0; moved != NULL && i < lf->n; i++) {
        const struct rl_declog_entry *m = &lf->v[i].e;
        if (m->moved_ns == 0 || !went(m))
            continue;
        for (size_t j = 0; j < lf->n; j++) {
            const struct rl_declog_entry *e = &lf->v[j].e;
            if (!moved[j] && went(e) && e->pid == m->pid &&
                e->mono_ns + e->wait_ns == m->moved_ns &&
                strcmp(e->dest, m->dest) == 0) {
                moved[j] = true;
                break;
            }
        }
    }
    return moved;
}

int rl_verify_pauses(const struct rl_logfile *lf, uint64_t slack_ns,
                     FILE *out)
{
    size_t pauses = 0, held = 0, broken = 0, made = 0;
    bool *moved = moved_turns(lf);
    for (size_t i = 0; i < lf->n; i++) {
        const struct rl_declog_entry *p = &lf->v[i].e;
        bool told = p->verdict == RL_DECLOG_RESPOND;
        if (p->verdict != RL_DECLOG_PAUSE && !told)
            continue;
        pauses++;
        made += told;
        uint64_t end = p->mono_ns + p->wait_ns;
        end = end > slack_ns ? end - slack_ns : 0;
        for (size_t j = 0; j < lf->n; j++) {
            const struct rl_declog_entry *e = &lf->v[j].e;
            if (told && j != i && asked_again(e, p, end)) {
                /* The shim's own 429 (SPEC §15): the client asked that
                 * destination again before the Retry-After it was given,
                 * whether that request went or was answered again. */
                if (broken++ == 0)
                    fprintf(out, "requests that went during a pause:\n");
                if (broken <= SHOW_MAX)
                    fprintf(out, "  %zu: %s\n    told to wait by %zu: %s\n",
                            lf->v[j].lineno, lf->v[j].raw, lf->v[i].lineno,
                            lf->v[i].raw);
                continue;
            }
            if (told || !went(e) || strcmp(e->dest, p->dest) != 0 ||
                (moved != NULL && moved[j]))
                continue;
            uint64_t turn = e->mono_ns + e->wait_ns;
            if (e->mono_ns < p->mono_ns &&
                (turn <= p->mono_ns + slack_ns || turn >= end))
                continue; /* decided before: gone before, or after, it */
            if (e->mono_ns >= p->mono_ns && turn >= end) {
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
    free(moved);
    if (broken > SHOW_MAX)
        fprintf(out, "  ... and %zu more\n", broken - SHOW_MAX);
    char mine[64] = "";
    if (made > 0)
        snprintf(mine, sizeof mine, " (%zu made up by the shim)", made);
    fprintf(out,
            "rlshim verify: %s: %zu pause%s by 429/503%s, %zu request%s "
            "decided during them %s\n",
            broken ? "FAIL" : "ok", pauses, pauses == 1 ? "" : "s", mine,
            held + broken, held + broken == 1 ? "" : "s",
            broken ? "went before the end" : "all waited for the end");
    return broken ? 1 : 0;
}
