/* init.c — the constructor, the re-entry guard and the sleep.
 *
 * The constructor runs once per process image (again after exec): it loads
 * the config, works out who the process is, opens the state store, and
 * only then lets the hooks act (rl_shim_ready). All of it runs with the
 * re-entry guard held, so the shim's own file and NSS calls pass through
 * its hooks. A hook called before (another library's constructor) passes
 * straight through. Nothing is locked across fork: the gate's state is
 * immutable after init, limiter words are lock-free or robust, and the
 * guard is per thread (a fork from inside a hook cannot happen: the shim
 * calls no fork). */
#include <errno.h>
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
#include "shim/real.h"
#include "shim/shim.h"
#include "util/log.h"

bool rl_shim_ready;
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
    syscall(SYS_write, 2, line, strlen(line));
    if (strict())
        _exit(RL_EXIT_CONFIG);
}

/* What the exit report covers (SPEC §4: report = yes or RLSHIM_REPORT=1):
 * REPORT_GATE when the gate was set up with the report on, REPORT_NONE
 * when it was asked for with no config at all. Written by the
 * constructor, read by the destructor. */
enum { REPORT_OFF, REPORT_GATE, REPORT_NONE };
static int report;

static bool report_env(void)
{
    const char *s = getenv("RLSHIM_REPORT");
    return s != NULL && strcmp(s, "1") == 0;
}

static void load(void)
{
    struct rl_config *cfg = NULL;
    struct rl_diag diag = {0};
    char line[512];
    int r = rl_config_load_env(&cfg, &diag);
    if (r < 0) {
        rl_config_error_line(&diag, strict(), line, sizeof line);
        rl_diag_free(&diag);
        broken(line);
        return;
    }
    rl_diag_free(&diag);
    if (cfg == NULL) {
        /* No config at all: nothing is throttled, silently (unless a
         * report was asked for). */
        if (report_env())
            report = REPORT_NONE;
        return;
    }
    if (rl_log_setup(cfg->log_target, cfg->log_path) < 0) {
        snprintf(line, sizeof line,
                 "rlshim: %s: log path too long; "
                 "nothing is throttled\n",
                 cfg->path);
        broken(line);
        rl_config_free(cfg);
        return;
    }
    struct rl_identity id;
    rl_identity_resolve(&id, cfg->key_mode);
    char why[256] = "";
    r = rl_gate_init(cfg, &id, why, sizeof why);
    if (why[0] != '\0')
        rl_log_stderr("%s", why);
    if (r < 0) {
        snprintf(line, sizeof line,
                 "rlshim: cannot set up budgets: %s; nothing is throttled\n",
                 strerror(-r));
        broken(line);
        return;
    }
    if (cfg->report || report_env()) {
        rl_gate_report_enable();
        report = REPORT_GATE;
    }
    /* cfg stays for the life of the process image: the gate reads it. */
    if (rl_gate_active())
        /* Pairs with the acquire load in rl_shim_enter. */
        __atomic_store_n(&rl_shim_ready, true, __ATOMIC_RELEASE);
}

__attribute__((constructor)) static void rl_shim_init(void)
{
    static int done;
    if (done)
        return;
    done = 1;
    int saved = errno;
    rl_real_resolve();
    /* Nothing of the shim's is held across fork (no locks; the guard is
     * per thread and never held across a real call), except a re-open of
     * a replaced segment another thread may be in the middle of. */
    pthread_atfork(NULL, NULL, rl_gate_atfork_child);
    rl_shim_busy = 1;
    load();
    rl_shim_busy = 0;
    errno = saved;
}

/* At exit (not _exit, not a fatal signal): the thread's unspent lease goes
 * back, and the report, if asked for, is written. */
__attribute__((destructor)) static void rl_shim_fini(void)
{
    int saved = errno;
    rl_shim_busy = 1;
    if (report == REPORT_NONE)
        rl_log_stderr("report: pid %d: no config (RLSHIM_CONFIG unset, %s "
                      "absent): nothing was throttled",
                      (int)getpid(), RL_SYSCONFDIR "/rlshim.ini");
    else if (__atomic_load_n(&rl_shim_ready, __ATOMIC_ACQUIRE) ||
             report == REPORT_GATE)
        rl_gate_finish();
    rl_shim_busy = 0;
    errno = saved;
}
