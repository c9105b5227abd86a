/* config.c — the ini file, through the system inih, into an immutable table:
 * the key table, the reader and the handler that dispatches by it, and
 * loading. The value parsers are in config_values.c, the sections and
 * what is settled after the file in config_sections.c, the look-ups in
 * config_find.c (config_int.h says what they share).
 *
 * What a key is lives in one table (rl_cfg_keys[], below): its name, the kinds
 * of section it may appear in, the parser of its value and the field that value
 * sets, in [rlshim] and in a rule. Section kinds are a table too
 * (rl_cfg_sect_kinds[]). Adding a key is a row and, when no parser fits, a
 * parser; adding a section kind is a row; the messages (did you mean, where a
 * key belongs, which sections exist) are built from the tables.
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

#include "policy/config_int.h"
#include "policy/names.h"
#include "policy/suggest.h"
#include "util/parse.h"
#include "util/sys.h"

#ifndef RL_SYSCONFDIR
#define RL_SYSCONFDIR "/etc"
#endif

/* ---- words --------------------------------------------------------------*/

/* The word's index is its value: the enums of config.h count from 0. */
_Static_assert(RL_ADAPT_MODE_LATENCY == 1 && RL_CRAWL_DELAY_IGNORE == 1,
               "a word list is in the order of its enum");
_Static_assert(RL_KEY_EXE == 1 && RL_KEY_CGROUP == 2 && RL_DENY_DELAY == 1 &&
                   RL_STATE_PROCESS == 1 &&
                   RL_UNKNOWN_DENY == 1 && RL_FLEET_DENY == 3 &&
                   RL_SCOPE_FLEET == 1 && RL_IO_URING_ALLOW == 1 &&
                   RL_PER_DESTINATION == 1 && RL_PER_DOMAIN == 2 &&
                   RL_PER_ADDRESS == 3,
               "a word list is in the order of its enum");
static const char *const key_names[] = {"env", "exe", "cgroup"};
static const char *const on_deny_names[] = {"fail", "delay", "respond"};
static const char *const state_names[] = {"shared", "process"};
static const char *const unknown_names[] = {"allow", "deny"};
static const char *const fallback_names[] = {"share", "local", "allow", "deny"};
static const char *const scope_names[] = {"host", "fleet"};
static const char *const io_uring_names[] = {"deny", "allow"};
static const char *const algo_names[] = {"token_bucket", "sliding_window"};
static const char *const per_names[] = {"user", "destination", "domain",
                                        "address"};
static const char *const retry_after_names[] = {"obey", "ignore"};
static const char *const adapt_names[] = {"off", "latency"};
static const char *const crawl_delay_names[] = {"obey", "ignore"};
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
static const struct words retry_after_words = {retry_after_names, NULL,
                                               NELEM(retry_after_names)};
static const struct words adapt_words = {adapt_names, NULL,
                                         NELEM(adapt_names)};
static const struct words crawl_delay_words = {crawl_delay_names, NULL,
                                               NELEM(crawl_delay_names)};
static const char *const respond_status_names[] = {"429", "503"};
static const int respond_status_values[] = {429, 503};
static const struct words respond_status_words = {
    respond_status_names, respond_status_values, NELEM(respond_status_names)};
static const struct words errno_words = {errno_names, errno_values,
                                         NELEM(errno_names)};

const char *rl_errno_name(int e)
{
    for (unsigned i = 0; i < errno_words.n; i++)
        if (errno_words.values[i] == e)
            return errno_words.names[i];
    return "?";
}

/* ---- keys ---------------------------------------------------------------*/

#define CFG(f)                                                                 \
    .cfg_off = offsetof(struct rl_config, f),                                  \
    .cfg_size = sizeof(((struct rl_config *)0)->f)
#define RULE(f)                                                                \
    .rule_off = offsetof(struct rl_rule, f),                                   \
    .rule_size = sizeof(((struct rl_rule *)0)->f)

/* A key of both [rlshim] and rules sets the same field in each; a rule
 * that does not set it inherits [rlshim]'s value (settle_rule). */
const struct key rl_cfg_keys[] = {
    {"key", IN_RLSHIM, rl_cfg_p_word, CFG(key_mode), .words = &key_words},
    {"on_deny", IN_RLSHIM | IN_RULE, rl_cfg_p_word, CFG(on_deny), RULE(on_deny),
     .words = &on_deny_words},
    {"respond_status", IN_RLSHIM | IN_RULE, rl_cfg_p_word, CFG(respond_status),
     RULE(respond_status), .words = &respond_status_words},
    {"max_delay", IN_RLSHIM | IN_RULE, rl_cfg_p_duration, CFG(max_delay_ns),
     RULE(max_delay_ns)},
    {"errno", IN_RLSHIM | IN_RULE, rl_cfg_p_word, CFG(deny_errno),
     RULE(deny_errno), .words = &errno_words},
    {"state", IN_RLSHIM, rl_cfg_p_word, CFG(state_mode), .words = &state_words},
    {"unknown", IN_RLSHIM, rl_cfg_p_word, CFG(unknown),
     .words = &unknown_words},
    {"log", IN_RLSHIM, rl_cfg_p_log, CFG(log_target)},
    {"decision_log", IN_RLSHIM, rl_cfg_p_decision_log, CFG(decision_log)},
    {"dry_run", IN_RLSHIM | IN_RULE, rl_cfg_p_bool, CFG(dry_run),
     RULE(dry_run)},
    {"report", IN_RLSHIM, rl_cfg_p_bool, CFG(report)},
    {"io_uring", IN_RLSHIM, rl_cfg_p_word, CFG(io_uring),
     .words = &io_uring_words},
    {"max_users", IN_RLSHIM, rl_cfg_p_count, CFG(max_users),
     .max = RL_CONFIG_MAX_USERS_MAX},
    {"max_destinations", IN_RLSHIM, rl_cfg_p_count, CFG(max_destinations),
     .max = RL_CONFIG_MAX_DESTINATIONS_MAX},
    {"algorithm", IN_RULE, rl_cfg_p_algorithm, RULE(algo),
     .words = &algo_words},
    {"connect", IN_RULE, rl_cfg_p_rates, .kind = RL_KIND_CONNECT},
    {"connect_burst", IN_RULE, rl_cfg_p_bursts, .kind = RL_KIND_CONNECT},
    {"send", IN_RULE, rl_cfg_p_rates, .kind = RL_KIND_SEND},
    {"send_burst", IN_RULE, rl_cfg_p_bursts, .kind = RL_KIND_SEND},
    {"send_bytes", IN_RULE, rl_cfg_p_rates, .kind = RL_KIND_SEND_BYTES},
    {"send_bytes_burst", IN_RULE, rl_cfg_p_bursts, .kind = RL_KIND_SEND_BYTES},
    {"request", IN_RULE, rl_cfg_p_rates, .kind = RL_KIND_REQUEST},
    {"request_burst", IN_RULE, rl_cfg_p_bursts, .kind = RL_KIND_REQUEST},
    {"to", IN_RULE, rl_cfg_p_to, RULE(to)},
    {"per", IN_RULE, rl_cfg_p_word, RULE(per), .words = &per_words},
    {"max_open", IN_RULE, rl_cfg_p_count, RULE(max_open),
     .max = RL_CONFIG_MAX_OPEN_MAX},
    {"fleet", IN_RLSHIM, rl_cfg_p_fleet, CFG(fleet)},
    {"fleet_password", IN_RLSHIM, rl_cfg_p_fleet_password, CFG(fleet_password)},
    {"fleet_fallback", IN_RLSHIM, rl_cfg_p_word, CFG(fleet_fallback),
     .words = &fallback_words},
    {"scope", IN_RULE, rl_cfg_p_word, RULE(scope), .words = &scope_words},
    {"retry_after", IN_RULE, rl_cfg_p_word, RULE(retry_after),
     .words = &retry_after_words},
    {"max_retry_after", IN_RULE, rl_cfg_p_duration, RULE(max_retry_after_ns)},
    {"adapt", IN_RULE, rl_cfg_p_word, RULE(adapt), .words = &adapt_words},
    {"adapt_factor", IN_RULE, rl_cfg_p_factor, RULE(adapt_factor_milli),
     .max = RL_ADAPT_FACTOR_MAX_MILLI},
    {"max_interval", IN_RULE, rl_cfg_p_duration, RULE(max_interval_ns)},
    {"backoff_on", IN_RULE, rl_cfg_p_backoff_on, RULE(backoff_on)},
    {"response_timeout", IN_RULE, rl_cfg_p_duration, RULE(response_timeout_ns)},
    {"crawl_delay", IN_RULE, rl_cfg_p_word, RULE(crawl_delay),
     .words = &crawl_delay_words},
    {"max_crawl_delay", IN_RULE, rl_cfg_p_duration, RULE(max_crawl_delay_ns)},
    {"jitter", IN_RULE, rl_cfg_p_percent, RULE(jitter_pct), .max = 100},
};

_Static_assert(NELEM(rl_cfg_keys) == RL_CFG_NKEYS,
               "RL_CFG_NKEYS is the rows of rl_cfg_keys[]");

size_t rl_config_key_count(void)
{
    return RL_CFG_NKEYS;
}

const char *rl_config_key_name(size_t i)
{
    return i < RL_CFG_NKEYS ? rl_cfg_keys[i].name : NULL;
}

/* ---- diagnostics --------------------------------------------------------*/

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

void rl_cfg_err(struct pstate *ps, unsigned line, const char *fmt, ...)
{
    char msg[400];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (!diag_add(ps->diag, "%s:%u: %s", ps->name, line, msg))
        ps->nomem = true;
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
            rl_cfg_err(ps, ps->lineno, "line longer than %zu bytes", max);
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
            rl_cfg_section_line(ps, str);
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
        rl_cfg_err(ps, ps->lineno, "expected 'key = value' or '[section]'");
        return 1;
    }
    if (*name == '\0') {
        /* inih split at the line's first byte: that is the separator. */
        rl_cfg_err(ps, ps->lineno, "missing key name before '%c'", ps->first);
        return 1;
    }
    if (ps->cur == CUR_SKIP)
        return 1; /* already reported */
    if (ps->cur == CUR_NONE) {
        rl_cfg_err(ps, ps->lineno, "key '%s' before any [section]", name);
        return 1;
    }
    s = &ps->sects[ps->cur];

    for (i = 0; i < RL_CFG_NKEYS && k == NULL; i++)
        if (strcmp(name, rl_cfg_keys[i].name) == 0)
            k = &rl_cfg_keys[i];
    if (k == NULL) {
        struct rl_suggest sg;
        rl_suggest_init(&sg, name, 2);
        for (i = 0; i < RL_CFG_NKEYS; i++)
            if (rl_cfg_keys[i].where & IN(s->kind))
                rl_suggest_offer(&sg, rl_cfg_keys[i].name);
        if (sg.best != NULL)
            rl_cfg_err(ps, ps->lineno,
                       "unknown key '%s' in [%s] (did you mean '%s'?)", name,
                       s->name, sg.best);
        else
            rl_cfg_err(ps, ps->lineno, "unknown key '%s' in [%s]", name,
                       s->name);
        return 1;
    }
    if (!(k->where & IN(s->kind))) {
        char list[128];
        rl_cfg_list_sections(k->where, list, sizeof list);
        rl_cfg_err(ps, ps->lineno,
                   "key '%s' does not belong in [%s] (it goes in %s)", name,
                   s->name, list);
        return 1;
    }
    i = (size_t)(k - rl_cfg_keys);
    if (s->key_line[i] != 0) {
        rl_cfg_err(ps, ps->lineno,
                   "duplicate key '%s' in [%s] (first at line %u)", name,
                   s->name, s->key_line[i]);
        return 1;
    }
    s->key_line[i] = ps->lineno;
    if (*v == '\0') {
        rl_cfg_err(ps, ps->lineno, "empty value for '%s' in [%s]", name,
                   s->name);
        return 1;
    }
    if (rl_cfg_sect_kinds[s->kind].rule && k->rule_size != 0)
        field = (char *)cur_rule(ps) + k->rule_off;
    else if (!rl_cfg_sect_kinds[s->kind].rule && k->cfg_size != 0)
        field = (char *)ps->cfg + k->cfg_off;
    k->parse(ps, k, field, v);
    return 1;
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
    cfg->respond_status = 429;
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
        rl_cfg_err(&ps, rc > 0 ? (unsigned)rc : ps.lineno, "syntax error");
    }
    rl_cfg_settle(&ps);
    free(ps.sects);

    if (ps.nomem) {
        rl_config_free(cfg);
        return -ENOMEM;
    }
    if (diag->n != nerr0) {
        rl_config_free(cfg);
        return -EINVAL;
    }
    cfg->hash = rl_cfg_hash(cfg);
    rl_cfg_adapt_settle(cfg);
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
    fd = rl_sys.openat(AT_FDCWD, path,
                       O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK, 0);
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
        ssize_t got = rl_sys.read(fd, buf + n, cap - n - 1);
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
    rl_sys.close(fd);
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
