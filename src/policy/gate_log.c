/* gate_log.c — see gate_log.h. */
#include "policy/gate_log.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

#include "policy/config.h"
#include "policy/names.h"
#include "util/declog.h"

/* The name the program resolved the address in `host` from (SPEC §1), in
 * place of the address when there is one. */
static void name_of(char *host, size_t hostlen)
{
    uint8_t a[16];
    int fam = strchr(host, ':') != NULL ? AF_INET6 : AF_INET;
    char name[RL_NAME_MAX + 1];
    if (inet_pton(fam, host, a) == 1 && rl_names_find(fam, a, name) > 0 &&
        strlen(name) < hostlen)
        memcpy(host, name, strlen(name) + 1);
}

/* The label of the site section the call is charged to, if any. */
static const char *site_of(const struct rl_gate_ticket *t)
{
    for (unsigned i = 0; i < t->ncharges; i++)
        if (t->charge[i].rule != NULL && t->charge[i].rule->site != NULL)
            return t->charge[i].rule->site;
    return NULL;
}

void rl_gate_log_decision(const struct rl_gate_ticket *t, const char *user,
                          const struct rl_rule *rule, int denied_kind,
                          uint64_t denied_units, const char *call, int fd,
                          const void *sa, unsigned salen)
{
    char host[RL_NAME_MAX + 1];
    unsigned port;
    rl_declog_dest(fd, sa, salen, host, sizeof host, &port);
    name_of(host, sizeof host);
    struct rl_declog_rec r = {
        .mono_ns = t->now,
        .user = user,
        .rule = rule != NULL ? rule->section : NULL,
        .site = site_of(t),
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
