/* bench_gate.h — a benchmark's gate: the config text `text` parsed and
 * the gate of `p` set up for the key "bench" (the fleet benchmarks' user);
 * any failure ends the benchmark (it could not run). Header-only. */
#ifndef RL_BENCH_GATE_H
#define RL_BENCH_GATE_H

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "policy/config.h"
#include "policy/gate.h"
#include "policy/proc.h"

static __attribute__((unused)) void bench_gate_with(struct rl_proc *p,
                                                    const char *text)
{
    struct rl_config *cfg = NULL;
    struct rl_diag d = {0};
    if (rl_config_load_string(text, "bench.ini", &cfg, &d) != 0) {
        fprintf(stderr, "config: %s\n", d.n ? d.msgs[0] : "?");
        exit(1);
    }
    struct rl_identity id = {.has_key = true, .uid = (uint32_t)getuid()};
    snprintf(id.key, sizeof id.key, "bench");
    char why[256];
    if (rl_gate_init(p, cfg, &id, why, sizeof why) != 0) {
        fprintf(stderr, "gate: %s\n", why);
        exit(1);
    }
}

#endif
