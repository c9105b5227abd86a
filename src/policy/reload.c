/* reload.c — see reload.h. */
#include "policy/reload.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fleet/fleet.h"
#include "policy/config.h"
#include "policy/gate.h"
#include "policy/gate_int.h"
#include "policy/identity.h"
#include "policy/report.h"
#include "util/log.h"

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

/* The counters that say a line once per process, and jitter's draws
 * (each draw a count no other of the process has), go on from the
 * generation in use: only what the config derives starts anew. */
static void carry_counts(struct rl_gate *to, struct rl_gate *from)
{
    rl_add_relaxed_u64(&to->overdue_said,
                       atomic_load_explicit(&from->overdue_said,
                                            memory_order_relaxed));
    rl_add_relaxed_u64(&to->respond_failed_said,
                       atomic_load_explicit(&from->respond_failed_said,
                                            memory_order_relaxed));
    rl_add_relaxed_u64(&to->jitter_draws,
                       atomic_load_explicit(&from->jitter_draws,
                                            memory_order_relaxed));
}

/* Build the generation of c aside and publish it with one release store:
 * a decision running meanwhile goes on with the one it loaded, the next
 * loads the new one whole. The generation and config replaced are
 * retired, never freed (reload.h). */
static enum rl_proc_state regear(struct rl_proc *p, struct rl_config *c,
                                  bool carry_spent)
{
    struct rl_gen *was = rl_proc_gen(p);
    struct rl_gen *G = aligned_alloc(_Alignof(struct rl_gen), sizeof *G);
    if (G == NULL) {
        rl_log_stderr("%s: no memory for the edit; keeping the config in use",
                      c->path);
        rl_config_free(c);
        return state_of(p);
    }
    memset(G, 0, sizeof *G);
    G->dests.psl = was->dests.psl; /* loaded once a process */
    carry_counts(&G->gate, &was->gate);
    /* The event log's target and path are not set anew: another thread
     * may be reading the path to open it (the decision log likewise is
     * set up once, at the first set-up). An edit of `log` reaches the
     * processes started after it. */
    struct rl_identity id;
    rl_proc_identity(p, c, &id);
    char why[256] = "";
    int r = rl_gate_init_gen(p, G, c, &id, why, sizeof why);
    if (why[0] != '\0')
        rl_log_stderr("%s", why);
    /* Kept whatever befalls it (reachable, counted against the bound):
     * a half-made G may have reached the process's own state. */
    p->watch.gens[p->watch.nretired] = G;
    if (r < 0) {
        p->watch.retired[p->watch.nretired++] = c;
        rl_log_stderr("%s: cannot set up budgets: %s; keeping the config "
                      "in use", c->path, strerror(-r));
        return state_of(p);
    }
    p->watch.retired[p->watch.nretired++] = p->cfg;
    if (p->report == RL_PROC_REPORT_WANTED) {
        (void)rl_report_setup(&G->gate.report, c);
        G->gate.report.on = true;
    }
    if (carry_spent)
        carry(atomic_load_explicit(&was->gate.cur, memory_order_acquire),
              atomic_load_explicit(&G->gate.cur, memory_order_acquire));
    p->cfg = c;
    p->watch.read_at = (long long)time(NULL);
    atomic_store_explicit(&p->gen, G, memory_order_release);
    /* The fleet stays as it is (fleet_moved): only its denials under the
     * old limits are forgotten. */
    rl_fleet_reopen(&p->fleet);
    return state_of(p);
}

static bool same_text(const char *a, const char *b)
{
    return a == b || (a != NULL && b != NULL && strcmp(a, b) == 0);
}

/* Why edit c cannot be followed for the fleet's sake, or NULL when it
 * can. The fleet (its Redis connections, cluster map, host lease and
 * away state) is set up once a process and used by every thread without
 * a lock: an edit is followed only when the fleet it was set up with
 * serves the new config as it is, so the settings that shape it are
 * compared with the fleet's own config (the one it read them from, kept
 * like every config replaced). Every [rlshim] key the fleet reads:
 * `fleet`, `fleet_password`, `fleet_fallback`. An edit that drops
 * `fleet` is followed: none of its budgets is decided in Redis. */
static const char *fleet_moved(const struct rl_proc *p,
                               const struct rl_config *c)
{
    const struct rl_fleet *f = &p->fleet;
    if (c->fleet == NULL)
        return NULL;
    if (!f->on)
        return p->cfg != NULL && p->cfg->fleet != NULL
                   ? "`fleet`: this process never set up its Redis (no "
                     "fleet budget was its); processes started after the "
                     "edit do"
                   : "`fleet` set: its Redis is reached by processes "
                     "started after the edit";
    if (!same_text(c->fleet, f->cfg->fleet))
        return "`fleet` changed: a new Redis is reached by processes "
               "started after the edit";
    if (!same_text(c->fleet_password, f->cfg->fleet_password))
        return "`fleet_password` changed: processes started after the "
               "edit use it";
    if (c->fleet_fallback != f->cfg->fleet_fallback)
        return "`fleet_fallback` changed: processes started after the edit "
               "fall back so";
    return NULL;
}

/* Is id a file just emptied, to be looked at once more before it is
 * followed? An in-place write (`fopen(path, "w")`, a shell's `>`)
 * truncates the file, then writes it: a look between the two would read
 * an empty config, nothing throttled, and a broken edit that followed
 * would keep it. An empty file where the config had text is followed
 * when the next look finds it empty still, unchanged. */
static bool emptied(struct rl_proc *p, const struct rl_cfgid *id)
{
    if (!id->present || id->size != 0 || !p->watch.w.id.present ||
        p->watch.w.id.size == 0)
        return false;
    if (rl_cfgid_same(&p->watch.emptied, id))
        return false; /* the second look: it is so */
    p->watch.emptied = *id;
    return true;
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
    if (emptied(p, id))
        return state_of(p); /* w.id is left: the next look sees it again */
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
    const char *moved = fleet_moved(p, c);
    if (moved != NULL) {
        char what[600];
        snprintf(what, sizeof what, "%s: %s", path, moved);
        say_keeping(p, what);
        rl_config_free(c);
        return state_of(p);
    }
    /* The set-up touches per-process state in place (max_open's map,
     * the leases' key): no
     * signal handler of this thread decides in the middle of it. */
    sigset_t all, was;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &was);
    enum rl_proc_state s = regear(p, c, true);
    pthread_sigmask(SIG_SETMASK, &was, NULL);
    return s;
}

/* A fork child's first look (SPEC §16: the cgroup is read once, again
 * after a fork only if it changed): a child moved to another cgroup is
 * set up again, on the same config, for its new key; its parent's spent
 * units are not carried (another user's budget). */
static enum rl_proc_state rekey(struct rl_proc *p)
{
    struct rl_identity id;
    rl_proc_identity(p, p->cfg, &id);
    char buf[RL_IDENTITY_MAX + 16];
    const char *who = rl_identity_user(&id, buf, sizeof buf);
    if (strcmp(who, rl_proc_gen(p)->gate.user) == 0)
        return state_of(p);
    if (p->watch.nretired >= RL_RELOAD_MAX)
        return state_of(p);
    sigset_t all, was;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &was);
    enum rl_proc_state s = regear(p, p->cfg, false);
    pthread_sigmask(SIG_SETMASK, &was, NULL);
    return s;
}

void rl_reload_atfork_child(struct rl_proc *p)
{
    /* A reload a parent thread was running never ends here. */
    atomic_flag_clear_explicit(&p->watch.busy, memory_order_relaxed);
    if (!p->gate_up || p->cfg == NULL || p->cfg->key_mode != RL_KEY_CGROUP ||
        rl_proc_gen(p)->gate.user[0] == '\0')
        return;
    p->watch.rekey = true;
    /* Due at once: the child's first decision looks. */
    atomic_store_explicit(&p->watch.w.next_look, 1, memory_order_relaxed);
}

enum rl_proc_state rl_reload_look(struct rl_proc *p)
{
    return rl_reload_look_at(p, rl_clock_coarse_ns());
}

enum rl_proc_state rl_reload_look_at(struct rl_proc *p, uint64_t now)
{
    if (!rl_cfgwatch_claim(&p->watch.w, now))
        return state_of(p);
    /* A reload taking longer than the period: the next look waits. */
    if (atomic_flag_test_and_set_explicit(&p->watch.busy,
                                          memory_order_acquire))
        return state_of(p);
    const char *path = rl_config_path_from_env();
    struct rl_cfgid id;
    enum rl_proc_state s = state_of(p);
    if (p->watch.rekey) {
        p->watch.rekey = false;
        s = rekey(p);
    }
    if (rl_cfgwatch_changed(&p->watch.w, path, &id))
        s = follow(p, &id, path);
    atomic_flag_clear_explicit(&p->watch.busy, memory_order_release);
    return s;
}
