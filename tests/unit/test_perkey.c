/* Budgets keyed as crawlers key them (SPEC §3): `per = domain` (the
 * registrable domain, by libpsl's Public Suffix List) and `per =
 * address` (the address the connection went to). The key's derivation
 * alone, then through the gate: budgets, and the pauses that follow the
 * same key (SPEC §14). A clock stepped by hand; each test in its own
 * process. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "gate_fixture.h"
#include "policy/dest.h"
#include "policy/dests.h"
#include "policy/names.h"
#include "policy/regdomain.h"

#define MS 1000000ull
#define S 1000000000ull
#define T0 (1000 * S)

static struct rl_regdomain psl;

static void setup(void)
{
    fixture_state_dir("perkey");
}

static void teardown(void)
{
    rl_regdomain_close(&psl);
    fixture_state_dir_remove();
}

TestSuite(perkey, .init = setup, .fini = teardown, .timeout = 60);

/* The registrable domain of `name` by the loaded list. */
static const char *domain_of(const char *name)
{
    static char out[RL_NAME_MAX + 1];
    if (!rl_regdomain_ready(&psl))
        cr_assert_eq(rl_regdomain_load(&psl, RL_REGDOMAIN_LIB), 0, "%s",
                     rl_regdomain_source(&psl));
    size_t n = rl_regdomain_of(&psl, name, strlen(name), out);
    cr_assert_eq(n, strlen(out));
    return out;
}

Test(perkey, a_name_under_co_uk_is_keyed_by_its_registrable_domain)
{
    cr_expect_str_eq(domain_of("a.example.co.uk"), "example.co.uk");
    cr_expect_str_eq(domain_of("b.example.co.uk"), "example.co.uk");
    cr_expect_str_eq(domain_of("deep.er.example.co.uk"), "example.co.uk");
}

Test(perkey, a_name_under_com_is_keyed_by_its_registrable_domain)
{
    cr_expect_str_eq(domain_of("www.example.com"), "example.com");
    cr_expect_str_eq(domain_of("example.com"), "example.com");
}

Test(perkey, an_address_literal_is_its_own_domain)
{
    cr_expect_str_eq(domain_of("127.0.0.1"), "127.0.0.1");
    cr_expect_str_eq(domain_of("10.1.2.3"), "10.1.2.3");
    cr_expect_str_eq(domain_of("::1"), "::1");
    cr_expect_str_eq(domain_of("2001:db8::1"), "2001:db8::1");
}

Test(perkey, a_single_label_or_a_public_suffix_is_its_own_domain)
{
    cr_expect_str_eq(domain_of("localhost"), "localhost");
    cr_expect_str_eq(domain_of("co.uk"), "co.uk");
    cr_expect_str_eq(domain_of("com"), "com");
}

Test(perkey, a_trailing_dot_and_upper_case_make_no_other_domain)
{
    cr_expect_str_eq(domain_of("a.example.co.uk."), "example.co.uk");
    cr_expect_str_eq(domain_of("WWW.Example.COM"), "example.com");
    cr_expect_str_eq(domain_of("B.EXAMPLE.CO.UK."), "example.co.uk");
    cr_expect_str_eq(domain_of("LocalHost."), "localhost");
}

Test(perkey, the_list_says_where_it_comes_from)
{
    domain_of("example.com");
    cr_expect_not_null(strstr(rl_regdomain_source(&psl), "psl_latest"),
                       "%s", rl_regdomain_source(&psl));
}

Test(perkey, without_libpsl_a_name_is_its_own_key)
{
    cr_expect_eq(rl_regdomain_load(&psl, "libpsl-not-here.so.5"), -ENOENT);
    cr_expect_not(rl_regdomain_ready(&psl));
    cr_expect_not_null(strstr(rl_regdomain_source(&psl), "cannot load"),
                       "%s", rl_regdomain_source(&psl));
    char out[RL_NAME_MAX + 1];
    cr_expect_eq(rl_regdomain_of(&psl, "a.example.co.uk", 15, out), 15);
    cr_expect_str_eq(out, "a.example.co.uk");
}

/* rl_dests_key for a peer at `ip` named `name`. */
static const char *key_of(const struct rl_dests *d, int per, const char *ip,
                          const char *name)
{
    static char key[RL_NAME_MAX + 1];
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(80)};
    struct rl_peer p;
    memset(&p, 0, sizeof p);
    if (ip != NULL) {
        cr_assert_eq(inet_pton(AF_INET, ip, &a.sin_addr), 1);
        cr_assert(rl_peer_from_addr(NULL, &a, sizeof a, &p));
    }
    p.name = name;
    p.namelen = (int16_t)strlen(name);
    size_t n = rl_dests_key(d, per, &p, name, strlen(name), key);
    cr_assert_eq(n, strlen(key));
    return key;
}

Test(perkey, per_address_keys_by_the_address_whatever_the_name)
{
    struct rl_dests d = {0};
    cr_expect_str_eq(key_of(&d, RL_PER_ADDRESS, "10.0.0.7", "a.test"),
                     "10.0.0.7");
    cr_expect_str_eq(key_of(&d, RL_PER_ADDRESS, "10.0.0.7", "b.test"),
                     "10.0.0.7");
    /* No address known (a request written through a BIO): its name. */
    cr_expect_str_eq(key_of(&d, RL_PER_ADDRESS, NULL, "c.test"), "c.test");
    /* per = destination: the name, as it always was. */
    cr_expect_str_eq(key_of(&d, RL_PER_DESTINATION, "10.0.0.7", "A.test"),
                     "A.test");
}

Test(perkey, per_domain_keys_by_the_domain)
{
    struct rl_dests d = {0};
    cr_assert_eq(rl_regdomain_load(&d.psl, RL_REGDOMAIN_LIB), 0);
    cr_expect_str_eq(key_of(&d, RL_PER_DOMAIN, "10.0.0.7", "a.example.co.uk"),
                     "example.co.uk");
    cr_expect_str_eq(key_of(&d, RL_PER_DOMAIN, "10.0.0.7", "10.0.0.7"),
                     "10.0.0.7");
    rl_regdomain_close(&d.psl);
}

/* ---- through the gate ---------------------------------------------------*/

static int conn_to(const char *ip, uint64_t now)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(80)};
    inet_pton(AF_INET, ip, &a.sin_addr);
    struct rl_gate_ticket tk;
    return rl_gate_connect_at(&proc, &tk, now, "connect", 3, &a, sizeof a);
}

static int grants(const char *ip, uint64_t now, int n)
{
    int ok = 0;
    for (int i = 0; i < n; i++)
        ok += conn_to(ip, now) == RL_GATE_GO;
    return ok;
}

static void name_of(const char *ip, const char *name)
{
    uint8_t a[4];
    inet_pton(AF_INET, ip, a);
    rl_names_note(&proc.names, AF_INET, a, name, strlen(name));
}

Test(perkey, per_domain_gives_two_hosts_of_one_domain_one_budget)
{
    fixture_gate(&proc, "crawler",
                 "[site:every]\nper = domain\nconnect = 2/s\n");
    name_of("10.0.0.1", "a.example.co.uk");
    name_of("10.0.0.2", "b.example.co.uk");
    name_of("10.0.0.3", "example.com");
    cr_expect_eq(grants("10.0.0.1", T0, 1) + grants("10.0.0.2", T0, 5), 2,
                 "a. and b.example.co.uk share example.co.uk's budget");
    cr_expect_eq(grants("10.0.0.3", T0, 5), 2, "example.com has its own");
}

Test(perkey, per_address_gives_two_names_of_one_server_one_budget)
{
    fixture_gate(&proc, "crawler",
                 "[site:every]\nper = address\nconnect = 2/s\n");
    name_of("10.0.0.1", "one.test"); /* one.test is on two servers */
    name_of("10.0.0.2", "one.test");
    cr_expect_eq(grants("10.0.0.1", T0, 5), 2);
    cr_expect_eq(grants("10.0.0.2", T0, 5), 2,
                 "one name on two addresses: two budgets");
}

static struct sockaddr_in server;

static struct rl_gate_req req(const char *name)
{
    return (struct rl_gate_req){.call = "send", .fd = -1, .sa = &server,
                                .salen = sizeof server, .name = name,
                                .port = 80, .method = "GET", .target = "/",
                                .units = 1};
}

static int ask(const char *name, uint64_t now, struct rl_gate_ticket *t)
{
    struct rl_gate_req q = req(name);
    return rl_gate_request_at(&proc, t, now, &q);
}

static void answer(const char *name, int status, uint64_t ra, uint64_t now)
{
    struct rl_gate_req q = req(name);
    rl_gate_request_outcome_at(&proc, &q, status, true, ra, now);
}

#define PAUSE_RULE(per)                                                    \
    "[rlshim]\non_deny = fail\n[site:every]\nper = " per "\n"              \
    "request = 1/s\nrequest_burst = 100\n"

Test(perkey, a_429_pauses_the_whole_domain_under_per_domain)
{
    server = (struct sockaddr_in){.sin_family = AF_INET,
                                  .sin_port = htons(80)};
    inet_pton(AF_INET, "10.0.0.1", &server.sin_addr);
    fixture_gate(&proc, "crawler", PAUSE_RULE("domain"));
    struct rl_gate_ticket t;
    answer("a.example.co.uk", 429, 5 * S, T0);
    cr_expect_eq(ask("b.example.co.uk", T0 + S, &t), RL_GATE_FAIL);
    cr_expect_eq(t.retry_ns, 4 * S);
    cr_expect_eq(ask("example.com", T0 + S, &t), RL_GATE_GO,
                 "another domain is not paused");
}

Test(perkey, a_429_pauses_every_name_of_the_server_under_per_address)
{
    server = (struct sockaddr_in){.sin_family = AF_INET,
                                  .sin_port = htons(80)};
    inet_pton(AF_INET, "10.0.0.1", &server.sin_addr);
    fixture_gate(&proc, "crawler", PAUSE_RULE("address"));
    struct rl_gate_ticket t;
    answer("one.test", 429, 5 * S, T0);
    cr_expect_eq(ask("two.test", T0 + S, &t), RL_GATE_FAIL);
    cr_expect_eq(t.retry_ns, 4 * S);
    inet_pton(AF_INET, "10.0.0.2", &server.sin_addr);
    cr_expect_eq(ask("one.test", T0 + S, &t), RL_GATE_GO,
                 "another server is not paused");
}

Test(perkey, per_domain_without_libpsl_is_said_once_and_keys_by_name,
     .init = cr_redirect_stderr)
{
    struct rl_config *cfg = NULL;
    struct rl_diag diag = {0};
    cr_assert_eq(rl_config_load_string("[site:a]\nper = domain\n"
                                       "connect = 1/s\n[site:b]\n"
                                       "per = domain\nconnect = 1/s\n",
                                       "test.ini", &cfg, &diag),
                 0);
    rl_diag_free(&diag);
    struct rl_dests d = {0};
    /* A process whose libpsl cannot be loaded (tried before set-up). */
    cr_assert_eq(rl_regdomain_load(&d.psl, "libpsl-not-here.so.5"), -ENOENT);
    cr_assert_eq(rl_dests_setup(&d, cfg), 0);
    cr_expect_str_eq(key_of(&d, RL_PER_DOMAIN, "10.0.0.7", "a.example.co.uk"),
                     "a.example.co.uk");
    rl_dests_close(&d);
    rl_config_free(cfg);
    fflush(stderr);
    cr_expect_stderr_eq_str(
        "rlshim: per = domain in [site:a]: cannot load libpsl: "
        "libpsl-not-here.so.5: cannot open shared object file: No such file "
        "or directory: its destinations are keyed by name (as per = "
        "destination)\n");
}
