/* gate_signal.c — a send decided from a signal handler (see gate.h). */
#include <stdatomic.h>

#include "limit/limit.h"
#include "policy/gate.h"
#include "policy/gate_int.h"
#include "util/clock.h"

int rl_gate_send_reentered(uint64_t calls, uint64_t bytes, uint64_t bytes_min,
                           uint64_t *granted, int *err)
{
    const struct rl_rule *rule = rl_gate.rule;
    *granted = bytes;
    if (rule == NULL) {
        if (!rl_gate.deny_all)
            return RL_GATE_GO;
        rl_gate_count(NULL, RL_KIND_SEND, RL_STAT_DENIED, calls);
        *err = rl_gate.cfg->deny_errno;
        return rl_gate.cfg->dry_run ? RL_GATE_GO : RL_GATE_FAIL;
    }
    /* The budget as it is: budget() may re-open the store (malloc). */
    struct budget *b = atomic_load_explicit(&rl_gate.cur, memory_order_acquire);
    if (b == NULL)
        return RL_GATE_GO;
    uint64_t now = rl_clock_now_ns();
    /* Our own verdicts: the interrupted frame's ticket is its own. */
    struct rl_verdict vc[RL_MAX_RATES], vb[RL_MAX_RATES];
    unsigned nc = rule->nlimits[RL_KIND_SEND];
    unsigned nb = rule->nlimits[RL_KIND_SEND_BYTES];
    int denied = -1;
    uint64_t got = bytes;
    if (nc > 0 && calls > 0 &&
        rl_multi_take(b->states[RL_KIND_SEND], rule->limits[RL_KIND_SEND], nc,
                      now, calls, calls, 0, vc)
                .granted == 0)
        denied = RL_KIND_SEND;
    if (denied < 0 && nb > 0 && bytes > 0) {
        struct rl_verdict v = rl_multi_take(
            b->states[RL_KIND_SEND_BYTES], rule->limits[RL_KIND_SEND_BYTES], nb,
            now, bytes, bytes_min > 0 ? bytes_min : 1, 0, vb);
        got = v.granted;
        if (got == 0) {
            denied = RL_KIND_SEND_BYTES;
            if (nc > 0 && calls > 0)
                rl_multi_refund(b->states[RL_KIND_SEND],
                                rule->limits[RL_KIND_SEND], nc, now, vc, calls);
        }
    }
    if (denied >= 0) {
        rl_gate_count(b, denied, RL_STAT_DENIED,
                      denied == RL_KIND_SEND ? calls : bytes);
        *err = rule->deny_errno;
        return rule->dry_run ? RL_GATE_GO : RL_GATE_FAIL;
    }
    if (nc > 0)
        rl_gate_count(b, RL_KIND_SEND, RL_STAT_ALLOWED, calls);
    if (nb > 0)
        rl_gate_count(b, RL_KIND_SEND_BYTES, RL_STAT_ALLOWED, got);
    *granted = got;
    return RL_GATE_GO;
}

