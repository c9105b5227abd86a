/* gate_log.c — see gate_log.h. */
#include "policy/gate_log.h"

#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "policy/config.h"
#include "policy/dests.h"
#include "policy/gate_int.h"
#include "policy/pace.h"
#include "policy/pauses.h"
#include "policy/proc.h"
#include "util/declog.h"
#include "util/log.h"

/* The label of the site section the call is charged to, if any. */
static const char *site_of(const struct rl_gate_ticket *t)
{
    for (unsigned i = 0; i < t->ncharges; i++)
        if (t->charge[i].rule != NULL && t->charge[i].rule->site != NULL)
            return t->charge[i].rule->site;
    return NULL;
}

/* The destination a line names: the request's name, else the name the
 * address was resolved from, else the address. */
static void dest_of(struct rl_proc *p, const struct rl_gate_call *c, char *host,
                    size_t len, unsigned *port)
{
    if (c->dest != NULL && strlen(c->dest) < len) {
        rl_declog_dest(c->sa, c->salen, host, len, port);
        memcpy(host, c->dest, strlen(c->dest) + 1);
    } else
        rl_dests_name_port(&p->names, c->sa, c->salen, host, len, port);
}

/* The interval a request's destination is spaced by at this decision
 * (SPEC §14), the largest of its charges' that keep a pace, for the
 * timeline to draw; 0 when none keeps one. Read only when a line is
 * written: a log costs a write per decision already. */
static uint64_t interval_of(const struct rl_gate_ticket *t)
{
    uint64_t most = 0;
    for (unsigned i = 0; i < t->ncharges; i++) {
        const struct rl_gate_charge *ch = &t->charge[i];
        if (ch->pause_key == 0 || ch->budget == NULL ||
            ch->budget->store == NULL || !rl_pace_kept(ch->rule))
            continue;
        struct rl_pauses table;
        struct rl_adapt a;
        struct rl_adapt_conf conf;
        rl_pauses_of(ch->budget->store, &table);
        rl_pauses_pace(&table, ch->pause_key, &a); /* none: all zero */
        rl_pace_conf(ch->rule, &conf);
        uint64_t v = rl_adapt_interval(&a, &conf, t->now);
        if (v > most)
            most = v;
    }
    return most;
}

void rl_gate_log_decision(struct rl_proc *p, const struct rl_gate_ticket *t,
                          int denied_kind, uint64_t denied_units,
                          const struct rl_gate_call *c)
{
    struct rl_gen *G = t->gen;
    const struct rl_rule *rule = G->gate.rule;
    char host[RL_NAME_MAX + 1];
    unsigned port;
    dest_of(p, c, host, sizeof host, &port);
    struct rl_declog_rec r = {
        .mono_ns = t->now,
        .user = G->gate.user,
        .rule = rule != NULL ? rule->section : NULL,
        .site = site_of(t),
        .dest = host,
        .port = port,
        .call = c->request ? "request" : c->name,
        .method = c->method,
        .target = c->target,
        .reason = t->reason,
        .moved_ns = t->moved_ns,
        .interval_ns = c->request ? interval_of(t) : 0,
    };
    if (denied_kind >= 0) {
        r.limit = rl_kind_name(denied_kind);
        r.units = denied_units;
        r.verdict = t->respond_ns != 0 ? RL_DECLOG_RESPOND : RL_DECLOG_DENY;
        r.wait_ns = t->respond_ns;
        rl_declog_write(&p->declog, &r);
        return;
    }
    const uint64_t units[RL_KIND_COUNT] = {1, t->calls, t->bytes, t->calls};
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
        rl_declog_write(&p->declog, &r);
    }
}

void rl_gate_log_pause(struct rl_proc *p, const struct rl_gate_ticket *t,
                       const struct rl_gate_charge *ch,
                       const struct rl_gate_call *c, unsigned status,
                       uint64_t wait_ns, const char *reason)
{
    struct rl_gen *G = t->gen;
    char host[RL_NAME_MAX + 1];
    unsigned port;
    dest_of(p, c, host, sizeof host, &port);
    struct rl_declog_rec r = {
        .mono_ns = t->now,
        .user = G->gate.user,
        .rule = G->gate.rule != NULL ? G->gate.rule->section : NULL,
        .site = ch->rule->site,
        .dest = host,
        .port = port,
        .call = "response",
        .limit = rl_kind_name(RL_KIND_REQUEST),
        .verdict = RL_DECLOG_PAUSE,
        .wait_ns = wait_ns,
        .reason = reason,
        .status = status,
    };
    rl_declog_write(&p->declog, &r);
}

/* "fd 3 to 127.0.0.1:80" (or "to [::1]:80") for a log line ("fd 3" when
 * the destination is not known: the hook found no peer, or not inet). */
static void describe(char *buf, size_t len, int fd, const void *sa,
                     unsigned salen)
{
    char host[INET6_ADDRSTRLEN], hp[INET6_ADDRSTRLEN + 8];
    unsigned port;
    if (!rl_declog_dest(sa, salen, host, sizeof host, &port)) {
        snprintf(buf, len, "fd %d", fd);
        return;
    }
    rl_declog_hostport(hp, sizeof hp, host, port);
    snprintf(buf, len, "fd %d to %s", fd, hp);
}

/* One log line. Nothing is formatted unless the log's rate limit says the
 * line will be written. */
/* Write line d about call c (admitted by the rate limit). */
static void say(struct rl_proc *p, const struct rl_gen *G,
                const struct rl_gate_call *c, const struct rl_gate_line *d)
{
    const struct rl_gate *g = &G->gate;
    char dest[96], detail[96];
    describe(dest, sizeof dest, c->fd, c->sa, c->salen);
    if (d->wait_ns > 0)
        snprintf(detail, sizeof detail, " by %llu.%03llu ms%s",
                 (unsigned long long)(d->wait_ns / 1000000),
                 (unsigned long long)(d->wait_ns / 1000 % 1000),
                 d->dry ? " (dry run: not slept)" : "");
    else if (d->max_open > 0)
        snprintf(detail, sizeof detail, ": max_open %u of [%s] reached%s",
                 d->max_open, d->by->section, d->dry ? " (dry run)" : "");
    else if (d->by != NULL && d->by != g->rule)
        snprintf(detail, sizeof detail, ": %s %llu over quota of [%s]%s",
                 rl_kind_name(d->kind), (unsigned long long)d->units,
                 d->by->section, d->dry ? " (dry run)" : "");
    else
        snprintf(detail, sizeof detail, ": %s %llu over quota%s",
                 rl_kind_name(d->kind), (unsigned long long)d->units,
                 d->dry ? " (dry run)" : "");
    rl_log_admitted(&p->log, "%s %s %s%s (user %s, rule [%s])", d->what,
                    c->name, dest, detail, g->user,
                    g->rule != NULL ? g->rule->section : "none");
}

void rl_gate_say(struct rl_proc *p, struct rl_gate_ticket *t, uint64_t now,
                 const struct rl_gate_call *c, const struct rl_gate_line *d)
{
    if (!rl_log_admit(&p->log, now))
        return;
    if (c->sa == NULL && c->fd >= 0 && !c->request) {
        t->say = *d;
        t->say_due = true; /* the hook knows the peer (gate.h) */
        return;
    }
    say(p, t->gen, c, d);
}

void rl_gate_say_peer(struct rl_proc *p, struct rl_gate_ticket *t,
                      const char *call, int fd, const void *sa, unsigned salen)
{
    if (!t->say_due)
        return;
    t->say_due = false;
    const struct rl_gate_call c = {call, fd,   sa,   salen,
                                   NULL, NULL, NULL, false};
    say(p, t->gen, &c, &t->say);
}

bool rl_gate_dry_run(const struct rl_proc *p)
{
    struct rl_gen *G = rl_proc_gen(p);
    const struct rl_gate *g = &G->gate;
    return g->rule != NULL ? g->rule->dry_run : g->cfg->dry_run;
}
