/* test_store.c — the state segment: layout, creation, validation, slots,
 * and budgets shared by real processes and threads.
 *
 * Each test makes its own state directory under /dev/shm and removes it.
 * The limiter here is a CAS counter (take_one): the store only hands out
 * words, and any lock-free algorithm on them must see one budget. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "limit/conform.h"
#include "limit/limit.h"
#include "state/layout.h"
#include "state/store.h"
#include "util/bootid.h"
#include "util/clock.h"
#include "util/ownerlock.h"

#include "../race.h"

#define HASH_A 0x1111222233334444ull
#define HASH_B 0x5555666677778888ull

static char dir[64];

static void make_dir(void)
{
    strcpy(dir, "/dev/shm/rlstore-test.XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
}

static void remove_dir(void)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char p[512];

    if (!d)
        return;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if (unlink(p) < 0)
            rmdir(p);
    }
    closedir(d);
    rmdir(dir);
}

TestSuite(store, .init = make_dir, .fini = remove_dir, .timeout = 30);
TestSuite(store_race, .init = make_dir, .fini = remove_dir, .timeout = 60);

static struct rl_store_opts opts(uint64_t hash)
{
    struct rl_store_opts o = {
        .shared = true,
        .dir = dir,
        .uid = (uint32_t)getuid(),
        .config_hash = hash,
        .nslots = 256,
        .arena_words = 4096,
        .noverflow = 4,
        .overflow_words = 64,
    };
    return o;
}

static struct rl_store *open_ok(uint64_t hash, bool want_shared)
{
    struct rl_store_opts o = opts(hash);
    struct rl_store *s;
    char why[256];

    cr_assert_eq(rl_store_open(&s, &o, why, sizeof why), 0);
    cr_assert_eq(rl_store_is_shared(s), want_shared, "why: %s", why);
    return s;
}

static void seg_path(char *buf, size_t len)
{
    cr_assert_eq(rl_store_path(buf, len, dir, (uint32_t)getuid(), HASH_A), 0);
}

static unsigned take_all(struct rl_store *s, uint64_t tag, uint64_t limit,
                         unsigned tries)
{
    struct rl_slot sl;
    bool ovf;
    unsigned n = 0;

    cr_assert_eq(rl_store_slot(s, tag, "sec|user", 1, 1, &sl, &ovf), 0);
    for (unsigned i = 0; i < tries; i++)
        n += take_one(&sl.words[0], limit);
    return n;
}

static unsigned count_files(void)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    unsigned n = 0;

    cr_assert_not_null(d);
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            n++;
    closedir(d);
    return n;
}

static void read_file(const char *path, unsigned char *buf, size_t len,
                      size_t *got)
{
    int fd = open(path, O_RDONLY | O_NOFOLLOW);
    ssize_t n;

    cr_assert_geq(fd, 0, "%s: %s", path, strerror(errno));
    n = read(fd, buf, len);
    cr_assert_geq(n, 0);
    *got = (size_t)n;
    close(fd);
}

static void make_path(const char *path, mode_t mode)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, mode);

    cr_assert_geq(fd, 0, "%s: %s", path, strerror(errno));
    close(fd);
}

static void write_at(const char *path, off_t off, const void *p, size_t n)
{
    int fd = open(path, O_WRONLY);

    cr_assert_geq(fd, 0);
    cr_assert_eq(pwrite(fd, p, n, off), (ssize_t)n);
    close(fd);
}

/* ---- layout ------------------------------------------------------------ */

Test(layout, pins_sizes_and_offsets_of_the_shared_structures)
{
    cr_assert_eq(sizeof(struct rl_seg_header), 680);
    cr_assert_eq(offsetof(struct rl_seg_header, magic), 0);
    cr_assert_eq(offsetof(struct rl_seg_header, version), 8);
    cr_assert_eq(offsetof(struct rl_seg_header, header_size), 12);
    cr_assert_eq(offsetof(struct rl_seg_header, total_size), 16);
    cr_assert_eq(offsetof(struct rl_seg_header, config_hash), 24);
    cr_assert_eq(offsetof(struct rl_seg_header, nslots), 32);
    cr_assert_eq(offsetof(struct rl_seg_header, noverflow), 36);
    cr_assert_eq(offsetof(struct rl_seg_header, slot_size), 40);
    cr_assert_eq(offsetof(struct rl_seg_header, uid), 44);
    cr_assert_eq(offsetof(struct rl_seg_header, arena_words), 48);
    cr_assert_eq(offsetof(struct rl_seg_header, overflow_words), 56);
    cr_assert_eq(offsetof(struct rl_seg_header, ready), 64);
    cr_assert_eq(offsetof(struct rl_seg_header, stale), 72);
    cr_assert_eq(offsetof(struct rl_seg_header, arena_used), 80);
    cr_assert_eq(offsetof(struct rl_seg_header, overflow_used), 88);
    cr_assert_eq(offsetof(struct rl_seg_header, boot_id), 96);
    cr_assert_eq(offsetof(struct rl_seg_header, max_period_ns), 112);
    cr_assert_eq(offsetof(struct rl_seg_header, last_used), 120);
    cr_assert_eq(offsetof(struct rl_seg_header, fleet), 128);
    cr_assert_eq(offsetof(struct rl_seg_header, hold_until), 144);
    cr_assert_eq(offsetof(struct rl_seg_header, pins_lost), 152);
    cr_assert_eq(offsetof(struct rl_seg_header, npauses), 160);
    cr_assert_eq(offsetof(struct rl_seg_header, pause_size), 164);
    cr_assert_eq(offsetof(struct rl_seg_header, pins), 168);
    cr_assert_eq(RL_SEG_PINS, 32);
    cr_assert_eq(RL_LAYOUT_VERSION, 9,
                 "a budget counts the requests it answered (SPEC §15)");
    cr_assert_eq(sizeof(struct rl_seg_pauses), 64);
    cr_assert_eq(sizeof(struct rl_seg_pause), 128);
    cr_assert_eq(RL_SEG_PAUSES, 1024);
    cr_assert_eq(rl_seg_pauses_off(2, 1), 768, "680 + 3 * 16, on 64 bytes");
    /* A window's lock words hold a pthread_mutex_t (layout.h). */
    cr_assert_eq(RL_WINDOW_LOCK_WORDS, 6);
    cr_assert_eq(RL_WINDOW_STATE_WORDS, 9);
    cr_assert_leq(sizeof(pthread_mutex_t), RL_WINDOW_LOCK_WORDS * 8);
    cr_assert_eq(sizeof(struct rl_seg_slot), 16);
    cr_assert_eq(offsetof(struct rl_seg_slot, tag), 0);
    cr_assert_eq(offsetof(struct rl_seg_slot, meta), 8);
    cr_assert_eq(sizeof(struct rl_seg_store), 208);
    cr_assert_eq(offsetof(struct rl_seg_store, label), 0);
    cr_assert_eq(offsetof(struct rl_seg_store, counters), 64);
    cr_assert_eq(RL_STORE_COUNTERS, 16, "4 kinds (request: SPEC §11) x 4 stats");
    cr_assert_eq(offsetof(struct rl_seg_store, tls_unseen), 192);
    cr_assert_eq(offsetof(struct rl_seg_store, responded), 200);
    cr_assert_eq(RL_SEG_CARVE_WORDS, 8);
    cr_assert_eq(RL_SEG_ALIGN, 4096);
    cr_assert_eq(RL_META_PENDING, 1ull << 39);
    cr_assert_eq(RL_META_NOSPACE, 1ull << 38);
}

Test(layout, sizes_a_segment_from_its_geometry_and_refuses_absurd_ones)
{
    /* The pause table: 64 + 1024 * 128 bytes after the slots. */
    cr_assert_eq(rl_seg_fixed_size(2, 1), 33 * 4096, "768 + 64 + 131072");
    cr_assert_eq(rl_seg_fixed_size(256, 1), 34 * 4096,
                 "680 + 257 * 16 bytes, then the pause table");
    cr_assert_eq(rl_seg_size(2, 1, 10, 5), 33 * 4096 + 15 * 8);
    cr_assert_eq(rl_seg_size(0, 1, 10, 5), 0);
    cr_assert_eq(rl_seg_size(1, 0, 10, 5), 0);
    cr_assert_eq(rl_seg_size(1, 1, 1ull << 40, 5), 0);
    cr_assert_eq(rl_seg_carve(1), 32,
                 "label, counters (2 lines), request words, a word: 4 lines");
    cr_assert_eq(rl_seg_carve(6), 32);
    cr_assert_eq(rl_seg_carve(7), 40);
}

/* ---- creation and slots ------------------------------------------------ */

Test(store, creates_one_file_of_mode_0600_owned_by_the_caller)
{
    struct rl_store *s = open_ok(HASH_A, true);
    char path[256];
    struct stat st;

    seg_path(path, sizeof path);
    cr_assert_eq(lstat(path, &st), 0);
    cr_assert(S_ISREG(st.st_mode));
    cr_assert_eq(st.st_mode & 07777, 0600);
    cr_assert_eq(st.st_uid, getuid());
    cr_assert_eq(count_files(), 1, "no temporary file is left behind");
    cr_assert_eq(rl_store_config_hash(s), HASH_A);
    rl_store_close(s);
}

Test(store, sweeps_temporary_files_of_dead_builders_when_making_one)
{
    struct timeval old[2] = {{.tv_sec = 1000}, {.tv_sec = 1000}};
    char dead[256], young[256], alive[256];
    struct rl_store *s;
    int status;
    pid_t pid = fork();

    if (pid == 0)
        _exit(0);
    cr_assert_eq(waitpid(pid, &status, 0), pid); /* a pid now unused */
    snprintf(dead, sizeof dead, "%s/.rlshim-%u.%d.1.tmp", dir, getuid(),
             (int)pid);
    snprintf(young, sizeof young, "%s/.rlshim-%u.%d.2.tmp", dir, getuid(),
             (int)pid);
    snprintf(alive, sizeof alive, "%s/.rlshim-%u.%d.3.tmp", dir, getuid(),
             (int)getpid());
    make_path(dead, 0600);
    make_path(young, 0600);
    make_path(alive, 0600);
    cr_assert_eq(utimes(dead, old), 0);
    cr_assert_eq(utimes(alive, old), 0);
    s = open_ok(HASH_A, true);
    cr_assert_neq(access(dead, F_OK), 0, "a dead builder's file is gone");
    cr_assert_eq(access(young, F_OK), 0, "a recent one may still be used");
    cr_assert_eq(access(alive, F_OK), 0, "a live builder's is kept");
    rl_store_close(s);
}

Test(store, names_the_segment_after_the_uid_and_config_in_the_state_dir)
{
    char p[256];

    cr_assert_eq(rl_store_path(p, sizeof p, "/x", 1000, HASH_A), 0);
    cr_assert_str_eq(p, "/x/rlshim-1000-1111222233334444");
    setenv("RLSHIM_STATE_DIR", "/y", 1);
    cr_assert_eq(rl_store_path(p, sizeof p, NULL, 7, 0xab), 0);
    cr_assert_str_eq(p, "/y/rlshim-7-00000000000000ab");
    unsetenv("RLSHIM_STATE_DIR");
    cr_assert_eq(rl_store_path(p, sizeof p, NULL, 7, 0xab), 0);
    cr_assert_str_eq(p, "/dev/shm/rlshim-7-00000000000000ab");
    cr_assert_eq(rl_store_path(p, 8, "/x", 1000, 1), -ENAMETOOLONG);
}

Test(store, finds_the_slot_it_claimed_and_its_words_again)
{
    struct rl_store *s = open_ok(HASH_A, true);
    struct rl_slot a, b;
    bool ovf = true;

    cr_assert_eq(rl_store_slot(s, 42, "default|alice", 3, 1, &a, &ovf), 0);
    cr_assert_not(ovf);
    cr_assert_eq(a.nwords, 3);
    rl_store_relaxed_u64(&a.words[2], 99);
    cr_assert_eq(rl_store_slot(s, 42, "default|alice", 3, 1, &b, &ovf), 0);
    cr_assert_eq(a.index, b.index);
    cr_assert_eq(a.words, b.words);
    cr_assert_eq(rl_load_relaxed_u64(&b.words[2]), 99);
    cr_assert_eq(rl_store_slot(s, 0, "x", 1, 1, &b, &ovf), -EINVAL);
    cr_assert_eq(rl_store_slot(s, 42, "default|alice", 4, 1, &b, &ovf), -EINVAL,
                 "a slot made with fewer words is not handed out");
    rl_store_close(s);
}

Test(store, hands_out_zeroed_words_that_never_overlap)
{
    struct rl_store *s = open_ok(HASH_A, true);
    struct rl_slot sl[20];
    bool ovf;

    for (unsigned i = 0; i < 20; i++) {
        cr_assert_eq(
            rl_store_slot(s, 1000 + i * 256, "r|u", 7, 1, &sl[i], &ovf), 0);
        for (unsigned w = 0; w < 7; w++) {
            cr_assert_eq(rl_load_relaxed_u64(&sl[i].words[w]), 0);
            rl_store_relaxed_u64(&sl[i].words[w], i + 1);
        }
    }
    for (unsigned i = 0; i < 20; i++)
        for (unsigned w = 0; w < 7; w++)
            cr_assert_eq(rl_load_relaxed_u64(&sl[i].words[w]), i + 1);
    rl_store_close(s);
}

Test(store, sends_new_users_to_one_overflow_slot_per_rule_when_full)
{
    struct rl_store_opts o = opts(HASH_A);
    struct rl_store *s;
    struct rl_slot sl, o1, o2, o3;
    bool ovf;

    o.nslots = 4;
    cr_assert_eq(rl_store_open(&s, &o, NULL, 0), 0);
    for (uint64_t t = 1; t <= 4; t++) {
        cr_assert_eq(rl_store_slot(s, t, "r|u", 1, 77, &sl, &ovf), 0);
        cr_assert_not(ovf);
    }
    cr_assert_eq(rl_store_slot(s, 5, "r|five", 1, 77, &o1, &ovf), 0);
    cr_assert(ovf);
    cr_assert_eq(rl_store_slot(s, 6, "r|six", 1, 77, &o2, &ovf), 0);
    cr_assert(ovf);
    cr_assert_eq(o1.index, o2.index);
    cr_assert_eq(o1.words, o2.words);
    cr_assert_eq(rl_store_slot(s, 7, "q|seven", 1, 78, &o3, &ovf), 0);
    cr_assert(ovf);
    cr_assert_neq(o3.index, o1.index, "each rule has its own");
    /* A user already in the table keeps its slot. */
    cr_assert_eq(rl_store_slot(s, 3, "r|u", 1, 77, &sl, &ovf), 0);
    cr_assert_not(ovf);
    rl_store_close(s);
}

Test(store, sends_new_users_to_the_overflow_slot_when_the_arena_is_full)
{
    struct rl_store_opts o = opts(HASH_A);
    struct rl_store *s;
    struct rl_slot a, b;
    bool ovf;

    /* Two slots' storage heads (label, counters, rounding) and 10 words:
     * room for one slot of 40 state words, not two. */
    o.nslots = 2;
    o.arena_words = 10;
    cr_assert_eq(rl_store_open(&s, &o, NULL, 0), 0);
    cr_assert_eq(rl_store_slot(s, 1, "r|a", 40, 9, &a, &ovf), 0);
    cr_assert_not(ovf);
    cr_assert_eq(rl_store_slot(s, 2, "r|b", 40, 9, &b, &ovf), 0);
    cr_assert(ovf);
    /* Later callers of the same user are sent there too. */
    cr_assert_eq(rl_store_slot(s, 2, "r|b", 40, 9, &a, &ovf), 0);
    cr_assert(ovf);
    cr_assert_eq(a.index, b.index);
    rl_store_close(s);
}

Test(store, takes_over_a_slot_whose_claimer_died_before_publishing_it)
{
    struct rl_store *s = open_ok(HASH_A, true);
    uint64_t size = rl_seg_size(256, 4, 4096, 64), t0, t1;
    struct rl_seg_slot *slots;
    struct rl_slot a, b;
    unsigned char *map;
    char path[256];
    bool ovf;
    int fd;

    /* As a claimer killed between its tag CAS and its meta CAS leaves it:
     * the tag set, the meta still 0 (in every slot, wherever it hashes). */
    seg_path(path, sizeof path);
    fd = open(path, O_RDWR);
    cr_assert_geq(fd, 0);
    map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    cr_assert_neq(map, MAP_FAILED);
    close(fd);
    slots = (struct rl_seg_slot *)(map + RL_SEG_HEADER_SIZE);
    for (unsigned i = 0; i < 256; i++)
        rl_store_relaxed_u64(&slots[i].tag, 4242);
    t0 = rl_clock_now_ns();
    cr_assert_eq(rl_store_slot(s, 4242, "d|e", 2, 1, &a, &ovf), 0);
    t1 = rl_clock_now_ns();
    cr_assert_not(ovf);
    cr_assert_eq(a.nwords, 2);
    cr_assert_geq(t1 - t0, RL_STORE_CLAIM_WAIT_NS, "it waited first");
    cr_assert_lt(t1 - t0, 1000000000ull);
    cr_assert_eq(rl_store_slot(s, 4242, "d|e", 2, 1, &b, &ovf), 0);
    cr_assert_eq(a.words, b.words, "and later callers get the same words");
    munmap(map, size);
    rl_store_close(s);
}

static int collect(const struct rl_slot_info *info, struct rl_slot *slot,
                   void *arg)
{
    char *out = arg;

    (void)slot;
    strcat(out, info->label);
    strcat(out, info->overflow ? "(o);" : ";");
    return 0;
}

/* The segment of open_ok's geometry, mapped as another process sees it:
 * its slot table and its arena. */
static unsigned char *map_segment(uint64_t *size, struct rl_seg_slot **slots,
                                  rl_atomic_u64 **arena)
{
    struct rl_seg_header *h;
    unsigned char *map;
    char path[256];
    struct stat st;
    int fd;

    seg_path(path, sizeof path);
    fd = open(path, O_RDWR);
    cr_assert_geq(fd, 0);
    cr_assert_eq(fstat(fd, &st), 0);
    *size = (uint64_t)st.st_size;
    map = mmap(NULL, *size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    cr_assert_neq(map, MAP_FAILED);
    close(fd);
    h = (struct rl_seg_header *)map;
    *slots = (struct rl_seg_slot *)(map + RL_SEG_HEADER_SIZE);
    *arena = (rl_atomic_u64 *)(map + rl_seg_fixed_size(h->nslots, h->noverflow));
    return map;
}

/* As a claimer leaves a slot when it dies (or sits) after carving its
 * storage and before publishing it: PENDING (with NOSPACE: its allocation
 * failed), the range carved at the arena's start. */
static void leave_pending(struct rl_seg_slot *slots, uint64_t extra)
{
    struct rl_seg_header *h =
        (struct rl_seg_header *)((unsigned char *)slots - RL_SEG_HEADER_SIZE);

    rl_store_relaxed_u64(&h->arena_used, rl_seg_carve(2));
    for (unsigned i = 0; i < 256; i++) {
        rl_store_relaxed_u64(&slots[i].tag, 4242);
        rl_store_relaxed_u64(&slots[i].meta, RL_META_PENDING | extra |
                                                 (2ull << RL_META_NWORDS_SHIFT));
    }
}

Test(store, takes_over_a_slot_whose_claimer_died_while_allocating_it)
{
    struct rl_store *s = open_ok(HASH_A, true);
    struct rl_seg_slot *slots;
    rl_atomic_u64 *arena;
    struct rl_slot a;
    uint64_t size, t0, t1;
    unsigned char *map = map_segment(&size, &slots, &arena);
    char seen[256] = "";
    bool ovf;

    leave_pending(slots, 0);
    rl_store_relaxed_u64(&arena[RL_SEG_STORE_WORDS + 1], 77); /* a mark */
    t0 = rl_clock_now_ns();
    cr_assert_eq(rl_store_slot(s, 4242, "d|e", 2, 1, &a, &ovf), 0);
    t1 = rl_clock_now_ns();
    cr_assert_not(ovf);
    cr_assert_not(a.local);
    cr_assert_geq(t1 - t0, RL_STORE_CLAIM_WAIT_NS, "it waited first");
    cr_assert_eq(rl_load_relaxed_u64(&a.words[1]), 77,
                 "the range the dead claimer carved, no other");
    cr_assert_eq(rl_load_relaxed_u64(&slots[a.index].meta) & RL_META_READY,
                 RL_META_READY, "published");
    cr_assert_eq(rl_store_each(s, collect, seen), 0);
    cr_assert_str_eq(seen, "d|e;", "with its label");
    munmap(map, size);
    rl_store_close(s);
}

Test(store, tries_again_at_once_a_slot_whose_allocation_failed)
{
    struct rl_store *s = open_ok(HASH_A, true);
    struct rl_seg_slot *slots;
    rl_atomic_u64 *arena;
    struct rl_slot a;
    uint64_t size, t0, t1;
    unsigned char *map = map_segment(&size, &slots, &arena);
    bool ovf;

    leave_pending(slots, RL_META_NOSPACE);
    rl_store_relaxed_u64(&arena[RL_SEG_STORE_WORDS + 1], 77);
    t0 = rl_clock_now_ns();
    cr_assert_eq(rl_store_slot(s, 4242, "d|e", 2, 1, &a, &ovf), 0);
    t1 = rl_clock_now_ns();
    cr_assert_not(a.local, "the dir has room now: shared");
    cr_assert_lt(t1 - t0, RL_STORE_CLAIM_WAIT_NS, "without waiting");
    cr_assert_eq(rl_load_relaxed_u64(&a.words[1]), 77, "the range carved");
    munmap(map, size);
    rl_store_close(s);
}

/* fd 2 into a file for a moment: what the store says. */
static int err_to(const char *path)
{
    int saved = dup(2);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

    cr_assert_geq(fd, 0);
    dup2(fd, 2);
    close(fd);
    return saved;
}

static void err_back(int saved)
{
    dup2(saved, 2);
    close(saved);
}

Test(store, a_claim_in_a_full_state_dir_gets_a_budget_of_this_process_only)
{
    struct rl_store_opts o = opts(HASH_A);
    struct rl_store *s;
    struct rl_slot early, late, again;
    char mnt[128], fill[200], errs[200], line[512] = "";
    bool ovf;
    int fd, saved;

    if (geteuid() != 0)
        cr_skip_test("mounting a tmpfs needs root");
    snprintf(mnt, sizeof mnt, "%s/full", dir);
    cr_assert_eq(mkdir(mnt, 0700), 0);
    cr_assert_eq(mount("tmpfs", mnt, "tmpfs", 0, "size=256k"), 0, "%s",
                 strerror(errno));
    o.dir = mnt;
    cr_assert_eq(rl_store_open(&s, &o, NULL, 0), 0);
    cr_assert(rl_store_is_shared(s));
    cr_assert_eq(rl_store_slot(s, 7, "r|early", 2, 1, &early, &ovf), 0);
    cr_assert_not(early.local);
    snprintf(fill, sizeof fill, "%s/fill", mnt);
    fd = open(fill, O_WRONLY | O_CREAT, 0600);
    cr_assert_geq(fd, 0);
    static const char zeros[4096];
    while (write(fd, zeros, sizeof zeros) > 0)
        ;
    close(fd);
    snprintf(errs, sizeof errs, "%s/stderr", dir);
    saved = err_to(errs);
    /* 4096 words: pages the full tmpfs does not have. */
    int r1 = rl_store_slot(s, 8, "r|late", 4096, 1, &late, &ovf);
    int r2 = rl_store_slot(s, 8, "r|late", 4096, 1, &again, &ovf);
    err_back(saved);
    cr_assert_eq(r1, 0);
    cr_assert_eq(r2, 0);
    cr_assert(late.local, "no SIGBUS: a budget of its own memory");
    cr_assert_eq(late.index, UINT32_MAX);
    cr_assert_eq(late.nwords, 4096);
    cr_assert_eq(again.words, late.words, "the same one every time");
    for (unsigned w = 0; w < 4096; w++)
        rl_store_relaxed_u64(&late.words[w], w);
    rl_store_count(&late, 0, RL_STAT_ALLOWED, 1);
    cr_assert_eq(rl_store_slot(s, 7, "r|early", 2, 1, &again, &ovf), 0);
    cr_assert_not(again.local, "the budget made before stays shared");
    cr_assert_eq(again.words, early.words);
    FILE *f = fopen(errs, "r");
    cr_assert_not_null(f);
    cr_assert_not_null(fgets(line, sizeof line, f));
    cr_assert_not_null(strstr(line, "r|late"), "%s", line);
    cr_assert_not_null(strstr(line, "kept in this process only"), "%s", line);
    cr_assert_null(fgets(line, sizeof line, f), "one line: %s", line);
    fclose(f);
    rl_store_close(s);
    cr_assert_eq(umount(mnt), 0);
}

/* As a kernel before 5.14 answers MADV_POPULATE_WRITE (EINVAL), for this
 * process from now on. */
static void no_populate(void)
{
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_madvise, 0, 3),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
                 offsetof(struct seccomp_data, args[2])),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 23 /* MADV_POPULATE_WRITE */, 0,
                 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EINVAL),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {sizeof f / sizeof f[0], f};

    cr_assert_eq(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), 0);
    cr_assert_eq(prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog), 0);
}

static uint64_t allocated(void)
{
    char path[256];
    struct stat st;

    seg_path(path, sizeof path);
    cr_assert_eq(stat(path, &st), 0);
    return (uint64_t)st.st_blocks * 512;
}

Test(store, without_madvise_a_claim_allocates_its_storage_through_the_file)
{
    struct rl_store *s, *t;
    struct rl_slot a, b;
    uint64_t before;
    bool ovf;

    no_populate();
    s = open_ok(HASH_A, true);
    before = allocated();
    cr_assert_eq(rl_store_slot(s, 5, "r|u", 4096, 1, &a, &ovf), 0);
    cr_assert_not(a.local);
    cr_assert_geq(allocated(), before + 4096 * 8, "%llu -> %llu",
                  (unsigned long long)before,
                  (unsigned long long)allocated());
    rl_store_relaxed_u64(&a.words[4095], 42);
    t = open_ok(HASH_A, true);
    cr_assert_eq(rl_store_slot(t, 5, "r|u", 4096, 1, &b, &ovf), 0);
    cr_assert_eq(rl_load_relaxed_u64(&b.words[4095]), 42, "one budget");
    rl_store_close(t);
    rl_store_close(s);
}

Test(store, without_madvise_a_claim_in_a_full_state_dir_is_kept_here)
{
    struct rl_store_opts o = opts(HASH_A);
    struct rl_store *s;
    struct rl_slot early, late;
    char mnt[128], fill[200], errs[200];
    static const char zeros[4096];
    bool ovf;
    int fd, saved;

    if (geteuid() != 0)
        cr_skip_test("mounting a tmpfs needs root");
    snprintf(mnt, sizeof mnt, "%s/full", dir);
    cr_assert_eq(mkdir(mnt, 0700), 0);
    cr_assert_eq(mount("tmpfs", mnt, "tmpfs", 0, "size=256k"), 0, "%s",
                 strerror(errno));
    no_populate();
    o.dir = mnt;
    cr_assert_eq(rl_store_open(&s, &o, NULL, 0), 0);
    cr_assert(rl_store_is_shared(s));
    cr_assert_eq(rl_store_slot(s, 7, "r|early", 2, 1, &early, &ovf), 0);
    cr_assert_not(early.local);
    snprintf(fill, sizeof fill, "%s/fill", mnt);
    fd = open(fill, O_WRONLY | O_CREAT, 0600);
    cr_assert_geq(fd, 0);
    while (write(fd, zeros, sizeof zeros) > 0)
        ;
    close(fd);
    snprintf(errs, sizeof errs, "%s/stderr", dir);
    saved = err_to(errs);
    int r = rl_store_slot(s, 8, "r|late", 4096, 1, &late, &ovf);
    err_back(saved);
    cr_assert_eq(r, 0);
    cr_assert(late.local, "no SIGBUS: a budget of its own memory");
    for (unsigned w = 0; w < 4096; w++)
        rl_store_relaxed_u64(&late.words[w], w);
    rl_store_close(s);
    cr_assert_eq(umount(mnt), 0);
}

Test(store, lists_claimed_slots_with_labels_for_the_cli)
{
    struct rl_store_opts o = opts(HASH_A);
    struct rl_store *s, *cli;
    struct rl_slot sl;
    char seen[1024] = "";
    char why[256];
    bool ovf;

    o.nslots = 1;
    cr_assert_eq(rl_store_open(&s, &o, NULL, 0), 0);
    cr_assert_eq(rl_store_slot(s, 5, "user:bob|bob", 1, 9, &sl, &ovf), 0);
    rl_store_count(&sl, 1, RL_STAT_DENIED, 3);
    cr_assert_eq(rl_store_slot(s, 6, "default|1000", 1, 9, &sl, &ovf), 0);
    cr_assert(ovf);
    cr_assert_eq(
        rl_store_attach(&cli, dir, (uint32_t)getuid(), HASH_A, why, sizeof why),
        0, "%s", why);
    cr_assert_eq(rl_store_each(cli, collect, seen), 0);
    cr_assert_str_eq(seen, "user:bob|bob;default|*(o);");
    rl_store_close(cli);
    rl_store_close(s);
}

static int grab_counters(const struct rl_slot_info *info, struct rl_slot *slot,
                         void *arg)
{
    (void)slot;
    memcpy(arg, info->counters, sizeof info->counters);
    return 1;
}

Test(store, reset_gives_back_a_full_budget_and_zero_counters)
{
    struct rl_store *s = open_ok(HASH_A, true);
    struct rl_store *cli;
    struct rl_slot sl;
    uint64_t c[RL_STORE_COUNTERS];
    bool ovf;

    cr_assert_eq(take_all(s, 5, 3, 10), 3);
    cr_assert_eq(rl_store_slot(s, 5, "sec|user", 1, 1, &sl, &ovf), 0);
    rl_store_count(&sl, 2, RL_STAT_ALLOWED, 3);
    cr_assert_eq(
        rl_store_attach(&cli, dir, (uint32_t)getuid(), HASH_A, NULL, 0), 0);
    cr_assert_eq(rl_store_each(cli, grab_counters, c), 1);
    cr_assert_eq(c[2 * RL_STORE_STATS_PER_KIND + RL_STAT_ALLOWED], 3);
    rl_store_reset_slot(cli, sl.index);
    cr_assert_eq(rl_store_each(cli, grab_counters, c), 1);
    cr_assert_eq(c[2 * RL_STORE_STATS_PER_KIND + RL_STAT_ALLOWED], 0);
    cr_assert_eq(take_all(s, 5, 3, 10), 3, "the running process sees it");
    rl_store_close(cli);
    rl_store_close(s);
}

Test(store, attach_does_not_create_a_segment)
{
    struct rl_store *cli;
    char why[256];

    cr_assert_eq(
        rl_store_attach(&cli, dir, (uint32_t)getuid(), HASH_A, why, sizeof why),
        -ENOENT);
    cr_assert_neq(why[0], '\0');
    cr_assert_eq(count_files(), 0);
}

Test(store, bounds_an_absurd_geometry_instead_of_failing)
{
    struct rl_store_opts o = opts(HASH_A);
    struct rl_store *s;
    struct rl_slot sl;
    char path[256];
    struct stat st;
    bool ovf;

    o.arena_words = 1ull << 45; /* 4096 users of a 65536-stamp window... */
    cr_assert_eq(rl_store_open(&s, &o, NULL, 0), 0);
    cr_assert(rl_store_is_shared(s));
    seg_path(path, sizeof path);
    cr_assert_eq(stat(path, &st), 0);
    cr_assert_leq((uint64_t)st.st_size, 3 * (RL_STORE_ARENA_MAX * 8));
    cr_assert_eq(rl_store_slot(s, 5, "a|b", 65539, 1, &sl, &ovf), 0);
    cr_assert_not(ovf);
    rl_store_close(s);
}

Test(store, process_mode_keeps_budgets_in_this_process_only)
{
    struct rl_store_opts o = opts(HASH_A);
    struct rl_store *s;

    o.shared = false;
    cr_assert_eq(rl_store_open(&s, &o, NULL, 0), 0);
    cr_assert_not(rl_store_is_shared(s));
    cr_assert_eq(count_files(), 0);
    cr_assert_eq(take_all(s, 9, 5, 8), 5);
    cr_assert_not(rl_store_is_stale(s));
    rl_store_close(s);
}

Test(store, process_mode_budget_is_shared_with_a_forked_child)
{
    struct rl_store_opts o = opts(HASH_A);
    struct rl_store *s;
    int status;
    pid_t pid;

    o.shared = false;
    cr_assert_eq(rl_store_open(&s, &o, NULL, 0), 0);
    cr_assert_eq(take_all(s, 9, 5, 2), 2);
    pid = fork();
    if (pid == 0)
        _exit(take_all(s, 9, 5, 8) == 3 ? 0 : 1);
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert_eq(status, 0);
    cr_assert_eq(take_all(s, 9, 5, 8), 0, "the child spent the rest");
    rl_store_close(s);
}

/* ---- corrupt, stale and foreign segments ------------------------------- */

/* The next process replaces a bad segment of ours, and throttles right. */
static void expect_replaced(void)
{
    struct rl_store *s = open_ok(HASH_A, true);
    char path[256];
    struct stat st;

    seg_path(path, sizeof path);
    cr_assert_eq(lstat(path, &st), 0);
    cr_assert_eq(st.st_mode & 07777, 0600);
    cr_assert_eq(take_all(s, 3, 5, 9), 5);
    cr_assert_eq(count_files(), 1);
    rl_store_close(s);
    s = open_ok(HASH_A, true);
    cr_assert_eq(take_all(s, 3, 5, 9), 0, "the new segment is kept");
    rl_store_close(s);
}

static void make_file(const void *p, size_t n, mode_t mode)
{
    char path[256];
    int fd;

    seg_path(path, sizeof path);
    fd = open(path, O_WRONLY | O_CREAT | O_EXCL, mode);
    cr_assert_geq(fd, 0);
    cr_assert_eq(fchmod(fd, mode), 0);
    cr_assert_eq(write(fd, p, n), (ssize_t)n);
    close(fd);
}

Test(store, replaces_a_segment_of_random_bytes)
{
    static unsigned char junk[1 << 16];
    struct rl_store *s;

    /* The right size, so only the header can tell. */
    s = open_ok(HASH_A, true);
    rl_store_close(s);
    remove_dir();
    make_dir();
    srand(7);
    for (size_t i = 0; i < sizeof junk; i++)
        junk[i] = (unsigned char)rand();
    make_file(junk,
              rl_seg_size(256, 4, 4096, 64) < sizeof junk
                  ? rl_seg_size(256, 4, 4096, 64)
                  : sizeof junk,
              0600);
    expect_replaced();
}

Test(store, replaces_a_segment_truncated_to_10_bytes)
{
    struct rl_store *s = open_ok(HASH_A, true);
    char path[256];

    cr_assert_eq(take_all(s, 3, 5, 9), 5);
    rl_store_close(s);
    seg_path(path, sizeof path);
    cr_assert_eq(truncate(path, 10), 0);
    expect_replaced();
}

Test(store, replaces_a_segment_of_another_layout_version)
{
    struct rl_store *s = open_ok(HASH_A, true);
    uint32_t v = RL_LAYOUT_VERSION + 1;
    char path[256];

    cr_assert_eq(take_all(s, 3, 5, 9), 5);
    rl_store_close(s);
    seg_path(path, sizeof path);
    write_at(path, offsetof(struct rl_seg_header, version), &v, sizeof v);
    expect_replaced();
}

/* A segment of the layout before `responded` (version 8: the same header,
 * every storage head 8 bytes shorter) left by a shim of the last release:
 * its counters would be read at the wrong words, so it is replaced. */
Test(store, replaces_a_segment_of_the_previous_layout_version)
{
    struct rl_store *s = open_ok(HASH_A, true);
    struct rl_store *cli = NULL;
    uint32_t v = RL_LAYOUT_VERSION - 1;
    char path[256], why[256] = "";

    cr_assert_eq(take_all(s, 3, 5, 9), 5);
    rl_store_close(s);
    seg_path(path, sizeof path);
    write_at(path, offsetof(struct rl_seg_header, version), &v, sizeof v);
    /* `rlshim stat` reads no counter of it, and says why. */
    cr_assert_eq(
        rl_store_attach(&cli, dir, (uint32_t)getuid(), HASH_A, why, sizeof why),
        -EINVAL);
    cr_assert_not_null(strstr(why, "not a valid segment of this version"),
                       "%s", why);
    expect_replaced();
}

Test(store, replaces_a_segment_whose_ready_word_was_never_published)
{
    struct rl_store *s = open_ok(HASH_A, true);
    uint64_t zero = 0;
    char path[256];

    cr_assert_eq(take_all(s, 3, 5, 9), 5);
    rl_store_close(s);
    seg_path(path, sizeof path);
    write_at(path, offsetof(struct rl_seg_header, ready), &zero, 8);
    expect_replaced();
}

Test(store, replaces_a_segment_whose_header_names_another_config)
{
    struct rl_store *s = open_ok(HASH_A, true);
    uint64_t other = HASH_B;
    char path[256];

    cr_assert_eq(take_all(s, 3, 5, 9), 5);
    rl_store_close(s);
    seg_path(path, sizeof path);
    write_at(path, offsetof(struct rl_seg_header, config_hash), &other, 8);
    expect_replaced();
}

Test(store, replaces_a_segment_made_in_another_boot)
{
    struct rl_store *s = open_ok(HASH_A, true);
    struct rl_store *cli;
    uint64_t mine[2], other[2];
    char path[256], why[256];

    rl_bootid(mine);
    cr_assert_neq(mine[0] | mine[1], 0, "this boot's id is known");
    other[0] = mine[0] ^ 1;
    other[1] = mine[1];
    cr_assert_eq(take_all(s, 3, 5, 9), 5);
    rl_store_close(s);
    seg_path(path, sizeof path);
    write_at(path, offsetof(struct rl_seg_header, boot_id), other, 16);
    /* The CLI does not trust it either, and says why. */
    cr_assert_eq(
        rl_store_attach(&cli, dir, (uint32_t)getuid(), HASH_A, why, sizeof why),
        -EINVAL);
    cr_assert_not_null(strstr(why, "earlier boot"), "%s", why);
    expect_replaced();
}

Test(store, two_configs_of_one_uid_keep_two_segments_apart)
{
    struct rl_store *a = open_ok(HASH_A, true);
    struct rl_store *b = open_ok(HASH_B, true);
    struct rl_store *a2, *b2;

    cr_assert_eq(count_files(), 2);
    cr_assert_not(rl_store_is_stale(a));
    cr_assert_not(rl_store_is_stale(b));
    cr_assert_eq(take_all(a, 3, 5, 4), 4);
    cr_assert_eq(take_all(b, 3, 5, 2), 2);
    /* Opened again, alternately: each finds its own budget as it was. */
    a2 = open_ok(HASH_A, true);
    b2 = open_ok(HASH_B, true);
    cr_assert_not(rl_store_is_stale(a));
    cr_assert_not(rl_store_is_stale(b));
    cr_assert_eq(take_all(a2, 3, 5, 9), 1);
    cr_assert_eq(take_all(b2, 3, 5, 9), 3);
    rl_store_close(a);
    rl_store_close(b);
    rl_store_close(a2);
    rl_store_close(b2);
}

Test(store, a_process_attached_before_moves_to_the_new_segment)
{
    struct rl_store *old = open_ok(HASH_A, true);
    struct rl_store *now, *again;
    uint32_t v = 99;
    char path[256];

    cr_assert_eq(take_all(old, 3, 5, 2), 2);
    cr_assert_not(rl_store_is_stale(old));
    /* Someone corrupts the file; the next process replaces it. */
    seg_path(path, sizeof path);
    write_at(path, offsetof(struct rl_seg_header, version), &v, sizeof v);
    now = open_ok(HASH_A, true);
    cr_assert(rl_store_is_stale(old));
    cr_assert_not(rl_store_is_stale(now));
    /* The old process re-opens and shares the new budget. */
    again = open_ok(HASH_A, true);
    rl_store_close(old);
    cr_assert_eq(take_all(now, 3, 5, 4), 4);
    cr_assert_eq(take_all(again, 3, 5, 4), 1);
    rl_store_close(now);
    rl_store_close(again);
}

Test(store, random_bytes_under_an_attached_process_crash_nothing)
{
    static unsigned char junk[1 << 16];
    struct rl_store *old = open_ok(HASH_A, true);
    struct rl_store *now;
    uint64_t size = rl_seg_size(256, 4, 4096, 64);
    struct rl_slot sl;
    char path[256];
    bool ovf;

    cr_assert_eq(take_all(old, 3, 5, 2), 2);
    srand(11);
    for (size_t i = 0; i < sizeof junk; i++)
        junk[i] = (unsigned char)(rand() | 1);
    seg_path(path, sizeof path);
    for (uint64_t off = 0; off < size; off += sizeof junk)
        write_at(path, (off_t)off, junk,
                 size - off < sizeof junk ? size - off : sizeof junk);
    cr_assert(rl_store_is_stale(old), "the stale word is not zero now");
    /* Look-ups through the old mapping stay in bounds, whatever they say. */
    for (uint64_t t = 1; t < 300; t++)
        (void)rl_store_slot(old, t * 7919, "x|y", 3, 5, &sl, &ovf);
    now = open_ok(HASH_A, true);
    cr_assert_eq(take_all(now, 3, 5, 9), 5);
    rl_store_close(old);
    rl_store_close(now);
}

/* A segment's header with last_used moved `ago` ns into the past. */
static void age_segment(uint64_t hash, uint64_t ago)
{
    char path[256];
    uint64_t last;
    int fd;

    cr_assert_eq(
        rl_store_path(path, sizeof path, dir, (uint32_t)getuid(), hash), 0);
    fd = open(path, O_RDWR);
    cr_assert_geq(fd, 0);
    cr_assert_eq(pread(fd, &last, 8, offsetof(struct rl_seg_header, last_used)),
                 8);
    last = last > ago ? last - ago : 1;
    cr_assert_eq(
        pwrite(fd, &last, 8, offsetof(struct rl_seg_header, last_used)), 8);
    close(fd);
}

Test(store, the_maker_of_a_segment_removes_those_unused_past_their_period)
{
    struct rl_store_opts o = opts(HASH_A);
    struct rl_store *a, *b, *c;
    char path[256];

    o.max_period_ns = 2000000000ull; /* 2 s */
    cr_assert_eq(rl_store_open(&a, &o, NULL, 0), 0);
    cr_assert_eq(take_all(a, 3, 5, 9), 5);
    /* Unused for 2.5 s: within its period and the slack, kept. */
    age_segment(HASH_A, 2500000000ull);
    b = open_ok(HASH_B, true);
    cr_assert_eq(count_files(), 2);
    cr_assert_not(rl_store_is_stale(a));
    /* Unused for 4 s: longer than 2 s and the slack: removed by the
     * next process that makes a segment, and its user is told. */
    age_segment(HASH_A, 4000000000ull);
    rl_store_close(b);
    cr_assert_eq(
        rl_store_path(path, sizeof path, dir, (uint32_t)getuid(), HASH_B), 0);
    cr_assert_eq(unlink(path), 0);
    c = open_ok(HASH_B, true);
    cr_assert_eq(count_files(), 1);
    seg_path(path, sizeof path);
    cr_assert_neq(access(path, F_OK), 0, "the unused one is gone");
    cr_assert(rl_store_is_stale(a));
    rl_store_close(a);
    rl_store_close(c);
}

Test(store, a_segment_in_use_is_kept_and_one_of_unknown_period_for_a_day)
{
    struct rl_store_opts o = opts(HASH_A);
    struct rl_store *a, *b;

    o.max_period_ns = 0;
    cr_assert_eq(rl_store_open(&a, &o, NULL, 0), 0);
    age_segment(HASH_A, 3600000000000ull); /* an hour */
    b = open_ok(HASH_B, true);
    cr_assert_eq(count_files(), 2);
    rl_store_close(b);
    rl_store_close(a);
    /* In use: a decision records it (at most every 100 ms). */
    o.max_period_ns = 1000000000ull;
    remove_dir();
    make_dir();
    cr_assert_eq(rl_store_open(&a, &o, NULL, 0), 0);
    age_segment(HASH_A, 10000000000ull);
    cr_assert_not(rl_store_is_stale(a));
    b = open_ok(HASH_B, true);
    cr_assert_eq(count_files(), 2, "used just now");
    rl_store_close(b);
    rl_store_close(a);
}

/* The sweep by another config's maker, as a segment of HASH_A unused for
 * `ago` ns: a fresh segment of HASH_B is made (and its file removed
 * again) so that the sweep runs. True when HASH_A's file is still there. */
static bool survives_a_sweep(uint64_t ago)
{
    char path[256];
    struct rl_store *b;

    age_segment(HASH_A, ago);
    b = open_ok(HASH_B, true);
    rl_store_close(b);
    cr_assert_eq(
        rl_store_path(path, sizeof path, dir, (uint32_t)getuid(), HASH_B), 0);
    cr_assert_eq(unlink(path), 0);
    seg_path(path, sizeof path);
    return access(path, F_OK) == 0;
}

/* SPEC §5: a pause is not a budget that refills; the segment is kept,
 * however long unused, until it ends (then removed as before). */
Test(store, a_segment_holding_a_pause_is_kept_until_the_pause_ends)
{
    struct rl_store_opts o = opts(HASH_A);
    struct rl_store *a;

    o.max_period_ns = 1000000000ull; /* 1 s */
    cr_assert_eq(rl_store_open(&a, &o, NULL, 0), 0);
    /* A pause of 600 s from now, on a segment unused for 10 s. */
    rl_store_hold(a, rl_clock_now_ns() + 600000000000ull);
    rl_store_hold(a, rl_clock_now_ns() + 1000000000ull); /* never earlier */
    cr_assert(survives_a_sweep(10000000000ull), "removed during the pause");
    cr_assert_not(rl_store_is_stale(a));
    rl_store_close(a);
    /* A pause that has ended holds nothing. */
    remove_dir();
    make_dir();
    cr_assert_eq(rl_store_open(&a, &o, NULL, 0), 0);
    rl_store_hold(a, rl_clock_now_ns() - 1000000000ull); /* a second ago */
    cr_assert_not(survives_a_sweep(10000000000ull), "kept with no pause");
    cr_assert(rl_store_is_stale(a));
    rl_store_close(a);
}

/* A process that holds a max_open connection counted in the segment pins
 * it for as long as it lives: kept while it lives, removed once it is
 * gone (even killed), and a dead process's record is taken by the next. */
Test(store, a_segment_pinned_by_a_live_process_is_kept_until_it_dies)
{
    struct rl_store_opts o = opts(HASH_A);
    struct rl_store *a;
    int p[2];
    char c;

    o.max_period_ns = 1000000000ull;
    cr_assert_eq(rl_store_open(&a, &o, NULL, 0), 0);
    cr_assert_eq(pipe(p), 0);
    pid_t pid = fork();
    cr_assert_neq(pid, -1);
    if (pid == 0) {
        rl_store_pin(a, (uint32_t)getpid(), rl_pid_start(getpid(), NULL));
        if (write(p[1], "x", 1) != 1)
            _exit(1);
        pause();
        _exit(0);
    }
    cr_assert_eq(read(p[0], &c, 1), 1);
    cr_assert(survives_a_sweep(10000000000ull), "removed while pinned");
    kill(pid, SIGKILL);
    cr_assert_eq(waitpid(pid, NULL, 0), pid);
    cr_assert_not(survives_a_sweep(10000000000ull), "kept by a dead pin");
    rl_store_close(a);
    /* Every record taken by dead processes: a new pin takes one over. */
    remove_dir();
    make_dir();
    cr_assert_eq(rl_store_open(&a, &o, NULL, 0), 0);
    for (unsigned i = 0; i < RL_SEG_PINS; i++)
        rl_store_pin(a, (uint32_t)pid, 1); /* the dead child, 32 times */
    rl_store_pin(a, (uint32_t)getpid(), rl_pid_start(getpid(), NULL));
    rl_store_close(a);
    close(p[0]);
    close(p[1]);
    /* The file's header: ours is there once, and no pin was lost. */
    char path[256];
    struct rl_seg_header h;
    size_t got;
    int found = 0;
    seg_path(path, sizeof path);
    read_file(path, (unsigned char *)&h, sizeof h, &got);
    cr_assert_eq(got, sizeof h);
    for (unsigned i = 0; i < RL_SEG_PINS; i++)
        found += h.pins[i][0] == ((uint64_t)getpid() << 32 | 1);
    cr_assert_eq(found, 1);
    cr_assert_eq(h.pins_lost, 0);
}

Test(store, renew_gives_every_user_a_fresh_segment)
{
    struct rl_store *s = open_ok(HASH_A, true);
    struct rl_store *cli, *again;
    char why[256];

    cr_assert_eq(take_all(s, 3, 5, 9), 5);
    cr_assert_eq(
        rl_store_attach(&cli, dir, (uint32_t)getuid(), HASH_A, why, sizeof why),
        0, "%s", why);
    cr_assert_eq(rl_store_renew(cli, dir, (uint32_t)getuid(), why, sizeof why),
                 0, "%s", why);
    rl_store_close(cli);
    cr_assert(rl_store_is_stale(s), "its user is told to move");
    again = open_ok(HASH_A, true);
    cr_assert_eq(take_all(again, 3, 5, 9), 5);
    cr_assert_eq(count_files(), 1);
    rl_store_close(again);
    rl_store_close(s);
}

static int list_hash(uint64_t hash, void *arg)
{
    uint64_t *seen = arg;

    seen[hash == HASH_A ? 0 : hash == HASH_B ? 1 : 2]++;
    return 0;
}

Test(store, lists_every_segment_of_the_uid_by_name)
{
    struct rl_store *a = open_ok(HASH_A, true);
    struct rl_store *b = open_ok(HASH_B, true);
    uint64_t seen[3] = {0, 0, 0};
    char other[300];

    snprintf(other, sizeof other, "%s/rlshim-%u-1111222233334444", dir,
             (unsigned)getuid() + 1);
    make_path(other, 0600); /* another uid's name: not listed */
    cr_assert_eq(
        rl_store_each_segment(dir, (uint32_t)getuid(), list_hash, seen), 0);
    cr_assert_eq(seen[0], 1);
    cr_assert_eq(seen[1], 1);
    cr_assert_eq(seen[2], 0);
    rl_store_close(a);
    rl_store_close(b);
}

/* A refused file: process-local budgets, one reason, the file untouched. */
static void expect_refused(const char *path, const char *content,
                           const char *reason)
{
    static unsigned char before[1 << 16], after[1 << 16];
    struct rl_store_opts o = opts(HASH_A);
    struct rl_store *s;
    struct stat st0, st1;
    size_t n0 = 0, n1 = 0;
    char why[256], next[256];

    cr_assert_eq(lstat(path, &st0), 0);
    if (content)
        read_file(content, before, sizeof before, &n0);
    /* SPEC §5: the next name, shared by every process of the uid. */
    cr_assert_eq(rl_store_open(&s, &o, why, sizeof why), 0);
    cr_assert(rl_store_is_shared(s), "why: %s", why);
    cr_assert_str_eq(why, "", "nothing to say while a name is left");
    cr_assert_eq(take_all(s, 3, 5, 9), 5);
    rl_store_close(s);
    cr_assert_eq(rl_store_path_nth(next, sizeof next, dir, (uint32_t)getuid(),
                                   HASH_A, 1),
                 0);
    cr_assert_eq(access(next, F_OK), 0, "made at the next name");
    s = open_ok(HASH_A, true);
    cr_assert_eq(take_all(s, 3, 5, 9), 0, "the same budget, met again");
    rl_store_close(s);
    cr_assert_eq(rl_store_attach(&s, dir, (uint32_t)getuid(), HASH_A, NULL, 0),
                 0, "the CLI finds it too");
    rl_store_close(s);
    /* Every name another's: refused, one line, budgets kept here. */
    cr_assert_eq(unlink(next), 0);
    for (unsigned k = 1; k < RL_STORE_NAMES; k++) {
        cr_assert_eq(rl_store_path_nth(next, sizeof next, dir,
                                       (uint32_t)getuid(), HASH_A, k),
                     0);
        cr_assert_eq(mkfifo(next, 0600), 0);
    }
    cr_assert_eq(rl_store_open(&s, &o, why, sizeof why), 0);
    cr_assert_not(rl_store_is_shared(s), "a foreign file is never trusted");
    cr_assert_not_null(strstr(why, reason), "why: %s", why);
    cr_assert_null(strchr(why, '\n'), "one line");
    cr_assert_not_null(strstr(why, "kept in this process"), "why: %s", why);
    cr_assert_eq(take_all(s, 3, 5, 9), 5, "it still throttles, locally");
    rl_store_close(s);
    cr_assert_eq(lstat(path, &st1), 0);
    cr_assert_eq(st1.st_ino, st0.st_ino, "not replaced");
    cr_assert_eq(st1.st_mode, st0.st_mode);
    cr_assert_eq(st1.st_uid, st0.st_uid);
    if (content) {
        read_file(content, after, sizeof after, &n1);
        cr_assert_eq(n0, n1);
        cr_assert_eq(memcmp(before, after, n0), 0, "never written");
    }
    cr_assert_lt(rl_store_attach(&s, dir, (uint32_t)getuid(), HASH_A, NULL, 0),
                 0);
}

/* A valid segment of ours at `path`, for the foreign cases to start from. */
static void make_segment(void)
{
    struct rl_store *s = open_ok(HASH_A, true);

    rl_store_close(s);
}

Test(store, refuses_a_segment_owned_by_another_uid)
{
    char path[256];

    if (getuid() != 0)
        cr_skip_test("needs root to give a file to uid 65534");
    make_segment();
    seg_path(path, sizeof path);
    cr_assert_eq(chown(path, 65534, 65534), 0);
    expect_refused(path, path, "owned by another user");
}

Test(store, refuses_a_segment_made_by_another_uid_through_setpriv)
{
    char path[256], cmd[600];

    if (getuid() != 0 || system("command -v setpriv >/dev/null") != 0)
        cr_skip_test("needs root and setpriv");
    cr_assert_eq(chmod(dir, 01777), 0);
    seg_path(path, sizeof path);
    snprintf(cmd, sizeof cmd,
             "setpriv --reuid 65534 --regid 65534 --clear-groups "
             "sh -c 'umask 077; head -c 4096 /dev/zero > %s'",
             path);
    cr_assert_eq(system(cmd), 0);
    expect_refused(path, path, "owned by another user");
}

Test(store, refuses_a_symbolic_link_at_the_segment_path)
{
    char path[256], target[256];

    make_segment();
    seg_path(path, sizeof path);
    snprintf(target, sizeof target, "%s/target", dir);
    cr_assert_eq(rename(path, target), 0);
    cr_assert_eq(symlink(target, path), 0);
    expect_refused(path, target, "symbolic link");
}

Test(store, refuses_a_segment_of_mode_0666)
{
    char path[256];

    make_segment();
    seg_path(path, sizeof path);
    cr_assert_eq(chmod(path, 0666), 0);
    expect_refused(path, path, "mode");
}

Test(store, refuses_a_directory_or_a_fifo_at_the_segment_path)
{
    char path[256];

    seg_path(path, sizeof path);
    cr_assert_eq(mkfifo(path, 0600), 0);
    expect_refused(path, NULL, "not a regular file");
    remove_dir();
    make_dir();
    seg_path(path, sizeof path);
    cr_assert_eq(mkdir(path, 0700), 0);
    expect_refused(path, NULL, "Is a directory");
}

/* ---- many processes and threads ---------------------------------------- */

/* `limit` per hour: nothing refills while the threads race. */
static void racer_algo(struct racer *r, const char *algo)
{
    uint32_t id;

    r->algo = NULL;
    r->nwords = 1;
    if (strcmp(algo, "counter") == 0)
        return;
    id = strcmp(algo, "token_bucket") == 0 ? RL_ALGO_TOKEN_BUCKET
                                           : RL_ALGO_SLIDING_WINDOW;
    r->algo = rl_algorithm_get(id);
    cr_assert_eq(rl_limit_prepare(&r->lim, id, r->limit, 3600000000000ull, 0),
                 0);
    r->nwords = r->algo->state_words(&r->lim);
}

/* In a forked child: open the store as a new process would, race. */
static void race_child(struct race_page *page, unsigned nthreads, unsigned reps,
                       uint64_t limit, const char *algo)
{
    struct rl_store_opts o = opts(page->config_hash);
    struct racer r = {.page = page, .reps = reps, .limit = limit};

    racer_algo(&r, algo);
    pthread_t th[64];
    char why[256];

    pthread_barrier_wait(&page->start);
    if (rl_store_open(&r.store, &o, why, sizeof why) < 0)
        _exit(2);
    if (!rl_store_is_shared(r.store))
        atomic_fetch_add(&page->errors, 1);
    for (unsigned i = 0; i < nthreads; i++)
        if (pthread_create(&th[i], NULL, race_thread, &r) != 0)
            _exit(3);
    for (unsigned i = 0; i < nthreads; i++)
        pthread_join(th[i], NULL);
    rl_store_close(r.store);
    _exit(0);
}

static struct race_page *new_page(unsigned nproc, unsigned parties, int *fd)
{
    pthread_barrierattr_t a;
    struct race_page *p;

    *fd = memfd_create("race", 0); /* inherited across exec */
    cr_assert_geq(*fd, 0);
    cr_assert_eq(ftruncate(*fd, sizeof *p), 0);
    p = mmap(NULL, sizeof *p, PROT_READ | PROT_WRITE, MAP_SHARED, *fd, 0);
    cr_assert_neq(p, MAP_FAILED);
    pthread_barrierattr_init(&a);
    pthread_barrierattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
    cr_assert_eq(pthread_barrier_init(&p->start, &a, nproc), 0);
    cr_assert_eq(pthread_barrier_init(&p->barrier, &a, parties), 0);
    p->tag0 = 1000;
    p->config_hash = HASH_A;
    return p;
}

/* nforked processes of this program and nexec of store_racer, each with
 * nthreads threads, race `reps` times for a budget of `limit`. */
/* TSan cannot follow threads started in a child forked from a threaded
 * process (Criterion's worker is one). These races are between processes,
 * which TSan cannot see anyway; the thread races on one limiter run under
 * TSan in the limit suites. */
static void skip_forked_threads_under_tsan(void)
{
    const char *san = getenv("RLSHIM_SANITIZER");
    if (san != NULL && strcmp(san, "thread") == 0)
        cr_skip_test("threads after fork are not supported by TSan");
}

/* Set by a test before race(): the give-back race. */
static uint32_t race_giveback;

static int by_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The give-back race: the turns kept in each rep obey the limit (no more
 * than `limit` in any hour, or the bucket's arrival curve). */
static void check_turns(struct race_page *page, unsigned reps, uint64_t limit,
                        const char *algo)
{
    static struct rl_conform_ev ev[RACE_MAX_GO];
    uint64_t kept = 0;
    for (unsigned rep = 0; rep < reps; rep++) {
        uint64_t n = atomic_load(&page->ngo[rep]);
        struct rl_conform_result res;
        cr_assert_leq(n, RACE_MAX_GO);
        qsort(page->go[rep], n, sizeof page->go[rep][0], by_u64);
        for (uint64_t i = 0; i < n; i++)
            ev[i] = (struct rl_conform_ev){page->go[rep][i], 1};
        if (strcmp(algo, "sliding_window") == 0)
            rl_conform_window(ev, n, limit, RACE_HOUR, 0, &res);
        else
            rl_conform_bucket(ev, n, limit, RACE_HOUR, limit, 1, &res);
        cr_assert(res.ok, "rep %u: %llu turns within %llu ns, %llu allowed",
                  rep, (unsigned long long)res.units,
                  (unsigned long long)(ev[res.last].t - ev[res.first].t),
                  (unsigned long long)res.allowed);
        kept += n;
    }
    cr_assert_gt(kept, 0);
}

static void race(unsigned nforked, unsigned nexec, unsigned nthreads,
                 unsigned reps, uint64_t limit, const char *algo)
{
    skip_forked_threads_under_tsan();
    const char *build = getenv("RLSHIM_BUILD");
    struct race_page *page;
    pid_t pids[32];
    unsigned n = 0;
    char prog[512], sfd[16], sth[16], sreps[16], slim[16];
    int fd;

    page = new_page(nforked + nexec, (nforked + nexec) * nthreads, &fd);
    page->giveback = race_giveback;
    snprintf(prog, sizeof prog, "%s/tests/helpers/store_racer",
             build ? build : "build");
    if (nexec && access(prog, X_OK) != 0)
        cr_assert_fail("%s is not built (make unit builds it)", prog);
    for (unsigned i = 0; i < nforked + nexec; i++) {
        pid_t pid = fork();

        cr_assert_geq(pid, 0);
        if (pid == 0 && i < nforked)
            race_child(page, nthreads, reps, limit, algo);
        if (pid == 0) {
            snprintf(sfd, sizeof sfd, "%d", fd);
            snprintf(sth, sizeof sth, "%u", nthreads);
            snprintf(sreps, sizeof sreps, "%u", reps);
            snprintf(slim, sizeof slim, "%llu", (unsigned long long)limit);
            execl(prog, prog, dir, sfd, sth, sreps, slim, algo, (char *)0);
            _exit(127);
        }
        pids[n++] = pid;
    }
    for (unsigned i = 0; i < n; i++) {
        int status;

        cr_assert_eq(waitpid(pids[i], &status, 0), pids[i]);
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "racer %u: status %#x", i, status);
    }
    cr_assert_eq(atomic_load(&page->errors), 0);
    cr_assert_eq(atomic_load(&page->attempts),
                 (uint64_t)(nforked + nexec) * nthreads * reps,
                 "every thread took part in every rep");
    if (page->giveback)
        check_turns(page, reps, limit, algo);
    for (unsigned rep = 0; rep < reps && !page->giveback; rep++)
        cr_assert_eq(atomic_load(&page->admitted[rep]), limit,
                     "rep %u admitted %llu, not %llu", rep,
                     (unsigned long long)page->admitted[rep],
                     (unsigned long long)limit);
    cr_assert_eq(count_files(), 1, "one segment, nothing else");
    munmap(page, sizeof *page);
    close(fd);
}

Test(store_race, eight_processes_of_25_threads_admit_exactly_5_by_cas)
{
    race(8, 0, 25, 100, 5, "counter");
}

Test(store_race, eight_processes_of_25_threads_admit_exactly_5_token_bucket)
{
    race(8, 0, 25, 100, 5, "token_bucket");
}

Test(store_race, eight_processes_of_25_threads_admit_exactly_5_window)
{
    race(8, 0, 25, 100, 5, "sliding_window");
}

Test(store_race, two_programs_of_one_uid_share_one_token_bucket)
{
    race(4, 4, 25, 100, 5, "token_bucket");
}

Test(store_race, two_programs_of_one_uid_share_one_window)
{
    race(4, 4, 25, 100, 5, "sliding_window");
}

Test(store_race, twenty_processes_starting_at_once_make_one_segment)
{
    /* One thread each, one rep: all 20 open the store at the same moment
     * (the barrier is before the first slot, and no segment exists). */
    for (int round = 0; round < 10; round++) {
        race(20, 0, 1, 1, 5, "token_bucket");
        remove_dir();
        make_dir();
    }
}

Test(store_race, twenty_processes_replace_a_corrupt_segment_once)
{
    static const char junk[4096] = "not a segment";

    for (int round = 0; round < 10; round++) {
        make_file(junk, sizeof junk, 0600);
        race(20, 0, 1, 1, 5, "token_bucket");
        remove_dir();
        make_dir();
    }
}

/* ---- a holder killed inside the sliding window's lock ------------------ */

#define WAITERS 3

/* Shared by the test, the holder and the waiters (anonymous, forked). */
struct kill_page {
    _Atomic uint64_t parked;
    _Atomic uint64_t killed_at;
    _Atomic uint64_t decided_at[WAITERS];
    _Atomic uint64_t granted;
};

static struct kill_page *kpage;

/* The limiter's test hook: called with the window lock held, between two
 * stores to the ring. Tell the test, then wait to be killed. */
static void park(rl_word *st)
{
    (void)st;
    atomic_store(&kpage->parked, 1);
    for (;;)
        pause();
}

static void window_slot(struct rl_store **s, struct rl_limit *lim,
                        struct rl_slot *sl)
{
    const struct rl_algorithm *win = rl_algorithm_get(RL_ALGO_SLIDING_WINDOW);
    bool ovf;

    *s = open_ok(HASH_A, true);
    cr_assert_eq(
        rl_limit_prepare(lim, RL_ALGO_SLIDING_WINDOW, 5, 3600000000000ull, 0),
        0);
    cr_assert_eq(
        rl_store_slot(*s, 77, "w|u", win->state_words(lim), 1, sl, &ovf), 0);
}

/* A window of 5/h whose lock holder is parked by `park` after its first
 * ring store, with WAITERS other processes queued on the lock, then
 * killed. Checks that every waiter decided within a second of the kill;
 * returns what the waiters and then 10 more takes admitted. */
static uint64_t take_after_killed_holder(void)
{
    static const struct rl_lock_ops parking = {
        .lock = rl_ownerlock_lock,
        .unlock = rl_ownerlock_unlock,
        .in_critical = park,
    };
    struct rl_lock_ops ops = parking;
    const struct rl_algorithm *win = rl_algorithm_get(RL_ALGO_SLIDING_WINDOW);
    struct rl_store *s;
    struct rl_limit lim;
    struct rl_slot sl;
    uint64_t got;
    pid_t holder, waiters[WAITERS];
    int status;

    kpage = mmap(NULL, sizeof *kpage, PROT_READ | PROT_WRITE,
                 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    cr_assert_neq(kpage, MAP_FAILED);
    window_slot(&s, &lim, &sl);
    holder = fork();
    cr_assert_geq(holder, 0);
    if (holder == 0) {
        struct rl_store *cs;
        struct rl_slot csl;

        window_slot(&cs, &lim, &csl);
        rl_window_set_lock_ops(&ops);
        win->take(csl.words, &lim, rl_clock_now_ns(), 1, 1, 0);
        _exit(3); /* not reached: parked inside */
    }
    while (atomic_load(&kpage->parked) == 0)
        usleep(1000);
    /* The mutex's lock word (glibc: its first int) holds the holder's tid. */
    cr_assert_neq((uint32_t)rl_load_relaxed_u64(&sl.words[0]), 0,
                  "the lock is held");
    for (int i = 0; i < WAITERS; i++) {
        waiters[i] = fork();
        cr_assert_geq(waiters[i], 0);
        if (waiters[i] == 0) {
            struct rl_store *ws;
            struct rl_slot wsl;
            uint64_t g;

            window_slot(&ws, &lim, &wsl);
            g = win->take(wsl.words, &lim, rl_clock_now_ns(), 1, 1, 0).granted;
            atomic_store(&kpage->decided_at[i], rl_clock_now_ns());
            atomic_fetch_add(&kpage->granted, g);
            _exit(0);
        }
    }
    usleep(200000); /* the waiters are queued on the lock by now */
    for (int i = 0; i < WAITERS; i++)
        cr_assert_eq(atomic_load(&kpage->decided_at[i]), 0,
                     "nobody passes a live holder");
    atomic_store(&kpage->killed_at, rl_clock_now_ns());
    cr_assert_eq(kill(holder, SIGKILL), 0);
    cr_assert_eq(waitpid(holder, &status, 0), holder);
    cr_assert(WIFSIGNALED(status));
    for (int i = 0; i < WAITERS; i++) {
        uint64_t dt;

        cr_assert_eq(waitpid(waiters[i], &status, 0), waiters[i]);
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        dt =
            atomic_load(&kpage->decided_at[i]) - atomic_load(&kpage->killed_at);
        cr_assert_lt(dt, 1000000000ull, "waiter %d decided %llu ns after", i,
                     (unsigned long long)dt);
    }
    got = atomic_load(&kpage->granted);
    for (int i = 0; i < 10; i++)
        got += win->take(sl.words, &lim, rl_clock_now_ns(), 1, 1, 0).granted;
    cr_assert_eq((uint32_t)rl_load_relaxed_u64(&sl.words[0]), 0,
                 "the lock is free");
    rl_store_close(s);
    munmap(kpage, sizeof *kpage);
    return got;
}

Test(store_race, a_holder_killed_in_the_window_lock_wedges_no_one, .timeout = 5)
{
    uint64_t got = take_after_killed_holder();

    /* The dead holder's unit may count as spent, never as free twice. */
    cr_assert_leq(got, 5, "got %llu", (unsigned long long)got);
}

/* The dead holder's unit counts as spent (its successor finishes its
 * update), so exactly 4 of the 5 are left for everyone else. */
Test(store_race, the_window_budget_stays_exact_after_a_holder_is_killed,
     .timeout = 5)
{
    uint64_t got = take_after_killed_holder();

    cr_assert_eq(got, 4, "got %llu", (unsigned long long)got);
}

/* ---- many claimers filling the table at once ---------------------------- */

#define FILL_PROCS 6
#define FILL_THREADS 4
#define FILL_TAGS 300 /* more than the 256 slots of opts() */

struct fill_page {
    pthread_barrier_t start;
    _Atomic uint64_t index[FILL_PROCS * FILL_THREADS][FILL_TAGS];
    _Atomic uint64_t errors;
};

struct filler {
    struct fill_page *page;
    struct rl_store *store;
    unsigned id;
};

static void *fill_thread(void *arg)
{
    struct filler *f = arg;

    pthread_barrier_wait(&f->page->start);
    for (unsigned k = 0; k < FILL_TAGS; k++) {
        /* Each thread walks the tags from another place. */
        unsigned t = (k + f->id * 37) % FILL_TAGS;
        struct rl_slot sl;
        bool ovf;

        if (rl_store_slot(f->store, 1000 + t, "fill|t", 3, 9, &sl, &ovf) < 0) {
            atomic_fetch_add(&f->page->errors, 1);
            continue;
        }
        /* The first word of each slot's words is its own: mark it. */
        rl_add_relaxed_u64(&sl.words[0], 1);
        atomic_store(&f->page->index[f->id][t],
                     sl.index + (ovf ? 1u << 20 : 0));
    }
    return NULL;
}

Test(store_race, concurrent_claimers_agree_on_every_slot_and_overflow_alike)
{
    skip_forked_threads_under_tsan();
    pthread_barrierattr_t a;
    struct fill_page *page;
    pid_t pids[FILL_PROCS];
    unsigned in_table = 0, overflowed = 0;
    uint64_t ovf_index = UINT64_MAX;
    bool used[256] = {false};

    page = mmap(NULL, sizeof *page, PROT_READ | PROT_WRITE,
                MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    cr_assert_neq(page, MAP_FAILED);
    pthread_barrierattr_init(&a);
    pthread_barrierattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
    cr_assert_eq(
        pthread_barrier_init(&page->start, &a, FILL_PROCS * FILL_THREADS), 0);
    for (unsigned p = 0; p < FILL_PROCS; p++) {
        pids[p] = fork();
        cr_assert_geq(pids[p], 0);
        if (pids[p] == 0) {
            struct rl_store_opts o = opts(HASH_A);
            struct filler f[FILL_THREADS];
            pthread_t th[FILL_THREADS];
            struct rl_store *s;

            if (rl_store_open(&s, &o, NULL, 0) < 0)
                _exit(2);
            for (unsigned i = 0; i < FILL_THREADS; i++) {
                f[i] = (struct filler){page, s, p * FILL_THREADS + i};
                pthread_create(&th[i], NULL, fill_thread, &f[i]);
            }
            for (unsigned i = 0; i < FILL_THREADS; i++)
                pthread_join(th[i], NULL);
            _exit(0);
        }
    }
    for (unsigned p = 0; p < FILL_PROCS; p++) {
        int status;

        cr_assert_eq(waitpid(pids[p], &status, 0), pids[p]);
        cr_assert_eq(status, 0);
    }
    cr_assert_eq(atomic_load(&page->errors), 0);
    for (unsigned t = 0; t < FILL_TAGS; t++) {
        uint64_t idx = atomic_load(&page->index[0][t]);

        for (unsigned c = 1; c < FILL_PROCS * FILL_THREADS; c++)
            cr_assert_eq(atomic_load(&page->index[c][t]), idx,
                         "tag %u: claimer %u disagrees", t, c);
        if (idx >= 1u << 20) {
            overflowed++;
            if (ovf_index == UINT64_MAX)
                ovf_index = idx;
            cr_assert_eq(idx, ovf_index, "one overflow slot for the rule");
        } else {
            cr_assert_lt(idx, 256);
            cr_assert_not(used[idx], "slot %llu handed out twice",
                          (unsigned long long)idx);
            used[idx] = true;
            in_table++;
        }
    }
    cr_assert_eq(in_table, 256, "the table fills up completely");
    cr_assert_eq(overflowed, FILL_TAGS - 256);
    munmap(page, sizeof *page);
}

/* ---- window lock holders in another PID namespace ---------------------- */

/* `unshare -p -f --mount-proc` (root only) running store_window_ns. */
static void ns_helper_path(char *buf, size_t len)
{
    const char *build = getenv("RLSHIM_BUILD");

    if (geteuid() != 0 || system("command -v unshare >/dev/null 2>&1") != 0)
        cr_skip_test("PID namespaces need root and unshare(1)");
    snprintf(buf, len, "%s/tests/helpers/store_window_ns",
             build ? build : "build");
    if (access(buf, X_OK) != 0)
        cr_assert_fail("%s is not built (make unit builds it)", buf);
}

struct ns_page {
    _Atomic uint64_t decided_at, granted, cpu_ns, wall_ns;
};

static uint64_t proc_cpu_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

Test(store_race,
     a_holder_in_another_pid_namespace_is_waited_for_then_taken_over,
     .timeout = 20)
{
    const struct rl_algorithm *win = rl_algorithm_get(RL_ALGO_SLIDING_WINDOW);
    char prog[512], hash[32], line[64] = "";
    struct rl_store *s;
    struct rl_limit lim;
    struct rl_slot sl;
    struct ns_page *pg;
    pid_t holder, waiter;
    uint64_t killed_at, got;
    int p[2], status;
    FILE *f;

    ns_helper_path(prog, sizeof prog);
    window_slot(&s, &lim, &sl);
    pg = mmap(NULL, sizeof *pg, PROT_READ | PROT_WRITE,
              MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    cr_assert_neq(pg, MAP_FAILED);
    snprintf(hash, sizeof hash, "%#llx", (unsigned long long)HASH_A);
    cr_assert_eq(pipe(p), 0);
    holder = fork();
    cr_assert_geq(holder, 0);
    if (holder == 0) {
        dup2(p[1], 1);
        close(p[0]);
        execlp("unshare", "unshare", "-p", "-f", "--mount-proc", "--kill-child",
               prog, dir, hash, "park", (char *)NULL);
        _exit(127);
    }
    close(p[1]);
    f = fdopen(p[0], "r");
    cr_assert_not_null(fgets(line, sizeof line, f), "the holder started");
    cr_assert_str_eq(line, "parked\n");
    waiter = fork();
    cr_assert_geq(waiter, 0);
    if (waiter == 0) {
        uint64_t t0 = rl_clock_now_ns(), c0 = proc_cpu_ns();
        uint64_t g =
            win->take(sl.words, &lim, rl_clock_now_ns(), 1, 1, 0).granted;

        atomic_store(&pg->decided_at, rl_clock_now_ns());
        atomic_store(&pg->cpu_ns, proc_cpu_ns() - c0);
        atomic_store(&pg->wall_ns, rl_clock_now_ns() - t0);
        atomic_store(&pg->granted, g);
        _exit(0);
    }
    usleep(400000);
    uint64_t early = atomic_load(&pg->decided_at);
    killed_at = rl_clock_now_ns();
    /* Before any assertion: --kill-child takes its child along. */
    cr_assert_eq(kill(holder, SIGKILL), 0);
    cr_assert_eq(waitpid(holder, &status, 0), holder);
    cr_assert_eq(early, 0, "a live holder in another namespace is not robbed");
    cr_assert_eq(waitpid(waiter, &status, 0), waiter);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    cr_assert_lt(
        atomic_load(&pg->decided_at) - killed_at, 1000000000ull,
        "taken over %llu ns after the kill",
        (unsigned long long)(atomic_load(&pg->decided_at) - killed_at));
    cr_assert_lt(atomic_load(&pg->cpu_ns) * 100, atomic_load(&pg->wall_ns),
                 "the waiter slept: %llu ns of CPU in %llu ns",
                 (unsigned long long)atomic_load(&pg->cpu_ns),
                 (unsigned long long)atomic_load(&pg->wall_ns));
    /* The dead holder's unit counts (its job was finished), and the ring
     * is whole: exactly 5 - 1 for everyone else. */
    got = atomic_load(&pg->granted);
    for (int i = 0; i < 10; i++)
        got += win->take(sl.words, &lim, rl_clock_now_ns(), 1, 1, 0).granted;
    cr_assert_eq(got, 4, "got %llu", (unsigned long long)got);
    fclose(f);
    munmap(pg, sizeof *pg);
    rl_store_close(s);
}

/* Run store_window_ns take in a new PID namespace; its output line. */
static void ns_take(const char *prog, char *out, size_t len)
{
    char cmd[1024];
    FILE *f;

    snprintf(cmd, sizeof cmd, "unshare -p -f --mount-proc '%s' '%s' %#llx take",
             prog, dir, (unsigned long long)HASH_A);
    f = popen(cmd, "r");
    cr_assert_not_null(f);
    out[0] = '\0';
    cr_assert_not_null(fgets(out, (int)len, f), "the waiter ran");
    pclose(f);
}

Test(store_race, a_waiter_in_another_pid_namespace_never_robs_a_live_holder,
     .timeout = 20)
{
    static const struct rl_lock_ops parking = {
        .lock = rl_ownerlock_lock,
        .unlock = rl_ownerlock_unlock,
        .in_critical = park,
    };
    char prog[512], out[128];
    struct rl_store *s;
    struct rl_limit lim;
    struct rl_slot sl;
    unsigned long long g, ms;
    double cpu;
    pid_t holder;
    int status;

    ns_helper_path(prog, sizeof prog);
    kpage = mmap(NULL, sizeof *kpage, PROT_READ | PROT_WRITE,
                 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    cr_assert_neq(kpage, MAP_FAILED);
    window_slot(&s, &lim, &sl);
    holder = fork();
    cr_assert_geq(holder, 0);
    if (holder == 0) {
        rl_window_set_lock_ops(&parking);
        rl_sliding_window.take(sl.words, &lim, rl_clock_now_ns(), 1, 1, 0);
        _exit(3);
    }
    while (atomic_load(&kpage->parked) == 0)
        usleep(1000);
    /* Its pid means nothing in the waiter's namespace: still waited for
     * (up to the lock's bound, asleep), then denied, never robbed. */
    ns_take(prog, out, sizeof out);
    kill(holder, SIGKILL);
    waitpid(holder, &status, 0);
    cr_assert_eq(sscanf(out, "granted=%llu ms=%llu cpu_ms=%lf", &g, &ms, &cpu),
                 3, "%s", out);
    cr_assert_eq(g, 0, "%s", out);
    cr_assert_geq(ms, 900, "%s", out);
    cr_assert_lt(cpu * 100, (double)ms, "%s", out);
    /* The holder killed: the next waiter there goes at once. */
    ns_take(prog, out, sizeof out);
    cr_assert_eq(sscanf(out, "granted=%llu ms=%llu cpu_ms=%lf", &g, &ms, &cpu),
                 3, "%s", out);
    cr_assert_eq(g, 1, "%s", out);
    cr_assert_lt(ms, 1000, "%s", out);
    munmap(kpage, sizeof *kpage);
    rl_store_close(s);
}

/* Reserved turns given back while other processes reserve theirs: the
 * turns kept obey the limit (a window given back a reserved turn once
 * wrote 0 over the stamp it had replaced; a bucket handed a turn given
 * back behind a later one to the next caller too, which a burst of 1
 * shows: two at one turn). */
Test(store_race, give_backs_among_eight_processes_keep_a_window_to_5_an_hour)
{
    race_giveback = 1;
    race(4, 4, 25, 20, 5, "sliding_window");
}

Test(store_race, give_backs_among_eight_processes_keep_a_bucket_to_1_an_hour)
{
    race_giveback = 1;
    race(4, 4, 25, 20, 1, "token_bucket");
}
