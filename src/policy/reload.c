/* reload.c — see reload.h. */
#include "policy/reload.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "policy/config.h"
#include "policy/gate.h"
#include "policy/gate_int.h"
#include "util/log.h"
#include "util/sys.h"

void rl_reload_start(struct rl_proc *p, const struct rl_cfgid *id)
{
    p->watch.read_at = (long long)time(NULL);
    rl_cfgwatch_start(&p->watch.w, id, rl_clock_coarse_ns());
}

bool rl_reload_same_shape(const struct rl_rule *a, const struct rl_rule *b)
{
    if (a->max_open != b->max_open || a->per != b->per ||
        a->scope != b->scope)
        return false;
    for (int k = 0; k < RL_KIND_COUNT; k++) {
        if (a->nlimits[k] != b->nlimits[k])
            return false;
        for (unsigned i = 0; i < a->nlimits[k]; i++) {
            const struct rl_limit *x = &a->limits[k][i], *y = &b->limits[k][i];
            if (x->algo != y->algo || x->count != y->count ||
                x->period_ns != y->period_ns || x->burst != y->burst)
                return false;
        }
    }
    return true;
}

/* The one line a process says about an edit it does not follow: once per
 * process, whatever the edits, so a program's stderr is not filled by a
 * file left broken for a day. */
static void say_keeping(struct rl_proc *p, const char *what)
{
    if (p->watch.said)
        return;
    p->watch.said = true;
    struct tm tm;
    time_t t = (time_t)p->watch.read_at;
    if (localtime_r(&t, &tm) == NULL)
        memset(&tm, 0, sizeof tm);
    rl_log_stderr("%s; keeping the config read at %02d:%02d:%02d", what,
                  tm.tm_hour, tm.tm_min, tm.tm_sec);
}

static enum rl_proc_state state_of(const struct rl_proc *p)
{
    return p->gate_up && rl_gate_active(p) ? RL_PROC_READY : RL_PROC_OFF;
}

/* A token bucket's word is its TAT: the later one has spent more. Raise
 * the new budget's word to the old one's, never lower it: a process that
 * reloaded earlier and spent from the new word since is not undone. */
static void raise_word(rl_word *w, uint64_t to)
{
    uint64_t v = atomic_load_explicit(w, memory_order_relaxed);
    while (v < to && !atomic_compare_exchange_weak_explicit(
                         w, &v, to, memory_order_relaxed, memory_order_relaxed))
        ;
}

/* The user's own budget keeps its spent units across an edit that leaves
 * its shape alone but moves it to a new segment (another section was
 * reshaped). A sliding window's ring is not carried: it starts fresh. */
static void carry(const struct budget *old, const struct budget *nb)
{
    if (old == NULL || nb == NULL || old == nb || old->rule == NULL ||
        nb->rule == NULL || !rl_reload_same_shape(old->rule, nb->rule))
        return;
    for (int k = 0; k < RL_KIND_COUNT; k++)
        for (unsigned i = 0; i < nb->rule->nlimits[k]; i++)
            if (nb->rule->limits[k][i].algo == RL_ALGO_TOKEN_BUCKET &&
                old->states[k][i] != NULL && nb->states[k][i] != NULL)
                raise_word(nb->states[k][i],
                           atomic_load_explicit(old->states[k][i],
                                                memory_order_relaxed));
}

/* What rl_gate_init derives from a config, back to a fresh process's
 * values (it only ever sets them one way). The tables it replaces are
 * left to whoever still holds them: never freed (reload.h). */
static void forget(struct rl_proc *p)
{
    struct rl_gate *g = &p->gate;
    g->rule = NULL;
    g->deny_all = g->active = g->charges_sends = false;
    g->counts_requests = g->needs_peer = false;
    g->fleet_lease = g->connect_alone = false;
    memset(&g->lease, 0, sizeof g->lease);
    g->slot_tag = g->overflow_tag = 0;
    g->label[0] = '\0';
    /* g->cur is left as it is: a thread deciding now may load it, and
     * rl_gate_init's store replaces it (a config without a rule for this
     * user and no site covers nothing: its budget is never charged). */
    memset(&p->sites, 0, sizeof p->sites);
    struct rl_regdomain psl = p->dests.psl; /* loaded once a process */
    memset(&p->dests, 0, sizeof p->dests);
    p->dests.psl = psl;
}

/* Set the gate up anew on c; the config in use is retired. */
static enum rl_proc_state regear(struct rl_proc *p, struct rl_config *c)
{
    struct budget *old = atomic_load_explicit(&p->gate.cur,
                                              memory_order_acquire);
    p->watch.retired[p->watch.nretired++] = p->cfg;
    forget(p);
    p->cfg = c;
    p->watch.read_at = (long long)time(NULL);
    if (rl_log_setup(&p->log, c->log_target, c->log_path) < 0)
        rl_log_stderr("%s: log path too long", c->path);
    struct rl_identity id;
    rl_proc_identity(p, c, &id);
    char why[256] = "";
    int r = rl_gate_init(p, c, &id, why, sizeof why);
    if (why[0] != '\0')
        rl_log_stderr("%s", why);
    if (r < 0) {
        rl_log_stderr("cannot set up budgets: %s; nothing is throttled",
                      strerror(-r));
        p->gate.active = false;
        return RL_PROC_OFF;
    }
    if (p->report == RL_PROC_REPORT_WANTED)
        rl_gate_report_enable(p);
    carry(old, atomic_load_explicit(&p->gate.cur, memory_order_acquire));
    return state_of(p);
}

/* The threads of this process now, from /proc/self/stat (field 20, the
 * 18th after the command's closing parenthesis); 0 when it cannot be
 * read. */
static long threads_now(void)
{
    char buf[1024];
    int fd = rl_sys.openat(AT_FDCWD, "/proc/self/stat", O_RDONLY | O_CLOEXEC,
                           0);
    if (fd < 0)
        return 0;
    ssize_t n = rl_sys.read(fd, buf, sizeof buf - 1);
    rl_sys.close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    const char *at = strrchr(buf, ')');
    for (int field = 2; at != NULL && field < 20; field++)
        at = strchr(at + 1, ' ');
    return at != NULL ? strtol(at + 1, NULL, 10) : 0;
}

/* The file changed (its identity now: id). */
static enum rl_proc_state follow(struct rl_proc *p, const struct rl_cfgid *id,
                                 const char *path)
{
    if (!p->gate_up) {
        /* Never set up (no config, or a broken one at the first read):
         * the caller runs the first set-up, which reads the file. */
        p->watch.w.id = *id;
        return id->present ? RL_PROC_PENDING : RL_PROC_OFF;
    }
    /* The gate is set up anew in place (regear), and a decision of
     * another thread in the middle of it would mix the two configs: so
     * only a process of one thread follows an edit, at its next look
     * after its other threads have ended (a resolver's thread ends soon;
     * a program that keeps threads keeps its config, and says so). */
    long threads =
        p->watch.threads != NULL ? p->watch.threads() : threads_now();
    if (threads != 1) {
        char what[600];
        snprintf(what, sizeof what, "%s changed: a process of several "
                 "threads does not follow an edit yet", path);
        say_keeping(p, what);
        return state_of(p);
    }
    if (p->watch.nretired >= RL_RELOAD_MAX) {
        char what[128];
        snprintf(what, sizeof what, "%s: %u edits followed, no more", path,
                 RL_RELOAD_MAX);
        say_keeping(p, what);
        p->watch.w.id = *id;
        return state_of(p);
    }
    struct rl_config *c = NULL;
    struct rl_diag diag = {0};
    /* Removed: nothing is throttled, as an empty file would say. */
    int r = id->present ? rl_config_load(path, &c, &diag)
                        : rl_config_load_string("", path, &c, &diag);
    if (r == -EMFILE || r == -ENFILE || r == -ENOMEM || r == -EINTR) {
        /* Not the file's fault: the identity is left as it was, so the
         * next look reads it again. */
        rl_diag_free(&diag);
        return state_of(p);
    }
    p->watch.w.id = *id;
    if (r < 0 || c == NULL) {
        say_keeping(p, diag.n > 0 ? diag.msgs[0] : "config error");
        rl_diag_free(&diag);
        return state_of(p);
    }
    rl_diag_free(&diag);
    if (c->fleet != NULL || (p->cfg != NULL && p->cfg->fleet != NULL)) {
        /* A fleet's Redis connections and accounts are not set up twice. */
        char what[600];
        snprintf(what, sizeof what, "%s: a config with `fleet` is not "
                 "followed while running", path);
        say_keeping(p, what);
        rl_config_free(c);
        return state_of(p);
    }
    /* Nor may a signal handler of this thread decide in the middle. */
    sigset_t all, was;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &was);
    enum rl_proc_state s = regear(p, c);
    pthread_sigmask(SIG_SETMASK, &was, NULL);
    return s;
}

enum rl_proc_state rl_reload_look(struct rl_proc *p)
{
    if (!rl_cfgwatch_claim(&p->watch.w, rl_clock_coarse_ns()))
        return state_of(p);
    /* A reload taking longer than the period: the next look waits. */
    if (atomic_flag_test_and_set_explicit(&p->watch.busy,
                                          memory_order_acquire))
        return state_of(p);
    const char *path = rl_config_path_from_env();
    struct rl_cfgid id;
    enum rl_proc_state s = state_of(p);
    if (rl_cfgwatch_changed(&p->watch.w, path, &id))
        s = follow(p, &id, path);
    atomic_flag_clear_explicit(&p->watch.busy, memory_order_release);
    return s;
}
