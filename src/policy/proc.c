/* proc.c — see proc.h. */
#include "policy/proc.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "policy/config.h"
#include "policy/gate.h"
#include "policy/identity.h"
#include "policy/lease.h"
#include "policy/names.h"
#include "policy/ready.h"
#include "policy/reload.h"
#include "fleet/fleet.h"
#include "util/log.h"

#ifndef RL_SYSCONFDIR
#define RL_SYSCONFDIR "/etc"
#endif

/* What the shim's constructor and destructor call, once per process:
 * marked cold, the compiler puts it beside them at the head of .text, so
 * a process that never touches the network faults in one page of the
 * library's code, not three (SPEC §13: loading is paid by every process
 * of a host). */
#define RL_ONCE_PER_PROCESS __attribute__((cold))

static bool env_is_1(const char *name)
{
    /* secure_getenv: a privileged program reads no RLSHIM_* (SPEC §3). */
    const char *s = secure_getenv(name);
    return s != NULL && strcmp(s, "1") == 0;
}

RL_ONCE_PER_PROCESS bool rl_proc_config_present(void)
{
    const char *env = secure_getenv("RLSHIM_CONFIG");
    if (env != NULL && *env != '\0')
        return true; /* unreadable is an error, said by the load */
    return access(RL_SYSCONFDIR "/rlshim.ini", F_OK) == 0 || errno != ENOENT;
}

RL_ONCE_PER_PROCESS void rl_proc_init(struct rl_proc *p)
{
    atomic_store_explicit(&p->gen, &p->gen0, memory_order_relaxed);
    p->strict = env_is_1("RLSHIM_STRICT");
    if (env_is_1("RLSHIM_REPORT"))
        p->report = RL_PROC_REPORT_WANTED;
}

int rl_proc_load(struct rl_proc *p, char *line, size_t n)
{
    line[0] = '\0';
    if (!rl_proc_config_present()) {
        /* No config at all: nothing is throttled, silently (unless a
         * report was asked for). */
        if (p->report == RL_PROC_REPORT_WANTED)
            p->report = RL_PROC_REPORT_NONE;
        return -1;
    }
    /* The file's identity before it is read: an edit made during the
     * read is seen by the next look (SPEC §16). Unknown (-errno): taken
     * as none, so the next look reads it again. */
    struct rl_cfgid id;
    if (rl_cfgid_read(rl_config_path_from_env(), &id) < 0)
        id.present = false;
    struct rl_diag diag = {0};
    int r = rl_config_load_env(&p->cfg, &diag);
    if (r == -EMFILE || r == -ENFILE || r == -ENOMEM || r == -EINTR) {
        /* The process's, or the host's, state of the moment: nothing
         * wrong with the file. */
        rl_diag_free(&diag);
        return RL_PROC_LOAD_AGAIN;
    }
    rl_reload_start(p, &id); /* followed from now, broken or not */
    if (r < 0) {
        rl_config_error_line(&diag, p->strict, line, n);
        rl_diag_free(&diag);
        return -1;
    }
    rl_diag_free(&diag);
    if (p->cfg == NULL)
        return -1;
    if (rl_log_setup(&p->log, p->cfg->log_target, p->cfg->log_path) < 0) {
        snprintf(line, n, "rlshim: %s: log path too long; nothing is throttled\n",
                 p->cfg->path);
        rl_config_free(p->cfg);
        p->cfg = NULL;
        return -1;
    }
    if (p->cfg->report)
        p->report = RL_PROC_REPORT_WANTED;
    return 0;
}

/* Could a section be named by this process's login? Only then is the
 * login looked up (NSS): not for a key's or a uid's own section, nor for
 * a config of [default] and numeric users only. */
static bool wants_login(const struct rl_config *cfg,
                        const struct rl_identity *id)
{
    for (size_t i = 0; i < cfg->nrules; i++) {
        const char *name = cfg->rules[i].user;
        if (name == NULL)
            continue;
        if (id->has_key && strcmp(name, id->key) == 0)
            return false; /* the key's section comes first */
        /* A login has no ':' (passwd's separator): "cgroup:..." is none. */
        if (name[strspn(name, "0123456789")] != '\0' &&
            strchr(name, ':') == NULL)
            return true;
    }
    return false;
}

void rl_proc_identity(struct rl_proc *p, const struct rl_config *cfg,
                      struct rl_identity *id)
{
    (void)p;
    rl_identity_resolve_login(id, cfg->key_mode, false);
    /* A cgroup wildcard that covers the key comes before a login too. */
    bool wildcard =
        id->has_key && rl_config_find_cgroup_wildcard(cfg, id->key) != NULL;
    if (!wildcard && wants_login(cfg, id))
        rl_identity_resolve_login(id, cfg->key_mode, true);
    const char *problem = rl_identity_cgroup_problem(id);
    if (problem[0] != '\0')
        rl_log_stderr("%s", problem);
}

static RL_ONCE_PER_PROCESS enum rl_proc_state at_load(struct rl_proc *p,
                                                      char *line, size_t n)
{
    line[0] = '\0';
    rl_proc_init(p);
    bool config = rl_proc_config_present();
    /* The stderr the shim's lines go to while fd 2 is still it: noted
     * only by a process that may have a line to write. */
    if (config || p->report == RL_PROC_REPORT_WANTED)
        rl_log_stderr_mark();
    if (!config) {
        if (p->report == RL_PROC_REPORT_WANTED)
            p->report = RL_PROC_REPORT_NONE;
        /* A file written later is read (SPEC §16): the access(2) above
         * told that there is none now, so no stat here. */
        struct rl_cfgid none = {0};
        rl_reload_start(p, &none);
        return RL_PROC_OFF;
    }
    /* A passing failure (RL_PROC_LOAD_AGAIN) is no broken config: the
     * set-up reads it again. */
    int r = p->strict ? rl_proc_load(p, line, n) : 0;
    return r < 0 && r != RL_PROC_LOAD_AGAIN ? RL_PROC_OFF : RL_PROC_PENDING;
}

static enum rl_proc_state at_first_call(struct rl_proc *p, char *line, size_t n)
{
    line[0] = '\0';
    if (p->cfg == NULL) {
        int l = rl_proc_load(p, line, n);
        if (l == RL_PROC_LOAD_AGAIN)
            return RL_PROC_PENDING;
        if (l < 0)
            return RL_PROC_OFF;
    }
    struct rl_identity id;
    rl_proc_identity(p, p->cfg, &id);
    char why[256] = "";
    int r = rl_gate_init(p, p->cfg, &id, why, sizeof why);
    if (why[0] != '\0')
        rl_log_stderr("%s", why);
    if (r < 0) {
        snprintf(line, n,
                 "rlshim: cannot set up budgets: %s; nothing is throttled\n",
                 strerror(-r));
        return RL_PROC_OFF;
    }
    p->gate_up = true;
    if (p->report == RL_PROC_REPORT_WANTED)
        rl_gate_report_enable(p);
    return rl_gate_active(p) ? RL_PROC_READY : RL_PROC_OFF;
}

static void forked(struct rl_proc *p)
{
    /* The order proc.h writes down. */
    rl_names_atfork_child(&p->names);
    rl_gate_atfork_child(p);
    rl_lease_atfork_child(p);
    rl_fleet_atfork_child(&p->fleet);
    rl_ready_atfork_child(p);
    rl_declog_atfork_child(&p->declog);
    rl_awaited_atfork_child(&p->awaited);
    rl_reload_atfork_child(p);
}

static RL_ONCE_PER_PROCESS void closing(struct rl_proc *p)
{
    if (p->report == RL_PROC_REPORT_NONE)
        rl_log_stderr("report: pid %d: no config (RLSHIM_CONFIG unset, %s "
                      "absent): nothing was throttled",
                      (int)getpid(), RL_SYSCONFDIR "/rlshim.ini");
    else if (p->gate_up)
        rl_gate_finish(p);
}

enum rl_proc_state rl_proc_set_up(struct rl_proc *p, int step, char *line,
                                  size_t n)
{
    return step == RL_PROC_AT_LOAD ? at_load(p, line, n)
                                   : at_first_call(p, line, n);
}

RL_ONCE_PER_PROCESS void rl_proc_event(struct rl_proc *p, int what)
{
    if (what == RL_PROC_FORKED)
        forked(p);
    else
        closing(p);
}
