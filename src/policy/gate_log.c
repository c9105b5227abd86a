/* gate_log.c — see gate_log.h. */
#include "policy/gate_log.h"

#include <netinet/in.h>

#include "util/declog.h"

void rl_gate_log_decision(const struct rl_gate_ticket *t, const char *user,
                          const struct rl_rule *rule, int denied_kind,
                          uint64_t denied_units, const char *call, int fd,
                          const void *sa, unsigned salen)
{
    char host[INET6_ADDRSTRLEN + 1];
    unsigned port;
    rl_declog_dest(fd, sa, salen, host, sizeof host, &port);
    struct rl_declog_rec r = {
        .mono_ns = t->now,
        .user = user,
        .rule = rule != NULL ? rule->section : NULL,
        .site = NULL,
        .dest = host,
        .port = port,
        .call = call,
    };
    if (denied_kind >= 0) {
        r.limit = rl_kind_name(denied_kind);
        r.units = denied_units;
        r.verdict = RL_DECLOG_DENY;
        rl_declog_write(&r);
        return;
    }
    const uint64_t units[RL_KIND_COUNT] = {1, t->calls, t->bytes};
    r.verdict = t->wait_ns > 0 ? RL_DECLOG_DELAY : RL_DECLOG_ALLOW;
    r.wait_ns = t->wait_ns;
    for (int k = 0; k < RL_KIND_COUNT; k++) {
        /* Charged when any budget of the call took it (each charge took
         * the same units). */
        bool took = false;
        for (unsigned i = 0; i < t->ncharges; i++)
            took = took || t->charge[i].took[k];
        if (!took)
            continue;
        r.limit = rl_kind_name(k);
        r.units = units[k];
        rl_declog_write(&r);
    }
}
