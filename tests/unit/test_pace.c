/* test_pace.c — a destination's pace in the segment's pause table
 * (policy/pauses.h, SPEC §14): the words read back as written, a write
 * from a stale read refused, and an entry that carries a pace kept
 * before one that carries nothing. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "policy/pauses.h"
#include "state/layout.h"
#include "state/store.h"

static char dir[64];
static struct rl_store *st;

static void open_store(void)
{
    strcpy(dir, "/dev/shm/rlpace-test.XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
    struct rl_store_opts o = {
        .shared = true,
        .dir = dir,
        .uid = (uint32_t)getuid(),
        .config_hash = 0x7ace7ace7ace7aceull,
        .nslots = 16,
        .arena_words = 1024,
        .noverflow = 1,
        .overflow_words = 64,
    };
    char why[256];
    cr_assert_eq(rl_store_open(&st, &o, why, sizeof why), 0, "%s", why);
}

static void close_store(void)
{
    char p[256];
    rl_store_close(st);
    rl_store_path(p, sizeof p, dir, (uint32_t)getuid(), 0x7ace7ace7ace7aceull);
    unlink(p);
    rmdir(dir);
}

TestSuite(pace, .init = open_store, .fini = close_store, .timeout = 30);

static struct rl_pause_set set_of(uint64_t key, const char *label)
{
    struct rl_pause_set s = {.key = key, .rule = 1, .label = label, .now = 1000};
    return s;
}

Test(pace, words_read_back_as_written_and_a_stale_write_is_refused)
{
    struct rl_pauses pt;
    rl_pauses_of(st, &pt);
    uint64_t key = rl_pauses_key(1, "alice", "a.test", 6);
    struct rl_adapt a;
    cr_assert_not(rl_pauses_pace(&pt, key, &a), "no entry yet");
    cr_assert_eq(a.latency | a.crawl | a.last, 0);

    struct rl_pause_set s = set_of(key, "alice|a.test");
    cr_assert_eq(rl_pauses_pace_cas(&pt, &s, RL_PACE_LATENCY, 0, 77), 1);
    cr_assert_eq(rl_pauses_pace_cas(&pt, &s, RL_PACE_CRAWL, 0, 88), 1);
    cr_assert_eq(rl_pauses_pace_cas(&pt, &s, RL_PACE_LAST, 0, 99), 1);
    cr_assert(rl_pauses_pace(&pt, key, &a));
    cr_expect_eq(a.latency, 77);
    cr_expect_eq(a.crawl, 88);
    cr_expect_eq(a.last, 99);
    cr_expect_eq(a.pause, 0, "the pause is the entry's until");

    /* Another process moved `last` first: a write from the old value is
     * refused and changes nothing. */
    cr_expect_eq(rl_pauses_pace_cas(&pt, &s, RL_PACE_LAST, 0, 5), 0);
    cr_assert(rl_pauses_pace(&pt, key, &a));
    cr_expect_eq(a.last, 99);

    /* Another destination's words are its own. */
    uint64_t other = rl_pauses_key(1, "alice", "b.test", 6);
    cr_expect_not(rl_pauses_pace(&pt, other, &a));
}

Test(pace, an_entry_with_a_pace_is_kept_before_one_that_carries_nothing)
{
    struct rl_pauses pt;
    rl_pauses_of(st, &pt);
    /* Fill more keys than a window holds, each with an adapted interval:
     * the first stays while the later ones that carry nothing come and
     * go. */
    uint64_t paced = rl_pauses_key(1, "alice", "paced.test", 10);
    struct rl_pause_set s = set_of(paced, "alice|paced.test");
    cr_assert_eq(rl_pauses_pace_cas(&pt, &s, RL_PACE_LATENCY, 0, 1), 1);
    cr_assert_eq(rl_pauses_pace_cas(&pt, &s, RL_PACE_LAST, 0, 5000), 1);
    char name[32];
    for (int i = 0; i < 4 * 1024; i++) {
        int n = snprintf(name, sizeof name, "n%d.test", i);
        uint64_t k = rl_pauses_key(1, "alice", name, (size_t)n);
        struct rl_pause_set t = set_of(k, "alice|n");
        cr_assert_geq(rl_pauses_pace_cas(&pt, &t, RL_PACE_CRAWL, 1, 2), 0);
    }
    struct rl_adapt a;
    cr_expect(rl_pauses_pace(&pt, paced, &a), "the paced entry gave way");
    cr_expect_eq(a.latency, 1);
    cr_expect_eq(a.last, 5000);
}

/* SPEC §5, §14: a Crawl-delay holds for a day, and the segment is kept
 * as long, however long unused (as for a pause). */
Test(pace, a_crawl_delay_holds_the_segment_until_it_expires)
{
    struct rl_pauses pt;
    rl_pauses_of(st, &pt);
    /* The segment's header, before the pause table in the mapping. */
    struct rl_seg_header *h =
        (void *)((unsigned char *)pt.head -
                       rl_seg_pauses_off(16, 1));
    cr_assert_eq(h->magic, RL_LAYOUT_MAGIC, "not the header");
    uint64_t before = rl_load_relaxed_u64(&h->hold_until);
    uint64_t key = rl_pauses_key(1, "alice", "slow.test", 9);
    struct rl_pause_set s = set_of(key, "alice|slow.test");
    /* A delay of 5 s expiring at second 90000 of the clock. */
    uint64_t crawl = (90000ull << 32) | 5000u;
    cr_assert_eq(rl_pauses_pace_cas(&pt, &s, RL_PACE_CRAWL, 0, crawl), 1);
    cr_expect_geq(rl_load_relaxed_u64(&h->hold_until), 90000ull * 1000000000ull,
                  "held until %llu (was %llu)",
                  (unsigned long long)rl_load_relaxed_u64(&h->hold_until),
                  (unsigned long long)before);
}
