/* init.c — the constructor, the deferred set-up, the re-entry guard and
 * the sleep.
 *
 * Start-up is paid by every process the shim is preloaded into, most of
 * which never make a call it charges, so the constructor does only what
 * must happen at once: resolve the real functions, and parse the config
 * (a broken one prints its line, or exits 78 under RLSHIM_STRICT=1, at
 * start-up). The rest waits:
 *
 *  - the set-up (identity, NSS included; rule; segment; budgets) runs at
 *    the first call that could be charged (a connect or send to an inet
 *    address, a send on a marked socket, io_uring_setup), once
 *    (rl_shim_start), or at exit for the report;
 *  - the look at inherited sockets (inherit.c) runs at the first send-like
 *    call on any fd (rl_shim_scan_now), before that call is classified.
 *
 * Both run once, with the re-entry guard held, so the shim's own file, NSS
 * and socket calls pass through its hooks; other threads that need them
 * wait (bounded). A hook called before the constructor (another library's
 * constructor) passes straight through.
 *
 * Nothing is locked across fork: the gate's state is immutable after the
 * set-up, limiter words are lock-free or robust, and the guard is per
 * thread; a fork while another thread runs the set-up waits for it. */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "policy/config.h"
#include "policy/gate.h"
#include "policy/identity.h"
#include "policy/names.h"
#include "shim/hooks.h"
#include "shim/real.h"
#include "shim/shim.h"
#include "util/log.h"

int rl_shim_state;
int rl_shim_scan;
__thread int rl_shim_busy __attribute__((tls_model("initial-exec")));

void rl_shim_sleep_until(uint64_t deadline_ns)
{
    struct timespec ts = {
        .tv_sec = (time_t)(deadline_ns / 1000000000u),
        .tv_nsec = (long)(deadline_ns % 1000000000u),
    };
    int saved = errno;
    /* An absolute deadline: after EINTR the same call sleeps exactly the
     * time left. A handler that siglongjmps out leaves nothing held. */
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
    errno = saved;
}

static bool strict(void)
{
    const char *s = secure_getenv("RLSHIM_STRICT");
    return s != NULL && strcmp(s, "1") == 0;
}

/* A problem at load: one stderr line, then pass everything through (or,
 * with RLSHIM_STRICT=1, exit: a test must never run unthrottled by
 * accident). */
static void broken(const char *line)
{
    rl_raw_syscall(SYS_write, 2, (long)line, (long)strlen(line), 0, 0, 0);
    if (strict())
        _exit(RL_EXIT_CONFIG);
}

/* What the exit report covers (SPEC §4: report = yes or RLSHIM_REPORT=1):
 * REPORT_WANTED when the environment (seen by the constructor) or the
 * config (seen by parse) asked for it, REPORT_NONE when it was asked for
 * with no config at all. Read by the set-up and the destructor. */
enum { REPORT_OFF, REPORT_WANTED, REPORT_NONE };
static int report;

/* The config, parsed by the constructor, kept for the life of the process
 * image (the gate reads it). */
static struct rl_config *cfg;

/* Set by the deferred set-up when the gate is up (its report and leases
 * are then the destructor's to finish). */
static bool gate_up;

bool rl_shim_io_uring_allowed(void)
{
    return cfg != NULL && cfg->io_uring == RL_IO_URING_ALLOW;
}

static bool report_env(void)
{
    const char *s = getenv("RLSHIM_REPORT");
    return s != NULL && strcmp(s, "1") == 0;
}

static void set_state(int s)
{
    /* Pairs with the acquire loads in rl_shim_enter and rl_shim_start. */
    __atomic_store_n(&rl_shim_state, s, __ATOMIC_RELEASE);
}

/* Could a section be named by this process's login? Only then is the
 * login looked up (NSS): not for a key's or a uid's own section, nor for
 * a config of [default] and numeric users only. */
static bool wants_login(const struct rl_identity *id)
{
    for (size_t i = 0; i < cfg->nrules; i++) {
        const char *name = cfg->rules[i].user;
        if (name == NULL)
            continue;
        if (id->has_key && strcmp(name, id->key) == 0)
            return false; /* the key's section comes first */
        if (name[strspn(name, "0123456789")] != '\0')
            return true;
    }
    return false;
}

/* Parse the config (at start-up). False, after its one line, when it is
 * broken: nothing is throttled. */
static bool parse(void)
{
    struct rl_diag diag = {0};
    char line[512];
    int r = rl_config_load_env(&cfg, &diag);
    if (r < 0) {
        rl_config_error_line(&diag, strict(), line, sizeof line);
        rl_diag_free(&diag);
        broken(line);
        return false;
    }
    rl_diag_free(&diag);
    if (cfg == NULL)
        return false; /* no config at all: nothing to enforce */
    if (rl_log_setup(cfg->log_target, cfg->log_path) < 0) {
        snprintf(line, sizeof line,
                 "rlshim: %s: log path too long; "
                 "nothing is throttled\n",
                 cfg->path);
        broken(line);
        rl_config_free(cfg);
        cfg = NULL;
        return false;
    }
    if (cfg->report)
        report = REPORT_WANTED;
    return true;
}

/* The deferred half of the set-up; the guard is held. True when hooks may
 * act. */
static bool set_up(void)
{
    struct rl_identity id;
    rl_identity_resolve_login(&id, cfg->key_mode, false);
    if (wants_login(&id))
        rl_identity_resolve_login(&id, cfg->key_mode, true);
    char why[256] = "";
    int r = rl_gate_init(cfg, &id, why, sizeof why);
    if (why[0] != '\0')
        rl_log_stderr("%s", why);
    if (r < 0) {
        char line[512];
        snprintf(line, sizeof line,
                 "rlshim: cannot set up budgets: %s; nothing is throttled\n",
                 strerror(-r));
        broken(line);
        return false;
    }
    gate_up = true;
    if (report == REPORT_WANTED)
        rl_gate_report_enable();
    return rl_gate_active();
}

static void futex_wake(int *word)
{
    int saved = errno;
    rl_raw_syscall(SYS_futex, (long)word, FUTEX_WAKE_PRIVATE, INT_MAX, 0, 0, 0);
    errno = saved;
}

/* Wait while *word is `busy` (another thread runs a set-up or the scan),
 * at most ~5 s: either takes well under a millisecond, so only one that
 * cannot go on (it needs a lock that the code this thread's signal handler
 * interrupted holds) lasts that long, and then this call passes through
 * rather than hang. Long enough that a set-up merely descheduled on a
 * loaded host is waited for (a waiter that gave up would go uncharged). */
static void wait_while(int *word, int busy)
{
    int saved = errno;
    for (int i = 0; i < 500; i++) {
        if (__atomic_load_n(word, __ATOMIC_ACQUIRE) != busy)
            break;
        struct timespec ts = {0, 10 * 1000 * 1000};
        rl_raw_syscall(SYS_futex, (long)word, FUTEX_WAIT_PRIVATE, busy,
                       (long)&ts, 0, 0);
    }
    errno = saved;
}

static void wait_set_up(void)
{
    wait_while(&rl_shim_state, RL_SHIM_INIT);
}

bool rl_shim_start(int s)
{
    /* From inside the shim (or a handler that interrupted the set-up on
     * this very thread): never wait on ourselves. */
    if ((s != RL_SHIM_PENDING && s != RL_SHIM_INIT) || rl_shim_busy)
        return false;
    int expect = RL_SHIM_PENDING;
    if (s == RL_SHIM_PENDING &&
        __atomic_compare_exchange_n(&rl_shim_state, &expect, RL_SHIM_INIT,
                                    false, __ATOMIC_ACQUIRE,
                                    __ATOMIC_ACQUIRE)) {
        int saved = errno;
        rl_shim_busy = 1;
        __atomic_signal_fence(__ATOMIC_SEQ_CST);
        bool ok = set_up();
        if (!ok) {
            /* Nothing to enforce: no scan, and no provisional marks. */
            __atomic_store_n(&rl_shim_scan, 0, __ATOMIC_RELAXED);
            rl_hook_inherited_drop();
        }
        __atomic_signal_fence(__ATOMIC_SEQ_CST);
        rl_shim_busy = 0;
        set_state(ok ? RL_SHIM_READY : RL_SHIM_OFF);
        futex_wake(&rl_shim_state);
        errno = saved;
        return ok;
    }
    wait_set_up();
    return rl_shim_ready();
}

void rl_shim_scan_now(void)
{
    if (rl_shim_busy)
        return; /* the scanning thread's own handler: never wait on it */
    int expect = RL_SCAN_DUE;
    if (__atomic_compare_exchange_n(&rl_shim_scan, &expect, RL_SCAN_RUNNING,
                                    false, __ATOMIC_ACQUIRE,
                                    __ATOMIC_ACQUIRE)) {
        int saved = errno;
        rl_shim_busy = 1;
        __atomic_signal_fence(__ATOMIC_SEQ_CST);
        if (rl_shim_may_act())
            rl_hook_inherited_scan();
        if (!rl_shim_may_act())
            rl_hook_inherited_drop(); /* a set-up found nothing meanwhile */
        __atomic_signal_fence(__ATOMIC_SEQ_CST);
        rl_shim_busy = 0;
        /* Pairs with the acquire loads of rl_shim_scan: the marks are
         * seen by whoever sees the scan done. */
        __atomic_store_n(&rl_shim_scan, RL_SCAN_DONE, __ATOMIC_RELEASE);
        futex_wake(&rl_shim_scan);
        errno = saved;
        return;
    }
    if (expect == RL_SCAN_RUNNING)
        wait_while(&rl_shim_scan, RL_SCAN_RUNNING);
}

/* fork while another thread runs the set-up: wait for it, so the child
 * does not start with a half-made gate that no thread of its own will
 * finish. A child that still sees it running (the wait gave up) runs it
 * again itself. */
static void before_fork(void)
{
    if (!rl_shim_busy) {
        wait_set_up();
        wait_while(&rl_shim_scan, RL_SCAN_RUNNING);
    }
}

int rl_shim_pid;

static void in_child(void)
{
    __atomic_store_n(&rl_shim_pid, (int)getpid(), __ATOMIC_RELAXED);
    if (__atomic_load_n(&rl_shim_state, __ATOMIC_RELAXED) == RL_SHIM_INIT)
        set_state(RL_SHIM_PENDING);
    if (__atomic_load_n(&rl_shim_scan, __ATOMIC_RELAXED) == RL_SCAN_RUNNING)
        __atomic_store_n(&rl_shim_scan, RL_SCAN_DUE, __ATOMIC_RELAXED);
    rl_gate_atfork_child();
    rl_names_atfork_child();
}

/* Is there a config to apply (RLSHIM_CONFIG set, or the sysconfdir file
 * there)? One access(2) at most. */
static bool config_present(void)
{
    const char *env = secure_getenv("RLSHIM_CONFIG");
    if (env != NULL && *env != '\0')
        return true; /* unreadable is an error, said at the set-up */
    return access(RL_SYSCONFDIR "/rlshim.ini", F_OK) == 0 || errno != ENOENT;
}

static int load(void)
{
    if (report_env())
        report = REPORT_WANTED;
    if (!config_present()) {
        /* No config at all: nothing is throttled, silently (unless a
         * report was asked for). */
        if (report == REPORT_WANTED)
            report = REPORT_NONE;
        return RL_SHIM_OFF;
    }
    /* A broken config says so at once (and exits 78 under
     * RLSHIM_STRICT=1), whether or not the program ever connects. */
    if (!parse())
        return RL_SHIM_OFF;
    __atomic_store_n(&rl_shim_scan, RL_SCAN_DUE, __ATOMIC_RELAXED);
    return RL_SHIM_PENDING;
}

__attribute__((constructor)) static void rl_shim_init(void)
{
    static int done;
    if (done)
        return;
    done = 1;
    int saved = errno;
    rl_real_resolve();
    __atomic_store_n(&rl_shim_pid, (int)getpid(), __ATOMIC_RELAXED);
    pthread_atfork(before_fork, NULL, in_child);
    rl_shim_busy = 1;
    int s = load();
    rl_shim_busy = 0;
    set_state(s);
    errno = saved;
}

/* At exit (not _exit, not a fatal signal): the thread's unspent lease goes
 * back, and the report, if asked for, is written (a process that made no
 * call the shim looks at is set up now, so that the report says what would
 * have applied). */
__attribute__((destructor)) static void rl_shim_fini(void)
{
    int saved = errno;
    /* Pairs with the release store of the set-up's end: gate_up is seen. */
    int s = __atomic_load_n(&rl_shim_state, __ATOMIC_ACQUIRE);
    if (report == REPORT_WANTED && !rl_shim_busy)
        rl_shim_start(s);
    rl_shim_busy = 1;
    if (report == REPORT_NONE)
        rl_log_stderr("report: pid %d: no config (RLSHIM_CONFIG unset, %s "
                      "absent): nothing was throttled",
                      (int)getpid(), RL_SYSCONFDIR "/rlshim.ini");
    else if (gate_up)
        rl_gate_finish();
    rl_shim_busy = 0;
    errno = saved;
}
