/* declog.h — the decision log (SPEC §9): one JSON object per line for
 * every decision on a covered call, from every process and thread of a
 * run into one file.
 *
 * The file is opened at the first line (util/logopen.h: a regular file
 * only, never through a link, never waited on; by the system call, never
 * a hooked name), moved to a high fd number and kept: a line
 * is one write(2), and O_APPEND with one write per line keeps lines of
 * concurrent writers and processes whole. An exec closes it
 * (close-on-exec); a fork child shares it. The program may close any fd
 * number, ours too (a close_range sweep, dup2 onto it): every close path
 * of the shim (shim/hook_close.c, and the raw system calls it routes
 * there) asks rl_declog_holds first, and rl_declog_release lets the fd go
 * after the lines being written through it, so no line ever lands in a
 * file the program opened at that number since. The next line opens the
 * file again. So does a line that finds the file removed (a test that
 * deletes the log between two phases of a run gets a new one, as when
 * every line opened the path; asked at most every RL_DECLOG_LOOK_NS).
 * tests/bench/bench_declog.c measures a line.
 *
 * A log that cannot be written, or is not a regular file, costs one
 * stderr line per process (util/log.h: while fd 2 is the process's own
 * stderr, else syslog); the program goes on and the lines are lost. */
#ifndef RL_UTIL_DECLOG_H
#define RL_UTIL_DECLOG_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum rl_declog_verdict {
    RL_DECLOG_ALLOW = 0,
    RL_DECLOG_DENY = 1,
    RL_DECLOG_DELAY = 2,
    /* Not a decision: a response that paused a request budget (SPEC §12),
     * call = response, limit = request, units 0, wait_ns the pause from
     * mono_ns, reason and status. */
    RL_DECLOG_PAUSE = 3,
    /* A request refused under on_deny = respond (SPEC §15): the shim
     * answered it itself; wait_ns is the Retry-After it gave. */
    RL_DECLOG_RESPOND = 4,
};

/* One line's content; strings are borrowed. */
struct rl_declog_rec {
    uint64_t mono_ns;  /* the decision's CLOCK_MONOTONIC reading */
    const char *user;
    const char *rule;  /* NULL: no rule (written as null) */
    const char *site;  /* NULL until site sections exist */
    const char *dest;  /* host name or address literal; NULL: unknown */
    unsigned port;
    const char *call;  /* the libc name ("connect", "send", ...) */
    const char *limit; /* "connect", "send", "send_bytes" or "request" */
    uint64_t units;
    int verdict;       /* enum rl_declog_verdict */
    uint64_t wait_ns;
    /* call = request (SPEC §11): its method and target, written as
     * "method" and "target" after the other fields, cut at
     * RL_DECLOG_REQ_MAX bytes (bytes that are not UTF-8 become U+FFFD);
     * NULL: not written (other calls). */
    const char *method, *target;
    /* Why a pause held the call (SPEC §12: "retry_after" or "backoff"),
     * written as "reason" after wait_ns; NULL: not written. */
    const char *reason;
    /* A response's status (verdict pause), written as "status" after
     * reason; 0: not written. */
    unsigned status;
    /* A request given a turn earlier, decided again at that turn because
     * a pause of its destination came meanwhile (SPEC §12): the earlier
     * turn (its line's mono_ns + wait_ns), which it did not go at,
     * written as "moved_ns" after status; 0: not written. */
    uint64_t moved_ns;
    /* A request whose destination keeps a pace (SPEC §14): the interval
     * its requests are spaced by at this decision (what latency or a
     * Crawl-delay made of it, else its limit's own period), written as
     * "interval_ns" after moved_ns, so a timeline can draw it; 0: not
     * written. */
    uint64_t interval_ns;
};

/* A request's method and target are cut at this many bytes (SPEC §11). */
#define RL_DECLOG_REQ_MAX 256

/* The longest line written (longer fields are cut, the line stays JSON):
 * room for the names and a request's method and target, escaped. */
#define RL_DECLOG_LINE_MAX 2048

/* Where a process's decisions are logged (a member of its struct
 * rl_proc). All zero: off. */
struct rl_declog {
    /* Written once by rl_declog_setup at load; then only read. */
    char path[4096];
    bool on;
    /* Set by the first line that could not be written: one stderr line
     * per process, not one per decision. */
    atomic_flag complained;
    /* The file kept open: its fd + 1 (0: none; the next line opens it),
     * for the process `owner` (a vfork child, whose fd table is its own
     * copy, writes a line the slow way); `writers`: lines being written
     * through it (a close of it waits for them: rl_declog_release). */
    _Atomic int kept;
    _Atomic unsigned writers;
    _Atomic int owner;
    _Atomic uint64_t looked; /* when a line last asked if it was removed */
};

/* How often a line asks whether the kept file was removed (10 ms). */
#define RL_DECLOG_LOOK_NS 10000000u

/* The log's file is kept at this fd number or above, out of the way of
 * the low numbers a program expects its own files at. */
#define RL_DECLOG_FD_FLOOR 512

/* Does the program's close (or replacement) of fds [first, last] take the
 * log's kept fd? One load: every close path of the shim asks. */
static inline bool rl_declog_holds(struct rl_declog *d, unsigned first,
                                   unsigned last)
{
    int k = atomic_load_explicit(&d->kept, memory_order_relaxed);
    return k > 0 && (unsigned)(k - 1) >= first && (unsigned)(k - 1) <= last;
}

/* Before such a close: the log lets its fd go (the program's own call
 * closes it), once the lines being written through it are done; the next
 * line opens the file again. */
void rl_declog_release(struct rl_declog *d);

/* In a fork child: the kept fd is the child's too. */
void rl_declog_atfork_child(struct rl_declog *d);

/* Log to `path` (copied; NULL or "" turns the log off). Call once at load,
 * before any decision. Returns 0, -ENAMETOOLONG, or -EINVAL for a relative
 * path; on error the log is off. */
int rl_declog_setup(struct rl_declog *d, const char *path);

/* Is the log on? Callers skip all the work when not. */
bool rl_declog_enabled(const struct rl_declog *d);

/* Format one line (with its "\n") into buf; returns its length. `wall_ns`
 * is CLOCK_REALTIME in ns (written as RFC 3339 UTC with microseconds). */
size_t rl_declog_format(char *buf, size_t len, const struct rl_declog_rec *r,
                        uint64_t wall_ns, int pid, int tid);

/* Write one line for `r` to d (now's wall clock, this pid and tid). Keeps
 * errno. */
void rl_declog_write(struct rl_declog *d, const struct rl_declog_rec *r);

/* The address literal and port of `sa`; host "?" and port 0 (and false)
 * when it is not an inet address (or NULL: not known). */
bool rl_declog_dest(const void *sa, unsigned salen, char *host, size_t hostlen,
                    unsigned *port);

/* "host:port" into buf, or "[host]:port" when host is an IPv6 literal (so
 * that the port cannot be read as the address's last group). */
void rl_declog_hostport(char *buf, size_t len, const char *host,
                        unsigned port);

#endif
