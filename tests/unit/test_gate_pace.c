/* test_gate_pace.c — a request's decision and its destination's pace
 * (policy/pace.h, SPEC §14): which sections keep one, what a section says
 * in adapt.h's units, the turn a learned latency gives, the record of a
 * granted turn (and a second process's turn made later, never earlier,
 * or refused past its latest), nothing written where nothing paces, and
 * jitter's bounds. Time is stepped by hand; the table is a real segment's. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "policy/config.h"
#include "policy/pace.h"
#include "policy/pauses.h"
#include "state/store.h"

#define MS 1000000ull
#define SEC 1000000000ull
#define T0 (1000ull * SEC)

static char dir[64];
static struct rl_store *st;
static struct rl_config *cfg;

static void open_store(void)
{
    strcpy(dir, "/dev/shm/rlgpace-test.XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
    struct rl_store_opts o = {
        .shared = true,
        .dir = dir,
        .uid = (uint32_t)getuid(),
        .config_hash = 0x9ace9ace9ace9aceull,
        .nslots = 16,
        .arena_words = 1024,
        .noverflow = 1,
        .overflow_words = 64,
    };
    char why[256];
    cr_assert_eq(rl_store_open(&st, &o, why, sizeof why), 0, "%s", why);
    cfg = NULL;
}

static void close_store(void)
{
    char p[256];
    rl_config_free(cfg);
    rl_store_close(st);
    rl_store_path(p, sizeof p, dir, (uint32_t)getuid(), 0x9ace9ace9ace9aceull);
    unlink(p);
    rmdir(dir);
}

TestSuite(pace_decide, .init = open_store, .fini = close_store, .timeout = 30);

/* The config's first section (its [default]). */
static const struct rl_rule *rule_of(const char *text)
{
    struct rl_diag d = {0};
    rl_config_free(cfg);
    cfg = NULL;
    int rc = rl_config_load_string(text, "t.ini", &cfg, &d);
    for (size_t i = 0; i < d.n; i++)
        cr_log_error("%s", d.msgs[i]);
    rl_diag_free(&d);
    cr_assert_eq(rc, 0);
    cr_assert_gt(cfg->nrules, 0);
    return &cfg->rules[0];
}

static void pace_for(const struct rl_rule *r, const char *name,
                     struct rl_pace *pc)
{
    rl_pauses_of(st, &pc->table);
    pc->set = (struct rl_pause_set){rl_pauses_key(1, "alice", name,
                                                  strlen(name)),
                                    1, "alice|a.test", false, 0, T0};
    rl_pace_conf(r, &pc->conf);
    pc->rule = r;
}

Test(pace_decide, a_section_keeps_a_pace_only_with_a_request_limit_and_a_cause)
{
    cr_assert_not(rl_pace_kept(rule_of("[default]\nconnect = 1/s\n")),
                  "no request limit: nothing to pace");
    cr_assert(rl_pace_kept(rule_of("[default]\nrequest = 1/s\n")),
              "crawl_delay = obey is the default");
    cr_assert_not(rl_pace_kept(rule_of("[default]\nrequest = 1/s\n"
                                       "crawl_delay = ignore\n")));
    cr_assert(rl_pace_kept(rule_of("[default]\nrequest = 1/s\n"
                                   "crawl_delay = ignore\njitter = 10%\n")));
    cr_assert(rl_pace_kept(rule_of("[default]\nrequest = 1/s\n"
                                   "crawl_delay = ignore\nadapt = latency\n")));
}

Test(pace_decide, the_floor_is_one_request_of_the_slowest_limit)
{
    struct rl_adapt_conf c;
    rl_pace_conf(rule_of("[default]\nrequest = 20/s, 600/min\n"
                         "adapt = latency\nadapt_factor = 3\n"
                         "max_interval = 5s\nmax_crawl_delay = 7s\n"),
                 &c);
    cr_assert_eq(c.floor_ns, 100 * MS, "600/min is one per 100 ms");
    cr_assert_eq(c.factor_milli, 3000);
    cr_assert_eq(c.max_interval_ns, 5 * SEC);
    cr_assert_eq(c.max_crawl_delay_ns, 7 * SEC);
    rl_pace_conf(rule_of("[default]\nrequest = 1/s\ncrawl_delay = ignore\n"),
                 &c);
    cr_assert_eq(c.max_crawl_delay_ns, 0, "an ignored Crawl-delay counts 0");
}

/* A learned latency of 400 ms (factor 2) spaces the next request 800 ms
 * from the last turn granted, though the limit would let it go at once. */
Test(pace_decide, a_learned_latency_holds_the_next_turn_from_the_last)
{
    const struct rl_rule *r =
        rule_of("[default]\nrequest = 20/s\nadapt = latency\n");
    struct rl_pace pc;
    pace_for(r, "a.test", &pc);
    enum rl_adapt_why why;
    cr_assert_eq(rl_pace_turn(&pc, T0, T0, &why), T0, "nothing learned");
    cr_assert_eq(why, RL_ADAPT_RATE);

    struct rl_adapt a = {0};
    cr_assert(rl_adapt_latency(&a, &pc.conf, 400 * MS));
    cr_assert_eq(rl_pauses_pace_cas(&pc.table, &pc.set, RL_PACE_LATENCY, 0,
                                    a.latency),
                 1);
    uint64_t turn = T0;
    cr_assert_eq(rl_pace_record(&pc, T0, &turn, T0, &why), 0);
    cr_assert_eq(turn, T0, "the first turn goes as the limit gave it");
    cr_assert_eq(rl_pace_turn(&pc, T0 + MS, T0 + MS, &why), T0 + 800 * MS);
    cr_assert_eq(why, RL_ADAPT_LATENCY);
    cr_assert_str_eq(rl_adapt_reason(why), "latency");
}

/* Two processes computed their turns from the same last turn: the first
 * to record it wins; the second's is moved after the first's spacing
 * (never earlier), or refused when that is past its latest (fail mode,
 * or max_delay), recording nothing. */
Test(pace_decide, a_turn_taken_meanwhile_moves_the_other_later_or_refuses_it)
{
    const struct rl_rule *r =
        rule_of("[default]\nrequest = 20/s\nadapt = latency\n");
    struct rl_pace pc;
    pace_for(r, "a.test", &pc);
    struct rl_adapt a = {0};
    rl_adapt_latency(&a, &pc.conf, 400 * MS);
    rl_pauses_pace_cas(&pc.table, &pc.set, RL_PACE_LATENCY, 0, a.latency);

    enum rl_adapt_why why = RL_ADAPT_RATE;
    uint64_t first = T0, second = T0;
    cr_assert_eq(rl_pace_record(&pc, T0, &first, T0, &why), 0);
    cr_assert_eq(rl_pace_record(&pc, T0, &second, T0, &why), -1,
                 "fail mode: a later turn is a denial");
    struct rl_adapt now;
    rl_pauses_pace(&pc.table, pc.set.key, &now);
    cr_assert_eq(now.last, T0, "a refused turn is not recorded");

    cr_assert_eq(rl_pace_record(&pc, T0, &second, T0 + 10 * SEC, &why), 1);
    cr_assert_eq(second, T0 + 800 * MS);
    cr_assert_eq(why, RL_ADAPT_LATENCY);
    rl_pauses_pace(&pc.table, pc.set.key, &now);
    cr_assert_eq(now.last, T0 + 800 * MS);

    /* A turn already later than the spacing keeps its own. */
    uint64_t third = T0 + 5 * SEC;
    cr_assert_eq(rl_pace_record(&pc, T0, &third, T0 + 10 * SEC, &why), 0);
    cr_assert_eq(third, T0 + 5 * SEC);
    rl_pauses_pace(&pc.table, pc.set.key, &now);
    cr_assert_eq(now.last, T0 + 5 * SEC);
}

/* jitter alone, or a Crawl-delay section with nothing learned: a granted
 * turn writes nothing (no entry is made for it). */
Test(pace_decide, nothing_is_written_where_nothing_paces)
{
    const struct rl_rule *r =
        rule_of("[default]\nrequest = 5/s\njitter = 50%\n");
    struct rl_pace pc;
    pace_for(r, "quiet.test", &pc);
    enum rl_adapt_why why = RL_ADAPT_RATE;
    uint64_t turn = T0;
    cr_assert_eq(rl_pace_record(&pc, T0, &turn, T0 + SEC, &why), 0);
    struct rl_adapt a;
    cr_assert_not(rl_pauses_pace(&pc.table, pc.set.key, &a),
                  "an entry was made for a destination nothing paces");
}

Test(pace_decide, jitter_stays_within_its_part_of_the_interval)
{
    cr_assert_eq(rl_pace_jitter_ns(200 * MS, 50, 0), 0);
    cr_assert_leq(rl_pace_jitter_ns(200 * MS, 50, UINT64_MAX), 100 * MS);
    cr_assert_geq(rl_pace_jitter_ns(200 * MS, 50, UINT64_MAX), 99 * MS);
    cr_assert_eq(rl_pace_jitter_ns(200 * MS, 0, UINT64_MAX), 0);
    /* The draws of one process differ, and are spread over the span. */
    uint64_t lo = UINT64_MAX, hi = 0;
    for (uint64_t n = 0; n < 1000; n++) {
        uint64_t j = rl_pace_jitter_ns(200 * MS, 50, rl_pace_random(n, T0));
        lo = j < lo ? j : lo;
        hi = j > hi ? j : hi;
    }
    cr_assert_lt(lo, 5 * MS, "least of 1000 draws %llu ns",
                 (unsigned long long)lo);
    cr_assert_gt(hi, 95 * MS, "most of 1000 draws %llu ns",
                 (unsigned long long)hi);
    cr_assert_neq(rl_pace_random(1, T0), rl_pace_random(1, T0 + 1),
                  "two processes at the same count part ways");
}
