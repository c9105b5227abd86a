/* overdue.c — see overdue.h. */
#include "policy/overdue.h"

#include <errno.h>
#include <stdio.h>

#include "policy/dests.h"
#include "policy/proc.h"
#include "util/atomics.h"
#include "util/declog.h"
#include "util/log.h"

/* A duration as a reader takes it: whole seconds from 1 s (rounded), else
 * milliseconds. */
static void span(char *buf, size_t len, uint64_t ns)
{
    if (ns >= 1000000000u)
        snprintf(buf, len, "%llu s",
                 (unsigned long long)((ns + 500000000u) / 1000000000u));
    else
        snprintf(buf, len, "%llu ms",
                 (unsigned long long)((ns + 500000u) / 1000000u));
}

void rl_overdue_line(const struct rl_gate_ticket *t, const char *dest,
                     char *buf, size_t len)
{
    char wait[32], max[32];
    span(wait, sizeof wait, t->retry_ns);
    span(max, sizeof max, t->denier->max_delay_ns);
    const char *why = t->reason != NULL ? t->reason : "";
    if (why[0] == 'r') /* retry_after */
        snprintf(buf, len,
                 "%s paused by the server for %s (Retry-After), over "
                 "max_delay %s",
                 dest, wait, max);
    else if (why[0] == 'b') /* backoff */
        snprintf(buf, len,
                 "%s paused for %s (backoff after a 429 or 503), over "
                 "max_delay %s",
                 dest, wait, max);
    else
        snprintf(buf, len, "%s: the next turn is %s away, over max_delay %s",
                 dest, wait, max);
}

bool rl_overdue(const struct rl_gate_ticket *t, int *err)
{
    const struct rl_rule *by = t->denier;
    if (by == NULL || by->on_deny != RL_DENY_DELAY ||
        t->retry_ns == UINT64_MAX || t->retry_ns <= by->max_delay_ns)
        return false;
    *err = by->deny_errno != EAGAIN ? by->deny_errno : ETIMEDOUT;
    return true;
}

void rl_overdue_say(struct rl_proc *p, const struct rl_gate_ticket *t,
                    const char *name, const struct sockaddr *sa,
                    socklen_t salen)
{
    struct rl_gen *G = t->gen;
    /* Once a process: the program's own error says the rest. */
    if (rl_add_relaxed_u64(&G->gate.overdue_said, 1) != 0)
        return;
    char dest[RL_NAME_MAX + 16], line[RL_NAME_MAX + 160];
    if (name != NULL && name[0] != '\0') {
        snprintf(dest, sizeof dest, "%s", name);
    } else {
        char host[RL_NAME_MAX + 1];
        unsigned port;
        rl_dests_name_port(&p->names, sa, sa != NULL ? salen : 0, host,
                           sizeof host, &port);
        rl_declog_hostport(dest, sizeof dest, host, port);
    }
    rl_overdue_line(t, dest, line, sizeof line);
    rl_log_stderr("%s", line);
}
