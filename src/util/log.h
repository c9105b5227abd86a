/* log.h — rlshim's own messages: one line per denial or delay, and the
 * start-up problems. Never stdout, never an fd kept open: stderr is fd 2
 * written with one write(2) system call (not stdio, not a hooked name)
 * while it is the stderr the process had at load (else the line goes to
 * syslog); a file is opened as util/logopen.h says (a regular file only),
 * written and closed per line, and one that cannot be is said once per
 * process; syslog goes through a datagram socket to /dev/log made and
 * closed per line (not syslog(3), whose socket stays open and may be
 * closed and reused by the program). Event lines are rate-limited per process: rl_log_admit first,
 * then rl_log_admitted. */
#ifndef RL_UTIL_LOG_H
#define RL_UTIL_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/atomics.h"

/* At most this many event lines per second per process; the rest are
 * counted and reported in one "N lines suppressed" line. */
#define RL_LOG_LINES_PER_S 10

/* Where a process's event lines go, and their rate limit (a member of the
 * process's struct rl_proc). All zero: off. */
struct rl_log {
    /* Written once by rl_log_setup at load, before any hook can log; then
     * only read. */
    int target;
    char path[4096];
    /* The rate limit: (second << 32 | lines in that second), CAS by any
     * thread; `suppressed` counts lines dropped since the last one
     * written. */
    rl_atomic_u64 window;
    rl_atomic_u64 suppressed;
    /* Set by the first line the file could not take: one stderr line per
     * process. */
    atomic_flag complained;
};

/* Where l's event lines go: `target` takes the values of enum
 * rl_log_target (0 off, 1 stderr, 2 syslog, 3 file); `path` (file) is
 * copied. Call once at load, before any event. Returns 0 or -ENAMETOOLONG. */
int rl_log_setup(struct rl_log *l, int target, const char *path);

/* Will an event line at `now` be written? Answers the rate limit's
 * question once, and counts the line as written (true) or suppressed
 * (false): a caller asks first and does the costly part of a line (the
 * formatting) only on true, then writes it with rl_log_admitted. false
 * when logging is off. */
bool rl_log_admit(struct rl_log *l, uint64_t now);

/* Write an event line that rl_log_admit said yes to (and first the count
 * of lines suppressed before it, if any). */
void rl_log_admitted(struct rl_log *l, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* One line to stderr (start-up problems, the exit report); "rlshim: "
 * prepended, "\n" appended. Any caller, any process: see
 * rl_log_stderr_line for where it goes. */
void rl_log_stderr(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Note fd 2 as the stderr of the process (SPEC §3): the shim's
 * constructor, once, before any line. A process that never calls it (the
 * CLI) writes its lines to fd 2 whatever it is. */
void rl_log_stderr_mark(void);

/* The whole line `line` (its "\n" included): to fd 2 while fd 2 is the
 * stderr rl_log_stderr_mark noted (one fstat), else — fd 2 closed, or
 * reopened on another file, a daemon's data — to syslog, never into the
 * program's files. Keeps errno. */
void rl_log_stderr_line(const char *line, size_t n);

#endif
