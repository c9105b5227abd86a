/* config.h — the quota table: the ini file, validated, made immutable.
 *
 * rl_config_load parses one file with the system inih and returns a table
 * that is never changed after: the shim reads it from every thread without
 * a lock. Every error names file:line and what is wrong; all errors of a
 * file are reported, not only the first. Nothing here touches the network,
 * the shared state or the clock.
 *
 * Loading sets inih's options, which are process globals in Debian's inih
 * 55: do not load from two threads at once (the shim loads once, at start;
 * the CLI has one thread). */
#ifndef RL_POLICY_CONFIG_H
#define RL_POLICY_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "limit/limit.h"
#include "policy/dest.h"
#include "util/parse.h"

/* What a limit counts (SPEC §1). */
enum rl_kind {
    RL_KIND_CONNECT = 0, /* new stream connections (and MSG_FASTOPEN) */
    RL_KIND_SEND = 1,    /* send-family calls (sendmmsg: per message) */
    RL_KIND_SEND_BYTES = 2,
    RL_KIND_REQUEST = 3, /* HTTP requests (SPEC §11) */
    RL_KIND_COUNT = 4,
};

/* Rates per kind, comma-separated in the file ("5/s, 100/min"). */
#define RL_MAX_RATES 4

/* The longest line accepted, in bytes, without its line ending. Longer
 * lines are an error (never a silently truncated value). */
#define RL_CONFIG_LINE_MAX 200

/* A config file larger than this is refused. */
#define RL_CONFIG_FILE_MAX (1u << 20)

/* max_users: the default and the largest accepted. */
#define RL_CONFIG_MAX_USERS_DEFAULT 4096u
#define RL_CONFIG_MAX_USERS_MAX 1048576u

/* max_destinations: the default and the largest accepted. */
#define RL_CONFIG_MAX_DESTINATIONS_DEFAULT 4096u
#define RL_CONFIG_MAX_DESTINATIONS_MAX 1048576u

/* The longest duration a key accepts (max_delay): one day. A clock
 * reading plus a duration then never wraps (CLOCK_MONOTONIC counts from
 * boot), and nothing a program waits for is meant to take longer. */
#define RL_CONFIG_DURATION_MAX_NS RL_NS_PER_DAY
#define RL_CONFIG_DURATION_MAX_TEXT "1 day"

/* max_open: the largest accepted. */
#define RL_CONFIG_MAX_OPEN_MAX 1048576u

/* A user name in [user:NAME] is at most this long (identity.h's buffers). */
#define RL_CONFIG_USER_MAX 63

/* The exit status of a process that RLSHIM_STRICT=1 stops at start-up for
 * a broken config (EX_CONFIG). */
#define RL_EXIT_CONFIG 78

enum rl_key_mode { RL_KEY_ENV = 0, RL_KEY_EXE = 1 };
enum rl_per { RL_PER_USER = 0, RL_PER_DESTINATION = 1 };
enum rl_on_deny { RL_DENY_FAIL = 0, RL_DENY_DELAY = 1 };
/* retry_after (SPEC §12): does a 429/503 pause the request budget? Obey
 * is 0: the default wherever a request limit is set. */
enum rl_retry_after { RL_RETRY_AFTER_OBEY = 0, RL_RETRY_AFTER_IGNORE = 1 };
/* max_retry_after's default: a longer pause asked by a server is cut. */
#define RL_MAX_RETRY_AFTER_DEFAULT_NS (600ull * 1000000000ull)
enum rl_state_mode { RL_STATE_SHARED = 0, RL_STATE_PROCESS = 1 };
enum rl_unknown { RL_UNKNOWN_ALLOW = 0, RL_UNKNOWN_DENY = 1 };
/* Fleet budgets (SPEC §8): what a process does while Redis is away, and
 * where a rule's budget lives. */
enum rl_fleet_fallback {
    RL_FLEET_SHARE = 0, /* the limits divided by the hosts seen active */
    RL_FLEET_LOCAL = 1, /* the full limits on this host alone */
    RL_FLEET_ALLOW = 2,
    RL_FLEET_DENY = 3,
};
enum rl_scope { RL_SCOPE_HOST = 0, RL_SCOPE_FLEET = 1 };
/* io_uring = deny: under a rule, syscall(SYS_io_uring_setup) answers
 * ENOSYS (so runtimes fall back to calls the shim sees); allow: untouched. */
enum rl_io_uring { RL_IO_URING_DENY = 0, RL_IO_URING_ALLOW = 1 };
enum rl_log_target {
    RL_LOG_OFF = 0,
    RL_LOG_STDERR = 1,
    RL_LOG_SYSLOG = 2,
    RL_LOG_FILE = 3,
};

struct rl_rule {
    char *section; /* "default", "user:1000", "user:scraper", "site:wiki" */
    char *user;    /* the part after "user:"; NULL for [default], sites */
    char *site;    /* the part after "site:"; NULL for user rules (a site
                      is never a user's rule: rl_config_find_rule skips it) */
    bool is_default;
    uint32_t algo; /* enum rl_algo_id */
    struct rl_limit limits[RL_KIND_COUNT][RL_MAX_RATES];
    unsigned nlimits[RL_KIND_COUNT]; /* 0 = that kind is not limited */
    struct rl_dest *to;              /* dest.h */
    size_t nto;                      /* 0 = every destination */
    int on_deny; /* enum rl_on_deny (inherited from [rlshim]) */
    uint64_t max_delay_ns;
    int deny_errno; /* EAGAIN, ECONNREFUSED, ETIMEDOUT, ENETUNREACH */
    bool dry_run;
    int per;       /* enum rl_per: destination = a budget per name */
    uint32_t max_open; /* connections open at once; 0 = not limited */
    int scope;     /* enum rl_scope; fleet only when cfg->fleet is set */
    int retry_after;             /* enum rl_retry_after (SPEC §12) */
    uint64_t max_retry_after_ns; /* the longest pause a 429/503 makes */
    unsigned line; /* where the section starts, for messages */
};

struct rl_config {
    char *path;
    int key_mode; /* enum rl_key_mode */
    int on_deny;  /* enum rl_on_deny */
    uint64_t max_delay_ns;
    int deny_errno;
    int state_mode; /* enum rl_state_mode */
    int unknown;    /* enum rl_unknown */
    int log_target; /* enum rl_log_target */
    char *log_path; /* RL_LOG_FILE */
    char *decision_log; /* SPEC §9, NULL: off (RLSHIM_DECISION_LOG wins) */
    bool dry_run;
    bool report;
    int io_uring;   /* enum rl_io_uring */
    uint32_t max_users;
    uint32_t max_destinations; /* entries of the per-destination table */
    char *fleet;          /* "redis://..." or "unix:..." as written; NULL: off */
    char *fleet_password; /* the file holding it (checked at load) */
    int fleet_fallback;   /* enum rl_fleet_fallback */
    struct rl_rule *rules; /* in file order */
    size_t nrules;
    uint64_t hash; /* stable hash of what shapes the budgets: rules,
                      algorithms, limits, max_users (not of the text,
                      nor of on_deny/errno/to/log...: see
                      config_sections.c) */
};

/* Error messages, each "file:line: what is wrong" (no newline). Start it
 * zeroed; rl_diag_free empties it. */
struct rl_diag {
    char **msgs;
    size_t n;
};

void rl_diag_free(struct rl_diag *d);

/* The one stderr line a host program gets for a broken config (SPEC §4),
 * newline included: "rlshim: FIRST ERROR (and N more: run 'rlshim check');
 * nothing is throttled" or, when `strict` (RLSHIM_STRICT=1), "...; exiting
 * with status 78 (RLSHIM_STRICT=1)". Truncated to fit `len`; returns the
 * length written (without the NUL). */
size_t rl_config_error_line(const struct rl_diag *d, bool strict, char *buf,
                            size_t len);

/* Parse `path`. Returns 0 and *out, or -EINVAL with every problem in
 * `diag` (or another -errno when the file cannot be read, also with a
 * message in diag). */
int rl_config_load(const char *path, struct rl_config **out,
                   struct rl_diag *diag);

/* The same from a string; `name` is what messages call the file. */
int rl_config_load_string(const char *text, const char *name,
                          struct rl_config **out, struct rl_diag *diag);

void rl_config_free(struct rl_config *cfg);

/* The file the shim reads: $RLSHIM_CONFIG (secure_getenv; empty counts as
 * unset) else RL_SYSCONFDIR "/rlshim.ini". */
const char *rl_config_path_from_env(void);

/* What the shim calls at load: parse rl_config_path_from_env(). Returns 0
 * with *out NULL when there is no config at all (RLSHIM_CONFIG unset and
 * the sysconfdir file missing: nothing is throttled), 0 with *out set, or
 * -errno with every problem in `diag` (RLSHIM_CONFIG naming a file that
 * cannot be read is an error). */
int rl_config_load_env(struct rl_config **out, struct rl_diag *diag);

/* The rule for a caller (SPEC §3): the first of [user:KEY], [user:UID],
 * [user:LOGIN], [default]. key and login may be NULL. NULL when none
 * matches. */
const struct rl_rule *rl_config_find_rule(const struct rl_config *cfg,
                                          const char *key, uint32_t uid,
                                          const char *login);

/* The site section that a call to `sa` is charged to besides the user's
 * rule (SPEC §3): the first [site:LABEL] in file order whose `to` covers
 * it (a site without `to` covers every destination; a name entry looks
 * the address's name up in `names`, policy/names.h, NULL: none). NULL
 * when none. */
const struct rl_rule *rl_config_find_site(struct rl_names *names,
                                          const struct rl_config *cfg,
                                          const void *sa, unsigned salen);

/* The same for a peer taken apart already (dest.h); `name` (RL_NAME_MAX
 * + 1 bytes) receives its name when a `to` needs it (kept in p). */
const struct rl_rule *rl_config_find_site_peer(const struct rl_config *cfg,
                                               struct rl_peer *p, char *name);

/* Does the file hold a site section at all? */
bool rl_config_has_sites(const struct rl_config *cfg);

/* Does `rule` cover this destination? `sa` is a struct sockaddr of family
 * AF_INET or AF_INET6 (IPv4-mapped IPv6 is matched as IPv4); other
 * families never match. A rule with no `to` list covers every inet
 * destination. Name entries look the name up in `names` (NULL: none). */
static inline bool rl_rule_covers(struct rl_names *names,
                                  const struct rl_rule *rule, const void *sa,
                                  unsigned salen)
{
    return rl_dests_cover(names, rule->to, rule->nto, sa, salen);
}

/* Names for messages and for `rlshim check`/`stat`. */
const char *rl_kind_name(int kind); /* "connect", "send", "send_bytes" */
const char *rl_errno_name(int err); /* "EAGAIN", ...; "?" for others */

/* A limit as the file would spell it ("5/s", "1MiB/s", "250/100ms" never:
 * the period is always one unit). Returns what snprintf returns. */
int rl_config_format_rate(int kind, const struct rl_limit *lim, char *buf,
                          size_t len);

/* A `to` entry as the file would spell it ("10.0.0.0/8", "[::1]:443"). */
static inline int rl_config_format_dest(const struct rl_dest *d, char *buf,
                                        size_t len)
{
    return rl_dest_format(d, buf, len);
}

/* The keys the file may hold, in the parser's table: i from 0 to
 * rl_config_key_count() - 1 (for tests that keep the docs honest). */
size_t rl_config_key_count(void);
const char *rl_config_key_name(size_t i);

#endif
