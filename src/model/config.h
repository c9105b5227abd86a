/* config.h — the config model: what a loaded file says (struct rl_config,
 * its rules, the words its keys take), as fleet, state's users and policy
 * read it. Loading, look-ups and messages are policy/config.h's.
 *
 * Below policy and fleet (src/README.md): includes only model/, limit/
 * (a rule holds its limits prepared, struct rl_limit, which the config
 * hash covers and the limiters read as they are) and util/. */
#ifndef RL_MODEL_CONFIG_H
#define RL_MODEL_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "limit/limit.h"
#include "model/kinds.h"
#include "util/parse.h"

struct rl_dest; /* a `to` entry: policy/dest.h */

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
#define RL_CONFIG_USER_MAX 191

/* The exit status of a process that RLSHIM_STRICT=1 stops at start-up for
 * a broken config (EX_CONFIG). */
#define RL_EXIT_CONFIG 78

/* cgroup: the process's cgroup v2 path, "cgroup:PATH" (SPEC §16). */
enum rl_key_mode { RL_KEY_ENV = 0, RL_KEY_EXE = 1, RL_KEY_CGROUP = 2 };
/* per (SPEC §3): one budget for the section's users, or one per
 * destination, keyed by its name, its registrable domain or the address
 * the connection went to. */
enum rl_per {
    RL_PER_USER = 0,
    RL_PER_DESTINATION = 1,
    RL_PER_DOMAIN = 2,
    RL_PER_ADDRESS = 3
};
/* respond (SPEC §15): a request over its budget is answered by the shim
 * with a made-up 429/503; every other call denied under it fails. */
enum rl_on_deny { RL_DENY_FAIL = 0, RL_DENY_DELAY = 1, RL_DENY_RESPOND = 2 };
/* retry_after (SPEC §12): does a 429/503 pause the request budget? Obey
 * is 0: the default wherever a request limit is set. */
enum rl_retry_after { RL_RETRY_AFTER_OBEY = 0, RL_RETRY_AFTER_IGNORE = 1 };
/* max_retry_after's default: a longer pause asked by a server is cut. */
#define RL_MAX_RETRY_AFTER_DEFAULT_NS (600ull * 1000000000ull)
/* Politeness that adapts (SPEC §14). adapt: does a destination's interval
 * follow its response time? crawl_delay: does robots.txt's Crawl-delay
 * space its requests? Obey is 0: the default wherever a request limit is
 * set. */
enum rl_adapt_mode { RL_ADAPT_MODE_OFF = 0, RL_ADAPT_MODE_LATENCY = 1 };
enum rl_crawl_delay { RL_CRAWL_DELAY_OBEY = 0, RL_CRAWL_DELAY_IGNORE = 1 };
/* backoff_on: the causes that pause a destination without Retry-After. */
enum {
    RL_BACKOFF_429 = 1u << 0,
    RL_BACKOFF_503 = 1u << 1,
    RL_BACKOFF_5XX = 1u << 2, /* any 500-599 */
    RL_BACKOFF_RESET = 1u << 3,
    RL_BACKOFF_TIMEOUT = 1u << 4,
};
#define RL_BACKOFF_ON_DEFAULT (RL_BACKOFF_429 | RL_BACKOFF_503)
#define RL_ADAPT_FACTOR_DEFAULT_MILLI 2000u
#define RL_ADAPT_FACTOR_MAX_MILLI 100000u
#define RL_MAX_INTERVAL_DEFAULT_NS (60ull * 1000000000ull)
#define RL_RESPONSE_TIMEOUT_DEFAULT_NS (30ull * 1000000000ull)
#define RL_MAX_CRAWL_DELAY_DEFAULT_NS (30ull * 1000000000ull)
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
    struct rl_dest *to;              /* policy/dest.h */
    size_t nto;                      /* 0 = every destination */
    int on_deny; /* enum rl_on_deny (inherited from [rlshim]) */
    int respond_status; /* on_deny = respond: 429 or 503 (inherited) */
    uint64_t max_delay_ns;
    int deny_errno; /* EAGAIN, ECONNREFUSED, ETIMEDOUT, ENETUNREACH */
    bool dry_run;
    int per;       /* enum rl_per: all but user = a budget per destination
                      key (rl_rule_per_dest) */
    uint32_t max_open; /* connections open at once; 0 = not limited */
    int scope;     /* enum rl_scope; fleet only when cfg->fleet is set */
    int retry_after;             /* enum rl_retry_after (SPEC §12) */
    uint64_t max_retry_after_ns; /* the longest pause a 429/503 makes */
    int adapt;                   /* enum rl_adapt_mode (SPEC §14) */
    uint32_t adapt_factor_milli; /* adapt_factor, in thousandths */
    uint64_t max_interval_ns;    /* adaptation's ceiling */
    uint32_t backoff_on;         /* RL_BACKOFF_* */
    uint64_t response_timeout_ns; /* backoff_on = timeout */
    int crawl_delay;             /* enum rl_crawl_delay */
    uint64_t max_crawl_delay_ns; /* a Crawl-delay is cut to this */
    uint32_t jitter_pct;         /* jitter = P%: 0 to 100 */
    unsigned line; /* where the section starts, for messages */
};

struct rl_config {
    char *path;
    int key_mode; /* enum rl_key_mode */
    int on_deny;  /* enum rl_on_deny */
    int respond_status; /* 429 (default) or 503 */
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
    /* The shortest response_timeout of a section that obeys servers and
     * lists backoff_on = timeout (0: none does): a request outstanding
     * less long is not late, and without one no request is looked at. */
    uint64_t response_timeout_ns;
    uint64_t hash; /* stable hash of what shapes the budgets: rules,
                      algorithms, limits, max_users (not of the text,
                      nor of on_deny/errno/to/log...: see
                      config_sections.c) */
};

/* Does section r give each destination a budget of its own (`per` =
 * destination, domain or address)? */
static inline bool rl_rule_per_dest(const struct rl_rule *r)
{
    return r->per != RL_PER_USER;
}

#endif
