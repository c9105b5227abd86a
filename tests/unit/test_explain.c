/* `rlshim check --explain` and the per-destination rows of `rlshim stat`:
 * the CLI run as a program, its output read back. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gate_fixture.h"
#include "policy/budget.h"
#include "policy/config.h"
#include "policy/gate.h"
#include "policy/names.h"
#include "policy/pace.h"
#include "policy/pauses.h"
#include "state/store.h"
#include "policy/proc.h"

/* The process state this file decides through. */
static struct rl_proc proc;

static char ini[128], out[16384];

static void setup(void)
{
    fixture_state_dir("explain");
    snprintf(ini, sizeof ini, "%s/t.ini", fixture_dir);
}

static void teardown(void)
{
    fixture_state_dir_remove();
}

TestSuite(explain, .init = setup, .fini = teardown);

static void write_ini(const char *text)
{
    FILE *f = fopen(ini, "w");
    cr_assert_not_null(f);
    fputs(text, f);
    fclose(f);
}

/* Run `rlshim ARGS` (a shell-quoted string); its stdout into out. */
static int cli(const char *args)
{
    char cmd[1024];
    const char *b = getenv("RLSHIM_BUILD");
    snprintf(cmd, sizeof cmd, "%s/rlshim %s 2>&1", b ? b : "build", args);
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p);
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The gate of user key "crawler" under the written config (which it
 * keeps), as a process of that user would open it: its segment made. */
static struct rl_config *gate_of_crawler(void)
{
    struct rl_config *cfg = NULL;
    struct rl_diag d = {0};
    cr_assert_eq(rl_config_load(ini, &cfg, &d), 0);
    struct rl_identity id = {.has_key = true, .uid = (uint32_t)getuid()};
    snprintf(id.key, sizeof id.key, "crawler");
    cr_assert_eq(rl_gate_init(&proc, cfg, &id, NULL, 0), 0);
    return cfg;
}

/* A connect of the gate's process to port 80 of an address that the
 * resolver said is `name`: its destination's entry made. */
static void connect_to(const char *name)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(80)};
    inet_pton(AF_INET, "192.168.7.7", &a.sin_addr);
    rl_names_note(&proc.names, AF_INET, &a.sin_addr, name, strlen(name));
    struct rl_gate_ticket t;
    cr_assert_eq(rl_gate_connect(&proc, &t, "connect", 3, &a, sizeof a),
                 RL_GATE_GO);
}

static const char *config = "[default]\nconnect = 5/s\nto = 10.0.0.0/8\n"
                            "[site:local]\nto = localhost\nconnect = 10/s\n"
                            "[site:every]\nper = destination\n"
                            "connect = 2/s\nmax_open = 2\n";

Test(explain, says_which_rule_site_and_budget_a_name_is_charged_to)
{
    write_ini(config);
    char args[512];
    snprintf(args, sizeof args, "check -c '%s' --explain -k crawler "
                                "http://localhost:8080/index.html",
             ini);
    cr_assert_eq(cli(args), 0, "%s", out);
    cr_expect(strstr(out, "user crawler, rule [default]") != NULL, "%s", out);
    cr_expect(strstr(out, "127.0.0.1 port 8080, name localhost") != NULL,
              "%s", out);
    cr_expect(strstr(out, "rule [default] does not cover it") != NULL, "%s",
              out);
    cr_expect(strstr(out, "site [site:local] covers it") != NULL, "%s", out);
    cr_expect(strstr(out, "budget: site:local|crawler (per user)") != NULL,
              "%s", out);
    cr_expect(strstr(out, "connect 10/s") != NULL, "%s", out);
}

Test(explain, a_per_destination_site_names_the_destination_and_max_open)
{
    write_ini(config);
    char args[512];
    snprintf(args, sizeof args, "check -c '%s' --explain -k crawler 10.1.2.3:443",
             ini);
    cr_assert_eq(cli(args), 0, "%s", out);
    cr_expect(strstr(out, "rule [default] covers it") != NULL, "%s", out);
    cr_expect(strstr(out, "budget: default|crawler (per user)") != NULL, "%s",
              out);
    cr_expect(strstr(out, "site [site:every] covers it") != NULL, "%s", out);
    cr_expect(strstr(out, "destination 10.1.2.3 (per = destination)") != NULL,
              "%s", out);
    cr_expect(strstr(out, "max_open 2") != NULL, "%s", out);
}

Test(explain, says_where_a_budget_lives_fleet_or_host)
{
    /* No Redis needed: --explain reads the config, it does not connect. */
    write_ini("[rlshim]\nfleet = redis://127.0.0.1:1\n"
              "[user:crawler]\nscope = fleet\nconnect = 10/s\n"
              "send = 1000/s\nto = 10.0.0.0/8\n"
              "[default]\nconnect = 5/s\n");
    char args[512];
    snprintf(args, sizeof args, "check -c '%s' --explain -k crawler 10.1.2.3",
             ini);
    cr_assert_eq(cli(args), 0, "%s", out);
    cr_expect(strstr(out, "lives: in the fleet's Redis redis://127.0.0.1:1 "
                          "(keys rlshim:{user:crawler|crawler}:*)") != NULL,
              "%s", out);
    cr_expect(strstr(out, "leased to this host ahead") != NULL, "%s", out);
    snprintf(args, sizeof args, "check -c '%s' --explain -k other 10.1.2.3",
             ini);
    cr_assert_eq(cli(args), 0, "%s", out);
    cr_expect(strstr(out, "lives: on this host") != NULL, "%s", out);
    cr_expect(strstr(out, "Redis") == NULL, "%s", out);
}

Test(explain, refuses_explain_without_a_target_and_k_without_explain)
{
    write_ini(config);
    char args[512];
    snprintf(args, sizeof args, "check -c '%s' --explain", ini);
    cr_expect_eq(cli(args), 2, "%s", out);
    snprintf(args, sizeof args, "check -c '%s' -k x", ini);
    cr_expect_eq(cli(args), 2, "%s", out);
}

Test(explain, stat_shows_a_row_per_destination_with_a_dest_field)
{
    write_ini(config);
    (void)gate_of_crawler();
    connect_to("crawled.test");
    /* (no rl_gate_connected: the connect still holds its place) */
    char args[512];
    snprintf(args, sizeof args, "stat -c '%s' --json", ini);
    cr_assert_eq(cli(args), 0, "%s", out);
    cr_expect(strstr(out, "\"dest\": \"crawled.test\"") != NULL, "%s", out);
    cr_expect(strstr(out, "\"available\": 1, \"open\": 1, \"max_open\": 2") !=
                  NULL,
              "%s", out);
    snprintf(args, sizeof args, "stat -c '%s'", ini);
    cr_assert_eq(cli(args), 0, "%s", out);
    cr_expect(strstr(out, "dest crawled.test open 1/2") != NULL, "%s", out);
}

/* A name that does not resolve here (no DNS; .invalid never resolves,
 * RFC 6761) is explained by name, since `to` matches names by name: the
 * rule and the first site its name entries cover, each budget (a
 * per-destination one by the name), and the address entries that its
 * unknown addresses would decide. */
Test(explain, a_name_that_does_not_resolve_is_explained_by_name)
{
    write_ini("[default]\nconnect = 5/s\nto = *.wiki.invalid, 10.0.0.0/8\n"
              "[site:nets]\nto = 192.168.0.0/16\nconnect = 1/s\n"
              "[site:wiki]\nto = wiki.invalid, *.wiki.invalid\n"
              "per = destination\nconnect = 3/s\n"
              "[site:every]\nconnect = 2/s\n");
    char args[512];
    snprintf(args, sizeof args,
             "check -c '%s' --explain -k crawler https://en.Wiki.invalid./x",
             ini);
    cr_assert_eq(cli(args), 0, "%s", out);
    cr_expect(strstr(out, "en.wiki.invalid port 443: addresses unknown") !=
                  NULL,
              "%s", out);
    cr_expect(strstr(out, "rule [default] covers it by name") != NULL, "%s",
              out);
    cr_expect(strstr(out, "budget: default|crawler (per user)") != NULL,
              "%s", out);
    cr_expect(strstr(out, "site [site:nets] covers it only if its address "
                          "is in 192.168.0.0/16") != NULL,
              "%s", out);
    cr_expect(strstr(out, "site [site:wiki] covers it by name") != NULL,
              "%s", out);
    cr_expect(strstr(out, "destination en.wiki.invalid (per = destination)") !=
                  NULL,
              "%s", out);
    cr_expect(strstr(out, "connect 3/s") != NULL, "%s", out);
    cr_expect(strstr(out, "[site:every]") == NULL, "%s", out);
    cr_expect(strstr(out, "charged:") != NULL, "%s", out);

    /* Nothing of its name: only the address entries could charge it. */
    snprintf(args, sizeof args,
             "check -c '%s' --explain -k crawler other.invalid:8080", ini);
    write_ini("[default]\nconnect = 5/s\nto = 10.0.0.0/8\n");
    cr_assert_eq(cli(args), 0, "%s", out);
    cr_expect(strstr(out, "rule [default] covers it only if its address is "
                          "in 10.0.0.0/8") != NULL,
              "%s", out);
    cr_expect(strstr(out, "charged only if its address is in the 'to' above") !=
                  NULL,
              "%s", out);
}

/* Requests (SPEC §11): a request budget is shown with the others, and
 * `rlshim check`'s table has its row. */
Test(explain, shows_request_budgets)
{
    write_ini("[site:every-host]\nper = destination\nrequest = 1/s\n"
              "request_burst = 1\nmax_open = 2\n");
    char args[512];
    snprintf(args, sizeof args,
             "check -c '%s' --explain -k crawler http://example.com/", ini);
    cr_assert_eq(cli(args), 0, "%s", out);
    cr_expect(strstr(out, "site [site:every-host] covers it") != NULL, "%s",
              out);
    cr_expect(strstr(out, "request 1/s (token_bucket)") != NULL, "%s", out);
    snprintf(args, sizeof args, "check -c '%s'", ini);
    cr_assert_eq(cli(args), 0, "%s", out);
    cr_expect(strstr(out, "request") != NULL, "%s", out);
}

/* SPEC §14: what the shim knows of a destination's pace now, read from
 * the segment as `rlshim stat` reads it, and what would change it. */
Test(explain, says_the_pace_learned_of_a_destination_and_its_settings)
{
    write_ini("[site:every-host]\nper = destination\nrequest = 2/s\n"
              "connect = 10/s\nadapt = latency\nadapt_factor = 2\nmax_interval = 60s\n"
              "backoff_on = 503, reset\nmax_crawl_delay = 30s\n"
              "jitter = 20%\n");
    char args[512];
    snprintf(args, sizeof args,
             "check -c '%s' --explain -k crawler http://slow.invalid/", ini);
    cr_assert_eq(cli(args), 0, "%s", out);
    cr_expect(strstr(out, "pace: the rate alone (no state on this host "
                          "yet)") != NULL,
              "%s", out);
    cr_expect(strstr(out, "adapts: adapt latency x 2 (max 60 s), backoff_on "
                          "503, reset, crawl_delay obey (max 30 s), jitter "
                          "20%") != NULL,
              "%s", out);

    /* A process of the user learned a 401 ms response time there. */
    struct rl_config *cfg = gate_of_crawler();
    struct rl_store *st = NULL;
    char why[256];
    cr_assert_eq(rl_store_attach(&st, NULL, (uint32_t)getuid(),
                                 rl_budget_hash(cfg), why, sizeof why),
                 0, "%s", why);
    struct rl_pauses pt;
    rl_pauses_of(st, &pt);
    struct rl_adapt_conf c;
    rl_pace_conf(&cfg->rules[0], &c);
    struct rl_adapt a = {0};
    cr_assert(rl_adapt_latency(&a, &c, 401000000u));
    struct rl_pause_set set = {
        .key = rl_pauses_key(1, "crawler", "slow.invalid", 12),
        .rule = 1,
        .label = "crawler|slow.invalid",
        .now = 1,
    };
    cr_assert_eq(rl_pauses_pace_cas(&pt, &set, RL_PACE_LATENCY, 0, a.latency),
                 1);
    rl_store_close(st);
    cr_assert_eq(cli(args), 0, "%s", out);
    cr_expect(strstr(out, "pace: 802 ms (latency 2 x 401 ms)") != NULL, "%s",
              out);
    /* `rlshim stat` words it the same, on the destination's row (which a
     * connection there makes). */
    connect_to("slow.invalid");
    snprintf(args, sizeof args, "stat -c '%s'", ini);
    cr_assert_eq(cli(args), 0, "%s", out);
    cr_expect(strstr(out, "dest slow.invalid pace 802 ms (latency 2 x 401 "
                          "ms)") != NULL,
              "%s", out);

    snprintf(args, sizeof args,
             "check -c '%s' --explain -k crawler http://other.invalid/", ini);
    cr_assert_eq(cli(args), 0, "%s", out);
    cr_expect(strstr(out, "pace: the rate alone\n") != NULL, "%s", out);
}
