/* config.c — the ini file, through the system inih, into an immutable table.
 *
 * inih does the key = value splitting; we feed it through our own reader so
 * that we know the line of everything it hands us (Debian's inih 55 is built
 * without INI_HANDLER_LINENO) and so that no line is ever truncated behind
 * our back: a line longer than RL_CONFIG_LINE_MAX is reported and replaced
 * by an empty one before inih sees it. The reader also sees section headers
 * (inih does not call the handler for them), which is how duplicate and
 * empty unknown sections are caught, and lines inih would reject, which is
 * how every syntax error is reported rather than only the first.
 *
 * Values are checked as they come; what depends on several keys (the
 * algorithm and its rates, per-user overrides of [rlshim]) is settled once
 * the whole file has been read. Nothing is handed out until every error of
 * the file has been collected. */
#include "policy/config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ini.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/hash.h"
#include "util/parse.h"

#ifndef RL_SYSCONFDIR
#define RL_SYSCONFDIR "/etc"
#endif

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

/* ---- keys ---------------------------------------------------------------*/

enum key {
    K_KEY,
    K_ON_DENY,
    K_MAX_DELAY,
    K_ERRNO,
    K_STATE,
    K_UNKNOWN,
    K_LOG,
    K_DECISION_LOG,
    K_DRY_RUN,
    K_REPORT,
    K_MAX_USERS,
    K_ALGORITHM,
    K_CONNECT,
    K_CONNECT_BURST,
    K_SEND,
    K_SEND_BURST,
    K_SEND_BYTES,
    K_SEND_BYTES_BURST,
    K_TO,
    NKEYS
};

#define IN_GLOBAL 1u
#define IN_RULE 2u

static const struct {
    const char *name;
    unsigned where;
} keys[NKEYS] = {
    [K_KEY] = {"key", IN_GLOBAL},
    [K_ON_DENY] = {"on_deny", IN_GLOBAL | IN_RULE},
    [K_MAX_DELAY] = {"max_delay", IN_GLOBAL | IN_RULE},
    [K_ERRNO] = {"errno", IN_GLOBAL | IN_RULE},
    [K_STATE] = {"state", IN_GLOBAL},
    [K_UNKNOWN] = {"unknown", IN_GLOBAL},
    [K_LOG] = {"log", IN_GLOBAL},
    [K_DECISION_LOG] = {"decision_log", IN_GLOBAL},
    [K_DRY_RUN] = {"dry_run", IN_GLOBAL | IN_RULE},
    [K_REPORT] = {"report", IN_GLOBAL},
    [K_MAX_USERS] = {"max_users", IN_GLOBAL},
    [K_ALGORITHM] = {"algorithm", IN_RULE},
    [K_CONNECT] = {"connect", IN_RULE},
    [K_CONNECT_BURST] = {"connect_burst", IN_RULE},
    [K_SEND] = {"send", IN_RULE},
    [K_SEND_BURST] = {"send_burst", IN_RULE},
    [K_SEND_BYTES] = {"send_bytes", IN_RULE},
    [K_SEND_BYTES_BURST] = {"send_bytes_burst", IN_RULE},
    [K_TO] = {"to", IN_RULE},
};

static const struct {
    const char *name;
    int value;
} errnos[] = {
    {"EAGAIN", EAGAIN},
    {"ECONNREFUSED", ECONNREFUSED},
    {"ETIMEDOUT", ETIMEDOUT},
    {"ENETUNREACH", ENETUNREACH},
};

static const char *const kind_names[RL_KIND_COUNT] = {"connect", "send",
                                                      "send_bytes"};

/* ---- parse state --------------------------------------------------------*/

enum sect_type { S_GLOBAL, S_DEFAULT, S_USER };

/* Rates and bursts as written, kept until the algorithm is known. */
struct raw_kind {
    struct rl_rate rates[RL_MAX_RATES];
    unsigned nrates;
    unsigned rate_line;
    uint64_t bursts[RL_MAX_RATES];
    unsigned nbursts;
    unsigned burst_line;
};

struct sect {
    int type;
    size_t rule; /* index in cfg->rules (S_DEFAULT, S_USER) */
    unsigned line;
    unsigned key_line[NKEYS]; /* 0 = not seen yet */
    bool has_algo;
    struct raw_kind raw[RL_KIND_COUNT];
};

#define CUR_NONE (-1) /* before the first section */
#define CUR_SKIP (-2) /* in a section already reported as wrong */

struct pstate {
    const char *name; /* the file, as messages call it */
    struct rl_diag *diag;
    bool nomem;
    const char *text;
    size_t pos;
    unsigned lineno;
    struct sect *sects;
    size_t nsects;
    int cur;
    struct rl_config *cfg;
};

/* ---- diagnostics --------------------------------------------------------*/

void rl_diag_free(struct rl_diag *d)
{
    if (d == NULL)
        return;
    for (size_t i = 0; i < d->n; i++)
        free(d->msgs[i]);
    free(d->msgs);
    d->msgs = NULL;
    d->n = 0;
}

static bool diag_vadd(struct rl_diag *d, const char *fmt, va_list ap)
{
    char buf[512];
    char **m;
    char *s;

    vsnprintf(buf, sizeof buf, fmt, ap);
    s = strdup(buf);
    if (s == NULL)
        return false;
    m = realloc(d->msgs, (d->n + 1) * sizeof *m);
    if (m == NULL) {
        free(s);
        return false;
    }
    d->msgs = m;
    d->msgs[d->n++] = s;
    return true;
}

static bool diag_add(struct rl_diag *d, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static bool diag_add(struct rl_diag *d, const char *fmt, ...)
{
    va_list ap;
    bool ok;

    va_start(ap, fmt);
    ok = diag_vadd(d, fmt, ap);
    va_end(ap);
    return ok;
}

/* "NAME:LINE: " then the message. */
static void err(struct pstate *ps, unsigned line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void err(struct pstate *ps, unsigned line, const char *fmt, ...)
{
    char msg[400];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (!diag_add(ps->diag, "%s:%u: %s", ps->name, line, msg))
        ps->nomem = true;
}

size_t rl_config_error_line(const struct rl_diag *d, bool strict, char *buf,
                            size_t len)
{
    const char *first = d->n ? d->msgs[0] : "config error";
    const char *tail = strict ? "exiting with status 78 (RLSHIM_STRICT=1)"
                              : "nothing is throttled";
    int n;

    if (len == 0)
        return 0;
    if (d->n > 1)
        n = snprintf(buf, len,
                     "rlshim: %s (and %zu more: run 'rlshim check'); %s\n",
                     first, d->n - 1, tail);
    else
        n = snprintf(buf, len, "rlshim: %s; %s\n", first, tail);
    if (n < 0) {
        buf[0] = '\0';
        return 0;
    }
    if ((size_t)n >= len) {
        /* Keep the line a line: end it with a newline even when cut. */
        if (len >= 2)
            buf[len - 2] = '\n';
        return len - 1;
    }
    return (size_t)n;
}

/* ---- did you mean -------------------------------------------------------*/

/* Optimal string alignment distance (an adjacent swap costs 1), for short
 * words only: anything longer than 32 bytes is simply "far". */
static unsigned distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    unsigned d[33][33];

    if (la > 32 || lb > 32)
        return 99;
    for (size_t i = 0; i <= la; i++)
        d[i][0] = (unsigned)i;
    for (size_t j = 0; j <= lb; j++)
        d[0][j] = (unsigned)j;
    for (size_t i = 1; i <= la; i++) {
        for (size_t j = 1; j <= lb; j++) {
            unsigned cost = a[i - 1] != b[j - 1];
            unsigned v = d[i - 1][j - 1] + cost;
            if (d[i - 1][j] + 1 < v)
                v = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < v)
                v = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] &&
                a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < v)
                v = d[i - 2][j - 2] + 1;
            d[i][j] = v;
        }
    }
    return d[la][lb];
}

/* The closest key allowed in a section of this kind, if close enough. */
static const char *suggest_key(const char *name, unsigned where)
{
    const char *best = NULL;
    unsigned bestd = 3; /* at most 2 edits away */
    size_t len = strlen(name);

    for (int k = 0; k < NKEYS; k++) {
        if (!(keys[k].where & where))
            continue;
        unsigned dd = distance(name, keys[k].name);
        if (dd < bestd && dd < len) {
            bestd = dd;
            best = keys[k].name;
        }
    }
    return best;
}

/* ---- helpers ------------------------------------------------------------*/

static const char *sect_name(struct pstate *ps)
{
    const struct sect *s = &ps->sects[ps->cur];
    if (s->type == S_GLOBAL)
        return "rlshim";
    return ps->cfg->rules[s->rule].section;
}

static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' ||
           c == '\f';
}

/* inih's inline comments: ';' at the start or after a blank. */
static const char *comment_or_end(const char *p, const char *stop)
{
    bool was_space = true;
    for (; *p; p++) {
        if (stop != NULL && strchr(stop, *p))
            return p;
        if (*p == ';' && was_space)
            return p;
        was_space = is_space(*p);
    }
    return p;
}

/* ---- sections -----------------------------------------------------------*/

static bool good_user(const char *u, size_t n)
{
    if (n == 0 || n > RL_CONFIG_USER_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)u[i];
        if (c <= ' ' || c == 0x7f || c == '|' || c == '[' || c == ']' ||
            c == ';')
            return false;
    }
    return true;
}

static int add_rule(struct pstate *ps, const char *section, bool is_default,
                    unsigned line)
{
    struct rl_config *cfg = ps->cfg;
    struct rl_rule *r = realloc(cfg->rules, (cfg->nrules + 1) * sizeof *r);

    if (r == NULL)
        return -ENOMEM;
    cfg->rules = r;
    r = &cfg->rules[cfg->nrules];
    memset(r, 0, sizeof *r);
    r->section = strdup(section);
    if (r->section == NULL)
        return -ENOMEM;
    if (!is_default) {
        r->user = strdup(section + 5);
        if (r->user == NULL) {
            free(r->section);
            return -ENOMEM;
        }
    }
    r->is_default = is_default;
    r->algo = RL_ALGO_TOKEN_BUCKET;
    r->line = line;
    cfg->nrules++;
    return 0;
}

/* A "[...]" line: name is what stands between the brackets. */
static void start_section(struct pstate *ps, const char *name, size_t n)
{
    char sec[RL_CONFIG_LINE_MAX + 1];
    int type;
    struct sect *s;

    ps->cur = CUR_SKIP;
    memcpy(sec, name, n);
    sec[n] = '\0';

    if (strcmp(sec, "rlshim") == 0) {
        type = S_GLOBAL;
    } else if (strcmp(sec, "default") == 0) {
        type = S_DEFAULT;
    } else if (strncmp(sec, "user:", 5) == 0) {
        if (!good_user(sec + 5, n - 5)) {
            if (n == 5)
                err(ps, ps->lineno, "empty user name in [%s]", sec);
            else if (n - 5 > RL_CONFIG_USER_MAX)
                err(ps, ps->lineno,
                    "user name in [%.20s...] is longer than %d bytes", sec,
                    RL_CONFIG_USER_MAX);
            else
                err(ps, ps->lineno,
                    "bad user name in [%s] (no blanks, ';', '|' or "
                    "brackets)",
                    sec);
            return;
        }
        type = S_USER;
    } else {
        const char *colon = strchr(sec, ':');
        if (colon != NULL && colon != sec) {
            char head[16];
            size_t hl = (size_t)(colon - sec);
            if (hl < sizeof head) {
                memcpy(head, sec, hl);
                head[hl] = '\0';
                if (distance(head, "user") <= 2 &&
                    good_user(colon + 1, strlen(colon + 1))) {
                    err(ps, ps->lineno,
                        "unknown section [%s] (did you mean [user:%s]?)", sec,
                        colon + 1);
                    return;
                }
            }
        } else if (colon == NULL) {
            const char *best = NULL;
            if (distance(sec, "rlshim") <= 2)
                best = "rlshim";
            else if (distance(sec, "default") <= 2)
                best = "default";
            else if (strcmp(sec, "user") == 0)
                best = "user:NAME";
            if (best != NULL) {
                err(ps, ps->lineno, "unknown section [%s] (did you mean [%s]?)",
                    sec, best);
                return;
            }
        }
        err(ps, ps->lineno,
            "unknown section [%s] (use [rlshim], [default] or [user:NAME])",
            sec);
        return;
    }

    for (size_t i = 0; i < ps->nsects; i++) {
        const struct sect *o = &ps->sects[i];
        bool same = o->type == type &&
                    (type != S_USER ||
                     strcmp(ps->cfg->rules[o->rule].section, sec) == 0);
        if (same) {
            err(ps, ps->lineno, "duplicate section [%s] (first at line %u)",
                sec, o->line);
            return;
        }
    }

    s = realloc(ps->sects, (ps->nsects + 1) * sizeof *s);
    if (s == NULL) {
        ps->nomem = true;
        return;
    }
    ps->sects = s;
    s = &ps->sects[ps->nsects];
    memset(s, 0, sizeof *s);
    s->type = type;
    s->line = ps->lineno;
    if (type != S_GLOBAL) {
        if (add_rule(ps, sec, type == S_DEFAULT, ps->lineno) < 0) {
            ps->nomem = true;
            return;
        }
        s->rule = ps->cfg->nrules - 1;
    }
    ps->cur = (int)ps->nsects++;
}

/* Look at one line as inih will, to catch what inih would not tell us. */
static void scan_line(struct pstate *ps, const char *line)
{
    const char *p = line;
    const char *end;

    if (ps->lineno == 1 && (unsigned char)p[0] == 0xef &&
        (unsigned char)p[1] == 0xbb && (unsigned char)p[2] == 0xbf)
        p += 3; /* inih skips a UTF-8 BOM too */
    while (is_space(*p))
        p++;
    if (*p == '\0' || *p == ';' || *p == '#')
        return;
    if (*p == '[') {
        end = comment_or_end(p + 1, "]");
        if (*end != ']') {
            err(ps, ps->lineno, "missing ']' in section header");
            ps->cur = CUR_SKIP;
            return;
        }
        const char *rest = end + 1;
        while (is_space(*rest))
            rest++;
        if (*rest != '\0' && *rest != ';' && *rest != '#') {
            err(ps, ps->lineno, "unexpected text after ']'");
            ps->cur = CUR_SKIP;
            return;
        }
        start_section(ps, p + 1, (size_t)(end - p - 1));
        return;
    }
    end = comment_or_end(p, "=:");
    if (*end != '=' && *end != ':')
        err(ps, ps->lineno, "expected 'key = value' or '[section]'");
    else if (end == p)
        err(ps, ps->lineno, "missing key name before '%c'", *end);
}

/* inih's fgets-like reader over our text: one line per call, counted. */
static char *reader(char *str, int num, void *stream)
{
    struct pstate *ps = stream;
    const char *line = ps->text + ps->pos;
    const char *nl;
    size_t len, max;

    if (*line == '\0')
        return NULL;
    nl = strchr(line, '\n');
    len = nl ? (size_t)(nl - line) : strlen(line);
    ps->pos += len + (nl != NULL);
    ps->lineno++;
    if (len > 0 && line[len - 1] == '\r')
        len--;
    max = num > 2 ? (size_t)num - 2 : 0; /* room for '\n' and NUL */
    if (max > RL_CONFIG_LINE_MAX)
        max = RL_CONFIG_LINE_MAX;
    if (len > max) {
        const char *p = line;
        err(ps, ps->lineno, "line longer than %zu bytes", max);
        len = 0; /* inih sees an empty line: nothing half-read */
        while (is_space(*p))
            p++;
        if (*p == '[')
            ps->cur = CUR_SKIP; /* its keys belong to no known section */
    }
    memcpy(str, line, len);
    str[len] = '\n';
    str[len + 1] = '\0';
    if (len > 0)
        scan_line(ps, str);
    return str;
}

/* ---- values -------------------------------------------------------------*/

static const char *why_number(int rc)
{
    switch (rc) {
    case -ERANGE:
        return "too large";
    case -EDOM:
        return "bad unit";
    case -E2BIG:
        return "too many values";
    default:
        return "bad number";
    }
}

/* One word out of a list: index in words[] or -1 (and an error). */
static int word(struct pstate *ps, const char *key, const char *v,
                const char *const *words, int n)
{
    char list[128] = "";
    for (int i = 0; i < n; i++) {
        if (strcmp(v, words[i]) == 0)
            return i;
    }
    for (int i = 0; i < n; i++) {
        strncat(list, words[i], sizeof list - strlen(list) - 1);
        strncat(list,
                i + 2 < n   ? ", "
                : i + 1 < n ? " or "
                            : "",
                sizeof list - strlen(list) - 1);
    }
    err(ps, ps->lineno, "bad value '%s' for '%s' in [%s] (use %s)", v, key,
        sect_name(ps), list);
    return -1;
}

static int get_errno(struct pstate *ps, const char *key, const char *v)
{
    const char *names[NELEM(errnos)];
    for (size_t i = 0; i < NELEM(errnos); i++)
        names[i] = errnos[i].name;
    int i = word(ps, key, v, names, (int)NELEM(errnos));
    return i < 0 ? -1 : errnos[i].value;
}

static bool get_bool(struct pstate *ps, const char *key, const char *v,
                     bool *out)
{
    if (rl_parse_bool(v, out) == 0)
        return true;
    err(ps, ps->lineno, "bad value '%s' for '%s' in [%s] (use yes or no)", v,
        key, sect_name(ps));
    return false;
}

static bool get_duration(struct pstate *ps, const char *key, const char *v,
                         uint64_t *ns)
{
    int rc = rl_parse_duration(v, ns);
    if (rc == 0)
        return true;
    if (rc == -EDOM)
        err(ps, ps->lineno,
            "bad unit in '%s' for '%s' in [%s] (use ns, us, ms, s, min or h)",
            v, key, sect_name(ps));
    else if (v[0] == '-')
        err(ps, ps->lineno, "negative value '%s' for '%s' in [%s]", v, key,
            sect_name(ps));
    else
        err(ps, ps->lineno, "%s '%s' for '%s' in [%s]", why_number(rc), v, key,
            sect_name(ps));
    return false;
}

/* Does a comma-separated list have an empty element ("a,,b", "a,")? */
static bool empty_element(const char *v)
{
    bool empty = true; /* the element being read, so far */

    for (; *v; v++) {
        if (*v == ',') {
            if (empty)
                return true;
            empty = true;
        } else if (!is_space(*v)) {
            empty = false;
        }
    }
    return empty;
}

static void set_rates(struct pstate *ps, int key, int kind, const char *v)
{
    struct raw_kind *rk = &ps->sects[ps->cur].raw[kind];
    bool sizes = kind == RL_KIND_SEND_BYTES;
    unsigned bad;
    int rc = rl_parse_rate_list(v, sizes, rk->rates, RL_MAX_RATES, &rk->nrates,
                                &bad);
    const char *k = keys[key].name;

    if (rc == -E2BIG) {
        err(ps, ps->lineno, "more than %d rates for '%s' in [%s]", RL_MAX_RATES,
            k, sect_name(ps));
    } else if (rc == -EINVAL && empty_element(v)) {
        err(ps, ps->lineno, "empty rate in the list '%s' for '%s' in [%s]", v,
            k, sect_name(ps));
    } else if (rc == -EDOM) {
        err(ps, ps->lineno,
            "bad unit in '%s' for '%s' in [%s] (use %sN/ms, N/s, N/min or "
            "N/h)",
            v, k, sect_name(ps),
            sizes ? "a size in B, KB, MB, GB, KiB, MiB or GiB per period: "
                  : "");
    } else if (rc < 0 && strchr(v, '-') != NULL) {
        err(ps, ps->lineno, "negative rate '%s' for '%s' in [%s]", v, k,
            sect_name(ps));
    } else if (rc < 0) {
        err(ps, ps->lineno, "%s in '%s' for '%s' in [%s]", why_number(rc), v, k,
            sect_name(ps));
    } else {
        for (unsigned i = 0; i < rk->nrates; i++) {
            if (rk->rates[i].count == 0) {
                err(ps, ps->lineno, "zero rate in '%s' for '%s' in [%s]", v, k,
                    sect_name(ps));
                rk->nrates = 0;
                return;
            }
        }
        rk->rate_line = ps->lineno;
        return;
    }
    rk->nrates = 0;
}

static void set_bursts(struct pstate *ps, int key, int kind, const char *v)
{
    struct raw_kind *rk = &ps->sects[ps->cur].raw[kind];
    const char *k = keys[key].name;
    const char *p = v;
    unsigned n = 0;

    for (;;) {
        const char *end = strchr(p, ',');
        const char *a = p, *b = end ? end : p + strlen(p);
        char one[RL_CONFIG_LINE_MAX + 1];
        int rc;

        while (a < b && is_space(*a))
            a++;
        while (b > a && is_space(b[-1]))
            b--;
        if (n == RL_MAX_RATES) {
            err(ps, ps->lineno, "more than %d bursts for '%s' in [%s]",
                RL_MAX_RATES, k, sect_name(ps));
            return;
        }
        memcpy(one, a, (size_t)(b - a));
        one[b - a] = '\0';
        if (kind == RL_KIND_SEND_BYTES)
            rc = rl_parse_size(one, &rk->bursts[n]);
        else
            rc = rl_parse_u64(one, &rk->bursts[n]);
        if (rc == 0 && rk->bursts[n] == 0) {
            err(ps, ps->lineno, "zero burst in '%s' for '%s' in [%s]", v, k,
                sect_name(ps));
            return;
        }
        if (rc < 0) {
            if (one[0] == '-')
                err(ps, ps->lineno, "negative burst '%s' for '%s' in [%s]", v,
                    k, sect_name(ps));
            else
                err(ps, ps->lineno, "%s in '%s' for '%s' in [%s]",
                    why_number(rc), v, k, sect_name(ps));
            return;
        }
        n++;
        if (end == NULL)
            break;
        p = end + 1;
    }
    rk->nbursts = n;
    rk->burst_line = ps->lineno;
}

/* ---- destinations -------------------------------------------------------*/

static void mask_prefix(uint8_t *addr, unsigned bytes, unsigned prefix)
{
    for (unsigned i = 0; i < bytes; i++) {
        unsigned bit = i * 8;
        if (prefix >= bit + 8)
            continue;
        addr[i] &= prefix <= bit ? 0 : (uint8_t)(0xff << (8 - (prefix - bit)));
    }
}

/* "A.B.C.D[/P][:PORT]", "[V6][/P][:PORT]", "[V6/P][:PORT]", "V6[/P]",
 * "*:PORT". Returns NULL or why the entry is wrong. */
static const char *parse_dest(const char *s, struct rl_dest *d)
{
    char addr[64] = "";
    const char *p = s, *port = NULL, *pfx = NULL, *pfx_end = NULL;
    uint64_t v;
    int family;
    size_t n;

    memset(d, 0, sizeof *d);
    if (*s == '[') {
        const char *close = strchr(s, ']');
        if (close == NULL)
            return "missing ']'";
        n = (size_t)(close - s - 1);
        if (n == 0 || n >= sizeof addr)
            return "bad IPv6 address";
        memcpy(addr, s + 1, n);
        addr[n] = '\0';
        char *slash = strchr(addr, '/');
        if (slash != NULL) {
            *slash = '\0';
            pfx = s + 1 + (slash - addr) + 1;
            pfx_end = close;
        }
        p = close + 1;
        if (*p == '/') {
            if (pfx != NULL)
                return "two prefix lengths";
            pfx = p + 1;
            p += strcspn(p, ":");
            pfx_end = p;
        }
        if (*p == ':')
            port = p + 1;
        else if (*p != '\0')
            return "unexpected text after ']'";
        family = AF_INET6;
    } else if (*s == '*') {
        if (s[1] != ':')
            return "'*' needs a port ('*:PORT')";
        port = s + 2;
        family = AF_UNSPEC;
    } else if (strchr(s, '.') != NULL && strchr(s, ':') == strrchr(s, ':')) {
        /* IPv4: at most one ':' (the port). */
        n = strcspn(s, "/:");
        if (n >= sizeof addr)
            return "bad IPv4 address";
        memcpy(addr, s, n);
        addr[n] = '\0';
        p = s + n;
        if (*p == '/') {
            pfx = p + 1;
            p += strcspn(p, ":");
            pfx_end = p;
        }
        if (*p == ':')
            port = p + 1;
        family = AF_INET;
    } else {
        /* A bare IPv6 address: no port possible, "::1/128". */
        n = strcspn(s, "/");
        if (n >= sizeof addr)
            return "bad IPv6 address";
        memcpy(addr, s, n);
        addr[n] = '\0';
        if (s[n] == '/') {
            pfx = s + n + 1;
            pfx_end = pfx + strlen(pfx);
        }
        family = AF_INET6;
    }

    if (family == AF_INET) {
        if (inet_pton(AF_INET, addr, d->addr) != 1)
            return "bad IPv4 address";
        d->prefix = 32;
    } else if (family == AF_INET6) {
        if (inet_pton(AF_INET6, addr, d->addr) != 1)
            return "bad IPv6 address";
        d->prefix = 128;
    }
    d->family = (uint8_t)family;

    if (pfx != NULL) {
        size_t pl = (size_t)(pfx_end - pfx);
        if (pl == 0 || pl > 3 || rl_parse_u64_n(pfx, (unsigned)pl, &v) < 0 ||
            v > (family == AF_INET ? 32u : 128u))
            return family == AF_INET ? "bad prefix length (0 to 32)"
                                     : "bad prefix length (0 to 128)";
        d->prefix = (uint8_t)v;
    }
    if (port != NULL) {
        size_t pl = strlen(port);
        if (pl == 0 || pl > 5 || rl_parse_u64_n(port, (unsigned)pl, &v) < 0 ||
            v == 0 || v > 65535)
            return "bad port (1 to 65535)";
        d->port = (uint16_t)v;
    }
    if (family == AF_INET6 && d->prefix >= 96 &&
        IN6_IS_ADDR_V4MAPPED((const struct in6_addr *)(const void *)d->addr)) {
        /* ::ffff:a.b.c.d is matched as IPv4 (SPEC §1). */
        memmove(d->addr, d->addr + 12, 4);
        memset(d->addr + 4, 0, 12);
        d->family = AF_INET;
        d->prefix = (uint8_t)(d->prefix - 96);
    }
    if (d->family == AF_INET)
        mask_prefix(d->addr, 4, d->prefix);
    else if (d->family == AF_INET6)
        mask_prefix(d->addr, 16, d->prefix);
    return NULL;
}

static void set_to(struct pstate *ps, const char *v)
{
    struct rl_rule *r = &ps->cfg->rules[ps->sects[ps->cur].rule];
    const char *p = v;
    struct rl_dest *list = NULL;
    size_t n = 0;

    for (;;) {
        const char *end = strchr(p, ',');
        const char *a = p, *b = end ? end : p + strlen(p);
        char one[RL_CONFIG_LINE_MAX + 1];
        struct rl_dest d, *nl;
        const char *why;

        while (a < b && is_space(*a))
            a++;
        while (b > a && is_space(b[-1]))
            b--;
        memcpy(one, a, (size_t)(b - a));
        one[b - a] = '\0';
        why = one[0] ? parse_dest(one, &d) : "empty entry";
        if (why != NULL) {
            err(ps, ps->lineno, "bad destination '%s' in 'to' of [%s]: %s", one,
                sect_name(ps), why);
            free(list);
            return;
        }
        nl = realloc(list, (n + 1) * sizeof *nl);
        if (nl == NULL) {
            ps->nomem = true;
            free(list);
            return;
        }
        list = nl;
        list[n++] = d;
        if (end == NULL)
            break;
        p = end + 1;
    }
    r->to = list;
    r->nto = n;
}

/* ---- the inih handler ---------------------------------------------------*/

static int handler(void *user, const char *section, const char *name,
                   const char *v)
{
    static const char *const on_deny_words[] = {"fail", "delay"};
    static const char *const key_words[] = {"env", "exe"};
    static const char *const state_words[] = {"shared", "process"};
    static const char *const unknown_words[] = {"allow", "deny"};
    static const char *const algo_words[] = {"token_bucket", "sliding_window"};
    struct pstate *ps = user;
    struct rl_config *cfg = ps->cfg;
    struct sect *s;
    struct rl_rule *r = NULL;
    unsigned where;
    int key = -1, i;
    uint64_t u;
    bool b;

    (void)section; /* ours (ps->cur) is exact; inih's is cut at 50 bytes */
    if (ps->cur == CUR_SKIP || *name == '\0')
        return 1; /* already reported */
    if (ps->cur == CUR_NONE) {
        err(ps, ps->lineno, "key '%s' before any [section]", name);
        return 1;
    }
    s = &ps->sects[ps->cur];
    where = s->type == S_GLOBAL ? IN_GLOBAL : IN_RULE;
    if (s->type != S_GLOBAL)
        r = &cfg->rules[s->rule];

    for (int k = 0; k < NKEYS; k++)
        if (strcmp(name, keys[k].name) == 0)
            key = k;
    if (key < 0) {
        const char *best = suggest_key(name, where);
        if (best != NULL)
            err(ps, ps->lineno, "unknown key '%s' in [%s] (did you mean '%s'?)",
                name, sect_name(ps), best);
        else
            err(ps, ps->lineno, "unknown key '%s' in [%s]", name,
                sect_name(ps));
        return 1;
    }
    if (!(keys[key].where & where)) {
        err(ps, ps->lineno, "key '%s' does not belong in [%s] (%s)", name,
            sect_name(ps),
            where == IN_GLOBAL ? "it goes in [default] or [user:NAME]"
                               : "it goes in [rlshim]");
        return 1;
    }
    if (s->key_line[key] != 0) {
        err(ps, ps->lineno, "duplicate key '%s' in [%s] (first at line %u)",
            name, sect_name(ps), s->key_line[key]);
        return 1;
    }
    s->key_line[key] = ps->lineno;
    if (*v == '\0') {
        err(ps, ps->lineno, "empty value for '%s' in [%s]", name,
            sect_name(ps));
        return 1;
    }

    switch (key) {
    case K_KEY:
        i = word(ps, name, v, key_words, 2);
        if (i >= 0)
            cfg->key_mode = i;
        break;
    case K_ON_DENY:
        i = word(ps, name, v, on_deny_words, 2);
        if (i >= 0 && r != NULL)
            r->on_deny = i;
        else if (i >= 0)
            cfg->on_deny = i;
        break;
    case K_MAX_DELAY:
        if (get_duration(ps, name, v, &u)) {
            if (r != NULL)
                r->max_delay_ns = u;
            else
                cfg->max_delay_ns = u;
        }
        break;
    case K_ERRNO:
        i = get_errno(ps, name, v);
        if (i >= 0 && r != NULL)
            r->deny_errno = i;
        else if (i >= 0)
            cfg->deny_errno = i;
        break;
    case K_STATE:
        i = word(ps, name, v, state_words, 2);
        if (i >= 0)
            cfg->state_mode = i;
        break;
    case K_UNKNOWN:
        i = word(ps, name, v, unknown_words, 2);
        if (i >= 0)
            cfg->unknown = i;
        break;
    case K_DECISION_LOG:
        /* SPEC §9: one JSON line per decision; absolute, like `log`. */
        if (v[0] != '/') {
            err(ps, ps->lineno,
                "bad value '%s' for 'decision_log' in [rlshim] (use an "
                "absolute path)",
                v);
            break;
        }
        free(cfg->decision_log);
        cfg->decision_log = strdup(v);
        if (cfg->decision_log == NULL)
            ps->nomem = true;
        break;
    case K_LOG:
        if (strcmp(v, "off") == 0) {
            cfg->log_target = RL_LOG_OFF;
        } else if (strcmp(v, "stderr") == 0) {
            cfg->log_target = RL_LOG_STDERR;
        } else if (strcmp(v, "syslog") == 0) {
            cfg->log_target = RL_LOG_SYSLOG;
        } else if (v[0] == '/') {
            free(cfg->log_path);
    free(cfg->decision_log);
            cfg->log_path = strdup(v);
            if (cfg->log_path == NULL)
                ps->nomem = true;
            cfg->log_target = RL_LOG_FILE;
        } else {
            err(ps, ps->lineno,
                "bad value '%s' for 'log' in [rlshim] (use off, stderr, "
                "syslog or an absolute path)",
                v);
        }
        break;
    case K_DRY_RUN:
        if (get_bool(ps, name, v, &b)) {
            if (r != NULL)
                r->dry_run = b;
            else
                cfg->dry_run = b;
        }
        break;
    case K_REPORT:
        if (get_bool(ps, name, v, &b))
            cfg->report = b;
        break;
    case K_MAX_USERS: {
        int rc = rl_parse_u64(v, &u);
        if (rc == 0 && (u == 0 || u > RL_CONFIG_MAX_USERS_MAX))
            err(ps, ps->lineno,
                "'max_users' in [rlshim] must be from 1 to %u, not %s",
                RL_CONFIG_MAX_USERS_MAX, v);
        else if (rc < 0)
            err(ps, ps->lineno, "%s '%s' for 'max_users' in [rlshim]",
                why_number(rc), v);
        else
            cfg->max_users = (uint32_t)u;
        break;
    }
    case K_ALGORITHM:
        i = word(ps, name, v, algo_words, 2);
        if (i >= 0) {
            r->algo = i == 0 ? RL_ALGO_TOKEN_BUCKET : RL_ALGO_SLIDING_WINDOW;
            s->has_algo = true;
        }
        break;
    case K_CONNECT:
        set_rates(ps, key, RL_KIND_CONNECT, v);
        break;
    case K_SEND:
        set_rates(ps, key, RL_KIND_SEND, v);
        break;
    case K_SEND_BYTES:
        set_rates(ps, key, RL_KIND_SEND_BYTES, v);
        break;
    case K_CONNECT_BURST:
        set_bursts(ps, key, RL_KIND_CONNECT, v);
        break;
    case K_SEND_BURST:
        set_bursts(ps, key, RL_KIND_SEND, v);
        break;
    case K_SEND_BYTES_BURST:
        set_bursts(ps, key, RL_KIND_SEND_BYTES, v);
        break;
    case K_TO:
        set_to(ps, v);
        break;
    }
    return 1;
}

/* ---- settling -----------------------------------------------------------*/

static int rate_key(int kind)
{
    static const int k[RL_KIND_COUNT] = {K_CONNECT, K_SEND, K_SEND_BYTES};
    return k[kind];
}

static const char *burst_key(int kind)
{
    static const char *const names[RL_KIND_COUNT] = {
        "connect_burst", "send_burst", "send_bytes_burst"};
    return names[kind];
}

static void settle_rule(struct pstate *ps, struct sect *s)
{
    struct rl_config *cfg = ps->cfg;
    struct rl_rule *r = &cfg->rules[s->rule];
    bool window = r->algo == RL_ALGO_SLIDING_WINDOW;

    if (!s->key_line[K_ON_DENY])
        r->on_deny = cfg->on_deny;
    if (!s->key_line[K_MAX_DELAY])
        r->max_delay_ns = cfg->max_delay_ns;
    if (!s->key_line[K_ERRNO])
        r->deny_errno = cfg->deny_errno;
    if (!s->key_line[K_DRY_RUN])
        r->dry_run = cfg->dry_run;

    for (int k = 0; k < RL_KIND_COUNT; k++) {
        struct raw_kind *rk = &s->raw[k];
        bool bad = false;

        if (window && k == RL_KIND_SEND_BYTES && rk->nrates > 0) {
            err(ps, rk->rate_line,
                "'send_bytes' needs algorithm = token_bucket in [%s]",
                r->section);
            bad = true;
        }
        if (rk->nbursts > 0 && window) {
            err(ps, rk->burst_line,
                "'%s' needs algorithm = token_bucket in [%s] (a sliding "
                "window has no burst)",
                burst_key(k), r->section);
            bad = true;
        } else if (rk->nbursts > 0 && rk->nrates == 0 &&
                   !s->key_line[rate_key(k)]) {
            err(ps, rk->burst_line, "'%s' without '%s' in [%s]", burst_key(k),
                kind_names[k], r->section);
            bad = true;
        } else if (rk->nbursts > rk->nrates && rk->nrates > 0) {
            err(ps, rk->burst_line, "%u bursts for %u rates in '%s' of [%s]",
                rk->nbursts, rk->nrates, burst_key(k), r->section);
            bad = true;
        }
        if (bad)
            continue;
        for (unsigned i = 0; i < rk->nrates; i++) {
            uint64_t burst = i < rk->nbursts ? rk->bursts[i] : 0;
            int rc;

            if (window && rk->rates[i].count > RL_WINDOW_MAX_COUNT) {
                err(ps, rk->rate_line,
                    "rate %llu per period for '%s' in [%s] is over the "
                    "sliding_window cap of %u",
                    (unsigned long long)rk->rates[i].count, kind_names[k],
                    r->section, RL_WINDOW_MAX_COUNT);
                break;
            }
            rc = rl_limit_prepare(&r->limits[k][i], r->algo,
                                  rk->rates[i].count, rk->rates[i].period_ns,
                                  burst);
            if (rc < 0) {
                err(ps, rk->rate_line,
                    "rate for '%s' in [%s] cannot be held exactly (%s)",
                    kind_names[k], r->section,
                    rc == -ERANGE ? "too large" : "out of range");
                break;
            }
            r->nlimits[k] = i + 1;
        }
    }
}

static uint64_t hash_limit(uint64_t h, const struct rl_limit *l)
{
    h = rl_hash_u64(h, l->algo);
    h = rl_hash_u64(h, l->count);
    h = rl_hash_u64(h, l->period_ns);
    return rl_hash_u64(h, l->burst);
}

/* What shapes the shared budgets, never how it was written: the rules in
 * order, their algorithms and limits, and the table size. Comments, blanks
 * and key order do not change it, and neither do settings that only say
 * what a denied call gets or who is logged (on_deny, errno, dry_run, to,
 * log, report...): editing those keeps every user's budget. */
static uint64_t hash_config(const struct rl_config *c)
{
    uint64_t h = RL_HASH_INIT;

    h = rl_hash_u64(h, 2); /* version of this hash's recipe */
    h = rl_hash_u64(h, c->max_users);
    h = rl_hash_u64(h, c->nrules);
    for (size_t i = 0; i < c->nrules; i++) {
        const struct rl_rule *r = &c->rules[i];
        h = rl_hash_str(h, r->section);
        h = rl_hash_u64(h, r->algo);
        for (int k = 0; k < RL_KIND_COUNT; k++) {
            h = rl_hash_u64(h, r->nlimits[k]);
            for (unsigned j = 0; j < r->nlimits[k]; j++)
                h = hash_limit(h, &r->limits[k][j]);
        }
    }
    return h;
}

/* ---- loading ------------------------------------------------------------*/

void rl_config_free(struct rl_config *cfg)
{
    if (cfg == NULL)
        return;
    for (size_t i = 0; i < cfg->nrules; i++) {
        free(cfg->rules[i].section);
        free(cfg->rules[i].user);
        free(cfg->rules[i].to);
    }
    free(cfg->rules);
    free(cfg->log_path);
    free(cfg->path);
    free(cfg);
}

int rl_config_load_string(const char *text, const char *name,
                          struct rl_config **out, struct rl_diag *diag)
{
    struct pstate ps;
    struct rl_config *cfg;
    size_t nerr0 = diag->n;
    int rc;

    *out = NULL;
    cfg = calloc(1, sizeof *cfg);
    if (cfg == NULL)
        return -ENOMEM;
    cfg->path = strdup(name);
    cfg->max_delay_ns = 10 * RL_NS_PER_S;
    cfg->deny_errno = EAGAIN;
    cfg->max_users = RL_CONFIG_MAX_USERS_DEFAULT;
    if (cfg->path == NULL) {
        rl_config_free(cfg);
        return -ENOMEM;
    }

    memset(&ps, 0, sizeof ps);
    ps.name = name;
    ps.diag = diag;
    ps.text = text;
    ps.cur = CUR_NONE;
    ps.cfg = cfg;

    /* inih 55 keeps its options in globals (our static copy's: the shim
     * exports no ini_* symbol). Ours: one value per line (a continuation
     * line would hide a mistake). Every load sets the same values. */
    ini_allow_multiline = false;
    ini_stop_on_first_error = false;
    ini_allow_no_value = false;
    ini_allow_inline_comments = true;
    /* A heap line buffer of exactly one maximal line plus '\n' and NUL, so
     * the reader is asked for RL_CONFIG_LINE_MAX + 2 bytes (the stack
     * buffer is fixed at 200 with Debian's build). */
    ini_use_stack = false;
    ini_allow_realloc = false;
    ini_max_line = RL_CONFIG_LINE_MAX + 2;
    ini_initial_alloc = RL_CONFIG_LINE_MAX + 2;

    rc = ini_parse_stream(reader, &ps, handler, &ps);
    if (rc == -2)
        ps.nomem = true; /* inih could not allocate its line buffer */
    else if (rc != 0 && diag->n == nerr0) {
        /* inih saw something our reader did not: still an error. */
        err(&ps, rc > 0 ? (unsigned)rc : ps.lineno, "syntax error");
    }
    for (size_t i = 0; i < ps.nsects; i++)
        if (ps.sects[i].type != S_GLOBAL)
            settle_rule(&ps, &ps.sects[i]);
    free(ps.sects);

    if (ps.nomem) {
        rl_config_free(cfg);
        return -ENOMEM;
    }
    if (diag->n != nerr0) {
        rl_config_free(cfg);
        return -EINVAL;
    }
    cfg->hash = hash_config(cfg);
    *out = cfg;
    return 0;
}

/* The whole file into a NUL-terminated buffer. */
static int read_file(const char *path, char **text, size_t *len)
{
    struct stat st;
    char *buf = NULL;
    size_t n = 0, cap = 0;
    int fd, rc = 0;

    /* O_NONBLOCK: a FIFO named as the config must not hang the host
     * program at start-up; it is refused below like anything that is not
     * a regular file. */
    fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0)
        return -errno;
    if (fstat(fd, &st) < 0) {
        rc = -errno;
        goto out;
    }
    if (S_ISDIR(st.st_mode)) {
        rc = -EISDIR;
        goto out;
    }
    if (!S_ISREG(st.st_mode)) {
        rc = -EINVAL;
        goto out;
    }
    for (;;) {
        if (n + 1 >= cap) {
            char *nb;
            cap = cap ? cap * 2 : 4096;
            if (cap > RL_CONFIG_FILE_MAX + 2)
                cap = RL_CONFIG_FILE_MAX + 2;
            if (n + 1 >= cap) {
                rc = -EFBIG;
                goto out;
            }
            nb = realloc(buf, cap);
            if (nb == NULL) {
                rc = -ENOMEM;
                goto out;
            }
            buf = nb;
        }
        ssize_t got = read(fd, buf + n, cap - n - 1);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            rc = -errno;
            goto out;
        }
        if (got == 0)
            break;
        n += (size_t)got;
    }
    if (n > RL_CONFIG_FILE_MAX) {
        rc = -EFBIG;
        goto out;
    }
    buf[n] = '\0';
out:
    close(fd);
    if (rc < 0) {
        free(buf);
        return rc;
    }
    if (buf == NULL) {
        buf = strdup("");
        if (buf == NULL)
            return -ENOMEM;
    }
    *text = buf;
    *len = n;
    return 0;
}

int rl_config_load(const char *path, struct rl_config **out,
                   struct rl_diag *diag)
{
    char *text = NULL;
    size_t len = 0;
    int rc;

    *out = NULL;
    rc = read_file(path, &text, &len);
    if (rc == -EFBIG) {
        diag_add(diag, "%s: larger than %u bytes", path, RL_CONFIG_FILE_MAX);
        return rc;
    }
    if (rc == -EINVAL) {
        diag_add(diag, "%s: cannot read: not a regular file", path);
        return rc;
    }
    if (rc < 0) {
        diag_add(diag, "%s: cannot read: %s", path, strerror(-rc));
        return rc;
    }
    if (strlen(text) != len) {
        unsigned line = 1;
        for (const char *p = text; *p; p++)
            line += *p == '\n';
        diag_add(diag, "%s:%u: NUL byte in the file", path, line);
        free(text);
        return -EINVAL;
    }
    rc = rl_config_load_string(text, path, out, diag);
    free(text);
    return rc;
}

const char *rl_config_path_from_env(void)
{
    const char *p = secure_getenv("RLSHIM_CONFIG");
    return p != NULL && *p != '\0' ? p : RL_SYSCONFDIR "/rlshim.ini";
}

int rl_config_load_env(struct rl_config **out, struct rl_diag *diag)
{
    const char *env = secure_getenv("RLSHIM_CONFIG");
    const char *path = rl_config_path_from_env();

    *out = NULL;
    if ((env == NULL || *env == '\0') && access(path, F_OK) != 0 &&
        errno == ENOENT)
        return 0; /* no config at all: nothing is throttled, silently */
    return rl_config_load(path, out, diag);
}

/* ---- look-ups -----------------------------------------------------------*/

static const struct rl_rule *find_user(const struct rl_config *cfg,
                                       const char *user)
{
    for (size_t i = 0; i < cfg->nrules; i++)
        if (cfg->rules[i].user != NULL && strcmp(cfg->rules[i].user, user) == 0)
            return &cfg->rules[i];
    return NULL;
}

const struct rl_rule *rl_config_find_rule(const struct rl_config *cfg,
                                          const char *key, uint32_t uid,
                                          const char *login)
{
    const struct rl_rule *r = NULL;
    char num[16];

    if (key != NULL)
        r = find_user(cfg, key);
    if (r == NULL) {
        snprintf(num, sizeof num, "%u", uid);
        r = find_user(cfg, num);
    }
    if (r == NULL && login != NULL)
        r = find_user(cfg, login);
    for (size_t i = 0; r == NULL && i < cfg->nrules; i++)
        if (cfg->rules[i].is_default)
            r = &cfg->rules[i];
    return r;
}

static bool prefix_match(const uint8_t *a, const uint8_t *b, unsigned prefix)
{
    unsigned full = prefix / 8, rest = prefix % 8;

    if (memcmp(a, b, full) != 0)
        return false;
    if (rest == 0)
        return true;
    uint8_t mask = (uint8_t)(0xff << (8 - rest));
    return (a[full] & mask) == (b[full] & mask);
}

bool rl_rule_covers(const struct rl_rule *rule, const void *sa, unsigned salen)
{
    sa_family_t fam;
    uint8_t addr[16];
    uint16_t port;
    int family;

    if (sa == NULL || salen < sizeof fam)
        return false;
    memcpy(&fam, sa, sizeof fam); /* sa may be unaligned */
    if (fam == AF_INET && salen >= sizeof(struct sockaddr_in)) {
        struct sockaddr_in in;
        memcpy(&in, sa, sizeof in);
        memcpy(addr, &in.sin_addr, 4);
        port = ntohs(in.sin_port);
        family = AF_INET;
    } else if (fam == AF_INET6 && salen >= sizeof(struct sockaddr_in6)) {
        struct sockaddr_in6 in6;
        memcpy(&in6, sa, sizeof in6);
        port = ntohs(in6.sin6_port);
        if (IN6_IS_ADDR_V4MAPPED(&in6.sin6_addr)) {
            memcpy(addr, in6.sin6_addr.s6_addr + 12, 4);
            family = AF_INET;
        } else {
            memcpy(addr, in6.sin6_addr.s6_addr, 16);
            family = AF_INET6;
        }
    } else {
        return false;
    }
    if (rule->nto == 0)
        return true;
    for (size_t i = 0; i < rule->nto; i++) {
        const struct rl_dest *d = &rule->to[i];
        if (d->port != 0 && d->port != port)
            continue;
        if (d->family == AF_UNSPEC)
            return true;
        if (d->family == family && prefix_match(d->addr, addr, d->prefix))
            return true;
    }
    return false;
}

/* ---- names and formatting -----------------------------------------------*/

const char *rl_kind_name(int kind)
{
    return kind >= 0 && kind < RL_KIND_COUNT ? kind_names[kind] : "?";
}

const char *rl_errno_name(int e)
{
    for (size_t i = 0; i < NELEM(errnos); i++)
        if (errnos[i].value == e)
            return errnos[i].name;
    return "?";
}

int rl_config_format_rate(int kind, const struct rl_limit *lim, char *buf,
                          size_t len)
{
    static const struct {
        const char *name;
        uint64_t ns;
    } per[] = {{"h", RL_NS_PER_H},
               {"min", RL_NS_PER_MIN},
               {"s", RL_NS_PER_S},
               {"ms", RL_NS_PER_MS}};
    static const struct {
        const char *name;
        uint64_t mul;
    } sz[] = {{"GiB", 1ull << 30},   {"MiB", 1ull << 20}, {"KiB", 1ull << 10},
              {"GB", 1000000000ull}, {"MB", 1000000ull},  {"KB", 1000ull}};
    const char *unit = NULL;
    uint64_t count = lim->count;
    const char *szu = "";

    for (size_t i = 0; i < NELEM(per); i++)
        if (lim->period_ns == per[i].ns)
            unit = per[i].name;
    if (kind == RL_KIND_SEND_BYTES) {
        szu = "B";
        for (size_t i = 0; i < NELEM(sz); i++) {
            if (count >= sz[i].mul && count % sz[i].mul == 0) {
                count /= sz[i].mul;
                szu = sz[i].name;
                break;
            }
        }
    }
    if (unit == NULL)
        return snprintf(buf, len, "%llu%s/%lluns", (unsigned long long)count,
                        szu, (unsigned long long)lim->period_ns);
    return snprintf(buf, len, "%llu%s/%s", (unsigned long long)count, szu,
                    unit);
}

int rl_config_format_dest(const struct rl_dest *d, char *buf, size_t len)
{
    char a[INET6_ADDRSTRLEN] = "";
    char port[8] = "";

    if (d->port != 0)
        snprintf(port, sizeof port, ":%u", d->port);
    if (d->family == AF_UNSPEC)
        return snprintf(buf, len, "*%s", port);
    inet_ntop(d->family == AF_INET ? AF_INET : AF_INET6, d->addr, a, sizeof a);
    if (d->family == AF_INET) {
        if (d->prefix == 32)
            return snprintf(buf, len, "%s%s", a, port);
        return snprintf(buf, len, "%s/%u%s", a, d->prefix, port);
    }
    if (d->prefix == 128)
        return snprintf(buf, len, "[%s]%s", a, port);
    return snprintf(buf, len, "[%s]/%u%s", a, d->prefix, port);
}
