/* init.c — the constructor, the deferred set-up, the re-entry guard and
 * the sleep.
 *
 * Start-up is paid by every process the shim is preloaded into (with
 * /etc/ld.so.preload, every process on the host), most of which never make
 * a call it charges, so the constructor does only what must happen at
 * once: read two environment variables and ask whether a config exists
 * (one access(2)), and, when one does (or a report is asked for), note
 * which file fd 2 is (one fstat: a daemon may close its stderr and open
 * its data at 2 before the shim has anything to say, SPEC §3); each hook
 * looks up its real function when first called. The rest waits:
 *
 *  - the set-up (the config, read and parsed, its broken line printed
 *    once; identity, NSS included; rule; segment; budgets) runs at the
 *    first call that could be charged (a connect or send to an inet
 *    address, a send on a marked socket, io_uring_setup), once
 *    (rl_shim_start), or at exit for a report asked for by the
 *    environment. RLSHIM_STRICT=1 reads the config in the constructor
 *    instead, so that a broken one exits 78 before the program runs;
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
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "policy/config.h"
#include "policy/gate.h"
#include "policy/proc.h"
#include "policy/reload.h"
#include "shim/conntab.h"
#include "shim/epreg.h"
#include "shim/hooks.h"
#include "shim/real.h"
#include "shim/self.h"
#include "shim/shim.h"
#include "shim/tlstab.h"
#include "shim/waitbuf.h"
#include "shim/wreal.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/sys.h"

/* The shim's state (shim/self.h), the process's (policy/proc.h) within
 * it: the one instance, and the one pointer to it. */
static struct rl_shim self;
struct rl_shim *const rl_shim_self = &self;

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

bool rl_shim_sleep_on(int fd, uint64_t deadline_ns)
{
    int saved = errno;
    struct pollfd p = {fd, 0, 0};
    /* No events asked: POLLHUP and POLLERR come whatever the mask. */
    bool watch = fd >= 0 && WREAL(poll)(&p, 1, 0) == 0;
    while (watch) {
        uint64_t now = rl_clock_now_ns();
        if (now >= deadline_ns)
            break;
        uint64_t left = deadline_ns - now;
        struct timespec ts = {(time_t)(left / 1000000000u),
                              (long)(left % 1000000000u)};
        p.revents = 0;
        int r = WREAL(ppoll)(&p, 1, &ts, NULL);
        if (r == 0 || (r < 0 && errno == EINTR))
            continue;
        if (r == 1 && (p.revents & POLLHUP)) {
            errno = saved;
            return true;
        }
        /* Only the error queue, or the fd gone: nothing a send hears,
         * and a poll that would say it again at once. */
        watch = false;
    }
    rl_shim_sleep_until(deadline_ns);
    errno = saved;
    return false;
}

/* A problem at load: one stderr line, then pass everything through (or,
 * with RLSHIM_STRICT=1, exit: a test must never run unthrottled by
 * accident). */
static void broken(const char *line)
{
    if (line[0] == '\0')
        return; /* nothing to apply, nothing wrong */
    rl_log_stderr_line(line, strlen(line));
    if (self.proc.strict)
        _exit(RL_EXIT_CONFIG);
}

/* Asked once the shim is READY, so the config has been read. */
bool rl_shim_io_uring_allowed(void)
{
    return self.proc.cfg != NULL &&
           self.proc.cfg->io_uring == RL_IO_URING_ALLOW;
}

static void set_state(int s)
{
    /* Pairs with the acquire loads in rl_shim_enter and rl_shim_start. */
    __atomic_store_n(&self.state, s, __ATOMIC_RELEASE);
}

/* The deferred half of the set-up; the guard is held. The state it
 * leaves: READY when hooks may act, OFF when nothing is throttled, PENDING
 * when the config could not be read for a passing reason (the next call
 * that needs it tries again). */
static int set_up(void)
{
    char line[512];
    /* The real functions, all of them now (hooks look theirs up on first
     * use), so that the core's own calls go to libc's (util/sys.h). */
    rl_real_resolve();
    /* The config is read here, when the process first needs it (SPEC
     * §4), unless RLSHIM_STRICT=1 read it at start-up. */
    enum rl_proc_state st =
        rl_proc_set_up(&self.proc, RL_PROC_AT_FIRST_CALL, line, sizeof line);
    if (st == RL_PROC_PENDING)
        return RL_SHIM_PENDING;
    if (st == RL_PROC_OFF) {
        broken(line);
        return RL_SHIM_OFF;
    }
    return RL_SHIM_READY;
}

static void futex_wake(int *word)
{
    int saved = errno;
    rl_raw_syscall(SYS_futex, (long)word, FUTEX_WAKE_PRIVATE, INT_MAX, 0, 0, 0);
    errno = saved;
}

/* Wait while *word is `busy` (another thread runs a set-up or the scan),
 * at most ~5 s: either is over long before that, so only one that
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
    wait_while(&self.state, RL_SHIM_INIT);
}

/* OFF: nothing applies now, but a config written, fixed or edited since
 * may (SPEC §16): at most once a second, a look at the file. The state
 * it leaves: READY (the gate was set up again and acts), PENDING (a
 * config appeared in a process that never set up: the caller runs the
 * set-up), or OFF. */
static int off_look(void)
{
    if (!rl_reload_due(&self.proc))
        return RL_SHIM_OFF;
    int saved = errno;
    rl_shim_busy = 1;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    enum rl_proc_state st = rl_reload_look(&self.proc);
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    rl_shim_busy = 0;
    errno = saved;
    int to = st == RL_PROC_READY     ? RL_SHIM_READY
             : st == RL_PROC_PENDING ? RL_SHIM_PENDING
                                     : RL_SHIM_OFF;
    int expect = RL_SHIM_OFF;
    if (to != RL_SHIM_OFF)
        __atomic_compare_exchange_n(&self.state, &expect, to, false,
                                    __ATOMIC_RELEASE, __ATOMIC_RELAXED);
    return __atomic_load_n(&self.state, __ATOMIC_ACQUIRE);
}

bool rl_shim_start(int s)
{
    if (s == RL_SHIM_OFF && !rl_shim_busy) {
        s = off_look();
        if (s == RL_SHIM_READY)
            return true;
    }
    /* From inside the shim (or a handler that interrupted the set-up on
     * this very thread): never wait on ourselves. */
    if ((s != RL_SHIM_PENDING && s != RL_SHIM_INIT) || rl_shim_busy)
        return false;
    int expect = RL_SHIM_PENDING;
    if (s == RL_SHIM_PENDING &&
        __atomic_compare_exchange_n(&self.state, &expect, RL_SHIM_INIT, false,
                                    __ATOMIC_ACQUIRE, __ATOMIC_ACQUIRE)) {
        int saved = errno;
        rl_shim_busy = 1;
        __atomic_signal_fence(__ATOMIC_SEQ_CST);
        int now = set_up();
        if (now == RL_SHIM_OFF) {
            /* Nothing to enforce: no scan, and no provisional marks. */
            __atomic_store_n(&self.scan, 0, __ATOMIC_RELAXED);
            rl_hook_inherited_drop();
        }
        /* PENDING: this call passes through; the marks and the scan stay
         * for the set-up that the next call runs. */
        __atomic_signal_fence(__ATOMIC_SEQ_CST);
        rl_shim_busy = 0;
        set_state(now);
        futex_wake(&self.state);
        errno = saved;
        return now == RL_SHIM_READY;
    }
    wait_set_up();
    return rl_shim_ready();
}

void rl_shim_scan_now(void)
{
    if (rl_shim_busy)
        return; /* the scanning thread's own handler: never wait on it */
    int expect = RL_SCAN_DUE;
    if (__atomic_compare_exchange_n(&self.scan, &expect, RL_SCAN_RUNNING, false,
                                    __ATOMIC_ACQUIRE, __ATOMIC_ACQUIRE)) {
        int saved = errno;
        rl_shim_busy = 1;
        __atomic_signal_fence(__ATOMIC_SEQ_CST);
        if (rl_shim_may_act())
            rl_hook_inherited_scan();
        if (!rl_shim_may_act())
            rl_hook_inherited_drop(); /* a set-up found nothing meanwhile */
        __atomic_signal_fence(__ATOMIC_SEQ_CST);
        rl_shim_busy = 0;
        /* Pairs with the acquire loads of the scan word: the marks are
         * seen by whoever sees the scan done. */
        __atomic_store_n(&self.scan, RL_SCAN_DONE, __ATOMIC_RELEASE);
        futex_wake(&self.scan);
        errno = saved;
        return;
    }
    if (expect == RL_SCAN_RUNNING)
        wait_while(&self.scan, RL_SCAN_RUNNING);
}

/* fork while another thread runs the set-up: wait for it, so the child
 * does not start with a half-made gate that no thread of its own will
 * finish. A child that still sees it running (the wait gave up) runs it
 * again itself. */
static void before_fork(void)
{
    if (!rl_shim_busy) {
        wait_set_up();
        wait_while(&self.scan, RL_SCAN_RUNNING);
    }
}

/* The child: the shim's own words first (so that its hooks know the
 * process), then the process's state in proc.h's order, then the shim's
 * tables. */
static void after_fork_child(void)
{
    __atomic_store_n(&self.pid, (int)getpid(), __ATOMIC_RELAXED);
    /* The parent's CLONE_VM children share the parent's memory, not
     * this one's. */
    __atomic_store_n(&self.vm_clones, 0, __ATOMIC_RELAXED);
    if (__atomic_load_n(&self.state, __ATOMIC_RELAXED) == RL_SHIM_INIT)
        set_state(RL_SHIM_PENDING);
    if (__atomic_load_n(&self.scan, __ATOMIC_RELAXED) == RL_SCAN_RUNNING)
        __atomic_store_n(&self.scan, RL_SCAN_DUE, __ATOMIC_RELAXED);
    rl_proc_event(&self.proc, RL_PROC_FORKED);
    rl_epreg_atfork_child();
    rl_wait_atfork_child();
    rl_conntab_atfork_child();
    rl_tlstab_atfork_child();
    /* The reads and looks under way were other threads', not the child's
     * (a look's mark left set would hold its reads for ever). */
    for (unsigned i = 0; i < RL_READERS_SLOTS; i++)
        atomic_store_explicit(&self.readers.slot[i], 0, memory_order_relaxed);
}

/* At start-up: the environment, and whether there is a config at all
 * (one access(2)): a program that never touches the network pays no more.
 * The config itself is read by the set-up, at the first call that needs
 * it; RLSHIM_STRICT=1 reads it now, so that a broken one exits 78 at
 * start-up, before the program ran. */
static int load(void)
{
    char line[512];
    if (rl_proc_set_up(&self.proc, RL_PROC_AT_LOAD, line, sizeof line) ==
        RL_PROC_OFF) {
        broken(line);
        return RL_SHIM_OFF;
    }
    __atomic_store_n(&self.scan, RL_SCAN_DUE, __ATOMIC_RELAXED);
    return RL_SHIM_PENDING;
}

__attribute__((constructor)) static void rl_shim_init(void)
{
    if (self.constructed)
        return;
    self.constructed = true;
    int saved = errno;
    __atomic_store_n(&self.pid, (int)getpid(), __ATOMIC_RELAXED);
    /* The process's one fork handler (policy/proc.h gives the order). */
    pthread_atfork(before_fork, NULL, after_fork_child);
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
    int s = __atomic_load_n(&self.state, __ATOMIC_ACQUIRE);
    if (self.proc.report == RL_PROC_REPORT_WANTED && !rl_shim_busy)
        rl_shim_start(s);
    rl_shim_busy = 1;
    rl_proc_event(&self.proc, RL_PROC_EXITING);
    rl_shim_busy = 0;
    errno = saved;
}
