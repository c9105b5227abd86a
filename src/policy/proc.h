/* proc.h — a process's state, and its one lifecycle.
 *
 * Every piece of state the shim keeps for the process it is loaded into
 * belongs to one `struct rl_proc`, whose life is:
 *
 *   rl_proc_set_up, RL_PROC_AT_LOAD  at start-up: the environment
 *                     (RLSHIM_STRICT, RLSHIM_REPORT), whether there is a
 *                     config (one access(2)), the config itself under
 *                     RLSHIM_STRICT=1
 *   rl_proc_set_up, RL_PROC_AT_FIRST_CALL  the config (at the first call
 *                     that needs it, SPEC §4, unless start-up read it),
 *                     then identity, rule, segment, budgets: the first
 *                     call that could be charged
 *   rl_reload_look   at most once a second after the config was read
 *                     (policy/reload.h): an edited file is read again,
 *                     a new generation (struct rl_gen) built on it and
 *                     published, the one it replaces kept until exit
 *                     (SPEC §16)
 *   rl_proc_event, RL_PROC_FORKED  after fork(), in the child: one
 *                     pthread_atfork, made by shim/init.c (whose prepare
 *                     step waits for a set-up another thread is running;
 *                     nothing else is held across fork, so there is
 *                     nothing to release)
 *   rl_proc_event, RL_PROC_EXITING  at exit: leases back, the report
 *
 * Its members, each owned by the module named (a function that uses a
 * member takes its owner as its first parameter: the struct rl_proc when
 * it needs several members, as the gate's entry points do; the member's
 * own struct when it needs nothing else):
 *
 *   cfg, report, strict, gate_up   this file: the config and the set-up
 *   log      (util/log.h)          where event lines go, their rate limit
 *   declog   (util/declog.h)       the decision log's file
 *   gen      (struct rl_gen below) what the config derives, loaded once
 *                                  per decision:
 *     gate   (policy/gate_int.h)   identity, rule, the store and the
 *                                  budget in use, the lease settings, the
 *                                  exit report's counts
 *     sites  (policy/sites.h)      the [site:LABEL] budgets of the user
 *     dests  (policy/dests.h)      per = destination: the table's
 *                                  geometry, the table in the store in use
 *   fleet    (fleet/fleet.h)       scope = fleet: a Redis connection per
 *                                  node, the cluster's map, the budgets'
 *                                  accounts, the fallback's state; set up
 *                                  once, kept across reloads (reload.c)
 *   ready    (policy/ready.h)      held sockets, reserved turns, deferred
 *                                  connects
 *   names    (policy/names.h)      the name each address was resolved from
 *   leases   (policy/lease.h)      the threads' leases of send units
 *   open     (policy/open.h)       max_open: the connections this process
 *                                  holds, by fd
 *
 * The child after fork resets what the parent's other threads may have been
 * in the middle of, in this order (each step async-signal-safe; none waits
 * for a lock, none frees what a parent thread may have been filling), and
 * nothing else: it is one pthread_atfork, shim/init.c's, which runs
 *
 *   0. the shim's words  (shim/init.c)  its pid; a set-up or a scan that
 *                                       another thread was running goes
 *                                       back to due
 *   1. names    (policy/names.c)  the table's writer word and the entry a
 *                                 parent thread was writing
 *   2. gate     (policy/gate.c)   a segment re-open in progress
 *   3. leases   (policy/lease.c)  the parent threads' lease records
 *   4. fleet    (fleet/fleet.c)   the parent's Redis connections and what
 *                                 its threads were doing on them: closed
 *                                 by system call, readers forgotten
 *   5. ready    (policy/ready.c)  the parent's held sockets, turns,
 *                                 tickets; its mutex made anew
 *   6. epreg    (shim/epreg.c)    the registrations' mutex made anew
 *   7. waitbufs (shim/waitbuf.c)  only the forking thread's wait buffers
 *                                 stay taken
 *   8. conntab  (shim/conntab.c)  its mutex made anew, no connection held
 *                                 by a write
 *   9. tlstab   (shim/tlstab.c)   its mutex made anew
 *  10. awaited  (policy/awaited.c) its list of connections and its word
 *                                 made anew (connections in the old list
 *                                 join again at their next request)
 *  11. reload   (policy/reload.c) a reload a parent thread was running
 *                                 forgotten; under key = cgroup, the next
 *                                 decision reads the cgroup again
 *
 * The other members need no reset: open (a connection's fds are the
 * child's too; the pid is read again), sites, dests, log, declog and the
 * report (words read or counted lock-free), and the shim's fd marks,
 * inherited sockets and signal actions (fork keeps them). Budgets,
 * counters and max_open holders live in the shared segment and are the
 * child's as much as the parent's (SPEC §1: fork keeps marks and budgets).
 *
 * shim/init.c holds the process's one instance (inside its struct
 * rl_shim); the CLI's supervisor holds its own; unit tests make two. */
#ifndef RL_POLICY_PROC_H
#define RL_POLICY_PROC_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "fleet/fleet.h"
#include "policy/awaited.h"
#include "policy/dests.h"
#include "policy/gate_int.h"
#include "policy/lease.h"
#include "policy/names.h"
#include "policy/open.h"
#include "policy/ready.h"
#include "policy/sites.h"
#include "util/cfgwatch.h"
#include "util/declog.h"
#include "util/log.h"

struct rl_config;

/* What the exit report covers (SPEC §4: report = yes or RLSHIM_REPORT=1). */
enum rl_proc_report {
    RL_PROC_REPORT_OFF,
    RL_PROC_REPORT_WANTED, /* asked for, by the environment or the config */
    RL_PROC_REPORT_NONE,   /* asked for, with no config at all */
};

/* What a config derives: the gate (its rule, budgets, lease settings,
 * report), the user's sites and the per-destination table. A decision
 * loads the process's current one once, at its start, and uses it
 * throughout (rl_proc_gen; a ticket carries it to the decision's settle):
 * a reload builds the next one aside and publishes it with one release
 * store, so no decision sees two configs' halves. Never freed: a thread
 * may still be deciding on one, an fd's record may point into it. */
struct rl_gen {
    struct rl_gate gate;
    struct rl_sites sites;
    struct rl_dests dests;
};

struct rl_proc {
    struct rl_config *cfg; /* the parsed config, NULL when there is none */
    enum rl_proc_report report;
    bool strict;  /* RLSHIM_STRICT=1: a broken config exits 78 */
    bool gate_up; /* set up: the report and leases are close's to finish */
    /* The generation in use: &gen0 from rl_proc_init (the first set-up
     * fills it, no allocation), a heap one after each reload. */
    _Atomic(struct rl_gen *) gen;
    struct rl_gen gen0;
    struct rl_ready ready;
    struct rl_names names;
    struct rl_leases leases;
    struct rl_open open;
    struct rl_awaited awaited; /* requests awaiting answers, by process */
    struct rl_fleet fleet;
    struct rl_log log;       /* the shim's event lines: where, how many */
    struct rl_declog declog; /* the decision log (SPEC §9) */
    /* Following the file (policy/reload.c, SPEC §16): the look's gate and
     * the file's identity; the configs replaced and the generations
     * reloads made, kept until exit (why: reload.h); when the config in
     * use was read (wall clock, for the line a broken edit gets); whether
     * that line was said; an emptied file waiting for its second look. */
    struct {
        struct rl_cfgwatch w;
        atomic_flag busy; /* one reload at a time */
        struct rl_config *retired[64];
        struct rl_gen *gens[64];
        unsigned nretired;
        long long read_at;
        bool said;
        bool rekey; /* a fork child: its cgroup read again at its next look */
        /* An empty file seen where the config had text: followed only
         * when the next look finds it so still (reload.c, emptied()). */
        struct rl_cfgid emptied;
    } watch;
};

/* Is there a config to apply (RLSHIM_CONFIG set, or the sysconfdir file
 * there)? One access(2) at most. */
bool rl_proc_config_present(void);

/* Read the environment's part (RLSHIM_STRICT, RLSHIM_REPORT) into p:
 * no system call, no allocation. */
void rl_proc_init(struct rl_proc *p);

/* Parse the config into p->cfg. 0 when there is one to apply; -1 when
 * there is none or it is broken (its one line, in `line`, for the caller
 * to print; line[0] == '\0' when there was nothing to say);
 * RL_PROC_LOAD_AGAIN when the read failed for a passing reason (EMFILE,
 * ENFILE, ENOMEM, EINTR: SPEC §4), which is no broken config: nothing to
 * say, and the next call that needs the config reads it again. */
#define RL_PROC_LOAD_AGAIN (-2)
int rl_proc_load(struct rl_proc *p, char *line, size_t n);

/* Who the caller is under cfg (its key mode; the login looked up only
 * when a section could be named by it). */
struct rl_identity;
void rl_proc_identity(struct rl_proc *p, const struct rl_config *cfg,
                      struct rl_identity *id);

/* Where the process stands after a step of rl_proc_set_up. */
enum rl_proc_state {
    RL_PROC_OFF,     /* nothing is throttled (a line may say why) */
    RL_PROC_PENDING, /* a config to apply, not set up yet */
    RL_PROC_READY,   /* set up: the hooks may act */
};

/* The two steps of the set-up, taken through one entry: the second
 * finishes what the first began. */
enum rl_proc_step {
    /* At start-up, once: rl_proc_init, then whether there is a config;
     * the stderr the process has now is noted when a line may be written
     * (SPEC §3); under RLSHIM_STRICT=1 the config is read now (a passing
     * failure is left to the next step). RL_PROC_PENDING, or RL_PROC_OFF
     * with the line to print in `line` (line[0] == '\0': nothing to say). */
    RL_PROC_AT_LOAD,
    /* The config, when start-up did not read it (rl_proc_load), then
     * identity, rule, segment, budgets. RL_PROC_READY when the hooks may
     * act; RL_PROC_PENDING when the config could not be read for a
     * passing reason (nothing to say: the next call that needs it tries
     * again); RL_PROC_OFF with a line in `line` (or none) when nothing is
     * throttled. */
    RL_PROC_AT_FIRST_CALL,
};

/* Take `step` (enum rl_proc_step) of the set-up; see there. */
enum rl_proc_state rl_proc_set_up(struct rl_proc *p, int step, char *line,
                                  size_t n);

/* What befalls the process after its set-up. */
enum rl_proc_event {
    RL_PROC_FORKED,  /* in the child after fork: see the order above */
    RL_PROC_EXITING, /* the calling thread's lease back, the report if
                        asked for */
};

/* Let p hear `what` (enum rl_proc_event). */
void rl_proc_event(struct rl_proc *p, int what);

/* Does any request limit apply in this process (its rule or a site sets
 * `request`, or unknown = deny)? When not, no connection is scanned. Set
 * at set-up and read inline: a TLS carrier asks it on every write, before
 * it makes a session's entry. */
static inline struct rl_gen *rl_proc_gen(const struct rl_proc *p)
{
    return atomic_load_explicit((_Atomic(struct rl_gen *) *)&p->gen,
                                memory_order_acquire);
}

static inline bool rl_proc_counts_requests(const struct rl_proc *p)
{
    return rl_proc_gen(p)->gate.counts_requests;
}

#endif
