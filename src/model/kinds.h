/* kinds.h — what a limit counts (SPEC §1): the one table of limit kinds.
 *
 * Every place that needs to know something of a kind (its name in the
 * file, in `stat`, in Prometheus labels, in the decision log and in a
 * Redis key; whether its rates are sizes; whether its units are leased;
 * whether a 429/503 pauses it) reads its row here instead of switching on
 * the kind. Adding a kind is a row here plus the place that counts it (a
 * hook, or policy's request scanner). Below policy and fleet (src/README.md):
 * includes nothing of ours. */
#ifndef RL_MODEL_KINDS_H
#define RL_MODEL_KINDS_H

#include <stdbool.h>

enum rl_kind {
    RL_KIND_CONNECT = 0, /* new stream connections (and MSG_FASTOPEN) */
    RL_KIND_SEND = 1,    /* send-family calls (sendmmsg: per message) */
    RL_KIND_SEND_BYTES = 2,
    RL_KIND_REQUEST = 3, /* HTTP requests (SPEC §11) */
    RL_KIND_COUNT = 4,
};

struct rl_kind_info {
    /* The rates' key in a rule ("send"), and the same word wherever a
     * kind is named: `limit` in `rlshim stat` rows, Prometheus labels and
     * decision-log lines, `--limit KIND=RATE`, the Redis key of a fleet
     * budget. */
    const char *name;
    const char *burst_key; /* its burst's key in a rule */
    const char *unit;      /* one unit of its rates, for messages */
    const char *charges;   /* what is charged to it */
    /* Its rates and bursts are sizes ("1MiB/s"): a sliding window, one
     * stamp per unit, cannot hold them, so it needs a token bucket. */
    bool sizes;
    /* Units taken ahead of the calls that spend them: a thread's lease
     * (policy/lease.c), the host's fleet pool (fleet/fleet_lease.c). */
    bool leased;
    /* A 429/503 pauses it (SPEC §12): its fleet script call carries the
     * pause keys of the request's destination. */
    bool paused;
};

extern const struct rl_kind_info rl_kinds[RL_KIND_COUNT];

/* rl_kinds[kind].name, "?" for a kind out of range. */
const char *rl_kind_name(int kind);

/* The kind named `name` (the `name` of a row), or -1. */
int rl_kind_by_name(const char *name);

#endif
