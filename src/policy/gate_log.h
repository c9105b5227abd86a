/* gate_log.h — a gate decision as decision-log lines (SPEC §9): one line
 * per limit the decision charged (a send under both send and send_bytes
 * is two lines, one per limit, so `rlshim verify --limit KIND=...` reads
 * the units of each), or one line for the limit that denied it. */
#ifndef RL_POLICY_GATE_LOG_H
#define RL_POLICY_GATE_LOG_H

#include "policy/config.h"
#include "policy/gate.h"

/* `denied_kind` is the limit that refused `denied_units`, or -1 when the
 * ticket was granted (then its charges' took[], t->calls, t->bytes and
 * t->wait_ns say what). `rule` may be NULL (no section; unknown = deny). Call only
 * when rl_declog_enabled(). */
void rl_gate_log_decision(const struct rl_gate_ticket *t, const char *user,
                          const struct rl_rule *rule, int denied_kind,
                          uint64_t denied_units, const char *call, int fd,
                          const void *sa, unsigned salen);

#endif
