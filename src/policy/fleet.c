/* fleet.c — the Redis side of fleet budgets (see fleet.h).
 *
 * Protocol: commands are written as RESP by hand (a few arrays of bulk
 * strings); replies are parsed by hiredis's reader, the only part of
 * hiredis used, so that every socket call is ours and bounded by poll.
 * A decision is one EVALSHA; a new connection first sends, in one write,
 * AUTH (fleet_password), SELECT (the URL's db) and SCRIPT LOAD of both
 * scripts (whose SHA1 the process learns from the replies): two round
 * trips for a process's first decision. NOSCRIPT (Redis restarted, or
 * SCRIPT FLUSH) loads them again, once, on the same call.
 *
 * Shared data: `mu` guards `conn` and the SHAs; everything else is atomic.
 * `down` and `next_try` are written by the thread that holds `mu` and read
 * by every thread (relaxed: a stale read only costs one extra try or one
 * extra fallback decision). */
#include "policy/fleet.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "policy/fleet_addr.h"
#include "policy/fleet_lease.h"
#include "policy/fleet_scripts.h"
#include "util/atomics.h"
#include "util/clock.h"
#include "util/hash.h"

enum { SCRIPT_BUCKET = 0, SCRIPT_WINDOW = 1 };

/* What the process keeps per fleet budget: the user's rule budget has its
 * own; a site's and per-destination budgets (named by their label) get one
 * of a small table, claimed by the label's hash. */
struct budget_state {
    rl_atomic_u64 tag;                 /* label hash | 1; 0: free */
    rl_atomic_u64 debt[RL_KIND_COUNT]; /* admitted while away */
    /* Host clock until which Redis said no to one unit of a kind: calls
     * before then are denied here, with no round trip (a denied client
     * that retries at once must not become a storm on one key). */
    rl_atomic_u64 closed_until[RL_KIND_COUNT];
    /* F.gen + 1 when this outage's host budget was drained. */
    rl_atomic_u64 drained[RL_KIND_COUNT];
};
#define RL_FLEET_BUDGETS 64

struct conn {
    int fd; /* -1: none */
    dev_t dev;
    ino_t ino;
    redisReader *rd;
};

static struct {
    const struct rl_config *cfg;
    struct rl_fleet_addr addr;
    char label[160];
    char host[40]; /* this host's id in the hosts sets */
    bool on;
    pthread_mutex_t mu;
    struct conn conn;
    char sha[2][41];
    atomic_bool down;
    rl_atomic_u64 next_try; /* host clock: no try before */
    atomic_flag warned;
    rl_atomic_u64 hosts; /* last seen; 1 until then */
    rl_atomic_u64 seq;
    rl_atomic_u64 round_trips; /* EVALSHA answered (tests, benchmarks) */
    rl_atomic_u64 gen;       /* Redis answers seen: a new one ends an outage */
    struct budget_state own; /* the user's rule budget (F.label) */
    struct budget_state others[RL_FLEET_BUDGETS];
} F = {
    .mu = PTHREAD_MUTEX_INITIALIZER,
    .conn = {.fd = -1},
    .warned = ATOMIC_FLAG_INIT,
};

/* ---- the host's identity ------------------------------------------------*/

/* Hosts are told apart by name, boot and state directory: two
 * RLSHIM_STATE_DIRs on one machine are two hosts (their budgets are apart
 * too), which is how the tests simulate a fleet. */
static void host_id(char *buf, size_t len)
{
    char name[256] = "", boot[64] = "";
    uint64_t h = RL_HASH_INIT;
    if (gethostname(name, sizeof name - 1) != 0)
        name[0] = '\0';
    int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t n = read(fd, boot, sizeof boot - 1);
        boot[n > 0 ? n : 0] = '\0';
        close(fd);
    }
    const char *dir = secure_getenv("RLSHIM_STATE_DIR");
    h = rl_hash_str(h, name);
    h = rl_hash_str(h, boot);
    h = rl_hash_str(h, dir != NULL ? dir : "");
    snprintf(buf, len, "%s:%016llx", name, (unsigned long long)h);
}

int rl_fleet_init(const struct rl_config *cfg, const char *label)
{
    if (cfg->fleet == NULL)
        return 0;
    if (rl_fleet_addr_parse(cfg->fleet, &F.addr) != NULL)
        return -EINVAL;
    F.cfg = cfg;
    snprintf(F.label, sizeof F.label, "%s", label);
    host_id(F.host, sizeof F.host);
    rl_store_relaxed_u64(&F.hosts, 1);
    /* Budgets' drained start at 0 (no generation): a process whose first
     * decisions find Redis away (or slow, as on a loaded host at start) drains
     * the host budget too. That budget sits full while Redis decides; taken as
     * it is, it would be a burst per process on top of what the fleet admitted.
     */
    F.on = true;
    return 0;
}

bool rl_fleet_decides(const struct rl_rule *rule)
{
    return F.on && rule->scope == RL_SCOPE_FLEET;
}

bool rl_fleet_up(void)
{
    return F.on && !atomic_load_explicit(&F.down, memory_order_relaxed);
}

/* The state of the budget named `label` (NULL: the user's rule budget);
 * NULL when the table is full (that budget then keeps no debt, no denial
 * shortcut and no drain: each call asks Redis, or the fallback). */
static struct budget_state *state_of(const char *label)
{
    if (label == NULL)
        return &F.own;
    uint64_t h = rl_hash_str(RL_HASH_INIT, label) | 1;
    for (unsigned i = 0; i < RL_FLEET_BUDGETS; i++) {
        struct budget_state *b = &F.others[(h + i) % RL_FLEET_BUDGETS];
        uint64_t t = rl_load_relaxed_u64(&b->tag);
        if (t == 0 &&
            atomic_compare_exchange_strong_explicit(
                &b->tag, &t, h, memory_order_relaxed, memory_order_relaxed))
            return b;
        if (t == h)
            return b;
    }
    return NULL;
}

/* ---- bounded I/O --------------------------------------------------------*/

static int wait_fd(int fd, short ev, uint64_t deadline)
{
    for (;;) {
        uint64_t now = rl_clock_now_ns();
        if (now >= deadline)
            return -ETIMEDOUT;
        struct pollfd p = {.fd = fd, .events = ev};
        int ms = (int)((deadline - now + 999999) / 1000000);
        int r = poll(&p, 1, ms);
        if (r > 0)
            return (p.revents & (POLLERR | POLLNVAL)) && !(p.revents & ev)
                       ? -ECONNRESET
                       : 0;
        if (r < 0 && errno != EINTR)
            return -errno;
    }
}

static void conn_forget(struct conn *c, bool close_fd)
{
    if (c->fd >= 0 && close_fd)
        close(c->fd);
    c->fd = -1;
    if (c->rd != NULL)
        redisReaderFree(c->rd);
    c->rd = NULL;
}

static int write_all(struct conn *c, const char *buf, size_t len,
                     uint64_t deadline)
{
    while (len > 0) {
        ssize_t n = send(c->fd, buf, len, MSG_NOSIGNAL);
        if (n > 0) {
            buf += n;
            len -= (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno != EAGAIN)
            return -errno;
        int r = wait_fd(c->fd, POLLOUT, deadline);
        if (r < 0)
            return r;
    }
    return 0;
}

/* The next reply, read until `deadline`. */
static int read_reply(struct conn *c, redisReply **out, uint64_t deadline)
{
    for (;;) {
        void *rep = NULL;
        if (redisReaderGetReply(c->rd, &rep) != REDIS_OK)
            return -EPROTO;
        if (rep != NULL) {
            *out = rep;
            return 0;
        }
        char buf[4096];
        ssize_t n = recv(c->fd, buf, sizeof buf, MSG_DONTWAIT);
        if (n > 0) {
            if (redisReaderFeed(c->rd, buf, (size_t)n) != REDIS_OK)
                return -EPROTO;
            continue;
        }
        if (n == 0)
            return -ECONNRESET;
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN)
            return -errno;
        int r = wait_fd(c->fd, POLLIN, deadline);
        if (r < 0)
            return r;
    }
}

/* ---- commands -----------------------------------------------------------*/

struct cmd {
    char buf[8192];
    size_t len;
    bool overflow;
};

static void cmd_add(struct cmd *m, const char *s, size_t n)
{
    if (m->overflow || m->len + n > sizeof m->buf) {
        m->overflow = true;
        return;
    }
    memcpy(m->buf + m->len, s, n);
    m->len += n;
}

static void cmd_fmt(struct cmd *m, const char *fmt, ...)
{
    char tmp[64];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof tmp)
        m->overflow = true;
    else
        cmd_add(m, tmp, (size_t)n);
}

static void cmd_start(struct cmd *m, unsigned nargs)
{
    cmd_fmt(m, "*%u\r\n", nargs);
}

static void cmd_arg(struct cmd *m, const char *s, size_t n)
{
    cmd_fmt(m, "$%zu\r\n", n);
    cmd_add(m, s, n);
    cmd_add(m, "\r\n", 2);
}

static void cmd_str(struct cmd *m, const char *s)
{
    cmd_arg(m, s, strlen(s));
}

static void cmd_u64(struct cmd *m, uint64_t v)
{
    char t[24];
    int n = snprintf(t, sizeof t, "%llu", (unsigned long long)v);
    cmd_arg(m, t, (size_t)n);
}

/* ---- connecting ---------------------------------------------------------*/

/* The password, from its file (checked by the config's loader; read at
 * each connection so that a rotated file is picked up). */
static int read_password(char *buf, size_t len)
{
    int fd = open(F.cfg->fleet_password, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return -errno;
    ssize_t n = read(fd, buf, len - 1);
    int e = errno;
    close(fd);
    if (n < 0)
        return -e;
    buf[n] = '\0';
    buf[strcspn(buf, "\r\n")] = '\0';
    return 0;
}

/* Is c's descriptor still our socket? A close_range/closefrom sweep (or a
 * close by the program) may have taken it and the number been reused:
 * then it is not ours to close. */
static bool conn_intact(struct conn *c)
{
    struct stat st;
    return c->fd >= 0 && fstat(c->fd, &st) == 0 && S_ISSOCK(st.st_mode) &&
           st.st_dev == c->dev && st.st_ino == c->ino;
}

static int err_reply(const redisReply *r, char *why, size_t whylen,
                     const char *what)
{
    snprintf(why, whylen, "%s: %.*s", what, (int)r->len, r->str);
    if (strncmp(r->str, "LOADING", 7) == 0 ||
        strncmp(r->str, "READONLY", 8) == 0)
        return -EAGAIN;
    if (strncmp(r->str, "NOAUTH", 6) == 0 ||
        strncmp(r->str, "WRONGPASS", 9) == 0)
        return -EACCES;
    return -EPROTO;
}

static int handshake(struct conn *c, char (*sha)[41], uint64_t deadline,
                     char *why, size_t whylen)
{
    struct cmd m = {.len = 0};
    unsigned n = 0;
    bool auth = F.cfg->fleet_password != NULL;
    if (auth) {
        char pw[512];
        int r = read_password(pw, sizeof pw);
        if (r < 0) {
            snprintf(why, whylen, "cannot read fleet_password %s: %s",
                     F.cfg->fleet_password, strerror(-r));
            return r;
        }
        cmd_start(&m, 2);
        cmd_str(&m, "AUTH");
        cmd_str(&m, pw);
        explicit_bzero(pw, sizeof pw);
        n++;
    }
    if (F.addr.db != 0) {
        cmd_start(&m, 2);
        cmd_str(&m, "SELECT");
        cmd_u64(&m, F.addr.db);
        n++;
    }
    const char *text[2] = {rl_fleet_lua_bucket, rl_fleet_lua_window};
    for (int i = 0; i < 2; i++) {
        cmd_start(&m, 3);
        cmd_str(&m, "SCRIPT");
        cmd_str(&m, "LOAD");
        cmd_str(&m, text[i]);
        n++;
    }
    int r = write_all(c, m.buf, m.len, deadline);
    explicit_bzero(m.buf, m.len);
    if (r < 0) {
        snprintf(why, whylen, "%s", strerror(-r));
        return r;
    }
    int first_err = 0;
    for (unsigned i = 0; i < n; i++) {
        redisReply *rep = NULL;
        r = read_reply(c, &rep, deadline);
        if (r < 0) {
            snprintf(why, whylen, "%s", strerror(-r));
            return r;
        }
        unsigned script = i - (n - 2);
        if (rep->type == REDIS_REPLY_ERROR && first_err == 0)
            first_err = err_reply(rep, why, whylen,
                                  auth && i == 0 ? "AUTH refused" : "error");
        else if (i >= n - 2 && rep->type == REDIS_REPLY_STRING &&
                 rep->len == 40)
            memcpy(sha[script], rep->str, 41);
        freeReplyObject(rep);
    }
    return first_err;
}

static int conn_open(struct conn *c, char (*sha)[41], uint64_t deadline,
                     char *why, size_t whylen)
{
    int fam = F.addr.sa.ss_family;
    int fd = socket(fam, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(why, whylen, "socket: %s", strerror(errno));
        return -errno;
    }
    c->fd = fd;
    c->rd = redisReaderCreate();
    int r = c->rd != NULL ? 0 : -ENOMEM;
    if (r == 0 &&
        connect(fd, (const struct sockaddr *)&F.addr.sa, F.addr.salen) != 0) {
        r = errno == EINPROGRESS ? wait_fd(fd, POLLOUT, deadline) : -errno;
        if (r == 0) {
            int e = 0;
            socklen_t el = sizeof e;
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el);
            r = -e;
        }
    }
    if (r < 0) {
        snprintf(why, whylen, "%s", strerror(-r));
        goto fail;
    }
    if (fam != AF_UNIX) {
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        r = -errno;
        goto fail;
    }
    c->dev = st.st_dev;
    c->ino = st.st_ino;
    r = handshake(c, sha, deadline, why, whylen);
    if (r < 0)
        goto fail;
    return 0;
fail:
    conn_forget(c, true);
    return r;
}

/* ---- one decision in Redis ----------------------------------------------*/

/* What one EVALSHA asks: a call's units, and a lease's. */
struct ask {
    uint64_t want, min, max_wait_ns, debt;
    uint64_t lease; /* units more for the host's pool */
    uint64_t ret;   /* a stale lease's units given back */
};

static void format_eval(struct cmd *m, const char *sha, const char *label,
                        const struct rl_rule *rule, int kind,
                        const struct ask *a)
{
    unsigned n = rule->nlimits[kind];
    char key[640];
    char id[96];
    cmd_start(m, 3 + (n + 1) + 8 + 3 * n);
    cmd_str(m, "EVALSHA");
    cmd_str(m, sha);
    cmd_u64(m, n + 1);
    for (unsigned i = 0; i < n; i++) {
        int k = snprintf(
            key, sizeof key, "rlshim:{%s}:%s:%u:%s", label, rl_kind_name(kind),
            i,
            rule->limits[kind][i].algo == RL_ALGO_TOKEN_BUCKET ? "tb" : "sw");
        if (k < 0 || (size_t)k >= sizeof key)
            m->overflow = true;
        else
            cmd_arg(m, key, (size_t)k);
    }
    int k = snprintf(key, sizeof key, "rlshim:{%s}:hosts", label);
    if (k < 0 || (size_t)k >= sizeof key)
        m->overflow = true;
    else
        cmd_arg(m, key, (size_t)k);
    cmd_u64(m, a->want);
    cmd_u64(m, a->min);
    cmd_u64(m, a->max_wait_ns / 1000);
    cmd_u64(m, a->debt);
    cmd_str(m, F.host);
    snprintf(id, sizeof id, "%s:%d:%llu", F.host, (int)getpid(),
             (unsigned long long)rl_add_relaxed_u64(&F.seq, 1));
    cmd_str(m, id);
    cmd_u64(m, a->lease);
    cmd_u64(m, a->ret);
    for (unsigned i = 0; i < n; i++) {
        const struct rl_limit *l = &rule->limits[kind][i];
        cmd_u64(m, l->count);
        cmd_u64(m, l->period_ns / 1000);
        cmd_u64(m, l->algo == RL_ALGO_TOKEN_BUCKET ? l->burst : l->count);
    }
}

static int64_t int_at(const redisReply *r, size_t i)
{
    return i < r->elements && r->element[i]->type == REDIS_REPLY_INTEGER
               ? r->element[i]->integer
               : -2;
}

/* One EVALSHA on c (re-loading the scripts once after NOSCRIPT); the
 * units leased are in *leased. */
static int eval(struct conn *c, const char *label, const struct rl_rule *rule,
                int kind, const struct ask *a, uint64_t deadline,
                struct rl_verdict *out, uint64_t *leased, char *why,
                size_t whylen)
{
    int script = rule->limits[kind][0].algo == RL_ALGO_TOKEN_BUCKET
                     ? SCRIPT_BUCKET
                     : SCRIPT_WINDOW;
    for (int attempt = 0; attempt < 2; attempt++) {
        struct cmd m = {.len = 0};
        format_eval(&m, F.sha[script], label, rule, kind, a);
        if (m.overflow) {
            snprintf(why, whylen, "command too long");
            return -E2BIG;
        }
        int r = write_all(c, m.buf, m.len, deadline);
        redisReply *rep = NULL;
        if (r == 0)
            r = read_reply(c, &rep, deadline);
        if (r < 0) {
            snprintf(why, whylen, "%s", strerror(-r));
            return r;
        }
        if (rep->type == REDIS_REPLY_ERROR &&
            strncmp(rep->str, "NOSCRIPT", 8) == 0 && attempt == 0) {
            freeReplyObject(rep);
            /* Redis lost the scripts (a restart): load them again. */
            r = handshake(c, F.sha, deadline, why, whylen);
            if (r < 0)
                return r;
            continue;
        }
        if (rep->type != REDIS_REPLY_ARRAY) {
            r = rep->type == REDIS_REPLY_ERROR
                    ? err_reply(rep, why, whylen, "script")
                    : -EPROTO;
            freeReplyObject(rep);
            return r;
        }
        int64_t g = int_at(rep, 0), w = int_at(rep, 1), h = int_at(rep, 2);
        int64_t l = int_at(rep, 3);
        freeReplyObject(rep);
        if (g < 0 || w < -1 || h < 0 || l < 0) {
            snprintf(why, whylen, "unexpected reply");
            return -EPROTO;
        }
        out->granted = (uint64_t)g;
        out->wait_ns = w < 0 ? UINT64_MAX : (uint64_t)w * 1000;
        out->stamp = 0;
        *leased = (uint64_t)l;
        rl_store_relaxed_u64(&F.hosts, h > 0 ? (uint64_t)h : 1);
        return 0;
    }
    return -EPROTO;
}

/* ---- while Redis is away ------------------------------------------------*/

static void warn_away(const char *why)
{
    static const char *const names[] = {"share", "local", "allow", "deny"};
    if (atomic_flag_test_and_set(&F.warned))
        return;
    char line[512];
    int n = snprintf(line, sizeof line,
                     "rlshim: fleet Redis %s: %s; fleet_fallback = %s until it "
                     "is back\n",
                     F.cfg->fleet, why, names[F.cfg->fleet_fallback & 3]);
    if (n > 0)
        (void)!write(2, line,
                     (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
}

static struct rl_verdict fallback(struct budget_state *st,
                                  const struct rl_rule *rule, int kind,
                                  rl_word *const *states, uint64_t now,
                                  uint64_t want, uint64_t min,
                                  uint64_t max_wait_ns, struct rl_verdict *v)
{
    struct rl_verdict r = {0, UINT64_MAX, 0};
    unsigned n = rule->nlimits[kind];
    int fb = F.cfg->fleet_fallback;
    uint64_t gen = rl_load_relaxed_u64(&F.gen) + 1;
    if ((fb == RL_FLEET_SHARE || fb == RL_FLEET_LOCAL) && st != NULL &&
        atomic_exchange_explicit(&st->drained[kind], gen,
                                 memory_order_relaxed) != gen) {
        /* The host budget sat full while Redis decided: empty it, so an
         * outage starts at the fleet's rate, not with a burst per host. */
        struct rl_verdict tmp[RL_MAX_RATES];
        uint64_t cap = UINT64_MAX;
        for (unsigned i = 0; i < n; i++)
            if (rule->limits[kind][i].burst < cap)
                cap = rule->limits[kind][i].burst;
        if (n > 0)
            (void)rl_multi_take(states, rule->limits[kind], n, now, cap, 1, 0,
                                tmp);
    }
    switch (fb) {
    case RL_FLEET_ALLOW:
        r = (struct rl_verdict){want, 0, 0};
        break;
    case RL_FLEET_DENY:
        return r;
    case RL_FLEET_LOCAL:
        r = rl_multi_take(states, rule->limits[kind], n, now, want, min,
                          max_wait_ns, v);
        break;
    case RL_FLEET_SHARE:
    default: {
        /* This host's share of the limits: each unit costs `hosts` units
         * of the host budget (a rate and burst divided by hosts). */
        uint64_t h = rl_load_relaxed_u64(&F.hosts);
        if (h == 0)
            h = 1;
        if (want > UINT64_MAX / h)
            want = UINT64_MAX / h;
        if (min > want)
            min = want;
        r = rl_multi_take(states, rule->limits[kind], n, now, want * h, min * h,
                          max_wait_ns, v);
        uint64_t got = r.granted / h;
        if (r.granted > got * h)
            rl_multi_refund(states, rule->limits[kind], n, now, v,
                            r.granted - got * h);
        r.granted = got;
        if (got == 0 && r.wait_ns == 0)
            r.wait_ns = UINT64_MAX;
        break;
    }
    }
    if (st != NULL)
        rl_add_relaxed_u64(&st->debt[kind], r.granted);
    return r;
}

/* F.mu, waited for at most RL_FLEET_WAIT_NS. timedlock (CLOCK_REALTIME)
 * rather than clocklock: sanitizers know it; a clock step only moves this
 * one bound. */
static bool lock_bounded(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += RL_FLEET_WAIT_NS;
    if (ts.tv_nsec >= 1000000000) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000;
    }
    return pthread_mutex_timedlock(&F.mu, &ts) == 0;
}

struct rl_verdict rl_fleet_take(const struct rl_rule *rule, const char *label,
                                int kind, rl_word *const *states,
                                const struct rl_fleet_pool *pool, uint64_t now,
                                uint64_t want, uint64_t min,
                                uint64_t max_wait_ns, struct rl_verdict *v)
{
    uint64_t cnow = pool != NULL ? rl_fleet_coarse_ns() : 0;
    if (pool != NULL) {
        /* What the host leased comes first: Redis counted it already
         * (and while Redis is away, it is spent before the fallback). */
        uint64_t g = rl_fleet_pool_get(pool, kind, want, min, cnow);
        if (g > 0) {
            struct rl_verdict out = {g, 0, 0};
            for (unsigned i = 0; i < rule->nlimits[kind]; i++)
                v[i] = out;
            return out;
        }
    }
    uint64_t deadline = rl_clock_now_ns() + RL_FLEET_WAIT_NS;
    bool down = atomic_load_explicit(&F.down, memory_order_relaxed);
    struct budget_state *st = state_of(label);
    uint64_t closed =
        st != NULL ? rl_load_relaxed_u64(&st->closed_until[kind]) : 0;
    if (!down && now < closed && closed - now > max_wait_ns)
        return (struct rl_verdict){0, closed - now, 0};
    if (down) {
        /* One try a second, by whichever thread claims it. */
        uint64_t next = rl_load_relaxed_u64(&F.next_try);
        if (now < next || !atomic_compare_exchange_strong_explicit(
                              &F.next_try, &next, now + RL_FLEET_RETRY_NS,
                              memory_order_relaxed, memory_order_relaxed))
            return fallback(st, rule, kind, states, now, want, min, max_wait_ns,
                            v);
    }
    if (!lock_bounded()) {
        /* Other threads of ours kept Redis busy for 50 ms: Redis answers,
         * so this is no outage; never admit without it. */
        if (!down)
            return (struct rl_verdict){0, RL_FLEET_WAIT_NS, 0};
        return fallback(st, rule, kind, states, now, want, min, max_wait_ns, v);
    }
    char why[256] = "";
    struct conn *c = &F.conn;
    int r = 0;
    if (c->fd >= 0 && !conn_intact(c))
        conn_forget(c, false);
    if (c->fd < 0)
        r = conn_open(c, F.sha, deadline, why, sizeof why);
    /* What was admitted while away is charged with this call. */
    struct ask a = {want, min, max_wait_ns, 0, 0, 0};
    if (st != NULL)
        a.debt =
            atomic_exchange_explicit(&st->debt[kind], 0, memory_order_relaxed);
    bool claimed = false;
    if (r == 0 && pool != NULL) {
        /* A stale lease goes back, and a new one comes, with this call. */
        a.ret = rl_fleet_pool_claim_stale(pool, kind, cnow);
        a.lease = rl_fleet_pool_lease_size(pool, rule, kind, want, cnow);
        claimed = a.lease > 0;
    }
    struct rl_verdict out = {0, UINT64_MAX, 0};
    uint64_t leased = 0;
    if (r == 0)
        r = eval(c, label != NULL ? label : F.label, rule, kind, &a, deadline,
                 &out, &leased, why, sizeof why);
    if (r < 0) {
        /* A stale lease's units are dropped, not kept: Redis may have run
         * the script that took them back (a reply lost to the timeout),
         * and spending them then would over-admit. */
        if (claimed)
            rl_fleet_pool_filled(pool, kind, 0, 0, a.ret, true, cnow);
        if (st != NULL)
            rl_add_relaxed_u64(&st->debt[kind], a.debt);
        conn_forget(c, true);
        rl_store_relaxed_u64(&F.next_try, now + RL_FLEET_RETRY_NS);
        atomic_store_explicit(&F.down, true, memory_order_relaxed);
        pthread_mutex_unlock(&F.mu);
        warn_away(why);
        return fallback(st, rule, kind, states, now, want, min, max_wait_ns, v);
    }
    atomic_store_explicit(&F.down, false, memory_order_relaxed);
    /* A new generation: the next outage drains every host budget again. */
    rl_add_relaxed_u64(&F.gen, 1);
    pthread_mutex_unlock(&F.mu);
    if (pool != NULL)
        rl_fleet_pool_filled(pool, kind, leased, out.granted, a.ret, claimed,
                             cnow);
    rl_add_relaxed_u64(&F.round_trips, 1);
    if (out.granted == 0 && out.wait_ns != UINT64_MAX && min == 1)
        if (st != NULL)
            rl_store_relaxed_u64(&st->closed_until[kind], now + out.wait_ns);
    for (unsigned i = 0; i < rule->nlimits[kind]; i++)
        v[i] = out;
    return out;
}

void rl_fleet_finish(const struct rl_rule *rule,
                     const struct rl_fleet_pool *pool)
{
    if (!F.on || pool == NULL ||
        atomic_load_explicit(&F.down, memory_order_relaxed))
        return;
    /* Only on a connection this process has: a process that never went
     * to Redis leaves the pool to the host's other processes (it goes
     * back when stale), rather than pay a connection at exit. */
    if (!lock_bounded())
        return;
    struct conn *c = &F.conn;
    if (c->fd >= 0 && !conn_intact(c))
        conn_forget(c, false);
    uint64_t deadline = rl_clock_now_ns() + RL_FLEET_WAIT_NS;
    for (int k = RL_KIND_SEND; k <= RL_KIND_SEND_BYTES && c->fd >= 0; k++) {
        if (rule->nlimits[k] == 0)
            continue;
        struct ask a = {0, 0, 0, 0, 0, rl_fleet_pool_drain(pool, k)};
        if (a.ret == 0)
            continue;
        a.debt =
            atomic_exchange_explicit(&F.own.debt[k], 0, memory_order_relaxed);
        struct rl_verdict out;
        uint64_t leased = 0;
        char why[256];
        if (eval(c, F.label, rule, k, &a, deadline, &out, &leased, why,
                 sizeof why) < 0) {
            conn_forget(c, true);
            break;
        }
        rl_add_relaxed_u64(&F.round_trips, 1);
    }
    pthread_mutex_unlock(&F.mu);
}

uint64_t rl_fleet_round_trips(void)
{
    return rl_load_relaxed_u64(&F.round_trips);
}

void rl_fleet_atfork_child(void)
{
    pthread_mutex_init(&F.mu, NULL);
    /* The parent's connection is the parent's: close our copy of it
     * (nothing is sent: the parent still holds the socket). */
    conn_forget(&F.conn, true);
    for (int k = 0; k < RL_KIND_COUNT; k++) {
        rl_store_relaxed_u64(&F.own.debt[k], 0);
        for (unsigned i = 0; i < RL_FLEET_BUDGETS; i++)
            rl_store_relaxed_u64(&F.others[i].debt[k], 0);
    }
}

int rl_fleet_ping(const struct rl_config *cfg, uint64_t *rtt_ns, char *why,
                  size_t whylen)
{
    const struct rl_config *saved = F.cfg;
    struct rl_fleet_addr saved_addr = F.addr;
    const char *bad = rl_fleet_addr_parse(cfg->fleet, &F.addr);
    if (bad != NULL) {
        snprintf(why, whylen, "%s", bad);
        F.addr = saved_addr;
        return -EINVAL;
    }
    F.cfg = cfg;
    struct conn c = {.fd = -1};
    char sha[2][41] = {"", ""};
    uint64_t t0 = rl_clock_now_ns();
    int r =
        conn_open(&c, sha, t0 + 10 * (uint64_t)RL_FLEET_WAIT_NS, why, whylen);
    if (r == 0) {
        uint64_t t1 = rl_clock_now_ns();
        static const char ping[] = "*1\r\n$4\r\nPING\r\n";
        redisReply *rep = NULL;
        r = write_all(&c, ping, sizeof ping - 1,
                      t1 + 10 * (uint64_t)RL_FLEET_WAIT_NS);
        if (r == 0)
            r = read_reply(&c, &rep, t1 + 10 * (uint64_t)RL_FLEET_WAIT_NS);
        *rtt_ns = rl_clock_now_ns() - t1;
        if (r < 0)
            snprintf(why, whylen, "%s", strerror(-r));
        else if (rep->type != REDIS_REPLY_STATUS)
            r = err_reply(rep, why, whylen, "PING");
        if (rep != NULL)
            freeReplyObject(rep);
        conn_forget(&c, true);
    }
    F.cfg = saved;
    F.addr = saved_addr;
    return r;
}
