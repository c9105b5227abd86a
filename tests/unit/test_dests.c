/* Budgets per destination (`per = destination`): through the gate, with a
 * config from a string, a segment in a temp dir and a clock stepped by
 * hand. Each test runs in its own process. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "policy/config.h"
#include "policy/dests.h"
#include "policy/gate.h"
#include "gate_fixture.h"
#include "policy/names.h"
#include "../dests_race.h"

#define MS 1000000ull
#define S 1000000000ull
#define T0 (1000 * S)

static struct rl_gate_ticket t;

static void setup(void)
{
    fixture_state_dir("dests");
}

static void teardown(void)
{
    fixture_state_dir_remove();
}

TestSuite(dests, .init = setup, .fini = teardown, .timeout = 60);

static void gate_as(const char *key, const char *text)
{
    fixture_gate(&proc, key, text);
}

static struct sockaddr_in v4(const char *ip, int port)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    cr_assert_eq(inet_pton(AF_INET, ip, &a.sin_addr), 1, "%s", ip);
    return a;
}

static int conn_to(const char *ip, uint64_t now)
{
    struct sockaddr_in a = v4(ip, 80);
    struct rl_gate_ticket tk;
    int r = rl_gate_connect_at(&proc, &tk, now, "connect", 3, &a, sizeof a);
    t.err = tk.err;
    return r;
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

Test(dests, every_destination_has_a_budget_of_its_own)
{
    gate_as("crawler", "[site:every]\nper = destination\nconnect = 2/s\n");
    cr_expect_eq(grants("10.0.0.1", T0, 5), 2);
    cr_expect_eq(grants("10.0.0.2", T0, 5), 2);
    cr_expect_eq(grants("10.0.0.3", T0, 5), 2);
    cr_expect_eq(grants("10.0.0.1", T0 + 500 * MS, 5), 1, "refills at 2/s");
}

Test(dests, the_budget_is_per_name_not_per_address)
{
    gate_as("crawler", "[site:every]\nper = destination\nconnect = 2/s\n");
    name_of("10.0.0.1", "cdn.test");
    name_of("10.0.0.2", "cdn.test");
    name_of("10.0.0.3", "other.test");
    cr_expect_eq(grants("10.0.0.1", T0, 1) + grants("10.0.0.2", T0, 5), 2,
                 "two addresses of one name share its budget");
    cr_expect_eq(grants("10.0.0.3", T0, 5), 2);
}

Test(dests, a_site_override_before_the_catch_all)
{
    gate_as("crawler", "[site:fast]\nto = fast.test\nper = destination\n"
                       "connect = 10/s\n"
                       "[site:every]\nper = destination\nconnect = 2/s\n");
    name_of("10.0.0.1", "fast.test");
    cr_expect_eq(grants("10.0.0.1", T0, 20), 10);
    cr_expect_eq(grants("10.0.0.2", T0, 20), 2);
    cr_expect_eq(grants("10.0.0.3", T0, 20), 2);
}

Test(dests, a_user_rule_per_destination)
{
    gate_as("crawler", "[user:crawler]\nper = destination\nconnect = 3/s\n"
                       "to = 10.0.0.0/8\n");
    cr_expect_eq(grants("10.0.0.1", T0, 5), 3);
    cr_expect_eq(grants("10.0.0.2", T0, 5), 3);
    struct sockaddr_in o = v4("192.168.0.1", 80);
    cr_expect_not(rl_gate_covers(&proc, &o, sizeof o));
}

Test(dests, users_never_share_a_destinations_budget)
{
    /* Two keys, one process each, one segment (one uid). */
    for (int u = 0; u < 2; u++) {
        pid_t pid = fork();
        cr_assert_neq(pid, -1);
        if (pid == 0) {
            gate_as(u == 0 ? "alice" : "bob",
                    "[site:every]\nper = destination\nconnect = 2/s\n");
            _exit(grants("10.0.0.1", T0, 5));
        }
        int st;
        waitpid(pid, &st, 0);
        cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 2, "user %d: %d", u,
                  WEXITSTATUS(st));
    }
}

Test(dests, ten_thousand_destinations_through_a_table_of_4096)
{
    gate_as("crawler", "[rlshim]\nmax_destinations = 4096\n"
                       "[site:every]\nper = destination\nconnect = 1/s\n");
    char ip[32];
    int first = 0, again = 0;
    for (int i = 0; i < 10000; i++) {
        snprintf(ip, sizeof ip, "10.%d.%d.%d", i >> 16, (i >> 8) & 255,
                 i & 255);
        first += conn_to(ip, T0) == RL_GATE_GO;
    }
    for (int i = 0; i < 10000; i++) {
        snprintf(ip, sizeof ip, "10.%d.%d.%d", i >> 16, (i >> 8) & 255,
                 i & 255);
        again += conn_to(ip, T0) == RL_GATE_GO;
    }
    /* 4096 budgets of their own, the rest share one overflow budget: never
     * more than a budget each, and nothing spent was forgotten. */
    cr_expect_eq(first, 4096 + 1, "first pass: %d", first);
    cr_expect_eq(again, 0, "second pass: %d", again);
    /* A second later every budget is full again: new names re-use them. */
    int fresh = 0;
    for (int i = 0; i < 3000; i++) {
        snprintf(ip, sizeof ip, "11.%d.%d.%d", i >> 16, (i >> 8) & 255,
                 i & 255);
        fresh += conn_to(ip, T0 + 2 * S) == RL_GATE_GO;
        fresh -= conn_to(ip, T0 + 2 * S) == RL_GATE_GO; /* spent: denied */
    }
    cr_expect_geq(fresh, 2900, "re-used full budgets: %d", fresh);
}

Test(dests, says_once_that_the_table_overflowed, .init = cr_redirect_stderr)
{
    setup();
    gate_as("crawler", "[rlshim]\nmax_destinations = 16\n"
                       "[site:every]\nper = destination\nconnect = 1/s\n");
    char ip[32];
    for (int i = 0; i < 200; i++) {
        snprintf(ip, sizeof ip, "10.0.%d.%d", i >> 8, i & 255);
        conn_to(ip, T0);
    }
    fflush(stderr);
    char buf[4096] = "";
    FILE *f = cr_get_redirected_stderr();
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    int lines = 0;
    for (char *p = buf; (p = strstr(p, "per-destination table is full")); p++)
        lines++;
    cr_expect_eq(lines, 1, "stderr: %s", buf);
    teardown();
}

/* 8 processes x 25 threads, all at one instant on one destination never
 * seen before, a budget of 5: exactly 5 go, rep after rep. The processes
 * are a program of their own (store_dests_racer), exec'd. */
Test(dests, eight_processes_of_25_threads_get_exactly_the_budget)
{
    int fd = memfd_create("dests_race", 0);
    cr_assert_geq(fd, 0);
    cr_assert_eq(ftruncate(fd, sizeof(struct dests_race)), 0);
    struct dests_race *page = mmap(NULL, sizeof *page, PROT_READ | PROT_WRITE,
                                   MAP_SHARED, fd, 0);
    cr_assert_neq(page, MAP_FAILED);
    pthread_barrierattr_t ba;
    pthread_barrierattr_init(&ba);
    pthread_barrierattr_setpshared(&ba, PTHREAD_PROCESS_SHARED);
    pthread_barrier_init(&page->barrier, &ba, DR_PROCS * DR_THREADS);
    char prog[512], fds[16];
    const char *b = getenv("RLSHIM_BUILD");
    snprintf(prog, sizeof prog, "%s/tests/helpers/store_dests_racer",
             b ? b : "build");
    cr_assert_eq(access(prog, X_OK), 0, "%s is not built (make unit)", prog);
    snprintf(fds, sizeof fds, "%d", fd);
    pid_t pids[DR_PROCS];
    for (int p = 0; p < DR_PROCS; p++) {
        pids[p] = fork();
        cr_assert_neq(pids[p], -1);
        if (pids[p] == 0) {
            execl(prog, prog, fds, (char *)NULL);
            _exit(127);
        }
    }
    for (int p = 0; p < DR_PROCS; p++) {
        int st;
        waitpid(pids[p], &st, 0);
        cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "racer %d: %d", p,
                  st);
    }
    for (int rep = 0; rep < DR_REPS; rep++)
        cr_expect_eq(atomic_load(&page->admitted[rep]), 5, "rep %d: %d", rep,
                     atomic_load(&page->admitted[rep]));
}
