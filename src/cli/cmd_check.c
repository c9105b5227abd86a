/* cmd_check.c — `rlshim check [-c FILE]`: validate the config and print the
 * table it means, one line per rule and limit; or every error and exit 1. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/check_diff.h"
#include "cli/commands.h"
#include "cli/explain.h"
#include "cli/host.h"
#include "fleet/fleet.h"
#include "policy/config.h"
#include "policy/regdomain.h"
#include "util/parse.h"

#ifndef RL_VERSION
#define RL_VERSION "unknown"
#endif

static const char usage[] =
    "usage: rlshim check [-c FILE]\n"
    "       rlshim check [-c FILE] --explain [-k KEY] URL|HOST[:PORT]\n"
    "       rlshim check [-c FILE] --host\n"
    "       rlshim check [-c FILE] --diff EDITED\n"
    "\n"
    "Validate the config and print the quota table it describes, one line\n"
    "per rule and limit. Exit 0 when valid, 1 with every error otherwise.\n"
    "With --explain, resolve the target and say which rule, site and budget\n"
    "a connection there is charged to, with their limits.\n"
    "\n"
    "  -c, --config FILE  the config (default: $RLSHIM_CONFIG, else\n"
    "                     " RL_SYSCONFDIR "/rlshim.ini)\n"
    "  -d, --diff EDITED  which budgets an edit (EDITED) of the config in\n"
    "                     use would restart in running processes, and\n"
    "                     which keep their state\n"
    "  -e, --explain      explain a destination (URL or HOST[:PORT])\n"
    "      --host         does this host preload the shim for every program\n"
    "                     (/etc/ld.so.preload), and whom does it throttle?\n"
    "  -k, --key KEY      as a process with RLSHIM_KEY=KEY (default: this\n"
    "                     process's own identity)\n"
    "  -h, --help         this text\n"
    "  -V, --version      the version\n";

/* "500ms", "10s", "2min": the largest unit that divides exactly. */
static void format_duration(uint64_t ns, char *buf, size_t len)
{
    static const struct {
        const char *name;
        uint64_t ns;
    } u[] = {{"h", RL_NS_PER_H},   {"min", RL_NS_PER_MIN}, {"s", RL_NS_PER_S},
             {"ms", RL_NS_PER_MS}, {"us", RL_NS_PER_US},   {"ns", 1}};

    if (ns == 0) {
        snprintf(buf, len, "0");
        return;
    }
    for (size_t i = 0; i < sizeof u / sizeof u[0]; i++) {
        if (ns % u[i].ns == 0) {
            snprintf(buf, len, "%llu%s", (unsigned long long)(ns / u[i].ns),
                     u[i].name);
            return;
        }
    }
}

static void format_size(uint64_t b, char *buf, size_t len)
{
    static const struct {
        const char *name;
        uint64_t mul;
    } u[] = {{"GiB", 1ull << 30},   {"MiB", 1ull << 20}, {"KiB", 1ull << 10},
             {"GB", 1000000000ull}, {"MB", 1000000ull},  {"KB", 1000ull}};

    for (size_t i = 0; i < sizeof u / sizeof u[0]; i++) {
        if (b >= u[i].mul && b % u[i].mul == 0) {
            snprintf(buf, len, "%llu%s", (unsigned long long)(b / u[i].mul),
                     u[i].name);
            return;
        }
    }
    snprintf(buf, len, "%lluB", (unsigned long long)b);
}

static const char *log_name(const struct rl_config *cfg)
{
    static const char *const names[] = {"off", "stderr", "syslog"};
    if (cfg->log_target == RL_LOG_FILE)
        return cfg->log_path;
    return names[cfg->log_target];
}

/* The USER column's width: the longest section name, at least 16 (a
 * cgroup section's path is often longer than the column). */
static int user_width = 16;

static void print_row(const struct rl_rule *r, const char *kind,
                      const char *algo, const char *rate, const char *burst,
                      const char *to)
{
    char deny[64], delay[32];

    if (r->on_deny == RL_DENY_RESPOND) {
        /* Requests get the status; the other kinds fail with the errno. */
        snprintf(deny, sizeof deny, "respond=%d,%s%s", r->respond_status,
                 rl_errno_name(r->deny_errno), r->dry_run ? ",dry_run" : "");
    } else if (r->on_deny == RL_DENY_DELAY) {
        format_duration(r->max_delay_ns, delay, sizeof delay);
        snprintf(deny, sizeof deny, "delay<=%s,%s%s", delay,
                 rl_errno_name(r->deny_errno), r->dry_run ? ",dry_run" : "");
    } else {
        snprintf(deny, sizeof deny, "fail,%s%s", rl_errno_name(r->deny_errno),
                 r->dry_run ? ",dry_run" : "");
    }
    printf("%-*s %-10s %-14s %-10s %-7s %-26s %s\n", user_width, r->section,
           kind, algo, rate, burst, deny, to);
}

static void print_table(const struct rl_config *cfg, const char *path)
{
    char md[32];

    format_duration(cfg->max_delay_ns, md, sizeof md);
    printf("%s: valid; %zu rule%s; key=%s on_deny=%s max_delay=%s errno=%s "
           "dry_run=%s state=%s unknown=%s log=%s report=%s max_users=%u "
           "hash=%016llx\n",
           path, cfg->nrules, cfg->nrules == 1 ? "" : "s",
           cfg->key_mode == RL_KEY_EXE      ? "exe"
           : cfg->key_mode == RL_KEY_CGROUP ? "cgroup"
                                            : "env",
           cfg->on_deny == RL_DENY_DELAY     ? "delay"
           : cfg->on_deny == RL_DENY_RESPOND ? "respond"
                                             : "fail",
           md,
           rl_errno_name(cfg->deny_errno), cfg->dry_run ? "yes" : "no",
           cfg->state_mode == RL_STATE_PROCESS ? "process" : "shared",
           cfg->unknown == RL_UNKNOWN_DENY ? "deny" : "allow", log_name(cfg),
           cfg->report ? "yes" : "no", cfg->max_users,
           (unsigned long long)cfg->hash);
    user_width = 16;
    for (size_t i = 0; i < cfg->nrules; i++) {
        size_t n = strlen(cfg->rules[i].section);
        if (n > (size_t)user_width && n < 256)
            user_width = (int)n;
    }
    printf("%-*s %-10s %-14s %-10s %-7s %-26s %s\n", user_width, "USER",
           "LIMIT", "ALGORITHM", "RATE", "BURST", "ON_DENY", "TO");

    for (size_t i = 0; i < cfg->nrules; i++) {
        const struct rl_rule *r = &cfg->rules[i];
        const char *algo = r->algo == RL_ALGO_SLIDING_WINDOW ? "sliding_window"
                                                             : "token_bucket";
        char to[1024] = "all";
        unsigned rows = 0;

        for (size_t j = 0; j < r->nto; j++) {
            char one[64];
            rl_config_format_dest(&r->to[j], one, sizeof one);
            if (j == 0)
                to[0] = '\0';
            else
                strncat(to, ",", sizeof to - strlen(to) - 1);
            strncat(to, one, sizeof to - strlen(to) - 1);
        }
        for (int k = 0; k < RL_KIND_COUNT; k++) {
            for (unsigned n = 0; n < r->nlimits[k]; n++) {
                const struct rl_limit *l = &r->limits[k][n];
                char rate[48], burst[32];
                rl_config_format_rate(k, l, rate, sizeof rate);
                if (r->algo == RL_ALGO_SLIDING_WINDOW)
                    snprintf(burst, sizeof burst, "-");
                else if (rl_kinds[k].sizes)
                    format_size(l->burst, burst, sizeof burst);
                else
                    snprintf(burst, sizeof burst, "%llu",
                             (unsigned long long)l->burst);
                print_row(r, rl_kind_name(k), algo, rate, burst, to);
                rows++;
            }
        }
        if (rows == 0)
            print_row(r, "-", "-", "unlimited", "-", to);
    }
    if (cfg->nrules == 0 || !cfg->rules[cfg->nrules - 1].is_default) {
        bool has_default = false;
        for (size_t i = 0; i < cfg->nrules; i++)
            has_default |= cfg->rules[i].is_default;
        if (!has_default)
            printf("(anyone else: %s)\n",
                   cfg->unknown == RL_UNKNOWN_DENY ? "every call denied"
                   : rl_config_has_sites(cfg)      ? "only the sites apply"
                                                   : "not throttled");
    }
}

/* Which budgets live in Redis, and whether it answers (a valid config
 * whose Redis is away still exits 0: the shim would use fleet_fallback). */
static void print_fleet(const struct rl_config *cfg)
{
    static const char *const fb[] = {"share", "local", "allow", "deny"};
    char list[1024] = "";
    uint64_t rtt = 0;
    char why[256] = "";

    if (cfg->fleet == NULL)
        return;
    for (size_t i = 0; i < cfg->nrules; i++) {
        if (cfg->rules[i].scope != RL_SCOPE_FLEET)
            continue;
        strncat(list, list[0] ? ", [" : "[", sizeof list - strlen(list) - 1);
        strncat(list, cfg->rules[i].section, sizeof list - strlen(list) - 1);
        strncat(list, "]", sizeof list - strlen(list) - 1);
    }
    printf("fleet: %s fallback=%s password=%s; fleet budgets: %s\n",
           cfg->fleet, fb[cfg->fleet_fallback & 3],
           cfg->fleet_password != NULL ? cfg->fleet_password : "none",
           list[0] ? list : "none (every budget is host-wide)");
    if (rl_fleet_ping(cfg, &rtt, why, sizeof why) == 0)
        printf("fleet: %s answers (PING %llu.%03llu ms)\n", cfg->fleet,
               (unsigned long long)(rtt / 1000000),
               (unsigned long long)(rtt / 1000 % 1000));
    else
        printf("fleet: %s is not answering (%s): fleet budgets would use "
               "fleet_fallback = %s\n",
               cfg->fleet, why, fb[cfg->fleet_fallback & 3]);
}

/* per = domain: which Public Suffix List keys it, or why none can. */
static void print_domains(const struct rl_config *cfg)
{
    struct rl_regdomain psl = {0};
    for (size_t i = 0; i < cfg->nrules; i++) {
        const struct rl_rule *r = &cfg->rules[i];
        if (r->per != RL_PER_DOMAIN)
            continue;
        if (!rl_regdomain_tried(&psl))
            rl_regdomain_load(&psl, RL_REGDOMAIN_LIB);
        if (rl_regdomain_ready(&psl))
            printf("per = domain [%s]: registrable domains by %s\n",
                   r->section, rl_regdomain_source(&psl));
        else
            printf("per = domain [%s]: %s: keyed by name instead (as per = "
                   "destination); install libpsl5\n",
                   r->section, rl_regdomain_source(&psl));
    }
    rl_regdomain_close(&psl);
}

/* --diff: the edited file must be valid first (a running process keeps
 * its config otherwise). */
static int check_diff(const struct rl_config *cur, const char *path,
                      const char *edited)
{
    struct rl_config *next = NULL;
    struct rl_diag d = {0};
    int rc = rl_config_load(edited, &next, &d);
    if (rc < 0) {
        for (size_t i = 0; i < d.n; i++)
            fprintf(stderr, "%s\n", d.msgs[i]);
        if (d.n == 0)
            fprintf(stderr, "rlshim check: %s: %s\n", edited, strerror(-rc));
        fprintf(stderr, "rlshim check: running processes would keep the "
                        "config in use\n");
        rl_diag_free(&d);
        return 1;
    }
    rc = rl_cli_check_diff(cur, path, next, edited);
    rl_config_free(next);
    return rc;
}

int rl_cmd_check(int argc, char **argv)
{
    static const struct option opts[] = {
        {"config", required_argument, NULL, 'c'},
        {"diff", required_argument, NULL, 'd'},
        {"explain", no_argument, NULL, 'e'},
        {"host", no_argument, NULL, 'H'},
        {"key", required_argument, NULL, 'k'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    const char *copt = NULL, *path, *env, *key = NULL, *edited = NULL;
    bool explain = false, host = false;
    struct rl_config *cfg = NULL;
    struct rl_diag d = {0};
    int c, rc;

    while ((c = getopt_long(argc, argv, "+c:d:ek:hV", opts, NULL)) != -1) {
        switch (c) {
        case 'c':
            copt = optarg;
            break;
        case 'd':
            edited = optarg;
            break;
        case 'e':
            explain = true;
            break;
        case 'H':
            host = true;
            break;
        case 'k':
            key = optarg;
            break;
        case 'h':
            fputs(usage, stdout);
            return 0;
        case 'V':
            printf("rlshim %s\n", RL_VERSION);
            return 0;
        default:
            fputs(usage, stderr);
            return 2;
        }
    }
    if (explain ? optind != argc - 1 : optind != argc) {
        if (explain && optind == argc)
            fprintf(stderr, "rlshim check: --explain needs a URL or "
                            "HOST[:PORT]\n%s",
                    usage);
        else
            fprintf(stderr, "rlshim check: unexpected argument '%s'\n%s",
                    argv[optind + explain], usage);
        return 2;
    }
    if (host && explain) {
        fprintf(stderr, "rlshim check: --host and --explain are two "
                        "questions: ask one\n%s",
                usage);
        return 2;
    }
    if (edited != NULL && (host || explain)) {
        fprintf(stderr, "rlshim check: --diff is a question of its own\n%s",
                usage);
        return 2;
    }
    if (key != NULL && !explain) {
        fprintf(stderr, "rlshim check: -k goes with --explain\n%s", usage);
        return 2;
    }

    path = rl_cli_config_path(copt);
    env = getenv("RLSHIM_CONFIG");
    if (copt == NULL && (env == NULL || *env == '\0') &&
        access(path, F_OK) != 0 && errno == ENOENT) {
        if (host)
            return rl_cli_host(NULL, path);
        printf("%s: no such file: nothing is throttled\n", path);
        return 0;
    }
    rc = rl_config_load(path, &cfg, &d);
    if (rc < 0) {
        for (size_t i = 0; i < d.n; i++)
            fprintf(stderr, "%s\n", d.msgs[i]);
        if (rc == -EINVAL)
            fprintf(stderr, "rlshim check: %zu error%s in %s\n", d.n,
                    d.n == 1 ? "" : "s", path);
        else if (d.n == 0)
            fprintf(stderr, "rlshim check: %s: %s\n", path, strerror(-rc));
        rl_diag_free(&d);
        return 1;
    }
    if (edited != NULL) {
        rc = check_diff(cfg, path, edited);
        rl_config_free(cfg);
        return rc;
    }
    if (host) {
        rc = rl_cli_host(cfg, path);
        rl_config_free(cfg);
        return rc;
    }
    if (explain) {
        rc = rl_cli_explain(cfg, key, argv[optind]);
        rl_config_free(cfg);
        return rc;
    }
    print_table(cfg, path);
    print_fleet(cfg);
    print_domains(cfg);
    rl_config_free(cfg);
    return 0;
}
