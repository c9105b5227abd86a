/* declog.c — see declog.h. */
#include "util/declog.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/logopen.h"
#include "util/sys.h"

#include <arpa/inet.h>
#include <errno.h>
#include <sched.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

int rl_declog_setup(struct rl_declog *d, const char *path)
{
    size_t n = path != NULL ? strlen(path) : 0;
    int k = atomic_exchange(&d->kept, 0);
    if (k > 0)
        rl_sys.close(k - 1); /* set up again: the old file is let go */
    d->on = false;
    if (n >= sizeof d->path)
        return -ENAMETOOLONG;
    /* Relative, each process of a run would write where its own working
     * directory is: lines of one run in several files. */
    if (n > 0 && path[0] != '/')
        return -EINVAL;
    d->on = n > 0;
    if (d->on) {
        memcpy(d->path, path, n + 1);
        atomic_store(&d->owner, (int)getpid());
    }
    return 0;
}

bool rl_declog_enabled(const struct rl_declog *d)
{
    return d->on;
}

/* A bounded appender: never writes past `len`, remembers that it had to
 * cut (then the caller ends the line as best it can). */
struct out {
    char *p;
    size_t len, n;
};

static void put(struct out *o, const char *s, size_t n)
{
    if (o->n + n > o->len)
        n = o->len > o->n ? o->len - o->n : 0;
    memcpy(o->p + o->n, s, n);
    o->n += n;
}

static void puts_(struct out *o, const char *s)
{
    put(o, s, strlen(s));
}

/* `v` in decimal, at least `width` digits (zero-padded): no snprintf, so
 * a line costs little beside the system calls that write it. */
static void put_u64(struct out *o, uint64_t v, unsigned width)
{
    char b[24];
    unsigned n = 0;
    do {
        b[sizeof b - 1 - n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v > 0 || n < width);
    put(o, b + sizeof b - n, n);
}

/* A literal key or punctuation, then a number. */
static void putf(struct out *o, const char *prefix, uint64_t v)
{
    puts_(o, prefix);
    put_u64(o, v, 1);
}

/* A bounded string: what is left of its own share of the line. */
struct share {
    struct out *o;
    size_t left;
};

/* One escape or byte sequence, whole or not at all, within the string's
 * share and keeping back a byte for its closing quote: a cut line still
 * parses. */
static bool put_whole(struct share *sh, const char *s, size_t n)
{
    struct out *o = sh->o;
    if (n > sh->left || o->n + n + 1 > o->len)
        return false;
    put(o, s, n);
    sh->left -= n;
    return true;
}

/* The length of the valid UTF-8 sequence at s[0..n) (0: not one). */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    size_t len = s[0] >= 0xf0 && s[0] <= 0xf4   ? 4
                 : s[0] >= 0xe0 && s[0] <= 0xef ? 3
                 : s[0] >= 0xc2 && s[0] <= 0xdf ? 2
                                                : 0;
    if (len == 0 || len > n)
        return 0;
    for (size_t i = 1; i < len; i++)
        if ((s[i] & 0xc0) != 0x80)
            return 0;
    /* Overlong 3- and 4-byte forms, surrogates, past U+10FFFF. */
    if ((s[0] == 0xe0 && s[1] < 0xa0) || (s[0] == 0xed && s[1] >= 0xa0) ||
        (s[0] == 0xf0 && s[1] < 0x90) || (s[0] == 0xf4 && s[1] >= 0x90))
        return 0;
    return len;
}

/* A JSON string of at most `max` bytes of s, taking at most `room` bytes
 * of the line escaped, or null. What a program wrote (a request's method
 * and target) may be any bytes: a byte that is not part of valid UTF-8
 * becomes U+FFFD, and a sequence the cut would split is left out, so
 * that every line is UTF-8 JSON. */
static void put_str_max(struct out *o, const char *s, size_t max, size_t room)
{
    if (s == NULL) {
        puts_(o, "null");
        return;
    }
    size_t n = strnlen(s, max);
    const unsigned char *u = (const unsigned char *)s;
    struct share sh = {o, room};
    put(o, "\"", 1);
    for (size_t i = 0; i < n;) {
        unsigned char c = u[i];
        bool fit;
        size_t step = 1;
        if (c == '"' || c == '\\') {
            char e[2] = {'\\', (char)c};
            fit = put_whole(&sh, e, 2);
        } else if (c < 0x20 || c == 0x7f) {
            static const char hex[] = "0123456789abcdef";
            char e[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
            fit = put_whole(&sh, e, 6);
        } else if (c < 0x80) {
            fit = put_whole(&sh, (const char *)&c, 1);
        } else if ((step = utf8_len(u + i, n - i)) > 0) {
            fit = put_whole(&sh, s + i, step);
        } else if (n == max && n - i < 4 && c >= 0xc2 && c <= 0xf4) {
            break; /* a sequence the cut split */
        } else {
            step = 1;
            fit = put_whole(&sh, "\\ufffd", 6);
        }
        if (!fit)
            break;
        i += step;
    }
    put(o, "\"", 1);
}

/* User names, rule sections and destination names: at most 200 bytes of
 * the line each (they are short; the cap keeps every field a reader needs
 * inside RL_DECLOG_LINE_MAX whatever they hold). */
static void put_str(struct out *o, const char *s)
{
    put_str_max(o, s, 200, 200);
}

/* Days since 1970-01-01 to a proleptic Gregorian date (the era-based
 * civil calendar arithmetic): no gmtime_r, so no time zone look-up or
 * lock inside a hook. */
static void civil(long long days, int *y, unsigned *m, unsigned *d)
{
    long long z = days + 719468;
    long long era = (z >= 0 ? z : z - 146096) / 146097;
    unsigned doe = (unsigned)(z - era * 146097);
    unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    unsigned mp = (5 * doy + 2) / 153;
    *d = doy - (153 * mp + 2) / 5 + 1;
    *m = mp < 10 ? mp + 3 : mp - 9;
    *y = (int)(yoe + era * 400 + (*m <= 2));
}

static const char *verdict_name(int v)
{
    switch (v) {
    case RL_DECLOG_DENY:
        return "deny";
    case RL_DECLOG_DELAY:
        return "delay";
    case RL_DECLOG_PAUSE:
        return "pause";
    case RL_DECLOG_RESPOND:
        return "respond";
    default:
        return "allow";
    }
}

size_t rl_declog_format(char *buf, size_t len, const struct rl_declog_rec *r,
                        uint64_t wall_ns, int pid, int tid)
{
    if (len < 2)
        return 0;
    /* Room for the closing "}\n" is kept back from the start. */
    struct out o = {buf, len - 2, 0};
    uint64_t secs = wall_ns / 1000000000u;
    int y;
    unsigned mo, d;
    civil((long long)(secs / 86400), &y, &mo, &d);
    unsigned sod = (unsigned)(secs % 86400);
    puts_(&o, "{\"t\":\"");
    put_u64(&o, (uint64_t)(y > 0 ? y : 0), 4);
    put(&o, "-", 1);
    put_u64(&o, mo, 2);
    put(&o, "-", 1);
    put_u64(&o, d, 2);
    put(&o, "T", 1);
    put_u64(&o, sod / 3600, 2);
    put(&o, ":", 1);
    put_u64(&o, sod / 60 % 60, 2);
    put(&o, ":", 1);
    put_u64(&o, sod % 60, 2);
    put(&o, ".", 1);
    put_u64(&o, wall_ns % 1000000000u / 1000, 6);
    puts_(&o, "Z\"");
    putf(&o, ",\"mono_ns\":", r->mono_ns);
    putf(&o, ",\"pid\":", (uint64_t)(pid > 0 ? pid : 0));
    putf(&o, ",\"tid\":", (uint64_t)(tid > 0 ? tid : 0));
    puts_(&o, ",\"user\":");
    put_str(&o, r->user);
    puts_(&o, ",\"rule\":");
    put_str(&o, r->rule);
    puts_(&o, ",\"site\":");
    put_str(&o, r->site);
    puts_(&o, ",\"dest\":{\"name\":");
    put_str(&o, r->dest);
    putf(&o, ",\"port\":", r->port);
    put(&o, "}", 1);
    puts_(&o, ",\"call\":");
    put_str(&o, r->call);
    puts_(&o, ",\"limit\":");
    put_str(&o, r->limit);
    putf(&o, ",\"units\":", r->units);
    puts_(&o, ",\"verdict\":");
    put_str(&o, verdict_name(r->verdict));
    putf(&o, ",\"wait_ns\":", r->wait_ns);
    if (r->reason != NULL) {
        puts_(&o, ",\"reason\":");
        put_str(&o, r->reason);
    }
    if (r->status != 0)
        putf(&o, ",\"status\":", r->status);
    if (r->moved_ns != 0)
        putf(&o, ",\"moved_ns\":", r->moved_ns);
    if (r->interval_ns != 0)
        putf(&o, ",\"interval_ns\":", r->interval_ns);
    /* Last: what a program wrote can be long, and a cut keeps the fields
     * every reader needs. */
    if (r->method != NULL) {
        puts_(&o, ",\"method\":");
        put_str_max(&o, r->method, RL_DECLOG_REQ_MAX, RL_DECLOG_REQ_MAX);
    }
    if (r->target != NULL) {
        puts_(&o, ",\"target\":");
        put_str_max(&o, r->target, RL_DECLOG_REQ_MAX, SIZE_MAX);
    }
    memcpy(buf + o.n, "}\n", 2);
    return o.n + 2;
}

/* One line on fd: one write, O_APPEND places it whole at the end. A short
 * write (disk full) leaves a cut line, which readers skip. */
static int put_line(int fd, const char *line, size_t n)
{
    for (;;) {
        ssize_t w = rl_sys.write(fd, line, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return -errno;
        return (size_t)w < n ? -ENOSPC : 0;
    }
}

/* The kept fd, opened now if none is (another thread may have opened one
 * meanwhile: the first kept wins). -errno when the file cannot be
 * opened or is not a regular file (util/logopen.h), `why` said. */
static int keep(struct rl_declog *d, char *why, size_t whylen)
{
    int fd = rl_logopen(d->path, why, whylen);
    if (fd < 0)
        return fd;
    int high = rl_sys.fcntl(fd, F_DUPFD_CLOEXEC, RL_DECLOG_FD_FLOOR);
    if (high >= 0) {
        rl_sys.close(fd);
        fd = high;
    }
    int none = 0;
    if (!atomic_compare_exchange_strong(&d->kept, &none, fd + 1))
        rl_sys.close(fd);
    return 0;
}

/* Was the kept file removed (rm between two phases of a test)? Its lines
 * would go nowhere: the log opens the path again. Asked at most every
 * RL_DECLOG_LOOK_NS (an fstat per line would cost about as much again as
 * its write), so the lines of that long after a removal go with the
 * removed file, as the lines written just before it do. */
static bool removed(struct rl_declog *d, int fd)
{
    uint64_t now = rl_clock_coarse_ns(),
             last = atomic_load_explicit(&d->looked, memory_order_relaxed);
    if (now - last < RL_DECLOG_LOOK_NS ||
        !atomic_compare_exchange_strong(&d->looked, &last, now))
        return false;
    struct stat st;
    return fstat(fd, &st) == 0 && st.st_nlink == 0;
}

/* The lines being written through the kept fd, which was just taken out
 * of `kept`, finish their one write (a signal handler that closes the fd
 * under its own thread's write gives up after a while: its close then
 * goes first). */
static void wait_writers(struct rl_declog *d)
{
    for (unsigned spins = 0; atomic_load(&d->writers) != 0 && spins < 100000;
         spins++)
        sched_yield();
}

/* Let the kept fd k - 1 go (ours: closed), once the lines being written
 * through it are done; another thread may have done so already. */
static void drop(struct rl_declog *d, int k)
{
    if (!atomic_compare_exchange_strong(&d->kept, &k, 0))
        return;
    wait_writers(d);
    rl_sys.close(k - 1);
}

static int write_line(struct rl_declog *d, const char *line, size_t n,
                      int pid, char *why, size_t whylen)
{
    /* The kept fd is this process's (not a vfork child's, whose fd table
     * is a copy the parent does not see: it writes the slow way). */
    for (int tries = 0; tries < 2 && atomic_load(&d->owner) == pid;
         tries++) {
        atomic_fetch_add(&d->writers, 1);
        int k = atomic_load(&d->kept);
        if (k > 0 && !removed(d, k - 1)) {
            int r = put_line(k - 1, line, n);
            atomic_fetch_sub(&d->writers, 1);
            return r;
        }
        atomic_fetch_sub(&d->writers, 1);
        if (k > 0)
            drop(d, k); /* the file was removed: a new one is made */
        int r = keep(d, why, whylen);
        if (r < 0)
            return r;
    }
    int fd = rl_logopen(d->path, why, whylen);
    if (fd < 0)
        return fd;
    int r = put_line(fd, line, n);
    rl_sys.close(fd);
    return r;
}

void rl_declog_release(struct rl_declog *d)
{
    /* The program's own call closes it. */
    if (atomic_exchange(&d->kept, 0) > 0)
        wait_writers(d);
}

void rl_declog_atfork_child(struct rl_declog *d)
{
    /* Writers of other threads are not in the child. */
    atomic_store(&d->writers, 0);
    if (d->on)
        atomic_store(&d->owner, (int)getpid());
}

void rl_declog_write(struct rl_declog *d, const struct rl_declog_rec *r)
{
    if (!d->on)
        return;
    int saved = errno;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t wall = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    char line[RL_DECLOG_LINE_MAX];
    int pid = (int)getpid();
    size_t n = rl_declog_format(line, sizeof line, r, wall, pid, (int)gettid());
    char why[128] = "";
    int rc = write_line(d, line, n, pid, why, sizeof why);
    if (rc < 0 && !atomic_flag_test_and_set_explicit(&d->complained,
                                                     memory_order_relaxed)) {
        char msg[4096 + 256];
        int m = snprintf(msg, sizeof msg,
                         "rlshim: decision_log %s: %s: decisions of pid %d "
                         "are not logged\n",
                         d->path, why[0] != '\0' ? why : strerror(-rc),
                         (int)getpid());
        if (m > 0)
            rl_log_stderr_line(msg, (size_t)m < sizeof msg ? (size_t)m
                                                           : sizeof msg - 1);
    }
    errno = saved;
}

bool rl_declog_dest(const void *sa, unsigned salen, char *host, size_t hostlen,
                    unsigned *port)
{
    snprintf(host, hostlen, "?");
    *port = 0;
    if (sa == NULL || salen < sizeof(sa_family_t))
        return false;
    sa_family_t fam = ((const struct sockaddr *)sa)->sa_family;
    if (fam == AF_INET && salen >= sizeof(struct sockaddr_in)) {
        const struct sockaddr_in *in = sa;
        inet_ntop(AF_INET, &in->sin_addr, host, (socklen_t)hostlen);
        *port = ntohs(in->sin_port);
        return true;
    }
    if (fam == AF_INET6 && salen >= sizeof(struct sockaddr_in6)) {
        const struct sockaddr_in6 *in6 = sa;
        /* An IPv4-mapped address is the IPv4 host the rule saw. */
        if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr))
            inet_ntop(AF_INET, &in6->sin6_addr.s6_addr[12], host,
                      (socklen_t)hostlen);
        else
            inet_ntop(AF_INET6, &in6->sin6_addr, host, (socklen_t)hostlen);
        *port = ntohs(in6->sin6_port);
        return true;
    }
    return false;
}

void rl_declog_hostport(char *buf, size_t len, const char *host, unsigned port)
{
    bool v6 = strchr(host, ':') != NULL;
    snprintf(buf, len, "%s%s%s:%u", v6 ? "[" : "", host, v6 ? "]" : "", port);
}
