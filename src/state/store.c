/* store.c — create, validate, attach and use a state segment (layout.h).
 *
 * Creation is race-free without a lock: a segment is built complete under a
 * temporary name in the same directory and only then link()ed into place,
 * which fails with EEXIST for every process but one; the losers drop their
 * copy and open the winner's. So whatever sits at the segment's path is
 * either complete (`ready` published before the link) or not ours.
 *
 * Replacement (ours but wrong) is serialised by flock() on the bad file,
 * taken only for that moment: two processes that judged the same file bad
 * do not both rename over it, which would strand the first one's users on
 * an orphan. The replacer sets `stale` in the old file before the rename.
 *
 * Nothing here keeps a file descriptor: each fd is closed once mapped. A
 * process killed while building leaves its temporary file; the next
 * process to make a segment sweeps such files away (sweep_temps), and the
 * uid's segments that no longer carry information with them (sweep_old).
 *
 * The file is allocated in full (posix_fallocate) before it is mapped: on
 * a full tmpfs the creation fails, the temporary file is removed and the
 * process keeps its budgets in its own memory; a sparse file would map
 * fine and kill its host with SIGBUS at the first page it touches. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "state/layout.h"
#include "state/store.h"
#include "util/clock.h"

struct rl_store {
    struct rl_seg_header *hdr;
    struct rl_seg_slot *slots; /* nslots, then noverflow */
    rl_atomic_u64 *arena;
    rl_atomic_u64 *oarena;
    uint64_t map_len;
    /* Copies of the validated header geometry: bounds never re-read from
     * shared memory. */
    uint32_t nslots;
    uint32_t noverflow;
    uint64_t arena_words;
    uint64_t overflow_words;
    bool shared;
};

struct geometry {
    uint32_t nslots;
    uint32_t noverflow;
    uint64_t arena_words;
    uint64_t overflow_words;
    uint64_t max_period_ns;
};

static void say(char *why, size_t whylen, const char *fmt, const char *path,
                const char *what)
{
    if (why && whylen)
        snprintf(why, whylen, fmt, path, what);
}

static const char *state_dir(const char *dir)
{
    const char *env;

    if (dir && dir[0])
        return dir;
    env = secure_getenv("RLSHIM_STATE_DIR");
    if (env && env[0])
        return env;
    return "/dev/shm";
}

int rl_store_path(char *buf, size_t len, const char *dir, uint32_t uid,
                  uint64_t config_hash)
{
    int n = snprintf(buf, len, "%s/rlshim-%u-%016llx", state_dir(dir), uid,
                     (unsigned long long)config_hash);

    if (n < 0 || (size_t)n >= len)
        return -ENAMETOOLONG;
    return 0;
}

static uint64_t clamp(uint64_t v, uint64_t max)
{
    return v < max ? v : max;
}

static void geometry_from(const struct rl_store_opts *o, struct geometry *g)
{
    g->nslots =
        o->nslots ? (uint32_t)clamp(o->nslots, RL_STORE_SLOTS_MAX) : 4096;
    g->arena_words = clamp(o->arena_words ? o->arena_words : 16ull * g->nslots,
                           RL_STORE_ARENA_MAX);
    g->noverflow = o->noverflow
                       ? (uint32_t)clamp(o->noverflow, RL_STORE_SLOTS_MAX)
                       : 64 + g->nslots / 64;
    g->overflow_words =
        clamp(o->overflow_words ? o->overflow_words : g->arena_words / 4 + 4096,
              RL_STORE_ARENA_MAX);
    g->max_period_ns = o->max_period_ns;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* The 32 hex digits of a boot id ("8-4-4-4-12") as two words; false when
 * the text is not one. */
static bool parse_boot_id(const char *t, uint64_t out[2])
{
    unsigned digits = 0;

    out[0] = out[1] = 0;
    for (; *t && *t != '\n'; t++) {
        int v = hexval(*t);
        if (*t == '-')
            continue;
        if (v < 0 || digits == 32)
            return false;
        out[digits / 16] = out[digits / 16] << 4 | (uint64_t)v;
        digits++;
    }
    return digits == 32;
}

void rl_store_boot_id(uint64_t out[2])
{
    /* Computed once; racing first readers compute the same words. Word 2
     * says the other two are set (release, paired with the acquire). */
    static rl_atomic_u64 cached[3];
    char buf[64];
    uint64_t id[2] = {0, 0};

    if (rl_load_acquire_u64(&cached[2])) {
        out[0] = rl_load_relaxed_u64(&cached[0]);
        out[1] = rl_load_relaxed_u64(&cached[1]);
        return;
    }
    int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t n = read(fd, buf, sizeof buf - 1);
        close(fd);
        buf[n > 0 ? n : 0] = '\0';
        if (!parse_boot_id(buf, id))
            id[0] = id[1] = 0;
    }
    rl_store_relaxed_u64(&cached[0], id[0]);
    rl_store_relaxed_u64(&cached[1], id[1]);
    rl_store_release_u64(&cached[2], 1);
    out[0] = id[0];
    out[1] = id[1];
}

/* Was a segment with this boot id made in another boot? Not when either
 * side does not know (no /proc): a process without /proc must not replace
 * the segments of those with it, over and over. */
static bool other_boot(const uint64_t theirs[2])
{
    uint64_t mine[2];

    rl_store_boot_id(mine);
    if ((mine[0] | mine[1]) == 0 || (theirs[0] | theirs[1]) == 0)
        return (mine[0] | mine[1]) != 0 && (theirs[0] | theirs[1]) == 0;
    return mine[0] != theirs[0] || mine[1] != theirs[1];
}

static uint64_t coarse_now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Point `s` at a mapping whose header has been validated or just built. */
static void bind(struct rl_store *s, void *map, uint64_t len, bool shared)
{
    struct rl_seg_header *h = map;
    unsigned char *base = map;

    s->hdr = h;
    s->map_len = len;
    s->shared = shared;
    s->nslots = h->nslots;
    s->noverflow = h->noverflow;
    s->arena_words = h->arena_words;
    s->overflow_words = h->overflow_words;
    s->slots = (struct rl_seg_slot *)(base + RL_SEG_HEADER_SIZE);
    s->arena = (rl_atomic_u64 *)(base + RL_SEG_HEADER_SIZE +
                                 (uint64_t)(s->nslots + s->noverflow) *
                                     RL_SEG_SLOT_SIZE);
    s->oarena = s->arena + s->arena_words;
}

/* Fill the header of zeroed memory and publish it. */
static void init_header(void *map, uint64_t size, const struct geometry *g,
                        uint64_t hash, uint32_t uid)
{
    struct rl_seg_header *h = map;
    uint64_t boot[2];

    h->magic = RL_LAYOUT_MAGIC;
    h->version = RL_LAYOUT_VERSION;
    h->header_size = RL_SEG_HEADER_SIZE;
    h->total_size = size;
    h->config_hash = hash;
    h->nslots = g->nslots;
    h->noverflow = g->noverflow;
    h->slot_size = RL_SEG_SLOT_SIZE;
    h->uid = uid;
    h->arena_words = g->arena_words;
    h->overflow_words = g->overflow_words;
    rl_store_boot_id(boot);
    h->boot_id[0] = boot[0];
    h->boot_id[1] = boot[1];
    h->max_period_ns = g->max_period_ns;
    rl_store_relaxed_u64(&h->last_used, coarse_now_ns());
    /* Pairs with the acquire load of `ready` in header_ok: every field
     * above is visible to whoever sees READY. */
    rl_store_release_u64(&h->ready, RL_SEG_READY);
}

/* Is this a complete segment of our layout, exactly `size` bytes long? */
static bool header_ok(struct rl_seg_header *h, uint64_t size)
{
    /* Pairs with the release store in init_header. */
    if (rl_load_acquire_u64(&h->ready) != RL_SEG_READY)
        return false;
    if (h->magic != RL_LAYOUT_MAGIC || h->version != RL_LAYOUT_VERSION ||
        h->header_size != RL_SEG_HEADER_SIZE ||
        h->slot_size != RL_SEG_SLOT_SIZE)
        return false;
    return h->total_size == size &&
           rl_seg_size(h->nslots, h->noverflow, h->arena_words,
                       h->overflow_words) == size;
}

static int map_anon(struct rl_store *s, const struct geometry *g, uint64_t hash,
                    uint32_t uid)
{
    uint64_t size =
        rl_seg_size(g->nslots, g->noverflow, g->arena_words, g->overflow_words);
    void *map;

    if (size == 0 || size > SIZE_MAX)
        return -EINVAL;
    /* MAP_SHARED, not MAP_PRIVATE: the memory is still this process's only
     * (nothing else can name it, and exec drops it), but a forked child
     * shares its parent's budgets as SPEC §1 asks, instead of getting a
     * fresh copy of them. Anonymous shared memory starts zeroed. */
    map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
               -1, 0);
    if (map == MAP_FAILED)
        return -errno;
    init_header(map, size, g, hash, uid);
    bind(s, map, size, false);
    return 0;
}

/* Build a complete segment under a fresh temporary name in `dir`. On
 * success `tmp` names it and *map and *size describe its mapping. */
static int build_file(const char *dir, uint32_t uid, const struct geometry *g,
                      uint64_t hash, char *tmp, size_t tmplen, void **map,
                      uint64_t *size)
{
    static rl_atomic_u64 seq;
    uint64_t sz =
        rl_seg_size(g->nslots, g->noverflow, g->arena_words, g->overflow_words);
    int fd = -1;
    int r;

    if (sz == 0 || sz > SIZE_MAX || sz > (uint64_t)INT64_MAX)
        return -EINVAL;
    for (int i = 0; i < 16 && fd < 0; i++) {
        int n = snprintf(tmp, tmplen, "%s/.rlshim-%u.%ld.%llu.tmp", dir, uid,
                         (long)getpid(),
                         (unsigned long long)rl_add_relaxed_u64(&seq, 1));
        if (n < 0 || (size_t)n >= tmplen)
            return -ENAMETOOLONG;
        fd =
            open(tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0 && errno != EEXIST)
            return -errno;
    }
    if (fd < 0)
        return -EEXIST;
    /* The umask may only have removed bits; validation wants exactly 0600. */
    if (fchmod(fd, 0600) < 0) {
        r = -errno;
        goto fail;
    }
    /* Every page now, or ENOSPC now: never a SIGBUS later (see the top). */
    r = posix_fallocate(fd, 0, (off_t)sz);
    if (r != 0) {
        r = -r;
        goto fail;
    }
    *map = mmap(NULL, sz, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (*map == MAP_FAILED) {
        r = -errno;
        goto fail;
    }
    close(fd);
    init_header(*map, sz, g, hash, uid);
    *size = sz;
    return 0;
fail:
    close(fd);
    unlink(tmp);
    return r;
}

/* Why a file we opened is foreign, or NULL when it is ours to use. */
static const char *foreign(const struct stat *st, uid_t uid)
{
    if (!S_ISREG(st->st_mode))
        return "not a regular file";
    if (st->st_uid != uid)
        return "owned by another user";
    if ((st->st_mode & 07777) != 0600)
        return "mode is not 0600";
    return NULL;
}

/* Open `path` without following a link or blocking on a FIFO, and say why
 * it is refused when it is. Returns the fd, or -errno. */
static int open_checked(const char *path, uid_t uid, struct stat *st, char *why,
                        size_t whylen)
{
    const char *bad;
    int fd = open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);

    if (fd < 0) {
        int e = errno;
        if (e == ELOOP)
            say(why, whylen, "state file %s refused: %s", path,
                "it is a symbolic link");
        else if (e != ENOENT)
            say(why, whylen, "state file %s cannot be opened: %s", path,
                strerror(e));
        return e == ELOOP ? -EPERM : -e;
    }
    if (fstat(fd, st) < 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    bad = foreign(st, uid);
    if (bad) {
        say(why, whylen, "state file %s refused: %s", path, bad);
        close(fd);
        return -EPERM;
    }
    return fd;
}

/* Map the file behind `fd` (size from fstat) when it is a valid segment.
 * Returns 1 and fills `s`, 0 when it is not valid (with *hdr_map set to a
 * mapping of its header when it has one, for the stale flag), or -errno. */
static int map_valid(int fd, const struct stat *st, struct rl_store *s,
                     void **hdr_map)
{
    struct rl_seg_header *h;
    uint64_t size = (uint64_t)st->st_size;
    void *map;

    *hdr_map = NULL;
    if (size < RL_SEG_HEADER_SIZE)
        return 0;
    h = mmap(NULL, RL_SEG_HEADER_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
             0);
    if (h == MAP_FAILED)
        return -errno;
    if (!header_ok(h, size) || size > SIZE_MAX) {
        *hdr_map = h;
        return 0;
    }
    munmap(h, RL_SEG_HEADER_SIZE);
    map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED)
        return -errno;
    /* Re-check through the mapping we keep: the file may have been
     * rewritten between the two maps. */
    if (!header_ok(map, size)) {
        munmap(map, size);
        *hdr_map = mmap(NULL, RL_SEG_HEADER_SIZE, PROT_READ | PROT_WRITE,
                        MAP_SHARED, fd, 0);
        if (*hdr_map == MAP_FAILED)
            *hdr_map = NULL;
        return 0;
    }
    bind(s, map, size, true);
    return 1;
}

/* Replace the bad file open as `fd` by a new segment, unless another
 * process has already replaced it. Returns 1 and fills `s` when we did, 0
 * when the caller should look again, or -errno. */
static int replace(const char *dir, const char *path, int fd,
                   const struct stat *st, void *old_hdr,
                   const struct geometry *g, uint64_t hash, uint32_t uid,
                   struct rl_store *s)
{
    char tmp[4096];
    struct stat now;
    uint64_t size;
    void *map;
    int r;

    /* Held a few microseconds; the kernel drops it if we die. */
    if (flock(fd, LOCK_EX) < 0)
        return -errno;
    if (lstat(path, &now) < 0 || now.st_ino != st->st_ino ||
        now.st_dev != st->st_dev) {
        r = 0; /* already replaced (or removed): look again */
        goto out;
    }
    r = build_file(dir, uid, g, hash, tmp, sizeof tmp, &map, &size);
    if (r < 0)
        goto out;
    if (old_hdr) {
        /* Pairs with the relaxed load in rl_store_is_stale: attached
         * processes re-open at their next decision. */
        rl_store_release_u64(&((struct rl_seg_header *)old_hdr)->stale, 1);
    }
    if (rename(tmp, path) < 0) {
        r = -errno;
        unlink(tmp);
        munmap(map, size);
        goto out;
    }
    bind(s, map, size, true);
    r = 1;
out:
    flock(fd, LOCK_UN);
    return r;
}

/* Remove temporary files that a process killed while building a segment
 * left in `dir`: ours (owner and name), regular, older than a minute, and
 * of a pid that no longer exists. Runs only when a segment is being made,
 * which is rare. */
static void sweep_temps(const char *dir, uint32_t uid)
{
    char prefix[32];
    DIR *d = opendir(dir);
    struct dirent *e;
    time_t now = time(NULL);
    int n = snprintf(prefix, sizeof prefix, ".rlshim-%u.", uid);

    if (!d)
        return;
    while ((e = readdir(d))) {
        struct stat st;
        char *end;
        long pid;

        if (strncmp(e->d_name, prefix, (size_t)n) != 0)
            continue;
        errno = 0;
        pid = strtol(e->d_name + n, &end, 10);
        if (errno || end == e->d_name + n || *end != '.' || pid <= 0)
            continue;
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
            !S_ISREG(st.st_mode) || st.st_uid != uid || st.st_mtime > now - 60)
            continue;
        if (kill((pid_t)pid, 0) < 0 && errno == ESRCH)
            unlinkat(dirfd(d), e->d_name, 0);
    }
    closedir(d);
}

/* Is this entry name a segment of `uid` ("rlshim-UID-HASH")? Sets *hash. */
static bool segment_name(const char *name, uint32_t uid, uint64_t *hash)
{
    char prefix[32];
    int n = snprintf(prefix, sizeof prefix, "rlshim-%u-", uid);
    uint64_t h = 0;
    const char *p = name + n;
    int digits = 0;

    if (strncmp(name, prefix, (size_t)n) != 0)
        return false;
    for (; *p; p++, digits++) {
        int v = hexval(*p);
        if (v < 0 || (*p >= 'A' && *p <= 'F') || digits == 16)
            return false;
        h = h << 4 | (uint64_t)v;
    }
    *hash = h;
    return digits == 16;
}

int rl_store_each_segment(const char *dir, uint32_t uid,
                          int (*fn)(uint64_t config_hash, void *arg),
                          void *arg)
{
    DIR *d = opendir(state_dir(dir));
    struct dirent *e;
    int r = 0;

    if (!d)
        return -errno;
    while (r == 0 && (e = readdir(d))) {
        uint64_t hash;

        if (segment_name(e->d_name, uid, &hash))
            r = fn(hash, arg);
    }
    closedir(d);
    return r;
}

/* Remove the segment at `path` (open as `fd`, header mapped at `h`) if it
 * is still the file we looked at: mark it stale first, so that a process
 * still attached to it moves to a new one at its next decision. Under the
 * same flock as replace(), so a replacement and a removal never cross. */
static void remove_segment(const char *path, int fd, const struct stat *st,
                           struct rl_seg_header *h)
{
    struct stat now;

    if (flock(fd, LOCK_EX) < 0)
        return;
    if (lstat(path, &now) == 0 && now.st_ino == st->st_ino &&
        now.st_dev == st->st_dev) {
        /* Pairs with the relaxed load in rl_store_is_stale. */
        rl_store_release_u64(&h->stale, 1);
        unlink(path);
    }
    flock(fd, LOCK_UN);
}

struct sweep {
    const char *dir;
    uint32_t uid;
    uint64_t keep_hash; /* the segment being made: never removed here */
    uint64_t now;
};

/* One segment of the uid: removed when it was made in another boot, or
 * has been unused for longer than its longest period (every budget in it
 * is full again, so it says nothing a new segment would not). */
static int sweep_one(uint64_t hash, void *arg)
{
    struct sweep *w = arg;
    char path[4096];
    struct stat st;
    struct rl_seg_header *h;
    int fd;

    if (hash == w->keep_hash ||
        rl_store_path(path, sizeof path, w->dir, w->uid, hash) < 0)
        return 0;
    fd = open_checked(path, w->uid, &st, NULL, 0);
    if (fd < 0)
        return 0;
    if ((uint64_t)st.st_size < RL_SEG_HEADER_SIZE) {
        close(fd);
        return 0;
    }
    h = mmap(NULL, RL_SEG_HEADER_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
             0);
    if (h != MAP_FAILED) {
        if (header_ok(h, (uint64_t)st.st_size)) {
            uint64_t keep = h->max_period_ns ? h->max_period_ns
                                             : RL_STORE_KEEP_UNKNOWN_NS;
            uint64_t last = rl_load_relaxed_u64(&h->last_used);

            keep += RL_STORE_SWEEP_SLACK_NS;
            if (other_boot(h->boot_id) || (w->now > last && w->now - last > keep))
                remove_segment(path, fd, &st, h);
        }
        munmap(h, RL_SEG_HEADER_SIZE);
    }
    close(fd);
    return 0;
}

static void sweep_old(const char *dir, uint32_t uid, uint64_t keep_hash)
{
    struct sweep w = {dir, uid, keep_hash, coarse_now_ns()};

    rl_store_each_segment(dir, uid, sweep_one, &w);
}

static int open_shared(struct rl_store *s, const struct rl_store_opts *o,
                       const struct geometry *g, char *why, size_t whylen)
{
    const char *dir = state_dir(o->dir);
    char path[4096];
    char tmp[4096];
    int r = rl_store_path(path, sizeof path, o->dir, o->uid, o->config_hash);

    if (r < 0) {
        say(why, whylen, "state dir %s%s: name too long", dir, "");
        return r;
    }
    for (int attempt = 0; attempt < 16; attempt++) {
        struct stat st;
        void *hdr_map;
        void *old_map;
        uint64_t old_len;
        void *map;
        uint64_t size;
        int fd = open_checked(path, o->uid, &st, why, whylen);

        if (fd == -ENOENT) {
            sweep_temps(dir, o->uid);
            sweep_old(dir, o->uid, o->config_hash);
            r = build_file(dir, o->uid, g, o->config_hash, tmp, sizeof tmp,
                           &map, &size);
            if (r < 0) {
                say(why, whylen, "state file %s cannot be made: %s", path,
                    strerror(-r));
                return r;
            }
            r = link(tmp, path) < 0 ? -errno : 0;
            unlink(tmp);
            if (r == 0) {
                bind(s, map, size, true);
                return 0;
            }
            munmap(map, size);
            if (r == -EEXIST)
                continue; /* lost the race: open the winner's */
            say(why, whylen, "state file %s cannot be made: %s", path,
                strerror(-r));
            return r;
        }
        if (fd < 0)
            return fd;
        r = map_valid(fd, &st, s, &hdr_map);
        old_map = hdr_map;
        old_len = RL_SEG_HEADER_SIZE;
        if (r == 1 && s->hdr->config_hash == o->config_hash &&
            !other_boot(s->hdr->boot_id)) {
            close(fd);
            rl_store_relaxed_u64(&s->hdr->last_used, coarse_now_ns());
            return 0;
        }
        if (r == 1) {
            /* Valid, but made for another config (a file renamed by hand)
             * or in an earlier boot, whose clock readings mean nothing
             * now: replace it, and tell its users through the mapping we
             * already have. */
            old_map = s->hdr;
            old_len = s->map_len;
            r = 0;
        }
        if (r == 0)
            r = replace(dir, path, fd, &st, old_map, g, o->config_hash, o->uid,
                        s);
        if (old_map)
            munmap(old_map, old_len);
        close(fd);
        if (r == 1)
            return 0;
        if (r < 0) {
            say(why, whylen, "state file %s cannot be replaced: %s", path,
                strerror(-r));
            return r;
        }
    }
    say(why, whylen, "state file %s: %s", path, "still changing, gave up");
    return -EAGAIN;
}

int rl_store_open(struct rl_store **out, const struct rl_store_opts *o,
                  char *why, size_t whylen)
{
    struct rl_store *s = calloc(1, sizeof *s);
    struct geometry g;
    int r;

    *out = NULL;
    if (why && whylen)
        why[0] = '\0';
    if (!s)
        return -ENOMEM;
    geometry_from(o, &g);
    if (o->shared) {
        r = open_shared(s, o, &g, why, whylen);
        if (r == 0) {
            *out = s;
            return 0;
        }
        memset(s, 0, sizeof *s);
        /* Refused or impossible: budgets in this process, and why says
         * so in the same line. */
        if (why && whylen) {
            size_t n = strlen(why);
            snprintf(why + n, whylen - n, "%s",
                     "; budgets are kept in this process only");
        }
    }
    r = map_anon(s, &g, o->config_hash, o->uid);
    if (r < 0) {
        free(s);
        return r;
    }
    *out = s;
    return 0;
}

int rl_store_attach(struct rl_store **out, const char *dir, uint32_t uid,
                    uint64_t config_hash, char *why, size_t whylen)
{
    struct rl_store *s;
    char path[4096];
    struct stat st;
    void *hdr_map;
    int fd;
    int r;

    *out = NULL;
    if (why && whylen)
        why[0] = '\0';
    r = rl_store_path(path, sizeof path, dir, uid, config_hash);
    if (r < 0)
        return r;
    fd = open_checked(path, uid, &st, why, whylen);
    if (fd == -ENOENT)
        say(why, whylen, "no state file %s%s", path, "");
    if (fd < 0)
        return fd;
    s = calloc(1, sizeof *s);
    if (!s) {
        close(fd);
        return -ENOMEM;
    }
    r = map_valid(fd, &st, s, &hdr_map);
    close(fd);
    if (hdr_map)
        munmap(hdr_map, RL_SEG_HEADER_SIZE);
    if (r == 1 && other_boot(s->hdr->boot_id)) {
        munmap(s->hdr, s->map_len);
        free(s);
        say(why, whylen, "state file %s is %s", path,
            "from an earlier boot (its next user replaces it)");
        return -EINVAL;
    }
    if (r == 1) {
        *out = s;
        return 0;
    }
    free(s);
    if (r == 0) {
        say(why, whylen, "state file %s is %s", path,
            "not a valid segment of this version");
        return -EINVAL;
    }
    return r;
}

void rl_store_close(struct rl_store *s)
{
    if (!s)
        return;
    munmap(s->hdr, s->map_len);
    free(s);
}

bool rl_store_is_shared(const struct rl_store *s)
{
    return s->shared;
}

bool rl_store_is_stale(const struct rl_store *s)
{
    struct rl_seg_header *h = s->hdr;
    uint64_t now = coarse_now_ns();

    /* Relaxed: a statistic of use, read only to judge a segment unused
     * for far longer than RL_STORE_TOUCH_NS. Read first, so that the
     * cache line is written once per RL_STORE_TOUCH_NS, not per call. */
    if (now - rl_load_relaxed_u64(&h->last_used) >= RL_STORE_TOUCH_NS &&
        now > rl_load_relaxed_u64(&h->last_used))
        rl_store_relaxed_u64(&h->last_used, now);
    /* Relaxed: a hint checked on every decision. The replacer's release
     * store (replace) is seen soon enough; the re-open that follows does
     * its own acquire of the new segment's `ready`. */
    return rl_load_relaxed_u64(&h->stale) != 0;
}

void rl_store_describe(const struct rl_store *s, struct rl_store_desc *out)
{
    out->config_hash = s->hdr->config_hash;
    out->max_period_ns = s->hdr->max_period_ns;
    out->last_used_ns = rl_load_relaxed_u64(&s->hdr->last_used);
    out->shared = s->shared;
}

int rl_store_renew(struct rl_store *s, const char *dir, uint32_t uid,
                   char *why, size_t whylen)
{
    const struct geometry g = {s->nslots, s->noverflow, s->arena_words,
                               s->overflow_words, s->hdr->max_period_ns};
    uint64_t hash = s->hdr->config_hash;
    char path[4096];
    struct rl_store fresh;
    struct rl_seg_header *h;
    struct stat st;
    int fd, r;

    if (!s->shared)
        return -EINVAL;
    r = rl_store_path(path, sizeof path, dir, uid, hash);
    if (r < 0)
        return r;
    fd = open_checked(path, uid, &st, why, whylen);
    if (fd < 0) {
        if (fd == -ENOENT)
            say(why, whylen, "no state file %s%s", path, "");
        return fd;
    }
    /* The header of the file at the path now (the one we attached to, or
     * a newer one, renewed again): replace() marks it stale for its
     * users. */
    h = mmap(NULL, RL_SEG_HEADER_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
             0);
    if ((uint64_t)st.st_size < RL_SEG_HEADER_SIZE || h == MAP_FAILED) {
        if (h != MAP_FAILED)
            munmap(h, RL_SEG_HEADER_SIZE);
        h = NULL;
    }
    r = replace(state_dir(dir), path, fd, &st, h, &g, hash, uid, &fresh);
    if (h)
        munmap(h, RL_SEG_HEADER_SIZE);
    close(fd);
    if (r == 1) {
        munmap(fresh.hdr, fresh.map_len);
        return 0;
    }
    say(why, whylen, "state file %s cannot be renewed: %s", path,
        r == 0 ? "it is changing" : strerror(-r));
    return r == 0 ? -EAGAIN : r;
}

uint64_t rl_store_config_hash(const struct rl_store *s)
{
    return s->hdr->config_hash;
}

/* Start of the probe sequence: the tag is a hash already, but fold its
 * high bits in so that tags differing only there spread too. */
static uint32_t home(uint64_t tag, uint32_t n)
{
    return (uint32_t)((tag ^ (tag >> 29) ^ (tag >> 47)) % n);
}

/* Turn a published meta word into `out`. -ENOSPC when the slot got no
 * words (its users overflow); -EINVAL when it has fewer than asked. */
static int resolve(struct rl_store *s, uint32_t index, uint64_t meta,
                   uint32_t nwords, struct rl_slot *out)
{
    bool ovf = index >= s->nslots;
    uint64_t off = meta & RL_META_OFF_MASK;
    uint64_t n = (meta >> RL_META_NWORDS_SHIFT) & RL_META_NWORDS_MAX;
    uint64_t cap = ovf ? s->overflow_words : s->arena_words;

    if (meta & RL_META_FULL)
        return -ENOSPC;
    if (n < nwords)
        return -EINVAL;
    if (off > cap || n > cap - off)
        return -EINVAL; /* not a meta word we would write */
    out->index = index;
    out->counters = s->slots[index].counters;
    out->words = (ovf ? s->oarena : s->arena) + off;
    out->nwords = (uint32_t)n;
    return 0;
}

/* Carve `nwords` from an arena and publish them as the slot's meta with a
 * CAS from 0; whoever publishes first wins (the loser's words are simply
 * left unused). Returns the meta word now published. */
static uint64_t publish(struct rl_store *s, uint32_t index, uint32_t nwords)
{
    struct rl_seg_slot *sl = &s->slots[index];
    bool ovf = index >= s->nslots;
    rl_atomic_u64 *used = ovf ? &s->hdr->overflow_used : &s->hdr->arena_used;
    uint64_t cap = ovf ? s->overflow_words : s->arena_words;
    uint64_t meta = RL_META_READY | RL_META_FULL;
    uint64_t expected = 0;

    if (nwords <= RL_META_NWORDS_MAX && nwords <= cap) {
        /* Relaxed: the words are zero since the file was made, and the
         * meta CAS below publishes the offset. */
        uint64_t off = rl_add_relaxed_u64(used, nwords);
        if (off <= cap - nwords)
            meta = RL_META_READY | ((uint64_t)nwords << RL_META_NWORDS_SHIFT) |
                   off;
    }
    /* Release: the label written before is visible to whoever acquires
     * meta (wait_meta, rl_store_each). */
    if (rl_cas_strong_acq_rel_u64(&sl->meta, &expected, meta))
        return meta;
    return expected;
}

/* Wait for the claimer of a slot to publish its meta; after
 * RL_STORE_CLAIM_WAIT_NS (it may have died between the tag and the meta)
 * publish it ourselves. */
static uint64_t wait_meta(struct rl_store *s, uint32_t index, uint32_t nwords)
{
    rl_atomic_u64 *m = &s->slots[index].meta;
    uint64_t start = 0;
    uint64_t meta;

    for (unsigned spin = 0;; spin++) {
        /* Pairs with the CAS (release) in publish. */
        meta = rl_load_acquire_u64(m);
        if (meta)
            return meta;
        if (spin < 200) {
            rl_cpu_relax();
            continue;
        }
        if (start == 0)
            start = rl_clock_now_ns();
        else if (rl_clock_now_ns() - start > RL_STORE_CLAIM_WAIT_NS)
            return publish(s, index, nwords);
        sched_yield();
    }
}

static void write_label(struct rl_seg_slot *sl, const char *label,
                        bool overflow)
{
    size_t n = 0;
    size_t cut = 0;

    if (!label)
        return;
    while (label[n] && n < RL_STORE_LABEL_MAX - 2) {
        if (label[n] == '|')
            cut = n + 1;
        n++;
    }
    if (overflow) {
        memcpy(sl->label, label, cut);
        sl->label[cut] = '*';
        n = cut + 1;
    } else {
        memcpy(sl->label, label, n);
    }
    sl->label[n] = '\0';
}

/* Find or claim `tag` in slots [base, base + n). */
static int find_or_claim(struct rl_store *s, uint32_t base, uint32_t n,
                         uint64_t tag, const char *label, uint32_t nwords,
                         bool overflow, struct rl_slot *out)
{
    uint32_t h = home(tag, n);

    for (uint32_t i = 0; i < n; i++) {
        uint32_t index = base + (h + i) % n;
        struct rl_seg_slot *sl = &s->slots[index];
        /* Pairs with the CAS below in another claimer. */
        uint64_t cur = rl_load_acquire_u64(&sl->tag);
        uint64_t meta;

        if (cur == 0) {
            if (rl_cas_strong_acq_rel_u64(&sl->tag, &cur, tag)) {
                /* Ours: label first, then publish the meta. */
                write_label(sl, label, overflow);
                meta = publish(s, index, nwords);
                return resolve(s, index, meta, nwords, out);
            }
            /* cur now holds the winner's tag. */
        }
        if (cur != tag)
            continue;
        meta = wait_meta(s, index, nwords);
        return resolve(s, index, meta, nwords, out);
    }
    return -ENOSPC;
}

int rl_store_slot(struct rl_store *s, uint64_t tag, const char *label,
                  uint32_t nwords, uint64_t overflow_tag, struct rl_slot *out,
                  bool *overflowed)
{
    int r;

    if (overflowed)
        *overflowed = false;
    if (tag == 0 || overflow_tag == 0)
        return -EINVAL;
    r = find_or_claim(s, 0, s->nslots, tag, label, nwords, false, out);
    if (r != -ENOSPC)
        return r;
    r = find_or_claim(s, s->nslots, s->noverflow, overflow_tag, label, nwords,
                      true, out);
    if (r == 0 && overflowed)
        *overflowed = true;
    return r;
}

int rl_store_each(struct rl_store *s,
                  int (*fn)(const struct rl_slot_info *info,
                            struct rl_slot *slot, void *arg),
                  void *arg)
{
    uint32_t total = s->nslots + s->noverflow;

    for (uint32_t i = 0; i < total; i++) {
        struct rl_seg_slot *sl = &s->slots[i];
        struct rl_slot_info info;
        struct rl_slot slot;
        uint64_t tag = rl_load_acquire_u64(&sl->tag);
        /* Pairs with the CAS (release) in publish: label is complete. */
        uint64_t meta = rl_load_acquire_u64(&sl->meta);
        int r;

        if (tag == 0 || meta == 0)
            continue;
        memset(&info, 0, sizeof info);
        memset(&slot, 0, sizeof slot);
        info.index = i;
        info.tag = tag;
        info.overflow = i >= s->nslots;
        memcpy(info.label, sl->label, RL_STORE_LABEL_MAX);
        info.label[RL_STORE_LABEL_MAX - 1] = '\0';
        for (unsigned c = 0; c < RL_STORE_COUNTERS; c++)
            info.counters[c] = rl_load_relaxed_u64(&sl->counters[c]);
        if (resolve(s, i, meta, 0, &slot) < 0) {
            slot.index = i;
            slot.counters = sl->counters;
        }
        info.nwords = slot.nwords;
        r = fn(&info, &slot, arg);
        if (r)
            return r;
    }
    return 0;
}

void rl_store_reset_counters(struct rl_store *s, uint32_t index)
{
    if (index >= s->nslots + s->noverflow)
        return;
    for (unsigned c = 0; c < RL_STORE_COUNTERS; c++)
        rl_store_relaxed_u64(&s->slots[index].counters[c], 0);
}

void rl_store_reset_words(struct rl_store *s, uint32_t index, uint32_t first,
                          uint32_t n)
{
    struct rl_slot slot;

    if (index >= s->nslots + s->noverflow)
        return;
    /* Pairs with the CAS (release) in publish. */
    if (resolve(s, index, rl_load_acquire_u64(&s->slots[index].meta), 0,
                &slot) < 0)
        return;
    if (first > slot.nwords || n > slot.nwords - first)
        return;
    for (uint32_t w = first; w < first + n; w++)
        rl_store_relaxed_u64(&slot.words[w], 0);
}

void rl_store_reset_slot(struct rl_store *s, uint32_t index)
{
    struct rl_slot slot;

    if (index >= s->nslots + s->noverflow)
        return;
    /* Pairs with the CAS (release) in publish. */
    if (resolve(s, index, rl_load_acquire_u64(&s->slots[index].meta), 0,
                &slot) == 0)
        rl_store_reset_words(s, index, 0, slot.nwords);
    rl_store_reset_counters(s, index);
}
