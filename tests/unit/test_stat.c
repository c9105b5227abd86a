/* test_stat.c — `rlshim stat` and `rlshim reset` on a real segment,
 * filled the way the gate fills it (budget.c's layout and labels). */
#include <criterion/criterion.h>
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "limit/limit.h"
#include "policy/budget.h"
#include "policy/config.h"
#include "state/store.h"
#include "util/clock.h"

static char dir[64];
static char cfg_path[128];
static struct rl_config *cfg;
static struct rl_store *store;

static const char cfg_text[] = "[rlshim]\n"
                               "max_users = 16\n"
                               "[user:alice]\n"
                               "connect = 5/h\n"
                               "send = 10/h\n"
                               "[user:scraper]\n"
                               "algorithm = sliding_window\n"
                               "connect = 2/h\n"
                               "[user:bulk]\n"
                               "send_bytes = 64000/h\n"
                               "[user:crawler]\n"
                               "request = 5/h\n";

static void setup(void)
{
    struct rl_diag d = {0};
    FILE *f;

    strcpy(dir, "/dev/shm/rlstat-test.XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
    snprintf(cfg_path, sizeof cfg_path, "%s/cfg.ini", dir);
    f = fopen(cfg_path, "w");
    cr_assert_not_null(f);
    fputs(cfg_text, f);
    fclose(f);
    cr_assert_eq(rl_config_load(cfg_path, &cfg, &d), 0);
    setenv("RLSHIM_STATE_DIR", dir, 1);
    unsetenv("RLSHIM_CONFIG");
}

static void teardown(void)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char p[512];

    if (store)
        rl_store_close(store);
    while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        unlink(p);
    }
    if (d)
        closedir(d);
    rmdir(dir);
}

TestSuite(stat, .init = setup, .fini = teardown, .timeout = 20);

static void open_store(void)
{
    struct rl_store_opts o = {
        .shared = true,
        .dir = dir,
        .uid = (uint32_t)getuid(),
        .config_hash = rl_budget_hash(cfg),
        .nslots = 32,
        .arena_words = 1024,
    };

    cr_assert_eq(rl_store_open(&store, &o, NULL, 0), 0);
    cr_assert(rl_store_is_shared(store));
}

/* Spend `n` units of the first limit of `kind` for the rule's user, and
 * count what was allowed and denied as the gate would. */
static void spend(const char *section, int kind, unsigned n)
{
    const struct rl_rule *rule = NULL;
    struct rl_budget_layout l;
    struct rl_slot sl;
    char label[RL_STORE_LABEL_MAX];
    uint64_t tag;
    bool ovf;

    for (size_t i = 0; i < cfg->nrules; i++)
        if (!strcmp(cfg->rules[i].section, section))
            rule = &cfg->rules[i];
    cr_assert_not_null(rule);
    rl_budget_layout(rule, &l);
    tag = rl_budget_label(rule, rl_budget_user(rule, "0"), label, sizeof label);
    cr_assert_eq(rl_store_slot(store, tag, label, l.nwords,
                               rl_budget_overflow_tag(rule), &sl, &ovf),
                 0);
    for (unsigned i = 0; i < n; i++) {
        const struct rl_limit *lim = &rule->limits[kind][0];
        struct rl_verdict v = rl_algorithm_get(lim->algo)->take(
            sl.words + l.offset[kind][0], lim, rl_clock_now_ns(), 1, 1, 0);

        rl_store_count(&sl, (unsigned)kind,
                       v.granted ? RL_STAT_ALLOWED : RL_STAT_DENIED, 1);
    }
}

/* Run the CLI with the test's state dir; returns its exit status. */
static int run(const char *args, char *out, size_t len)
{
    const char *build = getenv("RLSHIM_BUILD");
    char cmd[1024];
    size_t n = 0;
    FILE *p;
    int st;

    snprintf(cmd, sizeof cmd, "%s/rlshim %s 2>&1", build ? build : "build",
             args);
    p = popen(cmd, "r");
    cr_assert_not_null(p);
    n = fread(out, 1, len - 1, p);
    out[n] = '\0';
    st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void stat_json(char *out, size_t len)
{
    char args[256];

    snprintf(args, sizeof args, "stat --json -c %s", cfg_path);
    cr_assert_eq(run(args, out, len), 0, "%s", out);
}

#define ALICE_CONNECT                                                          \
    "{\"user\": \"alice\", \"rule\": \"user:alice\", \"limit\": \"connect\", " \
    "\"algorithm\": \"token_bucket\", "

Test(stat, prints_one_json_element_per_user_and_limit)
{
    char out[8192], cmd[512];

    open_store();
    spend("user:alice", RL_KIND_CONNECT, 6);
    spend("user:alice", RL_KIND_SEND, 2);
    spend("user:scraper", RL_KIND_CONNECT, 1);
    stat_json(out, sizeof out);
    cr_assert_not_null(strstr(out, ALICE_CONNECT
                              "\"allowed\": 5, \"denied\": 1, \"delayed\": 0, "
                              "\"delayed_ns\": 0, \"available\": 0}"),
                       "%s", out);
    cr_assert_not_null(strstr(out, "\"user\": \"alice\", \"rule\": "
                                   "\"user:alice\", \"limit\": \"send\", "
                                   "\"algorithm\": \"token_bucket\", "
                                   "\"allowed\": 2, \"denied\": 0, "
                                   "\"delayed\": 0, \"delayed_ns\": 0, "
                                   "\"available\": 8}"),
                       "%s", out);
    cr_assert_not_null(strstr(out, "\"user\": \"scraper\", \"rule\": "
                                   "\"user:scraper\", \"limit\": \"connect\", "
                                   "\"algorithm\": \"sliding_window\", "
                                   "\"allowed\": 1, \"denied\": 0, "
                                   "\"delayed\": 0, \"delayed_ns\": 0, "
                                   "\"available\": 1}"),
                       "%s", out);
    cr_assert_null(strstr(out, "send_bytes"), "unlimited, never counted");
    /* One JSON array, as a JSON parser reads it. */
    snprintf(cmd, sizeof cmd,
             "%s/rlshim stat --json -c %s | python3 -c 'import json,sys; "
             "d=json.load(sys.stdin); assert isinstance(d, list) and "
             "len(d) == 3, d'",
             getenv("RLSHIM_BUILD") ? getenv("RLSHIM_BUILD") : "build",
             cfg_path);
    cr_assert_eq(system(cmd), 0);
}

Test(stat, prints_an_empty_array_when_nothing_was_counted_yet)
{
    char out[1024];

    stat_json(out, sizeof out);
    cr_assert_str_eq(out, "[]\n");
}

Test(stat, prints_a_table_for_people)
{
    char out[8192], args[256];

    open_store();
    spend("user:alice", RL_KIND_CONNECT, 1);
    snprintf(args, sizeof args, "stat -c %s", cfg_path);
    cr_assert_eq(run(args, out, sizeof out), 0, "%s", out);
    cr_assert_not_null(strstr(out, "USER"));
    cr_assert_not_null(strstr(out, "alice"));
    cr_assert_not_null(strstr(out, "token_bucket"));
}

Test(stat, hides_budgets_read_under_another_config)
{
    struct rl_store_opts o = {
        .shared = true,
        .dir = dir,
        .uid = (uint32_t)getuid(),
        .config_hash = 1,
        .nslots = 32,
        .arena_words = 1024,
    };
    char out[8192];

    char args[256];

    cr_assert_eq(rl_store_open(&store, &o, NULL, 0), 0);
    /* Segments are named by config: this config has none yet. */
    stat_json(out, sizeof out);
    cr_assert_str_eq(out, "[]\n");
    /* --all lists the other one, with no budgets read through this
     * config's layout. */
    snprintf(args, sizeof args, "stat --all --json -c %s", cfg_path);
    cr_assert_eq(run(args, out, sizeof out), 0, "%s", out);
    cr_assert_not_null(
        strstr(out, "[{\"config_hash\": \"0000000000000001\""), "%s", out);
    cr_assert_not_null(strstr(out, "\"budgets\": []\n}]"), "%s", out);
}

Test(stat, all_lists_every_segment_of_the_uid_with_its_budgets)
{
    char out[8192], args[256];
    struct rl_store_opts o = {
        .shared = true,
        .dir = dir,
        .uid = (uint32_t)getuid(),
        .config_hash = 1,
        .nslots = 32,
        .arena_words = 1024,
    };
    struct rl_store *other = NULL;

    open_store();
    spend("user:alice", RL_KIND_CONNECT, 6);
    cr_assert_eq(rl_store_open(&other, &o, NULL, 0), 0);
    snprintf(args, sizeof args, "stat --all -c %s", cfg_path);
    cr_assert_eq(run(args, out, sizeof out), 0, "%s", out);
    cr_assert_not_null(strstr(out, "-0000000000000001: used"), "%s", out);
    cr_assert_not_null(strstr(out, " (this config)\n"), "%s", out);
    cr_assert_not_null(strstr(out, "alice"), "%s", out);
    rl_store_close(other);
}

Test(stat, refuses_a_foreign_state_file_with_one_line)
{
    char out[1024], path[256], args[256];

    open_store();
    cr_assert_eq(rl_store_path(path, sizeof path, dir, (uint32_t)getuid(),
                               rl_budget_hash(cfg)),
                 0);
    cr_assert_eq(chmod(path, 0666), 0);
    snprintf(args, sizeof args, "stat --json -c %s", cfg_path);
    cr_assert_eq(run(args, out, sizeof out), 1);
    cr_assert_not_null(strstr(out, "refused"), "%s", out);
}

Test(stat, reset_of_one_user_gives_only_that_user_a_full_budget)
{
    char out[8192], args[256];

    open_store();
    spend("user:alice", RL_KIND_CONNECT, 6);
    spend("user:scraper", RL_KIND_CONNECT, 2);
    snprintf(args, sizeof args, "reset -c %s alice", cfg_path);
    cr_assert_eq(run(args, out, sizeof out), 0, "%s", out);
    cr_assert_not_null(strstr(out, "reset 1 budget"), "%s", out);
    stat_json(out, sizeof out);
    cr_assert_not_null(strstr(out, ALICE_CONNECT
                              "\"allowed\": 0, \"denied\": 0, \"delayed\": 0, "
                              "\"delayed_ns\": 0, \"available\": 5}"),
                       "%s", out);
    cr_assert_not_null(strstr(out, "\"allowed\": 2, \"denied\": 0, "
                                   "\"delayed\": 0, \"delayed_ns\": 0, "
                                   "\"available\": 0}"),
                       "scraper untouched: %s", out);
    /* The running process sees the full budget at once. */
    spend("user:alice", RL_KIND_CONNECT, 6);
    stat_json(out, sizeof out);
    cr_assert_not_null(strstr(out, ALICE_CONNECT "\"allowed\": 5"), "%s", out);
}

Test(stat, reset_of_all_clears_windows_too)
{
    char out[8192], args[256];

    open_store();
    spend("user:alice", RL_KIND_CONNECT, 2);
    spend("user:scraper", RL_KIND_CONNECT, 3);
    snprintf(args, sizeof args, "reset -c %s", cfg_path);
    cr_assert_eq(run(args, out, sizeof out), 0, "%s", out);
    cr_assert_not_null(strstr(out, "reset 2 budgets"), "%s", out);
    stat_json(out, sizeof out);
    cr_assert_not_null(strstr(out, "\"algorithm\": \"sliding_window\", "
                                   "\"allowed\": 0, \"denied\": 0, "
                                   "\"delayed\": 0, \"delayed_ns\": 0, "
                                   "\"available\": 2}"),
                       "%s", out);
    spend("user:scraper", RL_KIND_CONNECT, 3);
    stat_json(out, sizeof out);
    cr_assert_not_null(strstr(out, "\"algorithm\": \"sliding_window\", "
                                   "\"allowed\": 2, \"denied\": 1"),
                       "%s", out);
}

Test(stat, reset_of_an_unknown_user_says_so)
{
    char out[1024], args[256];

    open_store();
    spend("user:alice", RL_KIND_CONNECT, 1);
    snprintf(args, sizeof args, "reset -c %s bob", cfg_path);
    cr_assert_eq(run(args, out, sizeof out), 1);
    cr_assert_not_null(strstr(out, "no budget for user 'bob'"), "%s", out);
}

Test(stat, watch_redraws_every_second_and_follows_new_counts)
{
    const char *build = getenv("RLSHIM_BUILD");
    char out[16384], prog[512];
    const char *first, *second;
    size_t n = 0;
    ssize_t got;
    int fds[2], status;
    pid_t pid;

    open_store();
    spend("user:alice", RL_KIND_CONNECT, 1);
    snprintf(prog, sizeof prog, "%s/rlshim", build ? build : "build");
    cr_assert_eq(pipe(fds), 0);
    pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        dup2(fds[1], 1);
        close(fds[0]);
        execl(prog, prog, "stat", "--json", "--watch", "-c", cfg_path,
              (char *)0);
        _exit(127);
    }
    close(fds[1]);
    /* The first frame comes at once; spend while it sleeps. */
    got = read(fds[0], out, sizeof out - 1);
    cr_assert_gt(got, 0);
    n = (size_t)got;
    spend("user:alice", RL_KIND_CONNECT, 1);
    usleep(1500000);
    kill(pid, SIGINT);
    while (n < sizeof out - 1 &&
           (got = read(fds[0], out + n, sizeof out - 1 - n)) > 0)
        n += (size_t)got;
    out[n] = '\0';
    close(fds[0]);
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%#x", status);
    first = strstr(out, ALICE_CONNECT "\"allowed\": 1,");
    second = strstr(out, ALICE_CONNECT "\"allowed\": 2,");
    cr_assert_not_null(first, "%s", out);
    cr_assert_not_null(second, "%s", out);
    cr_assert_lt(first, second);
}

Test(stat, names_a_bad_option_and_exits_2)
{
    char out[1024];

    cr_assert_eq(run("stat --bogus", out, sizeof out), 2);
    cr_assert_not_null(strstr(out, "rlshim stat: unknown option '--bogus'"),
                       "%s", out);
    cr_assert_eq(run("reset -c", out, sizeof out), 2);
    cr_assert_not_null(strstr(out, "needs a value"), "%s", out);
    cr_assert_eq(run("reset a b", out, sizeof out), 2);
}

Test(stat, says_counters_are_per_process_under_state_process)
{
    char out[1024], args[512], path[256];
    FILE *f;

    snprintf(path, sizeof path, "%s/proc.ini", dir);
    f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs("[rlshim]\nstate = process\n[default]\nconnect = 1/s\n", f);
    fclose(f);
    snprintf(args, sizeof args, "stat -c %s", path);
    cr_assert_eq(run(args, out, sizeof out), 0, "%s", out);
    cr_assert_not_null(strstr(out, "state = process"), "%s", out);
}

/* A lease as the gate keeps one (policy/lease.c): `taken` bytes out of
 * bulk's bucket into record 0, `spent` of them spent, the holder's last
 * call `ago_ms` ago on CLOCK_MONOTONIC (negative: a live lease that stays
 * live however slowly the CLI starts). Returns the record's words. */
static rl_atomic_u64 *lease(uint64_t taken, uint64_t spent, int ago_ms)
{
    const struct rl_rule *rule = NULL;
    struct rl_budget_layout l;
    struct rl_slot sl;
    char label[RL_STORE_LABEL_MAX];
    bool ovf;

    for (size_t i = 0; i < cfg->nrules; i++)
        if (!strcmp(cfg->rules[i].section, "user:bulk"))
            rule = &cfg->rules[i];
    cr_assert_not_null(rule);
    rl_budget_layout(rule, &l);
    cr_assert_neq(l.lease, 0);
    uint64_t tag = rl_budget_label(rule, "bulk", label, sizeof label);
    cr_assert_eq(rl_store_slot(store, tag, label, l.nwords,
                               rl_budget_overflow_tag(rule), &sl, &ovf),
                 0);
    const struct rl_limit *lim = &rule->limits[RL_KIND_SEND_BYTES][0];
    struct rl_verdict v = rl_algorithm_get(lim->algo)->take(
        sl.words + l.offset[RL_KIND_SEND_BYTES][0], lim, rl_clock_now_ns(),
        taken, taken, 0);
    cr_assert_eq(v.granted, taken);
    rl_atomic_u64 *area = rl_budget_lease_bitmap(&l, sl.words);
    rl_atomic_u64 *rec = area + RL_LEASE_WORDS;
    struct rl_lease_units u = {{0}, {0}};
    u.left[RL_KIND_SEND_BYTES] = taken - spent;
    u.spent[RL_KIND_SEND_BYTES] = spent;
    uint64_t now = rl_clock_now_ns();
    rl_store_relaxed_u64(&rec[1], now - (uint64_t)((int64_t)ago_ms * 1000000));
    rl_store_relaxed_u64(&rec[0], rl_lease_pack(1, &u));
    rl_store_relaxed_u64(&area[0], 1);
    return rec;
}

#define BULK_BYTES                                                             \
    "{\"user\": \"bulk\", \"rule\": \"user:bulk\", \"limit\": "                \
    "\"send_bytes\", \"algorithm\": \"token_bucket\", "

/* Bulk's send_bytes row says `allowed` and, as `available`, `least` plus
 * what the bucket (64000/h: a byte every 56 ms) refilled since `since_ns`:
 * a sanitizer build can take a tenth of a second between lease and stat. */
static void expect_bulk(const char *out, unsigned allowed, uint64_t least,
                        uint64_t since_ns)
{
    char head[256];
    unsigned long long got;

    snprintf(head, sizeof head,
             BULK_BYTES "\"allowed\": %u, \"denied\": 0, \"delayed\": 0, "
                        "\"delayed_ns\": 0, \"available\": ",
             allowed);
    const char *at = strstr(out, head);
    cr_assert_not_null(at, "%s", out);
    cr_assert_eq(sscanf(at + strlen(head), "%llu}", &got), 1, "%s", out);
    uint64_t refill =
        (rl_clock_now_ns() - since_ns) * 64000 / (3600ull * 1000000000) + 1;
    uint64_t most = least + refill < 64000 ? least + refill : 64000;
    cr_assert(got >= least && got <= most,
              "available %llu, want %llu..%llu:\n%s", got,
              (unsigned long long)least, (unsigned long long)most, out);
}

Test(stat, counts_what_leases_spent_and_leaves_out_what_they_hold)
{
    char out[8192];

    open_store();
    uint64_t t0 = rl_clock_now_ns();
    lease(1000, 400, -10000);
    stat_json(out, sizeof out);
    expect_bulk(out, 400, 63000, t0);
}

Test(stat, counts_an_idle_lease_as_available_again)
{
    char out[8192];

    open_store();
    uint64_t t0 = rl_clock_now_ns();
    lease(1000, 400, 20);
    stat_json(out, sizeof out);
    expect_bulk(out, 400, 63600, t0);
}

Test(stat, reset_takes_back_leases_with_the_buckets)
{
    char out[8192], args[256];

    open_store();
    rl_atomic_u64 *rec = lease(1000, 400, -10000);
    snprintf(args, sizeof args, "reset -c %s", cfg_path);
    cr_assert_eq(run(args, out, sizeof out), 0, "%s", out);
    cr_expect_eq(rl_load_relaxed_u64(&rec[0]), 0, "the record is free");
    stat_json(out, sizeof out);
    expect_bulk(out, 0, 64000, rl_clock_now_ns());
}

/* ---- requests (SPEC §11) ----------------------------------------------- */

/* The slot of a section's budget for uid "0" (as spend() claims it). */
static struct rl_slot slot_of(const char *section)
{
    const struct rl_rule *rule = NULL;
    struct rl_budget_layout l;
    struct rl_slot sl;
    char label[RL_STORE_LABEL_MAX];
    bool ovf;
    for (size_t i = 0; i < cfg->nrules; i++)
        if (!strcmp(cfg->rules[i].section, section))
            rule = &cfg->rules[i];
    cr_assert_not_null(rule);
    rl_budget_layout(rule, &l);
    uint64_t tag =
        rl_budget_label(rule, rl_budget_user(rule, "0"), label, sizeof label);
    cr_assert_eq(rl_store_slot(store, tag, label, l.nwords,
                               rl_budget_overflow_tag(rule), &sl, &ovf),
                 0);
    return sl;
}

Test(stat, shows_request_counters_and_tls_it_could_not_count)
{
    char out[8192], args[256];
    open_store();
    spend("user:crawler", RL_KIND_REQUEST, 6); /* 5/h: 5 allowed, 1 denied */
    struct rl_slot sl = slot_of("user:crawler");
    rl_store_count_tls_unseen(&sl);
    rl_store_count_tls_unseen(&sl);
    rl_store_count_responded(&sl, 3); /* on_deny = respond: not denied */
    snprintf(args, sizeof args, "stat -c %s", cfg_path);
    cr_assert_eq(run(args, out, sizeof out), 0, "%s", out);
    char want[256];
    snprintf(want, sizeof want, "%-16s %-18s %-10s %-14s %10u %10u %10u",
             "crawler", "user:crawler", "request", "token_bucket", 5, 1, 0);
    const char *row = strstr(out, want), *eol = row ? strchr(row, '\n') : 0;
    cr_expect_not_null(row, "no request row in:\n%s", out);
    cr_expect(eol != NULL && strncmp(eol - 11, "          3", 11) == 0,
              "RESPONDED is the last column:\n%s", out);
    cr_expect_not_null(strstr(out, "AVAILABLE  RESPONDED\n"), "%s", out);
    cr_expect_not_null(strstr(out, "TLS connections not counted: 2"), "%s",
                       out);
    stat_json(out, sizeof out);
    cr_expect_not_null(strstr(out, "\"user\": \"crawler\", \"rule\": "
                                   "\"user:crawler\", \"limit\": "
                                   "\"request\", \"algorithm\": "
                                   "\"token_bucket\", \"allowed\": 5, "
                                   "\"denied\": 1"),
                       "%s", out);
    cr_expect_not_null(strstr(out, "\"responded\": 3"), "%s", out);
    /* rlshim reset clears them with the counters. */
    snprintf(args, sizeof args, "reset -c %s", cfg_path);
    cr_assert_eq(run(args, out, sizeof out), 0, "%s", out);
    snprintf(args, sizeof args, "stat -c %s", cfg_path);
    cr_assert_eq(run(args, out, sizeof out), 0, "%s", out);
    cr_expect_null(strstr(out, "TLS connections not counted"), "%s", out);
    stat_json(out, sizeof out);
    cr_expect_not_null(strstr(out, "\"responded\": 0"), "%s", out);
}

Test(stat, says_nothing_of_tls_when_every_request_was_seen)
{
    char out[8192], args[256];
    open_store();
    spend("user:crawler", RL_KIND_REQUEST, 1);
    snprintf(args, sizeof args, "stat -c %s", cfg_path);
    cr_assert_eq(run(args, out, sizeof out), 0, "%s", out);
    cr_expect_not_null(strstr(out, "request"), "%s", out);
    cr_expect_null(strstr(out, "TLS"), "%s", out);
}
