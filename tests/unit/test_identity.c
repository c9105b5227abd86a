/* test_identity.c — who the calling process is. Each Criterion test runs in
 * its own worker process, so changing the environment or the uid here
 * touches nothing else. */
#include <criterion/criterion.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "policy/config.h"
#include "policy/identity.h"

Test(identity, takes_the_key_from_rlshim_key)
{
    struct rl_identity id;
    char buf[80];
    setenv("RLSHIM_KEY", "crawler", 1);
    cr_assert_eq(rl_identity_resolve(&id, RL_KEY_ENV), 0);
    cr_expect(id.has_key);
    cr_expect_str_eq(id.key, "crawler");
    cr_expect_str_eq(rl_identity_user(&id, buf, sizeof buf), "crawler");
}

Test(identity, without_a_key_is_its_real_uid)
{
    struct rl_identity id;
    char buf[80], want[16];
    unsetenv("RLSHIM_KEY");
    cr_assert_eq(rl_identity_resolve(&id, RL_KEY_ENV), 0);
    cr_expect_not(id.has_key);
    cr_expect_eq(id.uid, (uint32_t)getuid());
    snprintf(want, sizeof want, "%u", (unsigned)getuid());
    cr_expect_str_eq(rl_identity_user(&id, buf, sizeof buf), want);
}

Test(identity, an_empty_rlshim_key_counts_as_none)
{
    struct rl_identity id;
    setenv("RLSHIM_KEY", "", 1);
    rl_identity_resolve(&id, RL_KEY_ENV);
    cr_expect_not(id.has_key);
}

Test(identity, with_key_exe_is_the_program_name)
{
    struct rl_identity id;
    unsetenv("RLSHIM_KEY");
    rl_identity_resolve(&id, RL_KEY_EXE);
    cr_expect(id.has_key);
    /* The runner is build/tests/unit. */
    cr_expect_str_eq(id.key, "unit");
}

Test(identity, prefers_rlshim_key_to_the_program_name)
{
    struct rl_identity id;
    setenv("RLSHIM_KEY", "k", 1);
    rl_identity_resolve(&id, RL_KEY_EXE);
    cr_expect_str_eq(id.key, "k");
}

Test(identity, cuts_a_long_key_to_what_a_section_can_name)
{
    struct rl_identity id;
    char key[200];
    memset(key, 'k', sizeof key - 1);
    key[sizeof key - 1] = '\0';
    setenv("RLSHIM_KEY", key, 1);
    rl_identity_resolve(&id, RL_KEY_ENV);
    cr_expect_eq(strlen(id.key), RL_IDENTITY_MAX - 1);
}

Test(identity, finds_the_login_name_of_its_uid)
{
    struct rl_identity id;
    struct passwd *pw = getpwuid(getuid());
    if (pw == NULL)
        cr_skip_test("this uid has no passwd entry");
    rl_identity_resolve(&id, RL_KEY_ENV);
    cr_expect(id.has_login);
    cr_expect_str_eq(id.login, pw->pw_name);
}

Test(identity, a_uid_without_passwd_entry_still_matches_by_number)
{
    struct rl_identity id;
    struct rl_diag d = {0};
    struct rl_config *cfg = NULL;
    const uid_t nobody_known = 54321;

    if (getpwuid(nobody_known) != NULL)
        cr_skip_test("uid %u has a passwd entry here", nobody_known);
    if (getuid() != 0 || setresuid(nobody_known, nobody_known, 0) != 0)
        cr_skip_test("needs root to change uid");
    unsetenv("RLSHIM_KEY");
    rl_identity_resolve(&id, RL_KEY_ENV);
    cr_expect_eq(id.uid, nobody_known);
    cr_expect_not(id.has_login);

    cr_assert_eq(rl_config_load_string("[user:54321]\nconnect = 1/s\n"
                                       "[default]\nconnect = 2/s\n",
                                       "t.ini", &cfg, &d),
                 0);
    const struct rl_rule *r = rl_config_find_rule(
        cfg, id.has_key ? id.key : NULL, id.uid,
        id.has_login ? id.login : NULL);
    cr_expect_str_eq(r->section, "user:54321");
    rl_config_free(cfg);
}
