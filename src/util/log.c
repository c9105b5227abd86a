/* log.c — see log.h. */
#include "util/log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include "util/atomics.h"
#include "util/logopen.h"
#include "util/sys.h"

enum { T_OFF = 0, T_STDERR = 1, T_SYSLOG = 2, T_FILE = 3 };

#define LINE_MAX_BYTES 512

int rl_log_setup(struct rl_log *l, int t, const char *path)
{
    if (t == T_FILE) {
        size_t n = path != NULL ? strlen(path) : 0;
        if (n == 0 || n >= sizeof l->path)
            return -ENAMETOOLONG;
        memcpy(l->path, path, n + 1);
    }
    l->target = t;
    return 0;
}

static void emit_syslog(const char *line, size_t n)
{
    char msg[LINE_MAX_BYTES + 64];
    /* <13> = user.notice; the "rlshim: " prefix doubles as the tag. */
    int m = snprintf(msg, sizeof msg, "<13>%.*s", (int)n, line);
    if (m <= 0)
        return;
    if ((size_t)m >= sizeof msg)
        m = sizeof msg - 1;
    int fd = rl_sys.socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return;
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    memcpy(sun.sun_path, "/dev/log", sizeof "/dev/log");
    /* connect + send: the table has no sendto (datagram to a path). */
    if (rl_sys.connect(fd, (const struct sockaddr *)&sun, sizeof sun) == 0)
        (void)rl_sys.send(fd, msg, (size_t)m, MSG_DONTWAIT | MSG_NOSIGNAL);
    rl_sys.close(fd);
}

/* fd 2 as the process had it when the shim loaded (SPEC §3): set once by
 * rl_log_stderr_mark, in the constructor before any thread, then only
 * read. A file-scope fact about the process, like util/bootid.c's boot
 * id: every line to stderr asks it, and many who write one (the store,
 * the per-destination table, the fleet) hold no owner. UNMARKED (the CLI,
 * the tests): fd 2 is the program's own stderr, written as it is. */
enum { UNMARKED = 0, MARKED = 1, CLOSED_AT_LOAD = 2 };
static struct {
    int state;
    dev_t dev;
    ino_t ino;
} own_stderr;

void rl_log_stderr_mark(void)
{
    struct stat st;
    if (fstat(2, &st) != 0) {
        own_stderr.state = CLOSED_AT_LOAD;
        return;
    }
    own_stderr.dev = st.st_dev;
    own_stderr.ino = st.st_ino;
    own_stderr.state = MARKED;
}

/* Is fd 2 still the stderr the process had at load? One fstat: asked only
 * for a line, which is written on a denial, a report or an error. */
static bool stderr_is_own(void)
{
    if (own_stderr.state == UNMARKED)
        return true;
    struct stat st;
    return own_stderr.state == MARKED && fstat(2, &st) == 0 &&
           st.st_dev == own_stderr.dev && st.st_ino == own_stderr.ino;
}

void rl_log_stderr_line(const char *line, size_t n)
{
    int saved = errno;
    /* A daemon that closed its stderr and opened its data at fd 2 gets
     * no line of ours in that file: syslog has it. */
    if (stderr_is_own())
        rl_sys_write_all(2, line, n);
    else
        emit_syslog(line, n);
    errno = saved;
}

/* The log file cannot be opened, or is not one (util/logopen.h): said
 * once per process, the lines are lost. */
static void complain(struct rl_log *l, const char *why)
{
    if (atomic_flag_test_and_set_explicit(&l->complained,
                                          memory_order_relaxed))
        return;
    char msg[sizeof l->path + 256];
    int m = snprintf(msg, sizeof msg,
                     "rlshim: log %s: %s: lines of pid %d are not written\n",
                     l->path, why, (int)getpid());
    if (m > 0)
        rl_log_stderr_line(msg, (size_t)m < sizeof msg ? (size_t)m
                                                       : sizeof msg - 1);
}

static void emit(struct rl_log *l, const char *line, size_t n)
{
    int saved = errno;
    switch (l->target) {
    case T_STDERR:
        rl_log_stderr_line(line, n);
        break;
    case T_FILE: {
        char why[128];
        int fd = rl_logopen(l->path, why, sizeof why);
        if (fd >= 0) {
            rl_sys_write_all(fd, line, n);
            rl_sys.close(fd);
        } else {
            complain(l, why);
        }
        break;
    }
    case T_SYSLOG:
        emit_syslog(line, n);
        break;
    default:
        break;
    }
    errno = saved;
}

/* true when a line may be written at `now`; the caller then also reports
 * what was suppressed before. */
static bool admit(struct rl_log *l, uint64_t now)
{
    uint64_t sec = now / 1000000000u;
    uint64_t cur = rl_load_relaxed_u64(&l->window);
    for (;;) {
        uint64_t wsec = cur >> 32;
        uint64_t cnt = cur & 0xffffffffu;
        uint64_t next;
        if (wsec != (sec & 0xffffffffu))
            next = ((sec & 0xffffffffu) << 32) | 1;
        else if (cnt < RL_LOG_LINES_PER_S)
            next = cur + 1;
        else
            return false;
        if (rl_cas_acq_rel_u64(&l->window, &cur, next))
            return true;
    }
}

static size_t format(char *buf, size_t size, const char *fmt, va_list ap)
{
    memcpy(buf, "rlshim: ", 8);
    int n = vsnprintf(buf + 8, size - 9, fmt, ap);
    size_t len = 8;
    if (n > 0)
        len += (size_t)n < size - 9 ? (size_t)n : size - 10;
    buf[len++] = '\n';
    return len;
}

bool rl_log_admit(struct rl_log *l, uint64_t now)
{
    if (l->target == T_OFF)
        return false;
    if (!admit(l, now)) {
        rl_add_relaxed_u64(&l->suppressed, 1);
        return false;
    }
    return true;
}

static void write_admitted(struct rl_log *l, const char *fmt, va_list ap)
{
    char buf[LINE_MAX_BYTES];
    uint64_t lost = rl_xchg_acq_rel_u64(&l->suppressed, 0);
    if (lost > 0) {
        int n = snprintf(buf, sizeof buf,
                         "rlshim: %llu lines suppressed (at most %d/s)\n",
                         (unsigned long long)lost, RL_LOG_LINES_PER_S);
        if (n > 0 && (size_t)n < sizeof buf)
            emit(l, buf, (size_t)n);
    }
    size_t len = format(buf, sizeof buf, fmt, ap);
    emit(l, buf, len);
}

void rl_log_admitted(struct rl_log *l, const char *fmt, ...)
{
    if (l->target == T_OFF)
        return;
    va_list ap;
    va_start(ap, fmt);
    write_admitted(l, fmt, ap);
    va_end(ap);
}

void rl_log_stderr(const char *fmt, ...)
{
    int saved = errno;
    char buf[LINE_MAX_BYTES];
    va_list ap;
    va_start(ap, fmt);
    size_t len = format(buf, sizeof buf, fmt, ap);
    va_end(ap);
    rl_log_stderr_line(buf, len);
    errno = saved;
}
