/* test_config.c — the ini file into the quota table, and every way it can
 * be wrong.
 *
 * Each tests/fixtures/bad/NAME.ini starts with "; expect: LINE: MESSAGE" lines:
 * the exact errors, in order, that loading the file must report (after its
 * path and a colon). */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "policy/config.h"
#include "policy/dest.h"
#include "policy/suggest.h"
#include "util/parse.h"

static const char *src_dir(void)
{
    const char *s = getenv("RLSHIM_SRC");
    return s != NULL ? s : ".";
}

static struct rl_config *load_ok(const char *text)
{
    struct rl_diag d = {0};
    struct rl_config *cfg = NULL;
    int rc = rl_config_load_string(text, "t.ini", &cfg, &d);
    for (size_t i = 0; i < d.n; i++)
        cr_log_error("%s", d.msgs[i]);
    cr_assert_eq(rc, 0);
    cr_assert_not_null(cfg);
    rl_diag_free(&d);
    return cfg;
}

/* Load text that must fail; returns the diag (caller frees). */
static struct rl_diag load_bad(const char *text)
{
    struct rl_diag d = {0};
    struct rl_config *cfg = (void *)1;
    cr_assert_eq(rl_config_load_string(text, "t.ini", &cfg, &d), -EINVAL);
    cr_assert_null(cfg);
    cr_assert_gt(d.n, 0);
    return d;
}

static int check_bad_file(const char *dir, const char *file)
{
    char path[2304], line[512];
    char *want[32];
    size_t nwant = 0;
    struct rl_diag d = {0};
    struct rl_config *cfg = NULL;
    int failed = 0;
    FILE *f;

    snprintf(path, sizeof path, "%s/%s", dir, file);
    f = fopen(path, "r");
    cr_assert_not_null(f, "%s", path);
    while (fgets(line, sizeof line, f) != NULL &&
           strncmp(line, "; expect: ", 10) == 0 && nwant < 32) {
        line[strcspn(line, "\n")] = '\0';
        want[nwant] = malloc(strlen(path) + strlen(line));
        snprintf(want[nwant], strlen(path) + strlen(line), "%s:%s", path,
                 line + 10);
        nwant++;
    }
    fclose(f);
    cr_expect_gt(nwant, 0, "%s has no '; expect:' line", file);

    int rc = rl_config_load(path, &cfg, &d);
    if (rc != -EINVAL || cfg != NULL) {
        cr_expect_fail("%s: loaded (rc %d), should not", file, rc);
        failed = 1;
    }
    for (size_t i = 0; i < nwant || i < d.n; i++) {
        const char *w = i < nwant ? want[i] : "(nothing)";
        const char *g = i < d.n ? d.msgs[i] : "(nothing)";
        if (strcmp(w, g) != 0) {
            cr_expect_fail("%s: error %zu\n  want: %s\n  got:  %s", file, i, w,
                           g);
            failed = 1;
        }
    }
    for (size_t i = 0; i < nwant; i++)
        free(want[i]);
    rl_diag_free(&d);
    rl_config_free(cfg);
    return failed;
}

Test(config, reports_exactly_the_expected_error_of_every_bad_fixture)
{
    char dir[1024];
    struct dirent *e;
    int n = 0, failed = 0;
    DIR *dp;

    snprintf(dir, sizeof dir, "%s/tests/fixtures/bad", src_dir());
    dp = opendir(dir);
    cr_assert_not_null(dp, "%s", dir);
    while ((e = readdir(dp)) != NULL) {
        size_t len = strlen(e->d_name);
        if (len < 5 || strcmp(e->d_name + len - 4, ".ini") != 0)
            continue;
        failed += check_bad_file(dir, e->d_name);
        n++;
    }
    closedir(dp);
    cr_expect_geq(n, 30, "only %d bad fixtures", n);
    cr_expect_eq(failed, 0, "%d of %d bad fixtures failed", failed, n);
}

Test(config, loads_the_spec_example)
{
    char path[1024];
    struct rl_diag d = {0};
    struct rl_config *cfg = NULL;

    snprintf(path, sizeof path, "%s/tests/fixtures/good/spec_example.ini",
             src_dir());
    int rc = rl_config_load(path, &cfg, &d);
    for (size_t i = 0; i < d.n; i++)
        cr_log_error("%s", d.msgs[i]);
    cr_assert_eq(rc, 0);
    cr_expect_eq(cfg->nrules, 3);
    cr_expect_eq(cfg->max_delay_ns, 10 * RL_NS_PER_S);
    cr_expect_eq(cfg->max_users, 4096);

    const struct rl_rule *r = &cfg->rules[1];
    cr_expect_str_eq(r->section, "user:1000");
    cr_expect_str_eq(r->user, "1000");
    cr_expect_eq(r->algo, RL_ALGO_TOKEN_BUCKET);
    cr_expect_eq(r->nlimits[RL_KIND_CONNECT], 1);
    cr_expect_eq(r->limits[RL_KIND_CONNECT][0].count, 5);
    cr_expect_eq(r->limits[RL_KIND_CONNECT][0].burst, 5);
    cr_expect_eq(r->limits[RL_KIND_SEND_BYTES][0].count, 1048576);
    cr_expect_eq(r->limits[RL_KIND_SEND_BYTES][0].period_ns, RL_NS_PER_S);
    cr_expect_eq(r->nto, 3);
    cr_expect_eq(r->on_deny, RL_DENY_DELAY);
    cr_expect_eq(r->max_delay_ns, 500 * RL_NS_PER_MS);

    r = &cfg->rules[2];
    cr_expect_eq(r->algo, RL_ALGO_SLIDING_WINDOW);
    cr_expect_eq(r->limits[RL_KIND_CONNECT][0].algo, RL_ALGO_SLIDING_WINDOW);
    cr_expect_eq(r->on_deny, RL_DENY_FAIL, "inherited from [rlshim]");
    rl_config_free(cfg);
}

Test(config, applies_the_documented_defaults)
{
    struct rl_config *cfg = load_ok("[default]\nconnect = 5/s\n");
    cr_expect_eq(cfg->key_mode, RL_KEY_ENV);
    cr_expect_eq(cfg->on_deny, RL_DENY_FAIL);
    cr_expect_eq(cfg->deny_errno, EAGAIN);
    cr_expect_eq(cfg->state_mode, RL_STATE_SHARED);
    cr_expect_eq(cfg->unknown, RL_UNKNOWN_ALLOW);
    cr_expect_eq(cfg->log_target, RL_LOG_OFF);
    cr_expect_not(cfg->dry_run);
    cr_expect_not(cfg->report);
    cr_expect_eq(cfg->max_users, 4096);
    cr_expect_eq(cfg->rules[0].max_delay_ns, 10 * RL_NS_PER_S);
    cr_expect(cfg->rules[0].is_default);
    cr_expect_null(cfg->rules[0].user);
    rl_config_free(cfg);
}

Test(config, lets_a_user_section_override_the_global_settings)
{
    struct rl_config *cfg = load_ok("[user:a]\n"
                                    "connect = 1/s\n"
                                    "errno = ECONNREFUSED\n"
                                    "dry_run = yes\n"
                                    "[user:b]\n"
                                    "connect = 1/s\n"
                                    "[rlshim]\n"
                                    "errno = ETIMEDOUT\n"
                                    "on_deny = delay\n"
                                    "max_delay = 2min\n");
    cr_expect_eq(cfg->rules[0].deny_errno, ECONNREFUSED);
    cr_expect(cfg->rules[0].dry_run);
    cr_expect_eq(cfg->rules[1].deny_errno, ETIMEDOUT,
                 "[rlshim] after the rule still applies to it");
    cr_expect_not(cfg->rules[1].dry_run);
    cr_expect_eq(cfg->rules[1].on_deny, RL_DENY_DELAY);
    cr_expect_eq(cfg->rules[1].max_delay_ns, 2 * RL_NS_PER_MIN);
    rl_config_free(cfg);
}

Test(config, keeps_several_rates_and_their_bursts_in_order)
{
    struct rl_config *cfg = load_ok("[default]\n"
                                    "connect = 5/s, 100/min\n"
                                    "connect_burst = 10\n"
                                    "send_bytes = 64KiB/ms, 1GB/h\n"
                                    "send_bytes_burst = 1MiB, 2GB\n");
    const struct rl_rule *r = &cfg->rules[0];
    cr_expect_eq(r->nlimits[RL_KIND_CONNECT], 2);
    cr_expect_eq(r->limits[RL_KIND_CONNECT][0].burst, 10);
    cr_expect_eq(r->limits[RL_KIND_CONNECT][1].count, 100);
    cr_expect_eq(r->limits[RL_KIND_CONNECT][1].burst, 100,
                 "a rate without its own burst gets N");
    cr_expect_eq(r->limits[RL_KIND_SEND_BYTES][0].count, 65536);
    cr_expect_eq(r->limits[RL_KIND_SEND_BYTES][0].period_ns, RL_NS_PER_MS);
    cr_expect_eq(r->limits[RL_KIND_SEND_BYTES][0].burst, 1048576);
    cr_expect_eq(r->limits[RL_KIND_SEND_BYTES][1].burst, 2000000000ull);
    cr_expect_eq(r->nlimits[RL_KIND_SEND], 0);
    rl_config_free(cfg);
}

Test(config, reads_the_global_words)
{
    struct rl_config *cfg = load_ok("[rlshim]\n"
                                    "key = exe\n"
                                    "state = process\n"
                                    "unknown = deny\n"
                                    "log = /var/log/rlshim.log\n"
                                    "report = yes\n"
                                    "max_users = 16\n");
    cr_expect_eq(cfg->key_mode, RL_KEY_EXE);
    cr_expect_eq(cfg->state_mode, RL_STATE_PROCESS);
    cr_expect_eq(cfg->unknown, RL_UNKNOWN_DENY);
    cr_expect_eq(cfg->log_target, RL_LOG_FILE);
    cr_expect_str_eq(cfg->log_path, "/var/log/rlshim.log");
    cr_expect(cfg->report);
    cr_expect_eq(cfg->max_users, 16);
    cr_expect_eq(cfg->nrules, 0);
    rl_config_free(cfg);
}

Test(config, accepts_an_empty_file_and_an_empty_user_section)
{
    struct rl_config *cfg = load_ok("");
    cr_expect_eq(cfg->nrules, 0);
    rl_config_free(cfg);
    cfg = load_ok("; only a comment\n[user:exempt]\n");
    cr_expect_eq(cfg->nrules, 1);
    cr_expect_eq(cfg->rules[0].nlimits[RL_KIND_CONNECT], 0);
    rl_config_free(cfg);
}

Test(config, accepts_a_line_of_exactly_200_bytes)
{
    char text[512];
    int n = snprintf(text, sizeof text, "[default]\nconnect = 5/s%*s\n",
                     200 - 13, ";");
    cr_assert_lt(n, (int)sizeof text);
    struct rl_config *cfg = load_ok(text);
    rl_config_free(cfg);

    snprintf(text, sizeof text, "[default]\nconnect = 5/s%*s\n", 201 - 13, ";");
    struct rl_diag d = load_bad(text);
    cr_expect_str_eq(d.msgs[0], "t.ini:2: line longer than 200 bytes");
    rl_diag_free(&d);
}

Test(config, never_uses_a_value_cut_short_by_a_long_line)
{
    /* inih alone would hand over the first 197 bytes of this line, which
     * is a valid list of destinations. */
    char text[1024] = "[default]\nconnect = 5/s\nto = 10.0.0.1";
    while (strlen(text) < 300)
        strcat(text, ", 10.0.0.1");
    strcat(text, "\nsend = 1/s\n");
    struct rl_diag d = load_bad(text);
    cr_expect_eq(d.n, 1);
    cr_expect_str_eq(d.msgs[0], "t.ini:3: line longer than 200 bytes");
    rl_diag_free(&d);
}

Test(config, counts_lines_with_crlf_endings_and_a_bom)
{
    struct rl_diag d = load_bad("\xef\xbb\xbf[default]\r\n"
                                "connect = 5/s\r\n"
                                "\r\n"
                                "sned = 5/s\r\n");
    cr_expect_str_eq(d.msgs[0], "t.ini:4: unknown key 'sned' in [default] "
                                "(did you mean 'send'?)");
    rl_diag_free(&d);
}

Test(config, skips_a_bom_only_on_the_first_line)
{
#define BOM "\xef\xbb\xbf"
    struct rl_diag d =
        load_bad("; a comment first\n[default]\n" BOM "connect = 5/s\n");
    cr_expect_eq(d.n, 1);
    cr_expect_str_eq(d.msgs[0],
                     "t.ini:3: unknown key '" BOM "connect' in [default]");
#undef BOM
    rl_diag_free(&d);
}

Test(config, reports_every_syntax_error_not_only_the_first)
{
    struct rl_diag d = load_bad("[default\nnothing\n= 1/s\n: 2/s\n"
                                "[default]\nconnect\n");
    cr_assert_eq(d.n, 5);
    cr_expect_str_eq(d.msgs[0], "t.ini:1: missing ']' in section header");
    cr_expect_str_eq(d.msgs[1],
                     "t.ini:2: expected 'key = value' or '[section]'");
    cr_expect_str_eq(d.msgs[2], "t.ini:3: missing key name before '='");
    cr_expect_str_eq(d.msgs[3], "t.ini:4: missing key name before ':'");
    cr_expect_str_eq(d.msgs[4],
                     "t.ini:6: expected 'key = value' or '[section]'");
    rl_diag_free(&d);
}

Test(config, reports_keys_of_a_wrong_section_only_once)
{
    struct rl_diag d = load_bad("[nonsense]\nfoo = 1\nbar = 2\n"
                                "[default]\nconect = 1/s\n");
    cr_expect_eq(d.n, 2);
    cr_expect_str_eq(d.msgs[1], "t.ini:5: unknown key 'conect' in [default] "
                                "(did you mean 'connect'?)");
    rl_diag_free(&d);
}

Test(config, tells_about_a_section_name_longer_than_inih_keeps)
{
    /* inih cuts section names at 49 bytes; ours are read whole. */
    struct rl_config *cfg =
        load_ok("[user:abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyz]\n"
                "connect = 1/s\n");
    cr_expect_str_eq(cfg->rules[0].user,
                     "abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyz");
    rl_config_free(cfg);
}

Test(config, hashes_the_meaning_not_the_text)
{
    struct rl_config *a = load_ok("[default]\nconnect = 5/s\nsend = 1/s\n");
    struct rl_config *b = load_ok("; comment\n[default]\n  send=1/s ; x\n"
                                  "\nconnect   =   5/s\n");
    struct rl_config *c = load_ok("[default]\nconnect = 6/s\nsend = 1/s\n");
    struct rl_config *e = load_ok("[default]\nconnect = 5000/ms\n"
                                  "send = 1/s\n");
    cr_expect_eq(a->hash, b->hash);
    struct rl_config *f = load_ok("[rlshim]\nlog = stderr\n[default]\n"
                                  "connect = 5/s\nsend = 1/s\n"
                                  "on_deny = delay\nerrno = ETIMEDOUT\n"
                                  "to = 10.0.0.0/8\n");
    cr_expect_eq(a->hash, f->hash, "what a denial gets keeps budgets");
    struct rl_config *g = load_ok("[rlshim]\nmax_users = 5\n[default]\n"
                                  "connect = 5/s\nsend = 1/s\n");
    cr_expect_neq(a->hash, g->hash, "the table size shapes the segment");
    struct rl_config *w = load_ok("[default]\nalgorithm = sliding_window\n"
                                  "connect = 5/s\nsend = 1/s\n");
    cr_expect_neq(a->hash, w->hash);
    struct rl_config *u = load_ok("[user:x]\nconnect = 5/s\nsend = 1/s\n");
    cr_expect_neq(a->hash, u->hash);
    rl_config_free(f);
    rl_config_free(g);
    rl_config_free(w);
    rl_config_free(u);
    cr_expect_neq(a->hash, c->hash);
    cr_expect_neq(a->hash, e->hash);
    cr_expect_neq(a->hash, 0);
    rl_config_free(a);
    rl_config_free(b);
    rl_config_free(c);
    rl_config_free(e);
}

Test(config, hash_is_the_same_in_every_build)
{
    /* Pinned: a change of recipe must be deliberate (old segments would
     * be replaced on upgrade). */
    struct rl_config *a = load_ok("[default]\nconnect = 5/s\n");
    cr_expect_eq(a->hash, 0xb5172db25b282343ull, "hash %016llx",
                 (unsigned long long)a->hash);
    rl_config_free(a);
}

Test(config, reports_a_missing_file_with_its_path)
{
    struct rl_diag d = {0};
    struct rl_config *cfg;
    cr_expect_eq(rl_config_load("/nonexistent/rlshim.ini", &cfg, &d), -ENOENT);
    cr_assert_eq(d.n, 1);
    cr_expect_str_eq(d.msgs[0], "/nonexistent/rlshim.ini: cannot read: "
                                "No such file or directory");
    rl_diag_free(&d);
}

Test(config, no_config_at_all_means_nothing_is_throttled)
{
    struct rl_diag d = {0};
    struct rl_config *cfg = (void *)1;
    unsetenv("RLSHIM_CONFIG");
    /* The sysconfdir file of a test build does not exist. */
    if (access(rl_config_path_from_env(), F_OK) == 0)
        cr_skip_test("%s exists on this host", rl_config_path_from_env());
    cr_expect_eq(rl_config_load_env(&cfg, &d), 0);
    cr_expect_null(cfg);
    cr_expect_eq(d.n, 0);
}

Test(config, an_unreadable_rlshim_config_is_an_error)
{
    struct rl_diag d = {0};
    struct rl_config *cfg = (void *)1;
    setenv("RLSHIM_CONFIG", "/nonexistent/x.ini", 1);
    cr_expect_eq(rl_config_load_env(&cfg, &d), -ENOENT);
    cr_expect_null(cfg);
    cr_expect_eq(d.n, 1);
    rl_diag_free(&d);
    unsetenv("RLSHIM_CONFIG");
}

Test(config, writes_one_line_for_the_host_program)
{
    struct rl_diag d = load_bad("[default]\nconect = 1/s\nsend = 0/s\n");
    char buf[256];
    rl_config_error_line(&d, false, buf, sizeof buf);
    cr_expect_str_eq(buf, "rlshim: t.ini:2: unknown key 'conect' in "
                          "[default] (did you mean 'connect'?) (and 1 more: "
                          "run 'rlshim check'); nothing is throttled\n");
    rl_config_error_line(&d, true, buf, sizeof buf);
    cr_expect(strstr(buf, "; exiting with status 78 (RLSHIM_STRICT=1)\n"));
    size_t n = rl_config_error_line(&d, true, buf, 20);
    cr_expect_eq(n, 19);
    cr_expect_eq(buf[18], '\n', "a cut line still ends the line");
    rl_diag_free(&d);
}

/* ---- rules and destinations ---------------------------------------------*/

static const char rules_text[] = "[user:bob]\nconnect = 1/s\n"
                                 "[user:1000]\nconnect = 2/s\n"
                                 "[user:alice]\nconnect = 3/s\n"
                                 "[default]\nconnect = 4/s\n";

Test(config, finds_key_then_uid_then_login_then_default)
{
    struct rl_config *cfg = load_ok(rules_text);
    const struct rl_rule *r;

    r = rl_config_find_rule(cfg, "bob", 1000, "alice");
    cr_expect_str_eq(r->section, "user:bob");
    r = rl_config_find_rule(cfg, "nobody-key", 1000, "alice");
    cr_expect_str_eq(r->section, "user:1000");
    r = rl_config_find_rule(cfg, NULL, 1001, "alice");
    cr_expect_str_eq(r->section, "user:alice");
    r = rl_config_find_rule(cfg, NULL, 1001, NULL);
    cr_expect(r->is_default, "a uid without a passwd entry");
    rl_config_free(cfg);
}

Test(config, finds_nothing_without_a_default)
{
    struct rl_config *cfg = load_ok("[user:bob]\nconnect = 1/s\n");
    cr_expect_null(rl_config_find_rule(cfg, NULL, 5, "carol"));
    rl_config_free(cfg);
}

static bool covers(const struct rl_rule *r, const char *ip, unsigned port)
{
    struct sockaddr_in in = {.sin_family = AF_INET};
    struct sockaddr_in6 in6 = {.sin6_family = AF_INET6};
    if (inet_pton(AF_INET, ip, &in.sin_addr) == 1) {
        in.sin_port = htons((uint16_t)port);
        return rl_rule_covers(NULL, r, &in, sizeof in);
    }
    cr_assert_eq(inet_pton(AF_INET6, ip, &in6.sin6_addr), 1, "%s", ip);
    in6.sin6_port = htons((uint16_t)port);
    return rl_rule_covers(NULL, r, &in6, sizeof in6);
}

Test(dest, matches_ipv4_prefixes_and_ports)
{
    struct rl_config *cfg = load_ok("[default]\nconnect = 1/s\n"
                                    "to = 127.0.0.1:8080, 10.0.0.0/8, "
                                    "192.168.1.0/24:443\n");
    const struct rl_rule *r = &cfg->rules[0];
    cr_expect(covers(r, "127.0.0.1", 8080));
    cr_expect_not(covers(r, "127.0.0.1", 8081));
    cr_expect_not(covers(r, "127.0.0.2", 8080));
    cr_expect(covers(r, "10.255.0.1", 1));
    cr_expect_not(covers(r, "11.0.0.1", 1));
    cr_expect(covers(r, "192.168.1.77", 443));
    cr_expect_not(covers(r, "192.168.1.77", 80));
    cr_expect_not(covers(r, "::1", 8080));
    rl_config_free(cfg);
}

Test(dest, matches_ipv4_mapped_ipv6_as_ipv4)
{
    struct rl_config *cfg = load_ok("[default]\nconnect = 1/s\n"
                                    "to = 10.0.0.0/8, [::ffff:127.0.0.1]\n");
    const struct rl_rule *r = &cfg->rules[0];
    cr_expect(covers(r, "::ffff:10.1.2.3", 80));
    cr_expect_not(covers(r, "::ffff:11.1.2.3", 80));
    cr_expect(covers(r, "127.0.0.1", 80), "a mapped entry matches IPv4");
    cr_expect_eq(r->to[1].family, AF_INET);
    cr_expect_eq(r->to[1].prefix, 32);
    rl_config_free(cfg);
}

Test(dest, matches_ipv6_in_every_spelling)
{
    struct rl_config *cfg =
        load_ok("[default]\nconnect = 1/s\n"
                "to = [::1]:443, fd00::/8, [2001:db8::]/32:53,"
                " [2001:db9::/32]\n");
    const struct rl_rule *r = &cfg->rules[0];
    cr_expect(covers(r, "::1", 443));
    cr_expect_not(covers(r, "::1", 80));
    cr_expect(covers(r, "fdab::1", 9));
    cr_expect_not(covers(r, "fe80::1", 9));
    cr_expect(covers(r, "2001:db8:1::5", 53));
    cr_expect_not(covers(r, "2001:db8:1::5", 54));
    cr_expect(covers(r, "2001:db9:ffff::1", 1));
    cr_expect_not(covers(r, "127.0.0.1", 443));
    rl_config_free(cfg);
}

Test(dest, any_address_with_a_port_and_an_empty_list_cover_all)
{
    struct rl_config *cfg = load_ok("[user:a]\nconnect = 1/s\nto = *:443\n"
                                    "[user:b]\nconnect = 1/s\n");
    cr_expect(covers(&cfg->rules[0], "8.8.8.8", 443));
    cr_expect(covers(&cfg->rules[0], "2001:db8::1", 443));
    cr_expect_not(covers(&cfg->rules[0], "8.8.8.8", 80));
    cr_expect(covers(&cfg->rules[1], "8.8.8.8", 80));
    cr_expect(covers(&cfg->rules[1], "::1", 1));
    rl_config_free(cfg);
}

Test(dest, never_covers_other_families_or_short_addresses)
{
    struct rl_config *cfg = load_ok("[default]\nconnect = 1/s\n");
    struct sockaddr_in in = {.sin_family = AF_INET};
    struct sockaddr sa = {.sa_family = AF_UNIX};
    cr_expect_not(rl_rule_covers(NULL, &cfg->rules[0], &sa, sizeof sa));
    cr_expect_not(rl_rule_covers(NULL, &cfg->rules[0], &in, sizeof in - 1));
    cr_expect_not(rl_rule_covers(NULL, &cfg->rules[0], NULL, 0));
    rl_config_free(cfg);
}

Test(dest, masks_host_bits_and_prints_entries_back)
{
    struct rl_config *cfg = load_ok("[default]\nconnect = 1/s\n"
                                    "to = 10.1.2.3/8:80, [::1]:443, *:53, "
                                    "fd00::1/8\n");
    const struct rl_rule *r = &cfg->rules[0];
    char buf[64];
    rl_config_format_dest(&r->to[0], buf, sizeof buf);
    cr_expect_str_eq(buf, "10.0.0.0/8:80");
    rl_config_format_dest(&r->to[1], buf, sizeof buf);
    cr_expect_str_eq(buf, "[::1]:443");
    rl_config_format_dest(&r->to[2], buf, sizeof buf);
    cr_expect_str_eq(buf, "*:53");
    rl_config_format_dest(&r->to[3], buf, sizeof buf);
    cr_expect_str_eq(buf, "[fd00::]/8");
    rl_config_free(cfg);
}

Test(config, prints_rates_as_the_file_would_spell_them)
{
    struct rl_config *cfg = load_ok("[default]\nconnect = 5/s, 7/h\n"
                                    "send_bytes = 1MiB/s, 3000/ms, 10B/min\n");
    const struct rl_rule *r = &cfg->rules[0];
    char buf[64];
    rl_config_format_rate(RL_KIND_CONNECT, &r->limits[0][0], buf, sizeof buf);
    cr_expect_str_eq(buf, "5/s");
    rl_config_format_rate(RL_KIND_CONNECT, &r->limits[0][1], buf, sizeof buf);
    cr_expect_str_eq(buf, "7/h");
    rl_config_format_rate(RL_KIND_SEND_BYTES, &r->limits[2][0], buf,
                          sizeof buf);
    cr_expect_str_eq(buf, "1MiB/s");
    rl_config_format_rate(RL_KIND_SEND_BYTES, &r->limits[2][1], buf,
                          sizeof buf);
    cr_expect_str_eq(buf, "3KB/ms");
    rl_config_format_rate(RL_KIND_SEND_BYTES, &r->limits[2][2], buf,
                          sizeof buf);
    cr_expect_str_eq(buf, "10B/min");
    rl_config_free(cfg);
}

Test(config, refuses_a_fifo_without_waiting_for_a_writer)
{
    char dir[] = "/tmp/rlshim-fifo-XXXXXX", path[64];
    struct rl_diag d = {0};
    struct rl_config *cfg;

    cr_assert_not_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/rlshim.ini", dir);
    cr_assert_eq(mkfifo(path, 0600), 0);
    cr_expect_eq(rl_config_load(path, &cfg, &d), -EINVAL);
    cr_assert_eq(d.n, 1);
    cr_expect(strstr(d.msgs[0], ": cannot read: not a regular file"));
    rl_diag_free(&d);
    unlink(path);
    rmdir(dir);
}

Test(config, refuses_a_file_over_the_size_cap)
{
    char path[] = "/tmp/rlshim-big-XXXXXX";
    struct rl_diag d = {0};
    struct rl_config *cfg;
    int fd = mkstemp(path);

    cr_assert(fd >= 0);
    cr_assert_eq(ftruncate(fd, RL_CONFIG_FILE_MAX + 1), 0);
    close(fd);
    cr_expect_eq(rl_config_load(path, &cfg, &d), -EFBIG);
    cr_assert_eq(d.n, 1);
    cr_expect(strstr(d.msgs[0], ": larger than 1048576 bytes"));
    rl_diag_free(&d);
    unlink(path);
}

/* ---- the key table and the docs ----------------------------------------*/

static bool in_table(const char *name)
{
    for (size_t i = 0; i < rl_config_key_count(); i++)
        if (strcmp(rl_config_key_name(i), name) == 0)
            return true;
    return false;
}

/* A row of model/kinds.h's table is enough for the words a kind is known
 * by: its rates' and burst's keys are keys of the file, and its name
 * finds it again. */
Test(config, every_kind_of_the_table_has_its_keys)
{
    for (int k = 0; k < RL_KIND_COUNT; k++) {
        cr_expect(in_table(rl_kinds[k].name), "%s", rl_kinds[k].name);
        cr_expect(in_table(rl_kinds[k].burst_key), "%s",
                  rl_kinds[k].burst_key);
        cr_expect_eq(rl_kind_by_name(rl_kind_name(k)), k);
    }
    cr_expect_str_eq(rl_kind_name(RL_KIND_COUNT), "?");
    cr_expect_eq(rl_kind_by_name("send_burst"), -1);
}

/* The keys a document names, into names[] (at most max); returns how
 * many. conf: every `key = value` line. man: every ".It Cm a , b = ..."
 * item (the words before " =", split at " , "). */
static size_t doc_keys(const char *path, bool man, char names[][40], size_t max)
{
    char line[512];
    size_t n = 0;
    FILE *f = fopen(path, "r");

    cr_assert_not_null(f, "%s", path);
    while (fgets(line, sizeof line, f) != NULL && n < max) {
        char *p = line, *end;
        if (man) {
            if (strncmp(line, ".It Cm ", 7) != 0)
                continue;
            p = line + 7;
            end = strstr(p, " =");
            if (end == NULL)
                end = p + strcspn(p, "\n");
            *end = '\0';
            for (char *w = strtok(p, " ,"); w != NULL && n < max;
                 w = strtok(NULL, " ,"))
                snprintf(names[n++], sizeof names[0], "%s", w);
        } else {
            p += strspn(p, " \t");
            if (*p == ';' || *p == '#' || *p == '[' || strchr(p, '=') == NULL)
                continue;
            end = p + strcspn(p, " \t=");
            *end = '\0';
            snprintf(names[n++], sizeof names[0], "%s", p);
        }
    }
    fclose(f);
    return n;
}

Test(keys, has_no_name_twice)
{
    size_t n = rl_config_key_count();

    cr_assert_geq(n, 18);
    for (size_t i = 0; i < n; i++)
        for (size_t j = i + 1; j < n; j++)
            cr_expect_str_neq(rl_config_key_name(i), rl_config_key_name(j),
                              "rows %zu and %zu", i, j);
    cr_expect_null(rl_config_key_name(n));
}

Test(keys, are_the_keys_of_the_example_file_and_the_man_page)
{
    static const struct {
        const char *path;
        bool man;
    } docs[] = {{"conf/rlshim.ini", false}, {"src/man/rlshim.ini.5", true}};
    static char names[256][40];

    for (size_t d = 0; d < sizeof docs / sizeof docs[0]; d++) {
        char path[1024];
        size_t n;

        snprintf(path, sizeof path, "%s/%s", src_dir(), docs[d].path);
        n = doc_keys(path, docs[d].man, names, 256);
        cr_expect_geq(n, 18, "%s: only %zu keys found", path, n);
        /* Every key the doc names is one the parser knows ... */
        for (size_t i = 0; i < n; i++)
            cr_expect(in_table(names[i]), "%s names '%s', not in the table",
                      path, names[i]);
        /* ... and every key the parser knows is in the doc. */
        for (size_t k = 0; k < rl_config_key_count(); k++) {
            bool found = false;
            for (size_t i = 0; i < n && !found; i++)
                found = strcmp(names[i], rl_config_key_name(k)) == 0;
            cr_expect(found, "key '%s' is missing from %s",
                      rl_config_key_name(k), path);
        }
    }
}

/* ---- did you mean ------------------------------------------------------*/

Test(suggest, counts_an_adjacent_swap_as_one_edit)
{
    cr_expect_eq(rl_edit_distance("connect", "connect"), 0);
    cr_expect_eq(rl_edit_distance("conect", "connect"), 1);
    cr_expect_eq(rl_edit_distance("connetc", "connect"), 1);
    cr_expect_eq(rl_edit_distance("", "to"), 2);
    cr_expect_eq(rl_edit_distance("sned", "send"), 1);
    cr_expect_eq(rl_edit_distance("abcdefghijklmnopqrstuvwxyzabcdefg", "a"),
                 RL_SUGGEST_FAR);
}

Test(suggest, keeps_the_closest_and_never_a_word_as_far_as_it_is_long)
{
    struct rl_suggest s;

    rl_suggest_init(&s, "sned", 2);
    rl_suggest_offer(&s, "to");
    rl_suggest_offer(&s, "send_bytes");
    rl_suggest_offer(&s, "send");
    rl_suggest_offer(&s, "seed"); /* as close as "send", offered later */
    cr_expect_str_eq(s.best, "send");

    rl_suggest_init(&s, "x", 2);
    rl_suggest_offer(&s, "to"); /* 2 edits for a 1-byte word */
    cr_expect_null(s.best);

    rl_suggest_init(&s, "connnnnect", 2);
    rl_suggest_offer(&s, "connect"); /* 3 edits */
    cr_expect_null(s.best);
}

/* ---- destinations, directly ---------------------------------------------*/

Test(dest, parses_each_form_and_matches_a_peer)
{
    struct rl_dest d[3];
    struct rl_peer p;
    struct sockaddr_in in = {.sin_family = AF_INET,
                             .sin_port = htons(443),
                             .sin_addr.s_addr = htonl(0x0a010203)};

    cr_assert_null(rl_dest_parse("10.0.0.0/8", &d[0]));
    cr_assert_null(rl_dest_parse("*:443", &d[1]));
    cr_assert_null(rl_dest_parse("[::1]:80", &d[2]));
    cr_expect_eq(d[0].form, RL_DEST_ADDR);
    cr_expect_eq(d[1].form, RL_DEST_ANY);
    cr_expect_str_eq(rl_dest_parse("10.0.0.1:0", &d[0]),
                     "bad port (1 to 65535)");
    cr_expect_str_eq(rl_dest_parse("*", &d[0]), "'*' needs a port ('*:PORT')");

    cr_assert(rl_peer_from_addr(NULL, &in, sizeof in, &p));
    cr_expect_eq(p.family, AF_INET);
    cr_expect_eq(p.port, 443);
    cr_expect(rl_dest_match(&d[1], &p));
    cr_expect_not(rl_dest_match(&d[2], &p));
    cr_expect(rl_dests_cover(NULL, d + 1, 2, &in, sizeof in));
    cr_expect_not(rl_dests_cover(NULL, d + 2, 1, &in, sizeof in));
    cr_expect(rl_dests_cover(NULL, NULL, 0, &in, sizeof in));
    cr_expect_not(rl_dests_cover(NULL, NULL, 0, &in, sizeof in - 1));
}

/* `scope = fleet` in a site section and with `per = destination` is one
 * budget for every host (issue 12): accepted with `fleet`, and without
 * it the line is named like any fleet budget's. */
Test(config, scope_fleet_in_a_site_or_per_destination)
{
    static const char fleet[] = "[rlshim]\nfleet = redis://127.0.0.1:6379\n";
    char text[400];
    snprintf(text, sizeof text,
             "%s[site:every-host]\nper = destination\nconnect = 1/s\n"
             "scope = fleet\n",
             fleet);
    struct rl_config *cfg = load_ok(text);
    cr_expect_eq(cfg->rules[0].scope, RL_SCOPE_FLEET);
    rl_config_free(cfg);
    snprintf(text, sizeof text,
             "%s[user:crawler]\nscope = fleet\nper = destination\n"
             "connect = 1/s\n",
             fleet);
    rl_config_free(load_ok(text));
    snprintf(text, sizeof text,
             "%s[user:crawler]\nscope = fleet\n"
             "connect = 1/s\n[site:wiki]\nconnect = 2/s\nscope = fleet\n",
             fleet);
    rl_config_free(load_ok(text));
    /* Without `fleet`: "needs fleet", where it is written. */
    struct rl_diag d = load_bad("[site:wiki]\nto = wikipedia.org\n"
                                "scope = fleet\nconnect = 10/s\n");
    cr_expect_eq(d.n, 1);
    cr_expect_str_eq(d.msgs[0], "t.ini:3: 'scope = fleet' in [site:wiki] "
                                "needs 'fleet = redis://...' in [rlshim]");
    rl_diag_free(&d);
    d = load_bad("[user:crawler]\nper = destination\nscope = fleet\n"
                 "connect = 10/s\n");
    cr_expect_eq(d.n, 1);
    cr_expect(strstr(d.msgs[0], "t.ini:3: 'scope = fleet' in "
                                "[user:crawler] needs") == d.msgs[0],
              "%s", d.msgs[0]);
    rl_diag_free(&d);
}

/* Issue 19 item 10: max_delay took up to 2^64 ns, and now + max_delay
 * wrapped. Every duration key is capped at one day. */
Test(config, accepts_a_duration_at_the_cap_of_one_day)
{
    static const char *const at_cap[] = {"24h", "1440min", "86400s",
                                         "86400000000000ns"};
    for (size_t i = 0; i < sizeof at_cap / sizeof at_cap[0]; i++) {
        char text[128];
        snprintf(text, sizeof text,
                 "[rlshim]\nmax_delay = %s\n[default]\nmax_delay = %s\n",
                 at_cap[i], at_cap[i]);
        struct rl_config *cfg = load_ok(text);
        cr_expect_eq(cfg->max_delay_ns, RL_CONFIG_DURATION_MAX_NS, "%s",
                     at_cap[i]);
        cr_expect_eq(cfg->rules[0].max_delay_ns, RL_CONFIG_DURATION_MAX_NS,
                     "%s", at_cap[i]);
        rl_config_free(cfg);
    }
    cr_expect_eq(RL_CONFIG_DURATION_MAX_NS, 86400ull * RL_NS_PER_S);
}

Test(config, refuses_a_duration_past_the_cap_with_its_line)
{
    static const struct {
        const char *v, *sect;
    } past[] = {
        {"86400000000001ns", "rlshim"},
        {"25h", "user:a"},
        {"1441min", "default"},
        {"18446744073709551616ns", "rlshim"}, /* past 2^64 */
        {"5124096h", "rlshim"},               /* its ns past 2^64 */
    };
    for (size_t i = 0; i < sizeof past / sizeof past[0]; i++) {
        char text[160], want[160];
        snprintf(text, sizeof text, "; a comment\n[%s]\nmax_delay = %s\n",
                 past[i].sect, past[i].v);
        snprintf(want, sizeof want,
                 "t.ini:3: max_delay '%s' in [%s] is over the cap of 1 day",
                 past[i].v, past[i].sect);
        struct rl_diag d = load_bad(text);
        cr_expect_eq(d.n, 1, "%s", past[i].v);
        cr_expect_str_eq(d.msgs[0], want);
        rl_diag_free(&d);
    }
}

/* ---- the request kind (SPEC §11) ----------------------------------------*/

Test(config, reads_request_and_its_burst_like_connect)
{
    struct rl_config *cfg = load_ok("[default]\n"
                                    "request = 1/s, 30/min\n"
                                    "request_burst = 3\n");
    const struct rl_rule *r = &cfg->rules[0];
    cr_expect_eq(r->nlimits[RL_KIND_REQUEST], 2);
    cr_expect_eq(r->limits[RL_KIND_REQUEST][0].count, 1);
    cr_expect_eq(r->limits[RL_KIND_REQUEST][0].period_ns, RL_NS_PER_S);
    cr_expect_eq(r->limits[RL_KIND_REQUEST][0].burst, 3);
    cr_expect_eq(r->limits[RL_KIND_REQUEST][1].count, 30);
    cr_expect_eq(r->limits[RL_KIND_REQUEST][1].burst, 30,
                 "a rate without its own burst gets N");
    cr_expect_eq(r->nlimits[RL_KIND_CONNECT], 0);
    cr_expect_eq(r->nlimits[RL_KIND_SEND], 0);
    cr_expect_str_eq(rl_kind_name(RL_KIND_REQUEST), "request");
    rl_config_free(cfg);
}

Test(config, takes_request_in_a_sliding_window)
{
    struct rl_config *cfg = load_ok("[user:crawler]\n"
                                    "algorithm = sliding_window\n"
                                    "request = 2/s\n");
    const struct rl_rule *r = &cfg->rules[0];
    cr_expect_eq(r->nlimits[RL_KIND_REQUEST], 1);
    cr_expect_eq(r->limits[RL_KIND_REQUEST][0].algo, RL_ALGO_SLIDING_WINDOW);
    cr_expect_eq(r->limits[RL_KIND_REQUEST][0].count, 2);
    rl_config_free(cfg);
    /* ... but a window has no burst, for requests as for connect. */
    struct rl_diag d = load_bad("[user:crawler]\n"
                                "algorithm = sliding_window\n"
                                "request = 2/s\n"
                                "request_burst = 4\n");
    cr_expect_eq(d.n, 1);
    cr_expect_str_eq(d.msgs[0],
                     "t.ini:4: 'request_burst' needs algorithm = token_bucket "
                     "in [user:crawler] (a sliding window has no burst)");
    rl_diag_free(&d);
}

Test(config, takes_request_in_a_site_per_destination)
{
    struct rl_config *cfg = load_ok("[site:every-host]\n"
                                    "per = destination\n"
                                    "request = 1/s\n"
                                    "request_burst = 1\n"
                                    "max_open = 2\n");
    const struct rl_rule *r = &cfg->rules[0];
    cr_expect_str_eq(r->site, "every-host");
    cr_expect_eq(r->per, RL_PER_DESTINATION);
    cr_expect_eq(r->nlimits[RL_KIND_REQUEST], 1);
    cr_expect_eq(r->limits[RL_KIND_REQUEST][0].burst, 1);
    cr_expect_eq(r->max_open, 2);
    rl_config_free(cfg);
}

Test(config, names_the_line_of_each_request_mistake)
{
    static const struct {
        const char *text, *want;
    } bad[] = {
        {"[default]\nconnect = 1/s\nrequest = 0/s\n",
         "t.ini:3: zero rate in '0/s' for 'request' in [default]"},
        {"; x\n[site:a]\nrequest_burst = 2\n",
         "t.ini:3: 'request_burst' without 'request' in [site:a]"},
        {"[default]\nrequest = 1/s, 2/s\nrequest_burst = 1, 2, 3\n",
         "t.ini:3: 3 bursts for 2 rates in 'request_burst' of [default]"},
        {"[rlshim]\nrequest = 1/s\n",
         NULL /* a rule's key in [rlshim]: some message on line 2 */},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct rl_diag d = load_bad(bad[i].text);
        cr_expect_eq(d.n, 1, "%s", bad[i].text);
        if (bad[i].want != NULL)
            cr_expect_str_eq(d.msgs[0], bad[i].want);
        else
            cr_expect(strncmp(d.msgs[0], "t.ini:2: ", 9) == 0, "%s",
                      d.msgs[0]);
        rl_diag_free(&d);
    }
}

Test(config, hashes_a_request_limit_and_nothing_else_changes)
{
    /* A request limit shapes the budget (its words, its Redis keys); a
     * rule without one hashes as before the kind existed (pinned above). */
    struct rl_config *a = load_ok("[default]\nconnect = 5/s\n");
    struct rl_config *b = load_ok("[default]\nconnect = 5/s\nrequest = 1/s\n");
    struct rl_config *c = load_ok("[default]\nconnect = 5/s\nrequest = 2/s\n");
    struct rl_config *e = load_ok("[default]\nconnect = 5/s\nrequest = 1/s\n"
                                  "request_burst = 4\n");
    cr_expect_neq(a->hash, b->hash);
    cr_expect_neq(b->hash, c->hash);
    cr_expect_neq(b->hash, e->hash);
    rl_config_free(a);
    rl_config_free(b);
    rl_config_free(c);
    rl_config_free(e);
}

/* ---- retry_after, max_retry_after (SPEC §12) ----------------------------*/

Test(config, retry_after_obeys_for_ten_minutes_by_default)
{
    struct rl_config *cfg = load_ok("[user:u]\nrequest = 1/s\n"
                                    "[site:s]\nrequest = 2/s\n");
    for (size_t i = 0; i < cfg->nrules; i++) {
        cr_expect_eq(cfg->rules[i].retry_after, RL_RETRY_AFTER_OBEY);
        cr_expect_eq(cfg->rules[i].max_retry_after_ns, 600ull * 1000000000ull,
                     "[%s]", cfg->rules[i].section);
    }
    rl_config_free(cfg);
}

Test(config, retry_after_and_max_retry_after_in_rules_and_sites)
{
    struct rl_config *cfg =
        load_ok("[default]\nrequest = 1/s\nretry_after = ignore\n"
                "[site:s]\nrequest = 2/s\nretry_after = obey\n"
                "max_retry_after = 90s\n");
    cr_assert_eq(cfg->nrules, 2);
    cr_expect_eq(cfg->rules[0].retry_after, RL_RETRY_AFTER_IGNORE);
    cr_expect_eq(cfg->rules[0].max_retry_after_ns, 600ull * 1000000000ull);
    cr_expect_eq(cfg->rules[1].retry_after, RL_RETRY_AFTER_OBEY);
    cr_expect_eq(cfg->rules[1].max_retry_after_ns, 90ull * 1000000000ull);
    rl_config_free(cfg);
}

Test(config, a_bad_retry_after_says_file_and_line)
{
    struct rl_diag d = load_bad("[default]\nrequest = 1/s\n"
                                "retry_after = sometimes\n");
    cr_expect_str_eq(d.msgs[0], "t.ini:3: bad value 'sometimes' for "
                                "'retry_after' in [default] (use obey or "
                                "ignore)");
    rl_diag_free(&d);
}

Test(config, a_bad_max_retry_after_says_file_and_line)
{
    struct rl_diag d = load_bad("[site:s]\nrequest = 1/s\n"
                                "max_retry_after = 10 fortnights\n");
    cr_expect_str_eq(d.msgs[0], "t.ini:3: bad unit in '10 fortnights' for "
                                "'max_retry_after' in [site:s] (use ns, us, "
                                "ms, s, min or h)");
    rl_diag_free(&d);
    d = load_bad("[site:s]\nrequest = 1/s\nmax_retry_after = -5s\n");
    cr_expect_str_eq(d.msgs[0], "t.ini:3: negative value '-5s' for "
                                "'max_retry_after' in [site:s]");
    rl_diag_free(&d);
}

Test(config, retry_after_is_no_key_of_rlshim)
{
    struct rl_diag d = load_bad("[rlshim]\nretry_after = obey\n");
    cr_expect(strstr(d.msgs[0], "t.ini:2:") == d.msgs[0], "%s", d.msgs[0]);
    cr_expect(strstr(d.msgs[0], "retry_after") != NULL, "%s", d.msgs[0]);
    rl_diag_free(&d);
}

Test(config, reads_on_deny_respond_and_its_status_inherited)
{
    struct rl_config *cfg = load_ok("[rlshim]\n"
                                    "on_deny = respond\n"
                                    "[default]\n"
                                    "request = 1/s\n"
                                    "[site:api]\n"
                                    "to = api.example.com\n"
                                    "request = 10/s\n"
                                    "respond_status = 503\n");
    cr_expect_eq(cfg->on_deny, RL_DENY_RESPOND);
    cr_expect_eq(cfg->respond_status, 429, "the default");
    cr_expect_eq(cfg->rules[0].on_deny, RL_DENY_RESPOND, "inherited");
    cr_expect_eq(cfg->rules[0].respond_status, 429);
    cr_expect_eq(cfg->rules[1].respond_status, 503);
    rl_config_free(cfg);
}

Test(config, refuses_a_respond_status_other_than_429_or_503)
{
    struct rl_diag d = load_bad("[default]\nrequest = 1/s\n"
                                "on_deny = respond\nrespond_status = 500\n");
    cr_expect(strstr(d.msgs[0], "use 429 or 503") != NULL, "%s", d.msgs[0]);
    rl_diag_free(&d);
}
