/* test_cgroup.c — key = cgroup (SPEC §16): /proc/self/cgroup's text as
 * every kind of host writes it (and as a hostile one might), the key made
 * of it, and the [user:cgroup:...] sections that match it. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/cgroup.h"
#include "policy/config.h"
#include "policy/identity.h"

static enum rl_cgroup_found parse(const char *text, size_t n, char *out)
{
    return rl_cgroup_parse(text, n, out);
}

#define PARSE(lit, out) parse(lit, sizeof lit - 1, out)

/* ---- the file's text ----------------------------------------------------*/

Test(cgroup, a_v2_host_has_one_unified_line)
{
    char out[RL_CGROUP_PATH_MAX + 1];
    cr_expect_eq(PARSE("0::/system.slice/crawler.service\n", out),
                 RL_CGROUP_FOUND);
    cr_expect_str_eq(out, "/system.slice/crawler.service");
}

Test(cgroup, a_hybrid_host_uses_its_unified_line_among_the_v1_ones)
{
    char out[RL_CGROUP_PATH_MAX + 1];
    static const char text[] = "9:name=systemd:/user.slice\n"
                               "4:memory:/process_api/7cc6\n"
                               "1:cpu:/\n"
                               "0::/rlshim-test/a\n";
    cr_expect_eq(PARSE(text, out), RL_CGROUP_FOUND);
    cr_expect_str_eq(out, "/rlshim-test/a");
}

Test(cgroup, a_v1_only_host_has_none)
{
    char out[RL_CGROUP_PATH_MAX + 1];
    /* "10:" and "1:" begin like "0:" in no way that counts. */
    static const char text[] = "10:name=systemd:/x\n1:cpu:/\n";
    cr_expect_eq(PARSE(text, out), RL_CGROUP_NO_UNIFIED);
    cr_expect_str_eq(out, "");
    cr_expect_eq(PARSE("", out), RL_CGROUP_NO_UNIFIED);
}

Test(cgroup, takes_a_last_line_without_its_newline)
{
    char out[RL_CGROUP_PATH_MAX + 1];
    cr_expect_eq(PARSE("1:cpu:/\n0::/a/b", out), RL_CGROUP_FOUND);
    cr_expect_str_eq(out, "/a/b");
    cr_expect_eq(PARSE("0::/", out), RL_CGROUP_FOUND);
    cr_expect_str_eq(out, "/");
}

Test(cgroup, refuses_a_path_with_a_nul_or_a_control_byte)
{
    char out[RL_CGROUP_PATH_MAX + 1];
    cr_expect_eq(PARSE("0::/a\0b\n", out), RL_CGROUP_BAD);
    cr_expect_eq(PARSE("0::/a\tb\n", out), RL_CGROUP_BAD);
    cr_expect_eq(PARSE("0::/a\rb\n", out), RL_CGROUP_BAD);
    cr_expect_str_eq(out, "");
    /* A NUL on another line harms nothing. */
    cr_expect_eq(PARSE("1:cpu:/x\0y\n0::/ok\n", out), RL_CGROUP_FOUND);
    cr_expect_str_eq(out, "/ok");
}

Test(cgroup, refuses_an_empty_or_relative_path)
{
    char out[RL_CGROUP_PATH_MAX + 1];
    cr_expect_eq(PARSE("0::\n", out), RL_CGROUP_BAD);
    cr_expect_eq(PARSE("0::a/b\n", out), RL_CGROUP_BAD);
}

Test(cgroup, refuses_a_path_too_long_rather_than_cut_it)
{
    char out[RL_CGROUP_PATH_MAX + 1];
    size_t n = 3 + RL_CGROUP_PATH_MAX + 1;
    char *text = malloc(n);
    memcpy(text, "0::/", 4);
    memset(text + 4, 'x', n - 4);
    cr_expect_eq(parse(text, n, out), RL_CGROUP_BAD);
    /* One byte shorter fits exactly. */
    cr_expect_eq(parse(text, n - 1, out), RL_CGROUP_FOUND);
    cr_expect_eq(strlen(out), RL_CGROUP_PATH_MAX);
    free(text);
}

Test(cgroup, skips_very_long_other_lines)
{
    char out[RL_CGROUP_PATH_MAX + 1];
    size_t big = 100000;
    char *text = malloc(big + 32);
    memcpy(text, "1:cpu:/", 7);
    memset(text + 7, 'y', big);
    memcpy(text + 7 + big, "\n0::/z\n", 7);
    cr_expect_eq(parse(text, 7 + big + 7, out), RL_CGROUP_FOUND);
    cr_expect_str_eq(out, "/z");
    free(text);
}

Test(cgroup, reads_this_process_s_own)
{
    char out[RL_CGROUP_PATH_MAX + 1];
    enum rl_cgroup_found f = rl_cgroup_read_self(out);
    cr_expect(f == RL_CGROUP_FOUND || f == RL_CGROUP_NO_UNIFIED);
    if (f == RL_CGROUP_FOUND)
        cr_expect_eq(out[0], '/');
}

/* ---- the key ------------------------------------------------------------*/

Test(cgroup, the_key_is_the_path_after_cgroup_colon)
{
    char key[RL_IDENTITY_MAX];
    rl_identity_cgroup_key("/system.slice/crawler.service", key);
    cr_expect_str_eq(key, "cgroup:/system.slice/crawler.service");
}

Test(cgroup, two_long_paths_alike_in_their_head_get_two_keys)
{
    char a[RL_CGROUP_PATH_MAX + 1], b[RL_CGROUP_PATH_MAX + 1];
    char ka[RL_IDENTITY_MAX], kb[RL_IDENTITY_MAX];
    memset(a, 'p', 400);
    a[0] = '/';
    memcpy(b, a, 400);
    memcpy(a + 400, "/one", 5);
    memcpy(b + 400, "/two", 5);
    rl_identity_cgroup_key(a, ka);
    rl_identity_cgroup_key(b, kb);
    cr_expect_eq(strlen(ka), RL_IDENTITY_MAX - 1);
    cr_expect_str_neq(ka, kb);
    cr_expect_eq(strncmp(ka, "cgroup:/ppp", 11), 0, "the head is kept");
}

Test(cgroup, with_rlshim_key_set_the_key_is_rlshim_key)
{
    struct rl_identity id;
    setenv("RLSHIM_KEY", "crawler", 1);
    rl_identity_resolve_login(&id, RL_KEY_CGROUP, false);
    cr_expect_str_eq(id.key, "crawler");
    cr_expect_str_eq(rl_identity_cgroup_problem(&id), "");
}

Test(cgroup, without_rlshim_key_the_key_is_the_cgroup_or_a_line_says_why)
{
    struct rl_identity id;
    unsetenv("RLSHIM_KEY");
    rl_identity_resolve_login(&id, RL_KEY_CGROUP, false);
    if (id.has_key) {
        cr_expect_eq(strncmp(id.key, "cgroup:/", 8), 0, "%s", id.key);
        cr_expect_str_eq(rl_identity_cgroup_problem(&id), "");
    } else {
        cr_expect_neq(rl_identity_cgroup_problem(&id)[0], '\0');
    }
}

Test(cgroup, a_missing_unified_line_is_said_and_leaves_the_uid)
{
    struct rl_identity id = {.cgroup = RL_CGROUP_NO_UNIFIED};
    cr_expect(strstr(rl_identity_cgroup_problem(&id), "no cgroup v2 line") !=
              NULL);
    cr_expect(strstr(rl_identity_cgroup_problem(&id), "the uid") != NULL);
}

/* ---- sections -----------------------------------------------------------*/

static struct rl_config *load(const char *text)
{
    struct rl_config *cfg = NULL;
    struct rl_diag d = {0};
    int r = rl_config_load_string(text, "t.ini", &cfg, &d);
    cr_assert_eq(r, 0, "%s", d.n ? d.msgs[0] : "?");
    rl_diag_free(&d);
    return cfg;
}

static const char *section(const struct rl_config *cfg, const char *key)
{
    const struct rl_rule *r = rl_config_find_rule(cfg, key, 4242, NULL);
    return r == NULL ? "(none)" : r->section;
}

Test(cgroup, key_cgroup_is_a_config_word)
{
    struct rl_config *cfg = load("[rlshim]\nkey = cgroup\n"
                                 "[default]\nconnect = 1/s\n");
    cr_expect_eq(cfg->key_mode, RL_KEY_CGROUP);
    rl_config_free(cfg);
}

Test(cgroup, an_exact_section_matches_that_cgroup_only)
{
    struct rl_config *cfg =
        load("[user:cgroup:/system.slice/crawler.service]\nconnect = 1/s\n");
    cr_expect_str_eq(section(cfg, "cgroup:/system.slice/crawler.service"),
                     "user:cgroup:/system.slice/crawler.service");
    cr_expect_str_eq(section(cfg, "cgroup:/system.slice/crawler.service/x"),
                     "(none)");
    cr_expect_str_eq(section(cfg, "cgroup:/system.slice"), "(none)");
    rl_config_free(cfg);
}

Test(cgroup, a_wildcard_covers_the_cgroups_below_not_the_path_itself)
{
    struct rl_config *cfg = load("[user:cgroup:/parent/*]\nconnect = 1/s\n");
    cr_expect_str_eq(section(cfg, "cgroup:/parent/a"), "user:cgroup:/parent/*");
    cr_expect_str_eq(section(cfg, "cgroup:/parent/a/b.scope"),
                     "user:cgroup:/parent/*");
    cr_expect_str_eq(section(cfg, "cgroup:/parent"), "(none)");
    cr_expect_str_eq(section(cfg, "cgroup:/parentx/a"), "(none)");
    /* A key not from a cgroup is never covered. */
    cr_expect_str_eq(section(cfg, "/parent/a"), "(none)");
    rl_config_free(cfg);
}

Test(cgroup, an_exact_section_wins_over_a_wildcard_in_any_order)
{
    struct rl_config *cfg = load("[user:cgroup:/p/*]\nconnect = 1/s\n"
                                 "[user:cgroup:/p/a]\nconnect = 2/s\n");
    cr_expect_str_eq(section(cfg, "cgroup:/p/a"), "user:cgroup:/p/a");
    cr_expect_str_eq(section(cfg, "cgroup:/p/b"), "user:cgroup:/p/*");
    rl_config_free(cfg);
}

Test(cgroup, the_longest_wildcard_wins_in_any_order)
{
    struct rl_config *cfg = load("[user:cgroup:/*]\nconnect = 1/s\n"
                                 "[user:cgroup:/a/b/*]\nconnect = 3/s\n"
                                 "[user:cgroup:/a/*]\nconnect = 2/s\n");
    cr_expect_str_eq(section(cfg, "cgroup:/a/b/c"), "user:cgroup:/a/b/*");
    cr_expect_str_eq(section(cfg, "cgroup:/a/x"), "user:cgroup:/a/*");
    cr_expect_str_eq(section(cfg, "cgroup:/q"), "user:cgroup:/*");
    cr_expect_str_eq(section(cfg, "cgroup:/"), "(none)");
    rl_config_free(cfg);
}

Test(cgroup, a_wildcard_comes_before_the_uid_and_default)
{
    struct rl_config *cfg = load("[user:4242]\nconnect = 1/s\n"
                                 "[user:cgroup:/s/*]\nconnect = 2/s\n"
                                 "[default]\nconnect = 3/s\n");
    cr_expect_str_eq(section(cfg, "cgroup:/s/x"), "user:cgroup:/s/*");
    cr_expect_str_eq(section(cfg, "cgroup:/t"), "user:4242");
    rl_config_free(cfg);
}

Test(cgroup, a_systemd_user_service_path_can_be_named)
{
    static const char key[] = "cgroup:/user.slice/user-1000.slice/"
                              "user@1000.service/app.slice/crawler.service";
    char text[256], want[256];
    snprintf(text, sizeof text, "[user:%s]\nconnect = 1/s\n", key);
    snprintf(want, sizeof want, "user:%s", key);
    struct rl_config *cfg = load(text);
    cr_expect_str_eq(section(cfg, key), want);
    rl_config_free(cfg);
}
