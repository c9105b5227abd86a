/* gate_log.h — a gate decision in words: as decision-log lines (SPEC §9):
 * one line per limit the decision charged (a send under both send and
 * send_bytes is two lines, one per limit, so `rlshim verify --limit
 * KIND=...` reads the units of each), or one line for the limit that
 * denied it; and as a line of the shim's log (a denial, a delay). */
#ifndef RL_POLICY_GATE_LOG_H
#define RL_POLICY_GATE_LOG_H

#include "policy/config.h"
#include "policy/gate.h"

/* What a log line names: the call and its destination. */
struct rl_gate_call {
    const char *name;
    int fd;
    const void *sa;
    unsigned salen;
    /* A request (SPEC §11): the name it is charged to (NULL: the
     * connection's), its method and target (NULL for other calls). */
    const char *dest;
    const char *method, *target;
    /* A request: the decision log says `call = request` (SPEC §11), the
     * shim's log line names the call that carried it. */
    bool request;
};

/* One line of the shim's log about ticket t's decision (rate-limited:
 * nothing is formatted unless it will be written). A send without its
 * destination (c->sa NULL, a real fd) leaves the line in t (t->say_due)
 * for the hook, which looks the peer up and writes it with
 * rl_gate_say_peer (gate.h): the gate never asks about the program's
 * fds, and a denial whose line the rate limit drops costs no system
 * call. */
void rl_gate_say(struct rl_proc *p, struct rl_gate_ticket *t, uint64_t now,
                 const struct rl_gate_call *c, const struct rl_gate_line *d);

/* Is the decision a dry run (the rule's, or the config's with no rule)? */
bool rl_gate_dry_run(const struct rl_proc *p);

/* `denied_kind` is the limit that refused `denied_units`, or -1 when the
 * ticket was granted (then its charges' took[], t->calls, t->bytes and
 * t->wait_ns say what). The line names p's user and rule (none: no
 * section; unknown = deny). Call only when p's decision log is on. */
void rl_gate_log_decision(struct rl_proc *p, const struct rl_gate_ticket *t,
                          int denied_kind, uint64_t denied_units,
                          const struct rl_gate_call *c);

/* A response that paused charge ch's requests (SPEC §12): one line with
 * verdict pause, call = response, limit = request, units 0, wait_ns the
 * pause from t->now, reason and the response's status; dest as a
 * decision of c names it; user and rule are p's. Call only when p's
 * decision log is on. */
void rl_gate_log_pause(struct rl_proc *p, const struct rl_gate_ticket *t,
                       const struct rl_gate_charge *ch,
                       const struct rl_gate_call *c, unsigned status,
                       uint64_t wait_ns, const char *reason);

#endif
