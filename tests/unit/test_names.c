/* The address → name table and the name forms of `to`. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "policy/dest.h"
#include "policy/dests.h"
#include "policy/names.h"

/* The table under test (a process's is a member of its struct rl_proc). */
static struct rl_names names;

static void v4(const char *s, uint8_t a[4])
{
    cr_assert_eq(inet_pton(AF_INET, s, a), 1);
}

static struct sockaddr_in sin_of(const char *s, uint16_t port)
{
    struct sockaddr_in in = {.sin_family = AF_INET, .sin_port = htons(port)};
    cr_assert_eq(inet_pton(AF_INET, s, &in.sin_addr), 1);
    return in;
}

static void note(const char *addr, const char *name)
{
    uint8_t a[16];
    char c[RL_NAME_MAX + 1];
    size_t n = rl_name_canon(name, strlen(name), c);
    cr_assert_gt(n, 0, "'%s' is a name", name);
    if (strchr(addr, ':') != NULL) {
        cr_assert_eq(inet_pton(AF_INET6, addr, a), 1);
        rl_names_note(&names, AF_INET6, a, c, n);
    } else {
        v4(addr, a);
        rl_names_note(&names, AF_INET, a, c, n);
    }
}

static void fresh(void)
{
    rl_names_clear(&names);
}

TestSuite(names, .init = fresh);

Test(names, canonical_form_is_lower_case_without_the_trailing_dot)
{
    char out[RL_NAME_MAX + 1];
    cr_assert_eq(rl_name_canon("WWW.Example.COM.", 16, out), 15);
    cr_assert_str_eq(out, "www.example.com");
    cr_assert_eq(rl_name_canon(".", 1, out), 0);
    cr_assert_eq(rl_name_canon("a b", 3, out), 0);
    cr_assert_eq(rl_name_canon("a/b", 3, out), 0);
    char big[300];
    memset(big, 'a', sizeof big);
    cr_assert_eq(rl_name_canon(big, RL_NAME_MAX + 1, out), 0);
    cr_assert_eq(rl_name_canon(big, RL_NAME_MAX, out), RL_NAME_MAX);
}

Test(names, literals_are_not_names)
{
    cr_assert(rl_name_is_literal("127.0.0.1", 9));
    cr_assert(rl_name_is_literal("::1", 3));
    cr_assert_not(rl_name_is_literal("localhost", 9));
    cr_assert_not(rl_name_is_literal("1.example", 9));
    /* What getaddrinfo reads as numeric, besides the dotted quad. */
    cr_assert(rl_name_is_literal("127.1", 5));
    cr_assert(rl_name_is_literal("0x7f000001", 10));
    cr_assert(rl_name_is_literal("2130706433", 10));
    cr_assert(rl_name_is_literal("fe80::1%lo", 10));
    cr_assert_not(rl_name_is_literal("cafe", 4));
    cr_assert_not(rl_name_is_literal("dead.beef", 9));
    cr_assert_not(rl_name_is_literal("1e100", 5));
    cr_assert_not(rl_name_is_literal("lo%1", 4));
}

/* A lookup of a literal names its addresses by the literal: the name
 * they had is gone, the others' stay. */
Test(names, a_literal_lookup_forgets_the_name_of_its_address)
{
    uint8_t a[4], b[16];
    char buf[RL_NAME_MAX + 1];
    note("127.0.0.1", "localhost");
    note("10.1.2.4", "site-b.test");
    note("::1", "ip6-localhost");
    v4("127.0.0.1", a);
    rl_names_forget(&names, AF_INET, a);
    cr_assert_eq(rl_names_find(&names, AF_INET, a, buf), 0);
    v4("10.1.2.4", a);
    cr_assert_eq(rl_names_find(&names, AF_INET, a, buf), 11);
    cr_assert_str_eq(buf, "site-b.test");
    /* IPv4-mapped IPv6 is the IPv4 address. */
    cr_assert_eq(inet_pton(AF_INET6, "::ffff:10.1.2.4", b), 1);
    rl_names_forget(&names, AF_INET6, b);
    cr_assert_eq(rl_names_find(&names, AF_INET, a, buf), 0);
    cr_assert_eq(inet_pton(AF_INET6, "::1", b), 1);
    cr_assert_eq(rl_names_find(&names, AF_INET6, b, buf), 13);
    rl_names_forget(&names, AF_INET6, b);
    cr_assert_eq(rl_names_find(&names, AF_INET6, b, buf), 0);
    /* Named again by the next lookup of a name. */
    note("127.0.0.1", "localhost");
    v4("127.0.0.1", a);
    cr_assert_eq(rl_names_find(&names, AF_INET, a, buf), 9);
}

Test(names, finds_nothing_for_an_address_never_resolved)
{
    uint8_t a[4];
    char buf[RL_NAME_MAX + 1] = "junk";
    v4("10.1.2.3", a);
    cr_assert_eq(rl_names_find(&names, AF_INET, a, buf), 0);
    cr_assert_str_eq(buf, "");
}

Test(names, finds_the_last_name_noted_for_an_address)
{
    uint8_t a[4], b[4];
    char buf[RL_NAME_MAX + 1];
    note("10.1.2.3", "Site-A.test.");
    note("10.1.2.4", "site-b.test");
    v4("10.1.2.3", a);
    v4("10.1.2.4", b);
    cr_assert_eq(rl_names_find(&names, AF_INET, a, buf), 11);
    cr_assert_str_eq(buf, "site-a.test");
    cr_assert_eq(rl_names_find(&names, AF_INET, b, buf), 11);
    cr_assert_str_eq(buf, "site-b.test");
    note("10.1.2.3", "cdn.example");
    cr_assert_eq(rl_names_find(&names, AF_INET, a, buf), 11);
    cr_assert_str_eq(buf, "cdn.example");
}

Test(names, keeps_ipv4_mapped_ipv6_as_ipv4)
{
    uint8_t a[4];
    char buf[RL_NAME_MAX + 1];
    note("::ffff:10.9.9.9", "mapped.test");
    v4("10.9.9.9", a);
    cr_assert_eq(rl_names_find(&names, AF_INET, a, buf), 11);
    cr_assert_str_eq(buf, "mapped.test");
}

/* What a message names: the name the address was resolved from, even when
 * a socket of family AF_INET6 reached it IPv4-mapped, else the literal. */
Test(names, a_message_names_the_destination_by_its_name_else_its_literal)
{
    char host[RL_NAME_MAX + 1];
    unsigned port;
    note("10.9.9.8", "mapped.test");
    struct sockaddr_in6 in6 = {.sin6_family = AF_INET6,
                               .sin6_port = htons(443)};
    cr_assert_eq(inet_pton(AF_INET6, "::ffff:10.9.9.8", &in6.sin6_addr), 1);
    rl_dests_name_port(&names, &in6, sizeof in6, host, sizeof host, &port);
    cr_expect_str_eq(host, "mapped.test");
    cr_expect_eq(port, 443);
    cr_assert_eq(inet_pton(AF_INET6, "2001:db8::7", &in6.sin6_addr), 1);
    rl_dests_name_port(&names, &in6, sizeof in6, host, sizeof host, &port);
    cr_expect_str_eq(host, "2001:db8::7");
    struct sockaddr_in in = sin_of("10.9.9.7", 80);
    rl_dests_name_port(NULL, &in, sizeof in, host, sizeof host, &port);
    cr_expect_str_eq(host, "10.9.9.7");
    cr_expect_eq(port, 80);
    rl_dests_name_port(&names, NULL, 0, host, sizeof host, &port);
    cr_expect_str_eq(host, "?");
}

Test(names, stays_bounded_and_keeps_the_newest)
{
    uint8_t a[4];
    char buf[RL_NAME_MAX + 1], addr[32], name[32];
    unsigned n = RL_NAMES_SLOTS * 4, found = 0;
    for (unsigned i = 0; i < n; i++) {
        snprintf(addr, sizeof addr, "10.%u.%u.%u", i >> 16, (i >> 8) & 255,
                 i & 255);
        snprintf(name, sizeof name, "h%u.test", i);
        note(addr, name);
    }
    for (unsigned i = 0; i < n; i++) {
        snprintf(addr, sizeof addr, "10.%u.%u.%u", i >> 16, (i >> 8) & 255,
                 i & 255);
        v4(addr, a);
        if (rl_names_find(&names, AF_INET, a, buf) > 0) {
            snprintf(name, sizeof name, "h%u.test", i);
            cr_assert_str_eq(buf, name, "an address kept its own name");
            found++;
        }
    }
    cr_assert_leq(found, RL_NAMES_SLOTS);
    cr_assert_geq(found, RL_NAMES_SLOTS / 2, "kept %u", found);
    /* The last one noted is always there. */
    snprintf(addr, sizeof addr, "10.%u.%u.%u", (n - 1) >> 16,
             ((n - 1) >> 8) & 255, (n - 1) & 255);
    v4(addr, a);
    cr_assert_gt(rl_names_find(&names, AF_INET, a, buf), 0);
}

/* Readers racing a writer that flips one address between two names never
 * see anything but one of the two. */
static _Atomic int stop;

static void *flipper(void *arg)
{
    (void)arg;
    for (int i = 0; !stop; i++)
        note("10.7.7.7", i & 1 ? "a-rather-longer-name.example.org" : "b.test");
    return NULL;
}

Test(names, readers_racing_a_writer_never_see_a_torn_name)
{
    pthread_t t;
    uint8_t a[4];
    char buf[RL_NAME_MAX + 1];
    note("10.7.7.7", "b.test");
    v4("10.7.7.7", a);
    cr_assert_eq(pthread_create(&t, NULL, flipper, NULL), 0);
    for (int i = 0; i < 200000; i++) {
        size_t n = rl_names_find(&names, AF_INET, a, buf);
        if (n == 0)
            continue; /* a writer at work: "no name", allowed */
        cr_assert(strcmp(buf, "b.test") == 0 ||
                      strcmp(buf, "a-rather-longer-name.example.org") == 0,
                  "torn: '%s'", buf);
    }
    stop = 1;
    pthread_join(t, NULL);
}

/* A child forked while other threads note names (the pre-fork pattern:
 * the shim's getaddrinfo hook notes in every thread) notes and finds its
 * own names at once, and still finds what was noted before the fork: the
 * fork step frees the writers' word that a thread of the parent may have
 * held. Three threads note one address each (so that nothing noted
 * before is pushed out), 300 children get 2 s each (the test stops at the
 * 10th stuck); the fork step runs as the shim runs it, from
 * pthread_atfork. */
static _Atomic int stop_noting;

static void *noter(void *arg)
{
    char addr[32];
    snprintf(addr, sizeof addr, "10.8.0.%u", (unsigned)(uintptr_t)arg);
    for (unsigned i = 0; !stop_noting; i++)
        note(addr, i & 1 ? "a-rather-longer-name.example.org" : "b.test");
    return NULL;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void in_child(void)
{
    rl_names_atfork_child(&names);
}

Test(names, a_child_forked_while_threads_note_notes_at_once, .timeout = 60)
{
    static bool registered;
    pthread_t t[3];
    int stuck = 0, wrong = 0, k;

    if (!registered)
        cr_assert_eq(pthread_atfork(NULL, NULL, in_child), 0);
    registered = true;
    note("10.9.0.1", "before.test");
    stop_noting = 0;
    for (uintptr_t i = 0; i < 3; i++)
        cr_assert_eq(pthread_create(&t[i], NULL, noter, (void *)i), 0);
    for (k = 0; k < 300 && stuck < 10; k++) {
        pid_t pid = fork();
        cr_assert_neq(pid, -1);
        if (pid == 0) {
            uint8_t a[4];
            char buf[RL_NAME_MAX + 1];
            note("10.9.0.2", "child.test");
            v4("10.9.0.2", a);
            if (rl_names_find(&names, AF_INET, a, buf) == 0 ||
                strcmp(buf, "child.test") != 0)
                _exit(3);
            v4("10.9.0.1", a);
            _exit(rl_names_find(&names, AF_INET, a, buf) > 0 &&
                          strcmp(buf, "before.test") == 0
                      ? 0
                      : 4);
        }
        double end = now_s() + 2;
        int st = 0;
        pid_t w;
        while ((w = waitpid(pid, &st, WNOHANG)) == 0 && now_s() < end)
            usleep(200);
        if (w == 0) {
            stuck++;
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
        } else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            wrong++;
        }
    }
    stop_noting = 1;
    for (int i = 0; i < 3; i++)
        pthread_join(t[i], NULL);
    cr_expect_eq(stuck, 0, "%d of %d children stuck", stuck, k);
    cr_expect_eq(wrong, 0, "%d of %d children found a wrong name", wrong, k);
}

/* ---- the name forms of `to` ------------------------------------------*/

TestSuite(dest_names, .init = fresh);

Test(dest_names, parses_names_and_names_below)
{
    struct rl_dest d;
    char buf[300];
    cr_assert_null(rl_dest_parse("Example.COM.", &d));
    cr_assert_eq(d.form, RL_DEST_NAME);
    cr_assert_str_eq(d.name, "example.com");
    rl_dest_format(&d, buf, sizeof buf);
    cr_assert_str_eq(buf, "example.com");
    rl_dest_clear(&d);
    cr_assert_null(rl_dest_parse("*.example.com:443", &d));
    cr_assert_eq(d.form, RL_DEST_BELOW);
    cr_assert_eq(d.port, 443);
    rl_dest_format(&d, buf, sizeof buf);
    cr_assert_str_eq(buf, "*.example.com:443");
    rl_dest_clear(&d);
    cr_assert_null(rl_dest_parse("localhost", &d));
    cr_assert_eq(d.form, RL_DEST_NAME);
    rl_dest_clear(&d);
    /* Addresses stay addresses. */
    cr_assert_null(rl_dest_parse("10.0.0.1:80", &d));
    cr_assert_eq(d.form, RL_DEST_ADDR);
    cr_assert_null(rl_dest_parse("fe80::1", &d));
    cr_assert_eq(d.form, RL_DEST_ADDR);
}

Test(dest_names, rejects_bad_names)
{
    struct rl_dest d;
    cr_assert_not_null(rl_dest_parse("10.0.0.300", &d));
    rl_dest_clear(&d);
    cr_assert_not_null(rl_dest_parse("*.", &d));
    rl_dest_clear(&d);
    cr_assert_not_null(rl_dest_parse("a..b", &d));
    rl_dest_clear(&d);
    cr_assert_not_null(rl_dest_parse("*.*.b", &d));
    rl_dest_clear(&d);
    cr_assert_not_null(rl_dest_parse("example.com:0", &d));
    rl_dest_clear(&d);
    cr_assert_not_null(rl_dest_parse("exa mple.com", &d));
    rl_dest_clear(&d);
}

Test(dest_names, a_name_covers_what_the_process_resolved_from_it)
{
    struct rl_dest d[3];
    cr_assert_null(rl_dest_parse("site-a.test", &d[0]));
    cr_assert_null(rl_dest_parse("*.example.com", &d[1]));
    cr_assert_null(rl_dest_parse("10.0.0.0/8:443", &d[2]));
    note("127.0.0.2", "SITE-A.test");
    note("127.0.0.3", "site-b.test");
    note("127.0.0.4", "www.example.com");
    note("127.0.0.5", "example.com");
    note("127.0.0.6", "notexample.com");
    struct sockaddr_in a = sin_of("127.0.0.2", 80), b = sin_of("127.0.0.3", 80),
                       w = sin_of("127.0.0.4", 80), apex = sin_of("127.0.0.5", 80),
                       other = sin_of("127.0.0.6", 80),
                       never = sin_of("127.0.0.9", 80),
                       ten = sin_of("10.1.1.1", 443);
    cr_expect(rl_dests_cover(&names, d, 1, &a, sizeof a));
    cr_expect_not(rl_dests_cover(&names, d, 1, &b, sizeof b));
    cr_expect_not(rl_dests_cover(&names, d, 1, &never, sizeof never));
    cr_expect(rl_dests_cover(&names, d + 1, 1, &w, sizeof w));
    cr_expect_not(rl_dests_cover(&names, d + 1, 1, &apex, sizeof apex),
                  "*. is below the apex, not the apex");
    cr_expect_not(rl_dests_cover(&names, d + 1, 1, &other, sizeof other));
    cr_expect(rl_dests_cover(&names, d, 3, &ten, sizeof ten),
              "addresses mix in");
    cr_expect(rl_dests_cover(&names, d, 3, &w, sizeof w));
    cr_expect_not(rl_dests_cover(&names, d, 3, &b, sizeof b));
    for (int i = 0; i < 3; i++)
        rl_dest_clear(&d[i]);
}

Test(dest_names, a_port_on_a_name_is_checked)
{
    struct rl_dest d;
    cr_assert_null(rl_dest_parse("site-a.test:8080", &d));
    note("127.0.0.2", "site-a.test");
    struct sockaddr_in a = sin_of("127.0.0.2", 8080), b = sin_of("127.0.0.2", 80);
    cr_expect(rl_dests_cover(&names, &d, 1, &a, sizeof a));
    cr_expect_not(rl_dests_cover(&names, &d, 1, &b, sizeof b));
    rl_dest_clear(&d);
}

/* The resolver hooks' one question: an answer is noted under the name as
 * the program spelled it (canonical), a literal's by itself, and a name
 * that cannot be kept not at all; getaddrinfo's list and gethostbyname's
 * entry alike. */
Test(names, an_answer_is_noted_under_the_name_asked_for)
{
    char buf[RL_NAME_MAX + 1];
    struct sockaddr_in in = sin_of("10.9.8.7", 80);
    struct addrinfo ai = {.ai_family = AF_INET,
                          .ai_addrlen = sizeof in,
                          .ai_addr = (struct sockaddr *)&in};
    struct rl_name_answer a = {.node = "Api.Example.COM.", .ai = &ai};
    rl_names_resolved(&names, &a);
    cr_assert_eq(rl_names_find(&names, AF_INET, (uint8_t *)&in.sin_addr, buf),
                 15);
    cr_assert_str_eq(buf, "api.example.com");
    a.node = "10.9.8.7";
    rl_names_resolved(&names, &a);
    cr_assert_eq(rl_names_find(&names, AF_INET, (uint8_t *)&in.sin_addr, buf),
                 0, "a literal names its address by itself");
    a = (struct rl_name_answer){.node = "db.example.com", .numeric = true,
                                .ai = &ai};
    note("10.9.8.7", "before.example");
    rl_names_resolved(&names, &a);
    cr_assert_eq(rl_names_find(&names, AF_INET, (uint8_t *)&in.sin_addr, buf),
                 0, "AI_NUMERICHOST: a literal whatever it reads");
    a = (struct rl_name_answer){.node = "a b", .ai = &ai};
    note("10.9.8.7", "kept.example");
    rl_names_resolved(&names, &a);
    cr_assert_eq(rl_names_find(&names, AF_INET, (uint8_t *)&in.sin_addr, buf),
                 12, "not a name: nothing noted");

    uint8_t six[16];
    cr_assert_eq(inet_pton(AF_INET6, "2001:db8::5", six), 1);
    char *list[] = {(char *)six, NULL};
    struct hostent h = {.h_addrtype = AF_INET6, .h_length = 16,
                        .h_addr_list = list};
    a = (struct rl_name_answer){.node = "v6.example", .h = &h};
    rl_names_resolved(&names, &a);
    cr_assert_eq(rl_names_find(&names, AF_INET6, six, buf), 10);
    cr_assert_str_eq(buf, "v6.example");
}
