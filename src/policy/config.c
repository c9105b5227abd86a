/* config.c — the ini file, through the system inih, into an immutable table.
 *
 * What a key is lives in one table (keys[], below): its name, the kinds of
 * section it may appear in, the parser of its value and the field that
 * value sets, in [rlshim] and in a rule. Section kinds are a table too
 * (sect_kinds[]). Adding a key is a row and, when no parser fits, a parser;
 * adding a section kind is a row; the messages (did you mean, where a key
 * belongs, which sections exist) are built from the tables.
 *
 * Each line is scanned once. inih splits `key = value` lines; we feed it
 * through our own reader so that we know the line of everything it hands us
 * (Debian's inih 55 is built without INI_HANDLER_LINENO) and so that no
 * line is ever truncated behind our back: a line longer than
 * RL_CONFIG_LINE_MAX is reported and replaced by an empty one before inih
 * sees it. The reader handles section headers itself (inih does not call
 * the handler for them, and we need them to catch duplicate and empty
 * unknown sections) and hands inih an empty line in their place. inih calls
 * the handler for a line without '=' too (ini_allow_no_value), so every
 * syntax error is reported, not only the first.
 *
 * Values are checked as they come; what depends on several keys (the
 * algorithm and its rates, per-rule overrides of [rlshim]) is settled once
 * the whole file has been read. Nothing is handed out until every error of
 * the file has been collected. */
#include "policy/config.h"

#include <errno.h>
#include <fcntl.h>
#include <ini.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fleet/fleet_addr.h"
#include "policy/names.h"
#include "policy/suggest.h"
#include "util/hash.h"
#include "util/parse.h"

#ifndef RL_SYSCONFDIR
#define RL_SYSCONFDIR "/etc"
#endif

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

/* ---- section kinds ------------------------------------------------------*/

enum sect_kind { SK_RLSHIM, SK_DEFAULT, SK_USER, SK_SITE };

/* Messages list them in this order. A new kind is an enum value and a row
 * here, then IN(kind) in the rows of the keys it takes (and, when it makes
 * a rule, what add_rule records of its label). */
static const struct {
    const char *name;  /* "[name]", or "[name:LABEL]" when `label` is set */
    const char *label; /* what the part after the colon is, for messages */
    const char *meta;  /* how messages spell that part: "NAME", "LABEL" */
    bool rule;         /* its keys make a struct rl_rule */
} sect_kinds[] = {
    [SK_RLSHIM] = {"rlshim", NULL, NULL, false},
    [SK_DEFAULT] = {"default", NULL, NULL, true},
    [SK_USER] = {"user", "user name", "NAME", true},
    [SK_SITE] = {"site", "site label", "LABEL", true},
};

#define NSECT_KINDS NELEM(sect_kinds)
#define IN(kind) (1u << (kind))
#define IN_RLSHIM IN(SK_RLSHIM)
#define IN_RULE (IN(SK_DEFAULT) | IN(SK_USER) | IN(SK_SITE))

/* ---- words --------------------------------------------------------------*/

/* A value that is one word of a short list, and what each word sets. */
struct words {
    const char *const *names;
    const int *values;
    unsigned n;
};

/* The word's index is its value: the enums of config.h count from 0. */
_Static_assert(RL_KEY_EXE == 1 && RL_DENY_DELAY == 1 && RL_STATE_PROCESS == 1 &&
                   RL_UNKNOWN_DENY == 1 && RL_FLEET_DENY == 3 &&
                   RL_SCOPE_FLEET == 1 && RL_IO_URING_ALLOW == 1 &&
                   RL_PER_DESTINATION == 1,
               "a word list is in the order of its enum");
static const char *const key_names[] = {"env", "exe"};
static const char *const on_deny_names[] = {"fail", "delay"};
static const char *const state_names[] = {"shared", "process"};
static const char *const unknown_names[] = {"allow", "deny"};
static const char *const fallback_names[] = {"share", "local", "allow", "deny"};
static const char *const scope_names[] = {"host", "fleet"};
static const char *const io_uring_names[] = {"deny", "allow"};
static const char *const algo_names[] = {"token_bucket", "sliding_window"};
static const char *const per_names[] = {"user", "destination"};
static const char *const errno_names[] = {"EAGAIN", "ECONNREFUSED", "ETIMEDOUT",
                                          "ENETUNREACH"};
static const int errno_values[] = {EAGAIN, ECONNREFUSED, ETIMEDOUT,
                                   ENETUNREACH};

static const struct words key_words = {key_names, NULL, NELEM(key_names)};
static const struct words on_deny_words = {on_deny_names, NULL,
                                           NELEM(on_deny_names)};
static const struct words state_words = {state_names, NULL, NELEM(state_names)};
static const struct words unknown_words = {unknown_names, NULL,
                                           NELEM(unknown_names)};
static const struct words fallback_words = {fallback_names, NULL,
                                            NELEM(fallback_names)};
static const struct words scope_words = {scope_names, NULL, NELEM(scope_names)};
static const struct words io_uring_words = {io_uring_names, NULL,
                                            NELEM(io_uring_names)};
static const struct words algo_words = {algo_names, NULL, NELEM(algo_names)};
static const struct words per_words = {per_names, NULL, NELEM(per_names)};
static const struct words errno_words = {errno_names, errno_values,
                                         NELEM(errno_names)};

static const char *const kind_names[RL_KIND_COUNT] = {"connect", "send",
                                                      "send_bytes"};

/* ---- keys ---------------------------------------------------------------*/

struct pstate;
struct key;

/* Check `v` (never empty) and set what it says, through `field` (in
 * struct rl_config in [rlshim], in struct rl_rule in a rule; NULL when
 * the key has no field there) or the parse state. Errors go to ps. */
typedef void key_parser(struct pstate *ps, const struct key *k, void *field,
                        const char *v);

struct key {
    const char *name;
    unsigned where; /* IN(section kind)s it may appear in */
    key_parser *parse;
    size_t cfg_off;            /* the field it sets in struct rl_config ... */
    size_t cfg_size;           /* ... 0: none */
    size_t rule_off;           /* the field it sets in struct rl_rule ... */
    size_t rule_size;          /* ... 0: none */
    const struct words *words; /* p_word's list */
    int kind;                  /* p_rates, p_bursts: enum rl_kind */
    uint64_t max;              /* p_count: the largest value accepted */
};

static key_parser p_word, p_bool, p_duration, p_log, p_decision_log, p_count,
    p_algorithm, p_rates, p_bursts, p_to, p_fleet, p_fleet_password;

#define CFG(f)                                                                 \
    .cfg_off = offsetof(struct rl_config, f),                                  \
    .cfg_size = sizeof(((struct rl_config *)0)->f)
#define RULE(f)                                                                \
    .rule_off = offsetof(struct rl_rule, f),                                   \
    .rule_size = sizeof(((struct rl_rule *)0)->f)

/* A key of both [rlshim] and rules sets the same field in each; a rule
 * that does not set it inherits [rlshim]'s value (settle_rule). */
static const struct key keys[] = {
    {"key", IN_RLSHIM, p_word, CFG(key_mode), .words = &key_words},
    {"on_deny", IN_RLSHIM | IN_RULE, p_word, CFG(on_deny), RULE(on_deny),
     .words = &on_deny_words},
    {"max_delay", IN_RLSHIM | IN_RULE, p_duration, CFG(max_delay_ns),
     RULE(max_delay_ns)},
    {"errno", IN_RLSHIM | IN_RULE, p_word, CFG(deny_errno), RULE(deny_errno),
     .words = &errno_words},
    {"state", IN_RLSHIM, p_word, CFG(state_mode), .words = &state_words},
    {"unknown", IN_RLSHIM, p_word, CFG(unknown), .words = &unknown_words},
    {"log", IN_RLSHIM, p_log, CFG(log_target)},
    {"decision_log", IN_RLSHIM, p_decision_log, CFG(decision_log)},
    {"dry_run", IN_RLSHIM | IN_RULE, p_bool, CFG(dry_run), RULE(dry_run)},
    {"report", IN_RLSHIM, p_bool, CFG(report)},
    {"io_uring", IN_RLSHIM, p_word, CFG(io_uring), .words = &io_uring_words},
    {"max_users", IN_RLSHIM, p_count, CFG(max_users),
     .max = RL_CONFIG_MAX_USERS_MAX},
    {"max_destinations", IN_RLSHIM, p_count, CFG(max_destinations),
     .max = RL_CONFIG_MAX_DESTINATIONS_MAX},
    {"algorithm", IN_RULE, p_algorithm, RULE(algo)},
    {"connect", IN_RULE, p_rates, .kind = RL_KIND_CONNECT},
    {"connect_burst", IN_RULE, p_bursts, .kind = RL_KIND_CONNECT},
    {"send", IN_RULE, p_rates, .kind = RL_KIND_SEND},
    {"send_burst", IN_RULE, p_bursts, .kind = RL_KIND_SEND},
    {"send_bytes", IN_RULE, p_rates, .kind = RL_KIND_SEND_BYTES},
    {"send_bytes_burst", IN_RULE, p_bursts, .kind = RL_KIND_SEND_BYTES},
    {"to", IN_RULE, p_to, RULE(to)},
    {"per", IN_RULE, p_word, RULE(per), .words = &per_words},
    {"max_open", IN_RULE, p_count, RULE(max_open),
     .max = RL_CONFIG_MAX_OPEN_MAX},
    {"fleet", IN_RLSHIM, p_fleet, CFG(fleet)},
    {"fleet_password", IN_RLSHIM, p_fleet_password, CFG(fleet_password)},
    {"fleet_fallback", IN_RLSHIM, p_word, CFG(fleet_fallback),
     .words = &fallback_words},
    {"scope", IN_RULE, p_word, RULE(scope), .words = &scope_words},
};

#define NKEYS NELEM(keys)

size_t rl_config_key_count(void)
{
    return NKEYS;
}

const char *rl_config_key_name(size_t i)
{
    return i < NKEYS ? keys[i].name : NULL;
}

/* ---- parse state --------------------------------------------------------*/

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
    enum sect_kind kind;
    const char *name; /* as messages spell it: "rlshim", "user:alice" */
    size_t rule;      /* index in cfg->rules (kinds that make a rule) */
    unsigned line;
    unsigned key_line[NKEYS]; /* 0 = not seen yet */
    struct raw_kind raw[RL_KIND_COUNT];
};

#define CUR_NONE (-1) /* before the first section */
#define CUR_SKIP (-2) /* in a section already reported as wrong */

struct pstate {
    const char *name; /* the file, as messages call it */
    struct rl_diag *diag;
    bool nomem;
    const char *text;
    size_t len; /* of text */
    size_t pos;
    unsigned lineno;
    char first; /* the line's first non-blank byte (inih's start) */
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

/* ---- helpers ------------------------------------------------------------*/

static const char *sect_name(struct pstate *ps)
{
    return ps->sects[ps->cur].name;
}

static struct rl_rule *cur_rule(struct pstate *ps)
{
    return &ps->cfg->rules[ps->sects[ps->cur].rule];
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

/* "[rlshim], [default] or [user:NAME]": the section kinds in `mask`. */
static void list_sections(unsigned mask, char *buf, size_t len)
{
    size_t n = 0, total = 0, done = 0;

    for (size_t i = 0; i < NSECT_KINDS; i++)
        total += (mask & IN(i)) != 0;
    buf[0] = '\0';
    for (size_t i = 0; i < NSECT_KINDS && n < len; i++) {
        if (!(mask & IN(i)))
            continue;
        done++;
        const char *sep = done + 1 < total ? ", " : done < total ? " or " : "";
        int w = snprintf(buf + n, len - n, "[%s%s%s]%s", sect_kinds[i].name,
                         sect_kinds[i].meta ? ":" : "",
                         sect_kinds[i].meta ? sect_kinds[i].meta : "", sep);
        if (w < 0)
            break;
        n += (size_t)w;
    }
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

/* The value of one word of `w`, or -1 (and an error). */
static int word(struct pstate *ps, const char *key, const char *v,
                const struct words *w)
{
    char list[128] = "";
    unsigned n = w->n;

    for (unsigned i = 0; i < n; i++) {
        if (strcmp(v, w->names[i]) == 0)
            return w->values != NULL ? w->values[i] : (int)i;
    }
    for (unsigned i = 0; i < n; i++) {
        strncat(list, w->names[i], sizeof list - strlen(list) - 1);
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

static void p_word(struct pstate *ps, const struct key *k, void *field,
                   const char *v)
{
    int i = word(ps, k->name, v, k->words);
    if (i >= 0)
        *(int *)field = i;
}

static void p_algorithm(struct pstate *ps, const struct key *k, void *field,
                        const char *v)
{
    int i = word(ps, k->name, v, &algo_words);
    if (i >= 0)
        *(uint32_t *)field =
            i == 0 ? RL_ALGO_TOKEN_BUCKET : RL_ALGO_SLIDING_WINDOW;
}

static void p_bool(struct pstate *ps, const struct key *k, void *field,
                   const char *v)
{
    bool b;

    if (rl_parse_bool(v, &b) == 0) {
        *(bool *)field = b;
        return;
    }
    err(ps, ps->lineno, "bad value '%s' for '%s' in [%s] (use yes or no)", v,
        k->name, sect_name(ps));
}

static void p_duration(struct pstate *ps, const struct key *k, void *field,
                       const char *v)
{
    uint64_t ns;
    int rc = rl_parse_duration(v, &ns);

    if (rc == 0)
        *(uint64_t *)field = ns;
    else if (rc == -EDOM)
        err(ps, ps->lineno,
            "bad unit in '%s' for '%s' in [%s] (use ns, us, ms, s, min or h)",
            v, k->name, sect_name(ps));
    else if (v[0] == '-')
        err(ps, ps->lineno, "negative value '%s' for '%s' in [%s]", v, k->name,
            sect_name(ps));
    else
        err(ps, ps->lineno, "%s '%s' for '%s' in [%s]", why_number(rc), v,
            k->name, sect_name(ps));
}

static void p_log(struct pstate *ps, const struct key *k, void *field,
                  const char *v)
{
    struct rl_config *cfg = ps->cfg;
    int *target = field;

    (void)k;
    if (strcmp(v, "off") == 0) {
        *target = RL_LOG_OFF;
    } else if (strcmp(v, "stderr") == 0) {
        *target = RL_LOG_STDERR;
    } else if (strcmp(v, "syslog") == 0) {
        *target = RL_LOG_SYSLOG;
    } else if (v[0] == '/') {
        free(cfg->log_path);
        cfg->log_path = strdup(v);
        if (cfg->log_path == NULL)
            ps->nomem = true;
        *target = RL_LOG_FILE;
    } else {
        err(ps, ps->lineno,
            "bad value '%s' for 'log' in [rlshim] (use off, stderr, "
            "syslog or an absolute path)",
            v);
    }
}

/* SPEC §9: one JSON line per decision; absolute, like `log`. */
static void p_decision_log(struct pstate *ps, const struct key *k, void *field,
                           const char *v)
{
    char **path = field;

    (void)k;
    if (strcmp(v, "off") == 0) {
        free(*path);
        *path = NULL;
        return;
    }
    if (v[0] != '/') {
        err(ps, ps->lineno,
            "bad value '%s' for 'decision_log' in [rlshim] (use off or an "
            "absolute path)",
            v);
        return;
    }
    free(*path);
    *path = strdup(v);
    if (*path == NULL)
        ps->nomem = true;
}

/* A count: 1 to k->max, into a uint32_t. */
static void p_count(struct pstate *ps, const struct key *k, void *field,
                    const char *v)
{
    uint64_t u;
    int rc = rl_parse_u64(v, &u);

    if (rc == 0 && (u == 0 || u > k->max))
        err(ps, ps->lineno, "'%s' in [%s] must be from 1 to %llu, not %s",
            k->name, sect_name(ps), (unsigned long long)k->max, v);
    else if (rc < 0)
        err(ps, ps->lineno, "%s '%s' for '%s' in [%s]", why_number(rc), v,
            k->name, sect_name(ps));
    else
        *(uint32_t *)field = (uint32_t)u;
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

static void p_rates(struct pstate *ps, const struct key *key, void *field,
                    const char *v)
{
    struct raw_kind *rk = &ps->sects[ps->cur].raw[key->kind];
    bool sizes = key->kind == RL_KIND_SEND_BYTES;
    unsigned bad;
    int rc = rl_parse_rate_list(v, sizes, rk->rates, RL_MAX_RATES, &rk->nrates,
                                &bad);
    const char *k = key->name;

    (void)field;
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

static void p_bursts(struct pstate *ps, const struct key *key, void *field,
                     const char *v)
{
    struct raw_kind *rk = &ps->sects[ps->cur].raw[key->kind];
    const char *k = key->name;
    const char *p = v;
    unsigned n = 0;

    (void)field;
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
        if (key->kind == RL_KIND_SEND_BYTES)
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

static void p_to(struct pstate *ps, const struct key *k, void *field,
                 const char *v)
{
    struct rl_rule *r = cur_rule(ps);
    const char *p = v;
    struct rl_dest *list = NULL;
    size_t n = 0;

    (void)k;
    (void)field; /* r->to, set with r->nto */
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
        /* An empty entry is never parsed: d must still be safe to clear
         * (the fuzzer's "to = , 10.0.13.0/24" freed a stack pointer). */
        memset(&d, 0, sizeof d);
        why = one[0] ? rl_dest_parse(one, &d) : "empty entry";
        if (why != NULL) {
            err(ps, ps->lineno, "bad destination '%s' in 'to' of [%s]: %s", one,
                sect_name(ps), why);
            rl_dest_clear(&d);
            rl_dests_free(list, n);
            return;
        }
        nl = realloc(list, (n + 1) * sizeof *nl);
        if (nl == NULL) {
            ps->nomem = true;
            rl_dest_clear(&d);
            rl_dests_free(list, n);
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

static void p_fleet(struct pstate *ps, const struct key *k, void *field,
                    const char *v)
{
    struct rl_fleet_addr a;
    const char *why;

    (void)k;
    if (strcmp(v, "off") == 0) {
        free(*(char **)field);
        *(char **)field = NULL;
        return;
    }
    why = rl_fleet_addr_parse(v, &a);
    if (why != NULL) {
        err(ps, ps->lineno, "bad value '%s' for 'fleet' in [rlshim]: %s", v,
            why);
        return;
    }
    free(*(char **)field);
    *(char **)field = strdup(v);
    if (*(char **)field == NULL)
        ps->nomem = true;
}

/* A file that holds the password, never the password itself: absolute,
 * a regular file, mode 0600 or 0640 (or stricter). */
static void p_fleet_password(struct pstate *ps, const struct key *k,
                             void *field, const char *v)
{
    struct stat st;

    (void)k;
    if (strcmp(v, "none") == 0) {
        free(*(char **)field);
        *(char **)field = NULL;
        return;
    }
    if (v[0] != '/') {
        err(ps, ps->lineno,
            "'fleet_password' in [rlshim] must be the absolute path of a "
            "file holding the password, not '%s'",
            v);
        return;
    }
    if (stat(v, &st) != 0) {
        err(ps, ps->lineno,
            "'fleet_password' in [rlshim]: cannot read '%s': %s", v,
            strerror(errno));
        return;
    }
    if (!S_ISREG(st.st_mode) || (st.st_mode & 0137) != 0) {
        err(ps, ps->lineno,
            "'fleet_password' in [rlshim]: '%s' must be a regular file of "
            "mode 0600 or 0640, not %04o",
            v, (unsigned)(st.st_mode & 07777));
        return;
    }
    free(*(char **)field);
    *(char **)field = strdup(v);
    if (*(char **)field == NULL)
        ps->nomem = true;
}

/* ---- sections -----------------------------------------------------------*/

static bool good_label(const char *u, size_t n)
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

static int add_rule(struct pstate *ps, const char *section, enum sect_kind kind,
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
    if (kind == SK_USER) {
        r->user = strdup(section + strlen(sect_kinds[kind].name) + 1);
        if (r->user == NULL) {
            free(r->section);
            return -ENOMEM;
        }
    }
    if (kind == SK_SITE) {
        r->site = strdup(section + strlen(sect_kinds[kind].name) + 1);
        if (r->site == NULL) {
            free(r->section);
            return -ENOMEM;
        }
    }
    r->is_default = kind == SK_DEFAULT;
    r->algo = RL_ALGO_TOKEN_BUCKET;
    r->line = line;
    cfg->nrules++;
    return 0;
}

/* The kind a section name spells: "rlshim", "user:alice". -1 when none;
 * *label is what follows the colon of a labelled kind. */
static int find_kind(const char *sec, const char **label)
{
    for (size_t i = 0; i < NSECT_KINDS; i++) {
        size_t n = strlen(sect_kinds[i].name);
        if (strncmp(sec, sect_kinds[i].name, n) != 0)
            continue;
        if (sect_kinds[i].label == NULL && sec[n] == '\0') {
            *label = NULL;
            return (int)i;
        }
        if (sect_kinds[i].label != NULL && sec[n] == ':') {
            *label = sec + n + 1;
            return (int)i;
        }
    }
    return -1;
}

/* An unknown section: say what it might have meant, or what exists. */
static void unknown_section(struct pstate *ps, const char *sec)
{
    const char *colon = strchr(sec, ':');
    char list[128];

    if (colon != NULL && colon != sec) {
        /* "[usr:alice]": a labelled kind, misspelt, with a good label. */
        char head[16];
        size_t hl = (size_t)(colon - sec);
        if (hl < sizeof head) {
            memcpy(head, sec, hl);
            head[hl] = '\0';
            for (size_t i = 0; i < NSECT_KINDS; i++) {
                if (sect_kinds[i].label == NULL ||
                    rl_edit_distance(head, sect_kinds[i].name) > 2 ||
                    !good_label(colon + 1, strlen(colon + 1)))
                    continue;
                err(ps, ps->lineno,
                    "unknown section [%s] (did you mean [%s:%s]?)", sec,
                    sect_kinds[i].name, colon + 1);
                return;
            }
        }
    } else if (colon == NULL) {
        /* "[rlshm]", "[defualt]"; "[user]" without its label. */
        const char *best = NULL, *label = "", *meta = "";
        for (size_t i = 0; i < NSECT_KINDS && best == NULL; i++)
            if (sect_kinds[i].label == NULL &&
                rl_edit_distance(sec, sect_kinds[i].name) <= 2)
                best = sect_kinds[i].name;
        for (size_t i = 0; i < NSECT_KINDS && best == NULL; i++) {
            if (sect_kinds[i].label != NULL &&
                strcmp(sec, sect_kinds[i].name) == 0) {
                best = sect_kinds[i].name;
                label = ":";
                meta = sect_kinds[i].meta;
            }
        }
        if (best != NULL) {
            err(ps, ps->lineno, "unknown section [%s] (did you mean [%s%s%s]?)",
                sec, best, label, meta);
            return;
        }
    }
    list_sections(~0u, list, sizeof list);
    err(ps, ps->lineno, "unknown section [%s] (use %s)", sec, list);
}

/* A "[...]" line: name is what stands between the brackets. */
static void start_section(struct pstate *ps, const char *name, size_t n)
{
    char sec[RL_CONFIG_LINE_MAX + 1];
    const char *label;
    int kind;
    struct sect *s;

    ps->cur = CUR_SKIP;
    memcpy(sec, name, n);
    sec[n] = '\0';

    kind = find_kind(sec, &label);
    if (kind < 0) {
        unknown_section(ps, sec);
        return;
    }
    if (label != NULL && !good_label(label, strlen(label))) {
        const char *what = sect_kinds[kind].label;
        size_t ln = strlen(label);
        if (ln == 0)
            err(ps, ps->lineno, "empty %s in [%s]", what, sec);
        else if (ln > RL_CONFIG_USER_MAX)
            err(ps, ps->lineno, "%s in [%.20s...] is longer than %d bytes",
                what, sec, RL_CONFIG_USER_MAX);
        else
            err(ps, ps->lineno,
                "bad %s in [%s] (no blanks, ';', '|' or brackets)", what, sec);
        return;
    }

    for (size_t i = 0; i < ps->nsects; i++) {
        const struct sect *o = &ps->sects[i];
        if (o->kind == (enum sect_kind)kind &&
            (label == NULL || strcmp(o->name, sec) == 0)) {
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
    s->kind = (enum sect_kind)kind;
    s->name = sect_kinds[kind].name;
    s->line = ps->lineno;
    if (sect_kinds[kind].rule) {
        if (add_rule(ps, sec, s->kind, ps->lineno) < 0) {
            ps->nomem = true;
            return;
        }
        s->rule = ps->cfg->nrules - 1;
        s->name = ps->cfg->rules[s->rule].section;
    }
    ps->cur = (int)ps->nsects++;
}

/* A line whose first non-blank byte is '[' (p points at it). */
static void section_line(struct pstate *ps, const char *p)
{
    const char *end = comment_or_end(p + 1, "]");

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
}

/* ---- lines --------------------------------------------------------------*/

/* inih's fgets-like reader over our text. It counts every line, handles
 * what inih need not see itself (blank and comment lines, section headers,
 * lines too long) and hands inih only `key = value` lines: each line is
 * scanned once, by one of them. */
static char *reader(char *str, int num, void *stream)
{
    struct pstate *ps = stream;
    size_t max = num > 2 ? (size_t)num - 2 : 0; /* room for '\n' and NUL */

    if (max > RL_CONFIG_LINE_MAX)
        max = RL_CONFIG_LINE_MAX;
    while (ps->pos < ps->len) {
        const char *line = ps->text + ps->pos;
        const char *nl = memchr(line, '\n', ps->len - ps->pos);
        size_t len = nl ? (size_t)(nl - line) : ps->len - ps->pos;
        const char *p = line, *end;

        ps->pos += len + (nl != NULL);
        ps->lineno++;
        if (len > 0 && line[len - 1] == '\r')
            len--;
        end = line + len;
        while (p < end && is_space(*p))
            p++;
        if (len > max) {
            err(ps, ps->lineno, "line longer than %zu bytes", max);
            if (p < end && *p == '[')
                ps->cur = CUR_SKIP; /* its keys belong to no known section */
            /* Nothing half-read reaches inih. */
            continue;
        }
        if (ps->lineno == 1 && len >= 3 && (unsigned char)line[0] == 0xef &&
            (unsigned char)line[1] == 0xbb && (unsigned char)line[2] == 0xbf) {
            p = line + 3; /* a UTF-8 BOM, as inih would skip it */
            while (p < end && is_space(*p))
                p++;
        }
        if (p == end || *p == ';' || *p == '#')
            continue;
        /* From its first non-blank byte, NUL-terminated, with the '\n'
         * inih expects. */
        len = (size_t)(end - p);
        memcpy(str, p, len);
        str[len] = '\n';
        str[len + 1] = '\0';
        ps->first = str[0];
        if (str[0] == '[') {
            section_line(ps, str);
            continue;
        }
        return str;
    }
    return NULL;
}

/* A `key = value` line, split by inih; v is NULL for a line with neither
 * '=' nor ':'. */
static int handler(void *user, const char *section, const char *name,
                   const char *v)
{
    struct pstate *ps = user;
    const struct key *k = NULL;
    struct sect *s;
    void *field = NULL;
    size_t i;

    (void)section; /* ours (ps->cur) is exact; inih's is cut at 50 bytes */
    if (v == NULL) {
        err(ps, ps->lineno, "expected 'key = value' or '[section]'");
        return 1;
    }
    if (*name == '\0') {
        /* inih split at the line's first byte: that is the separator. */
        err(ps, ps->lineno, "missing key name before '%c'", ps->first);
        return 1;
    }
    if (ps->cur == CUR_SKIP)
        return 1; /* already reported */
    if (ps->cur == CUR_NONE) {
        err(ps, ps->lineno, "key '%s' before any [section]", name);
        return 1;
    }
    s = &ps->sects[ps->cur];

    for (i = 0; i < NKEYS && k == NULL; i++)
        if (strcmp(name, keys[i].name) == 0)
            k = &keys[i];
    if (k == NULL) {
        struct rl_suggest sg;
        rl_suggest_init(&sg, name, 2);
        for (i = 0; i < NKEYS; i++)
            if (keys[i].where & IN(s->kind))
                rl_suggest_offer(&sg, keys[i].name);
        if (sg.best != NULL)
            err(ps, ps->lineno, "unknown key '%s' in [%s] (did you mean '%s'?)",
                name, s->name, sg.best);
        else
            err(ps, ps->lineno, "unknown key '%s' in [%s]", name, s->name);
        return 1;
    }
    if (!(k->where & IN(s->kind))) {
        char list[128];
        list_sections(k->where, list, sizeof list);
        err(ps, ps->lineno, "key '%s' does not belong in [%s] (it goes in %s)",
            name, s->name, list);
        return 1;
    }
    i = (size_t)(k - keys);
    if (s->key_line[i] != 0) {
        err(ps, ps->lineno, "duplicate key '%s' in [%s] (first at line %u)",
            name, s->name, s->key_line[i]);
        return 1;
    }
    s->key_line[i] = ps->lineno;
    if (*v == '\0') {
        err(ps, ps->lineno, "empty value for '%s' in [%s]", name, s->name);
        return 1;
    }
    if (sect_kinds[s->kind].rule && k->rule_size != 0)
        field = (char *)cur_rule(ps) + k->rule_off;
    else if (!sect_kinds[s->kind].rule && k->cfg_size != 0)
        field = (char *)ps->cfg + k->cfg_off;
    k->parse(ps, k, field, v);
    return 1;
}

/* ---- settling -----------------------------------------------------------*/

/* Was the key that parses with `parse` for `kind` in the section (even
 * with a bad or empty value)? */
static bool kind_key_seen(const struct sect *s, key_parser *parse, int kind)
{
    for (size_t i = 0; i < NKEYS; i++)
        if (keys[i].parse == parse && keys[i].kind == kind)
            return s->key_line[i] != 0;
    return false;
}

static void settle_rule(struct pstate *ps, struct sect *s)
{
    struct rl_config *cfg = ps->cfg;
    struct rl_rule *r = &cfg->rules[s->rule];
    bool window = r->algo == RL_ALGO_SLIDING_WINDOW;

    /* What a rule does not say, [rlshim] says (read after all of it). */
    for (size_t i = 0; i < NKEYS; i++) {
        const struct key *k = &keys[i];
        if (!s->key_line[i] && k->cfg_size != 0 && k->cfg_size == k->rule_size)
            memcpy((char *)r + k->rule_off, (char *)cfg + k->cfg_off,
                   k->rule_size);
    }

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
                "'%s_burst' needs algorithm = token_bucket in [%s] (a sliding "
                "window has no burst)",
                kind_names[k], r->section);
            bad = true;
        } else if (rk->nbursts > 0 && rk->nrates == 0 &&
                   !kind_key_seen(s, p_rates, k)) {
            err(ps, rk->burst_line, "'%s_burst' without '%s' in [%s]",
                kind_names[k], kind_names[k], r->section);
            bad = true;
        } else if (rk->nbursts > rk->nrates && rk->nrates > 0) {
            err(ps, rk->burst_line,
                "%u bursts for %u rates in '%s_burst' of [%s]", rk->nbursts,
                rk->nrates, kind_names[k], r->section);
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
            rc = rl_limit_prepare(&r->limits[k][i], r->algo, rk->rates[i].count,
                                  rk->rates[i].period_ns, burst);
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

static unsigned key_line(const struct sect *s, const char *name)
{
    for (size_t i = 0; i < NKEYS; i++)
        if (strcmp(keys[i].name, name) == 0)
            return s->key_line[i];
    return 0;
}

/* Fleet keys that mean nothing without `fleet`: an error, since a budget
 * the user believes shared would be host-wide. */
static void settle_fleet(struct pstate *ps)
{
    for (size_t i = 0; i < ps->nsects; i++) {
        const struct sect *s = &ps->sects[i];
        if (ps->cfg->fleet != NULL)
            break;
        if (s->kind == SK_RLSHIM) {
            unsigned l = key_line(s, "fleet_password");
            if (l != 0 && ps->cfg->fleet_password != NULL)
                err(ps, l, "'fleet_password' without 'fleet' in [rlshim]");
        } else if (sect_kinds[s->kind].rule &&
                   ps->cfg->rules[s->rule].scope == RL_SCOPE_FLEET) {
            err(ps, key_line(s, "scope"),
                "'scope = fleet' in [%s] needs 'fleet = redis://...' in "
                "[rlshim]",
                s->name);
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

    h = rl_hash_u64(h, 3); /* version of this hash's recipe */
    h = rl_hash_u64(h, c->max_users);
    h = rl_hash_u64(h, c->max_destinations);
    h = rl_hash_u64(h, c->nrules);
    for (size_t i = 0; i < c->nrules; i++) {
        const struct rl_rule *r = &c->rules[i];
        h = rl_hash_str(h, r->section);
        h = rl_hash_u64(h, r->algo);
        h = rl_hash_u64(h, (uint64_t)r->per);
        h = rl_hash_u64(h, r->max_open);
        if (r->scope != RL_SCOPE_HOST) /* host budgets hash as before */
            h = rl_hash_u64(h, (uint64_t)r->scope);
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
        free(cfg->rules[i].site);
        rl_dests_free(cfg->rules[i].to, cfg->rules[i].nto);
    }
    free(cfg->rules);
    free(cfg->log_path);
    free(cfg->decision_log);
    free(cfg->fleet);
    free(cfg->fleet_password);
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
    cfg->max_destinations = RL_CONFIG_MAX_DESTINATIONS_DEFAULT;
    if (cfg->path == NULL) {
        rl_config_free(cfg);
        return -ENOMEM;
    }

    memset(&ps, 0, sizeof ps);
    ps.name = name;
    ps.diag = diag;
    ps.text = text;
    ps.len = strlen(text);
    ps.cur = CUR_NONE;
    ps.cfg = cfg;

    /* inih 55 keeps its options in globals (our static copy's: the shim
     * exports no ini_* symbol). Ours: one value per line (a continuation
     * line would hide a mistake); a line without '=' goes to the handler,
     * which reports it, so that inih keeps calling it for every line after
     * (it stops after its first own error). Every load sets the same
     * values. */
    ini_allow_multiline = false;
    ini_stop_on_first_error = false;
    ini_allow_no_value = true; /* the handler reports such a line */
    ini_allow_inline_comments = true;
    ini_allow_bom = false; /* the reader does: inih's line 1 is not ours */
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
        if (sect_kinds[ps.sects[i].kind].rule)
            settle_rule(&ps, &ps.sects[i]);
    settle_fleet(&ps);
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

const struct rl_rule *rl_config_find_site(const struct rl_config *cfg,
                                          const void *sa, unsigned salen)
{
    struct rl_peer p;
    char name[RL_NAME_MAX + 1];

    if (!rl_peer_from_addr(sa, salen, &p))
        return NULL;
    return rl_config_find_site_peer(cfg, &p, name);
}

const struct rl_rule *rl_config_find_site_peer(const struct rl_config *cfg,
                                               struct rl_peer *p, char *name)
{
    for (size_t i = 0; i < cfg->nrules; i++) {
        const struct rl_rule *r = &cfg->rules[i];
        if (r->site != NULL && rl_dests_cover_peer(r->to, r->nto, p, name))
            return r;
    }
    return NULL;
}

bool rl_config_has_sites(const struct rl_config *cfg)
{
    for (size_t i = 0; i < cfg->nrules; i++)
        if (cfg->rules[i].site != NULL)
            return true;
    return false;
}

/* ---- names and formatting -----------------------------------------------*/

const char *rl_kind_name(int kind)
{
    return kind >= 0 && kind < RL_KIND_COUNT ? kind_names[kind] : "?";
}

const char *rl_errno_name(int e)
{
    for (unsigned i = 0; i < errno_words.n; i++)
        if (errno_words.values[i] == e)
            return errno_words.names[i];
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
