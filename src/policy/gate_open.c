/* gate_open.c — a connect's max_open places (policy/open.h) as the gate
 * holds them: one per charge whose section has max_open, taken before the
 * rate's turn (gate_decide.c says why), bound to the fd once connected, and
 * the wait of a connect denied for want of one (see gate.h). */
#include <stdio.h>

#include "policy/gate.h"
#include "policy/gate_int.h"
#include "policy/open.h"
#include "policy/proc.h"
#include "state/store.h"
#include "util/clock.h"
#include "util/hash.h"

/* The max_open area of a charge: a per-destination entry's, or a slot of
 * its own beside the budget's ("#open|" and the budget's slot number, the
 * same in every process of the segment). NULL when none can be had. */
static rl_atomic_u64 *open_area(struct rl_gate_charge *c)
{
    if (c->open_area != NULL)
        return c->open_area;
    struct budget *b = c->budget;
    char label[RL_STORE_LABEL_MAX];
    snprintf(label, sizeof label, "#open|%s|%u", c->rule->section,
             b->slot.index);
    uint64_t tag = rl_hash_str(RL_HASH_INIT, label);
    struct rl_slot slot;
    bool overflowed = false;
    if (rl_store_slot(b->store, tag, label, RL_OPEN_WORDS,
                      rl_hash_str(RL_HASH_INIT, "#open|*"), &slot,
                      &overflowed) < 0 ||
        slot.nwords < RL_OPEN_WORDS)
        return NULL;
    return slot.words;
}

/* Give back the places open_take held (the rate denied the connect). */
void rl_gate_open_untake(struct rl_proc *p, struct rl_gate_ticket *t)
{
    for (unsigned j = 0; j < t->nopen; j++)
        rl_open_release(&p->open, t->open[j]);
    t->nopen = 0;
}

/* Hold a connection in every charge with max_open: true, or false with
 * nothing held and t->open_full set. Takes nothing of the rate. */
bool rl_gate_open_take(struct rl_proc *p, struct rl_gate_ticket *t)
{
    t->nopen = 0;
    if (!p->open.on)
        return true;
    for (unsigned i = 0; i < t->ncharges; i++) {
        struct rl_gate_charge *c = &t->charge[i];
        if (c->rule->max_open == 0)
            continue;
        rl_atomic_u64 *area = open_area(c);
        uint32_t seq;
        if (area == NULL)
            continue; /* no room in the segment: not enforced, never blocks */
        if (rl_open_acquire(&p->open, area, c->rule->max_open, &seq) == 0) {
            t->open[t->nopen++] = area;
            /* The count lives in the segment: not removed as unused
             * while its holder lives (SPEC §5). */
            uint32_t pid;
            uint64_t start;
            rl_open_holder_now(&p->open, &pid, &start);
            rl_store_pin(c->budget->store, pid, start);
            continue;
        }
        rl_gate_open_untake(p, t);
        t->denier = c->rule;
        t->open_full = area;
        t->open_seq = seq;
        return false;
    }
    return true;
}

void rl_gate_connected(struct rl_proc *p, struct rl_gate_ticket *t, int fd,
                       bool holds)
{
    if (t->nopen == 0)
        return;
    if (holds)
        rl_open_bind(&p->open, fd, t->open, t->nopen);
    else
        for (unsigned j = 0; j < t->nopen; j++)
            rl_open_release(&p->open, t->open[j]);
    t->nopen = 0;
}

bool rl_gate_open_waits(const struct rl_gate_ticket *t, uint64_t *deadline)
{
    const struct rl_rule *r = t->denier;
    if (t->open_full == NULL || r == NULL || r->on_deny != RL_DENY_DELAY ||
        r->dry_run)
        return false;
    uint64_t now = rl_clock_now_ns();
    if (*deadline == 0)
        *deadline = rl_add_sat_u64(now, r->max_delay_ns);
    return now < *deadline;
}

void rl_gate_open_wait(const struct rl_gate_ticket *t, uint64_t deadline)
{
    rl_open_wait(t->open_full, t->open_seq, deadline);
}

bool rl_gate_open_freed(const struct rl_gate_ticket *t)
{
    return t->open_full == NULL || rl_open_freed(t->open_full, t->open_seq);
}

