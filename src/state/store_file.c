/* store_file.c — the segment file: make (built by store_build.c),
 * validate, attach and replace it (layout.h; its ranges are allocated by
 * store_slot.c).
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
 * process to make a segment sweeps such files away, and the uid's segments
 * that no longer carry information with them (store_sweep.c).
 *
 * Memory is paid for as it is used: the file is given its whole length
 * (ftruncate, sparse) and only its fixed part (header and slot tables) is
 * allocated at creation (posix_fallocate: on a full tmpfs the creation
 * fails, the temporary file is removed and the process keeps its budgets
 * in its own memory). A slot's storage is allocated when it is first
 * claimed (rl_seg_alloc, from store_slot.c), before anyone touches it: a
 * page of a sparse file maps fine and kills its host with SIGBUS at the
 * first touch when tmpfs has no page to give. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/fsuid.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "state/store_int.h"
#include "util/bootid.h"
#include "util/sys.h"
#include "util/clock.h"

void rl_seg_say(char *why, size_t whylen, const char *fmt, const char *path,
                const char *what)
{
    if (why && whylen)
        snprintf(why, whylen, fmt, path, what);
}

const char *rl_seg_state_dir(const char *dir)
{
    const char *env;

    if (dir && dir[0])
        return dir;
    env = secure_getenv("RLSHIM_STATE_DIR");
    if (env && env[0])
        return env;
    return "/dev/shm";
}

int rl_store_path_nth(char *buf, size_t len, const char *dir, uint32_t uid,
                      uint64_t config_hash, unsigned nth)
{
    int n = nth == 0 ? snprintf(buf, len, "%s/rlshim-%u-%016llx",
                                rl_seg_state_dir(dir), uid,
                                (unsigned long long)config_hash)
                     : snprintf(buf, len, "%s/rlshim-%u-%016llx.%u",
                                rl_seg_state_dir(dir), uid,
                                (unsigned long long)config_hash, nth);

    if (n < 0 || (size_t)n >= len)
        return -ENAMETOOLONG;
    return 0;
}

int rl_store_path(char *buf, size_t len, const char *dir, uint32_t uid,
                  uint64_t config_hash)
{
    return rl_store_path_nth(buf, len, dir, uid, config_hash, 0);
}

int rl_seg_open_first(const char *dir, uint32_t uid, uint64_t hash,
                      char *path, struct stat *st, int *free_nth, char *why,
                      size_t whylen)
{
    char said[256] = "";
    bool taken = false;

    *free_nth = -1;
    for (unsigned k = 0; k < RL_STORE_NAMES; k++) {
        char p[RL_SEG_PATH_MAX];
        int r = rl_store_path_nth(p, sizeof p, dir, uid, hash, k);
        if (r < 0)
            return r;
        char other[256] = "";
        /* The line names the first name; the others only their own
         * error, when it is not a name taken. */
        char *say = k == 0 ? said : other;
        int fd = rl_seg_open_checked(p, uid, st, say, sizeof said);
        if (fd >= 0) {
            memcpy(path, p, sizeof p);
            return fd;
        }
        if (fd == -ENOENT) {
            if (*free_nth < 0)
                *free_nth = (int)k;
            continue;
        }
        /* Another's file (or one we may not open) at a name anyone can
         * create first: the next name. */
        if (fd != -EPERM && fd != -EACCES && fd != -EISDIR && fd != -ENXIO) {
            rl_seg_say(why, whylen, "%s%s", say, "");
            return fd;
        }
        taken = true;
    }
    if (*free_nth >= 0 || !taken)
        return -ENOENT;
    if (why && whylen)
        snprintf(why, whylen, "%s, and the %u names after it are taken too",
                 said, RL_STORE_NAMES - 1);
    return -EPERM;
}

static uint64_t clamp(uint64_t v, uint64_t max)
{
    return v < max ? v : max;
}

/* The caller asks for state words; every slot's storage also carries its
 * label and counters and is rounded to a line (layout.h), which the arenas
 * add. They are address space, not memory, until claimed. */
static void geometry_from(const struct rl_store_opts *o, struct rl_seg_geometry *g)
{
    const uint64_t head = RL_SEG_STORE_WORDS + RL_SEG_CARVE_WORDS - 1;
    uint64_t words;

    g->nslots =
        o->nslots ? (uint32_t)clamp(o->nslots, RL_STORE_SLOTS_MAX) : 4096;
    words = clamp(o->arena_words ? o->arena_words : 16ull * g->nslots,
                  RL_STORE_ARENA_MAX);
    g->noverflow = o->noverflow
                       ? (uint32_t)clamp(o->noverflow, RL_STORE_SLOTS_MAX)
                       : 64 + g->nslots / 64;
    g->overflow_words =
        clamp(o->overflow_words ? o->overflow_words : words / 4 + 4096,
              RL_STORE_ARENA_MAX) +
        g->noverflow * head;
    g->arena_words = words + g->nslots * head;
    g->max_period_ns = o->max_period_ns;
}

/* Not when either side does not know (no /proc): a process without /proc
 * must not replace the segments of those with it, over and over. */
bool rl_seg_other_boot(const uint64_t theirs[2])
{
    uint64_t mine[2];

    rl_bootid(mine);
    if ((mine[0] | mine[1]) == 0 || (theirs[0] | theirs[1]) == 0)
        return (mine[0] | mine[1]) != 0 && (theirs[0] | theirs[1]) == 0;
    return mine[0] != theirs[0] || mine[1] != theirs[1];
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

int rl_seg_open_checked(const char *path, uid_t uid, struct stat *st,
                        char *why, size_t whylen)
{
    const char *bad;
    int fd = rl_sys.openat(AT_FDCWD, path,
                           O_RDWR | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0);

    if (fd < 0) {
        int e = errno;
        if (e == ELOOP)
            rl_seg_say(why, whylen, "state file %s refused: %s", path,
                       "it is a symbolic link");
        else if (e != ENOENT)
            rl_seg_say(why, whylen, "state file %s cannot be opened: %s",
                       path, strerror(e));
        return e == ELOOP ? -EPERM : -e;
    }
    if (fstat(fd, st) < 0) {
        int e = errno;
        rl_sys.close(fd);
        return -e;
    }
    bad = foreign(st, uid);
    if (bad) {
        rl_seg_say(why, whylen, "state file %s refused: %s", path, bad);
        rl_sys.close(fd);
        return -EPERM;
    }
    return fd;
}

/* Could these bytes of a file we did not build be touched without a
 * fault? Not when they are a hole that tmpfs cannot fill. */
static bool touchable(void *p, uint64_t len)
{
    int r = rl_seg_populate(p, len);

    return r == 0 || r == -EOPNOTSUPP;
}

int rl_seg_map_valid(int fd, const struct stat *st, struct rl_store *s,
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
    if (!touchable(h, RL_SEG_HEADER_SIZE)) {
        munmap(h, RL_SEG_HEADER_SIZE);
        return -ENOSPC; /* a hole at the header of a full tmpfs */
    }
    if (!rl_seg_header_ok(h, size) || size > SIZE_MAX) {
        *hdr_map = h;
        return 0;
    }
    munmap(h, RL_SEG_HEADER_SIZE);
    map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED)
        return -errno;
    /* Re-check through the mapping we keep: the file may have been
     * rewritten between the two maps. The tables are read on every
     * claim: they must exist (they do in every file we made). */
    if (!rl_seg_header_ok(map, size) ||
        !touchable(map, rl_seg_fixed_size(((struct rl_seg_header *)map)->nslots,
                                          ((struct rl_seg_header *)map)
                                              ->noverflow))) {
        munmap(map, size);
        *hdr_map = mmap(NULL, RL_SEG_HEADER_SIZE, PROT_READ | PROT_WRITE,
                        MAP_SHARED, fd, 0);
        if (*hdr_map == MAP_FAILED)
            *hdr_map = NULL;
        return 0;
    }
    rl_seg_bind_map(s, map, size, true);
    return 1;
}

int rl_seg_replace(const char *dir, const char *path, int fd,
                   const struct stat *st, void *old_hdr,
                   const struct rl_seg_geometry *g, uint64_t hash, uint32_t uid,
                   struct rl_store *s)
{
    char tmp[RL_SEG_PATH_MAX];
    struct stat now, made;
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
    r = rl_seg_build_file(dir, uid, g, hash, tmp, sizeof tmp, &map, &size,
                          &made);
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
    rl_seg_bind_map(s, map, size, true);
    rl_seg_bind_file(s, path, &made);
    r = 1;
out:
    flock(fd, LOCK_UN);
    return r;
}

static int open_shared(struct rl_store *s, const struct rl_store_opts *o,
                       const struct rl_seg_geometry *g, char *why, size_t whylen)
{
    const char *dir = rl_seg_state_dir(o->dir);
    char path[RL_SEG_PATH_MAX];
    char tmp[RL_SEG_PATH_MAX];
    int r = rl_store_path(path, sizeof path, o->dir, o->uid, o->config_hash);

    if (r < 0) {
        rl_seg_say(why, whylen, "state dir %s%s: name too long", dir, "");
        return r;
    }
    for (int attempt = 0; attempt < 16; attempt++) {
        struct stat st, made;
        void *hdr_map;
        void *old_map;
        uint64_t old_len;
        void *map;
        uint64_t size;
        int free_nth;
        /* The first of the segment's names that is ours (SPEC §5: every
         * process of the uid meets there, whatever others made at the
         * names before it); else a new one at the first free name. */
        int fd = rl_seg_open_first(o->dir, o->uid, o->config_hash, path, &st,
                                   &free_nth, why, whylen);

        if (fd == -ENOENT) {
            r = rl_store_path_nth(path, sizeof path, o->dir, o->uid,
                                  o->config_hash, (unsigned)free_nth);
            if (r < 0)
                return r;
            rl_seg_sweep_temps(dir, o->uid);
            rl_seg_sweep_old(dir, o->uid, o->config_hash);
            r = rl_seg_build_file(dir, o->uid, g, o->config_hash, tmp,
                                  sizeof tmp, &map, &size, &made);
            if (r < 0) {
                rl_seg_say(why, whylen, "state file %s cannot be made: %s",
                           path, strerror(-r));
                return r;
            }
            r = link(tmp, path) < 0 ? -errno : 0;
            unlink(tmp);
            if (r == 0) {
                rl_seg_bind_map(s, map, size, true);
                rl_seg_bind_file(s, path, &made);
                return 0;
            }
            munmap(map, size);
            if (r == -EEXIST)
                continue; /* lost the race: open the winner's */
            rl_seg_say(why, whylen, "state file %s cannot be made: %s", path,
                       strerror(-r));
            return r;
        }
        if (fd < 0)
            return fd;
        r = rl_seg_map_valid(fd, &st, s, &hdr_map);
        old_map = hdr_map;
        old_len = RL_SEG_HEADER_SIZE;
        if (r == 1 && s->hdr->config_hash == o->config_hash &&
            !rl_seg_other_boot(s->hdr->boot_id)) {
            rl_sys.close(fd);
            rl_seg_bind_file(s, path, &st);
            rl_store_relaxed_u64(&s->hdr->last_used, rl_clock_coarse_ns());
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
            r = rl_seg_replace(dir, path, fd, &st, old_map, g, o->config_hash,
                               o->uid, s);
        if (old_map)
            munmap(old_map, old_len);
        rl_sys.close(fd);
        if (r == 1)
            return 0;
        if (r < 0) {
            rl_seg_say(why, whylen, "state file %s cannot be replaced: %s",
                       path, strerror(-r));
            return r;
        }
    }
    rl_seg_say(why, whylen, "state file %s: %s", path,
               "still changing, gave up");
    return -EAGAIN;
}

/* A privileged program (setuid root run by a user: its euid is not the uid
 * its segment is named by) makes and opens the segment as that user, so
 * the file is theirs like every other process's of theirs, and the user's
 * own processes share the budget with it. setfsuid changes, for the
 * calling thread only, nothing but whose files these are. */
static int open_as_user(struct rl_store *s, const struct rl_store_opts *o,
                        const struct rl_seg_geometry *g, char *why,
                        size_t whylen)
{
    bool as_user = geteuid() != (uid_t)o->uid;
    int was_uid = 0, was_gid = 0;
    if (as_user) {
        was_gid = setfsgid(getgid());
        was_uid = setfsuid((uid_t)o->uid);
    }
    int r = open_shared(s, o, g, why, whylen);
    if (as_user) {
        setfsuid((uid_t)was_uid);
        setfsgid((gid_t)was_gid);
    }
    return r;
}

int rl_store_open(struct rl_store **out, const struct rl_store_opts *o,
                  char *why, size_t whylen)
{
    struct rl_store *s = calloc(1, sizeof *s);
    struct rl_seg_geometry g;
    int r;

    *out = NULL;
    if (why && whylen)
        why[0] = '\0';
    if (!s)
        return -ENOMEM;
    geometry_from(o, &g);
    if (o->shared) {
        r = open_as_user(s, o, &g, why, whylen);
        if (r == 0) {
            rl_seg_init_slots(s);
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
    r = rl_seg_map_anon(s, &g, o->config_hash, o->uid);
    if (r < 0) {
        free(s);
        return r;
    }
    rl_seg_init_slots(s);
    *out = s;
    return 0;
}

void rl_store_close(struct rl_store *s)
{
    if (!s)
        return;
    rl_seg_free_locals(s);
    munmap(s->hdr, s->map_len);
    free(s);
}

bool rl_store_is_shared(const struct rl_store *s)
{
    return s->shared;
}

rl_atomic_u64 *rl_store_fleet_words(struct rl_store *s)
{
    return s->hdr->fleet;
}

struct rl_seg_pauses *rl_store_pauses(struct rl_store *s, uint32_t *n)
{
    *n = RL_SEG_PAUSES;
    return (struct rl_seg_pauses *)((unsigned char *)s->hdr +
                                    rl_seg_pauses_off(s->nslots,
                                                      s->noverflow));
}

bool rl_store_is_stale(const struct rl_store *s)
{
    struct rl_seg_header *h = s->hdr;
    uint64_t now = rl_clock_coarse_ns();

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
    struct stat st;

    out->config_hash = s->hdr->config_hash;
    out->max_period_ns = s->hdr->max_period_ns;
    out->last_used_ns = rl_load_relaxed_u64(&s->hdr->last_used);
    out->shared = s->shared;
    out->size_bytes = s->shared ? s->map_len : 0;
    /* What the file costs now, when the path still names it; else what it
     * cost when attached. */
    out->allocated_bytes = s->allocated;
    if (s->shared && stat(s->path, &st) == 0 && st.st_dev == s->dev &&
        st.st_ino == s->ino)
        out->allocated_bytes = (uint64_t)st.st_blocks * 512;
}

uint64_t rl_store_config_hash(const struct rl_store *s)
{
    return s->hdr->config_hash;
}

