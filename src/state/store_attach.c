/* store_attach.c — segments this process does not decide in: the CLI's
 * (attach, renew, list), and what the maker of a new segment removes
 * (temporary files of builders that died, the uid's segments that carry
 * no information any more; store.h). Rare: never on a decision's path. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "state/store_int.h"
#include "util/sys.h"
#include "util/clock.h"

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

/* Remove temporary files that a process killed while building a segment
 * left in `dir`: ours (owner and name), regular, older than a minute, and
 * of a pid that no longer exists. Runs only when a segment is being made,
 * which is rare. */
void rl_seg_sweep_temps(const char *dir, uint32_t uid)
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

/* Is this entry name a segment of `uid` ("rlshim-UID-HASH", or one of the
 * next names, "rlshim-UID-HASH.N": store.h)? Sets *hash and *nth. */
static bool segment_name(const char *name, uint32_t uid, uint64_t *hash,
                         unsigned *nth)
{
    char prefix[32];
    int n = snprintf(prefix, sizeof prefix, "rlshim-%u-", uid);
    uint64_t h = 0;
    const char *p = name + n;
    int digits = 0;

    if (strncmp(name, prefix, (size_t)n) != 0)
        return false;
    for (; *p && *p != '.'; p++, digits++) {
        int v = hexval(*p);
        if (v < 0 || digits == 16)
            return false;
        h = h << 4 | (uint64_t)v;
    }
    *hash = h;
    *nth = 0;
    if (*p == '.') {
        if (p[1] < '1' || p[1] >= '0' + (int)RL_STORE_NAMES || p[2] != '\0')
            return false;
        *nth = (unsigned)(p[1] - '0');
    }
    return digits == 16;
}

/* fn(hash, nth, arg) for every entry of `dir` named as a segment of `uid`
 * and owned by it (a file another user made at one of its names is none
 * of its segments). */
static int each_name(const char *dir, uint32_t uid,
                     int (*fn)(uint64_t hash, unsigned nth, void *arg),
                     void *arg)
{
    DIR *d = opendir(rl_seg_state_dir(dir));
    struct dirent *e;
    int r = 0;

    if (!d)
        return -errno;
    while (r == 0 && (e = readdir(d))) {
        uint64_t hash;
        unsigned nth;
        struct stat st;

        if (segment_name(e->d_name, uid, &hash, &nth) &&
            fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
            st.st_uid == uid)
            r = fn(hash, nth, arg);
    }
    closedir(d);
    return r;
}

struct each_hash {
    int (*fn)(uint64_t config_hash, void *arg);
    void *arg;
};

static int one_hash(uint64_t hash, unsigned nth, void *arg)
{
    struct each_hash *w = arg;

    (void)nth; /* attach finds the first name of ours */
    return w->fn(hash, w->arg);
}

int rl_store_each_segment(const char *dir, uint32_t uid,
                          int (*fn)(uint64_t config_hash, void *arg),
                          void *arg)
{
    struct each_hash w = {fn, arg};

    return each_name(dir, uid, one_hash, &w);
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
 * is full again) and holds nothing live (no pause running, no connection
 * of a live process counted: rl_seg_live), so that it says nothing a new
 * segment would not. */
static int sweep_one(uint64_t hash, unsigned nth, void *arg)
{
    struct sweep *w = arg;
    char path[4096];
    struct stat st;
    struct rl_seg_header *h;
    int fd;

    if (hash == w->keep_hash ||
        rl_store_path_nth(path, sizeof path, w->dir, w->uid, hash, nth) < 0)
        return 0;
    fd = rl_seg_open_checked(path, w->uid, &st, NULL, 0);
    if (fd < 0)
        return 0;
    if ((uint64_t)st.st_size < RL_SEG_HEADER_SIZE) {
        rl_sys.close(fd);
        return 0;
    }
    h = mmap(NULL, RL_SEG_HEADER_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
             0);
    if (h != MAP_FAILED) {
        /* A hole where the header should be is no segment of ours: never
         * touched (on a full tmpfs, that would be a SIGBUS). */
        int p = rl_seg_populate(h, RL_SEG_HEADER_SIZE);
        if ((p == 0 || p == -EOPNOTSUPP) &&
            rl_seg_header_ok(h, (uint64_t)st.st_size)) {
            uint64_t keep = h->max_period_ns ? h->max_period_ns
                                             : RL_STORE_KEEP_UNKNOWN_NS;
            uint64_t last = rl_load_relaxed_u64(&h->last_used);

            keep += RL_STORE_SWEEP_SLACK_NS;
            if (rl_seg_other_boot(h->boot_id) ||
                (w->now > last && w->now - last > keep &&
                 !rl_seg_live(h, w->now)))
                remove_segment(path, fd, &st, h);
        }
        munmap(h, RL_SEG_HEADER_SIZE);
    }
    rl_sys.close(fd);
    return 0;
}

void rl_seg_sweep_old(const char *dir, uint32_t uid, uint64_t keep_hash)
{
    struct sweep w = {dir, uid, keep_hash, rl_clock_coarse_ns()};

    each_name(dir, uid, sweep_one, &w);
}


int rl_store_attach(struct rl_store **out, const char *dir, uint32_t uid,
                    uint64_t config_hash, char *why, size_t whylen)
{
    struct rl_store *s;
    char path[RL_SEG_PATH_MAX];
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
    int free_nth;
    fd = rl_seg_open_first(dir, uid, config_hash, path, &st, &free_nth, why,
                           whylen);
    if (fd == -ENOENT && free_nth > 0) {
        /* Its first name is another's: say so rather than "none". */
        rl_seg_say(why, whylen, "state file %s refused: %s", path,
                   "another's file, and none of yours at the names after it");
        return -EPERM;
    }
    if (fd == -ENOENT)
        rl_seg_say(why, whylen, "no state file %s%s", path, "");
    if (fd < 0)
        return fd;
    s = calloc(1, sizeof *s);
    if (!s) {
        rl_sys.close(fd);
        return -ENOMEM;
    }
    r = rl_seg_map_valid(fd, &st, s, &hdr_map);
    rl_sys.close(fd);
    if (hdr_map)
        munmap(hdr_map, RL_SEG_HEADER_SIZE);
    if (r == 1 && rl_seg_other_boot(s->hdr->boot_id)) {
        munmap(s->hdr, s->map_len);
        free(s);
        rl_seg_say(why, whylen, "state file %s is %s", path,
            "from an earlier boot (its next user replaces it)");
        return -EINVAL;
    }
    if (r == 1) {
        rl_seg_bind_file(s, path, &st);
        rl_seg_init_slots(s);
        *out = s;
        return 0;
    }
    free(s);
    if (r == 0) {
        rl_seg_say(why, whylen, "state file %s is %s", path,
            "not a valid segment of this version");
        return -EINVAL;
    }
    return r;
}

int rl_store_renew(struct rl_store *s, const char *dir, uint32_t uid,
                   char *why, size_t whylen)
{
    const struct rl_seg_geometry g = {s->nslots, s->noverflow, s->arena_words,
                               s->overflow_words, s->hdr->max_period_ns};
    uint64_t hash = s->hdr->config_hash;
    char path[RL_SEG_PATH_MAX];
    struct rl_store fresh;
    struct rl_seg_header *h;
    struct stat st;
    int fd, r;

    if (!s->shared)
        return -EINVAL;
    r = rl_store_path(path, sizeof path, dir, uid, hash);
    if (r < 0)
        return r;
    int free_nth;
    fd = rl_seg_open_first(dir, uid, hash, path, &st, &free_nth, why, whylen);
    if (fd < 0) {
        if (fd == -ENOENT)
            rl_seg_say(why, whylen, "no state file %s%s", path, "");
        return fd;
    }
    /* The header of the file at the path now (the one we attached to, or
     * a newer one, renewed again): replace() marks it stale for its
     * users. */
    h = mmap(NULL, RL_SEG_HEADER_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
             0);
    if ((uint64_t)st.st_size < RL_SEG_HEADER_SIZE || h == MAP_FAILED ||
        rl_seg_populate(h, RL_SEG_HEADER_SIZE) == -ENOSPC) {
        if (h != MAP_FAILED)
            munmap(h, RL_SEG_HEADER_SIZE);
        h = NULL;
    }
    r = rl_seg_replace(rl_seg_state_dir(dir), path, fd, &st, h, &g, hash, uid,
                       &fresh);
    if (h)
        munmap(h, RL_SEG_HEADER_SIZE);
    rl_sys.close(fd);
    if (r == 1) {
        munmap(fresh.hdr, fresh.map_len);
        return 0;
    }
    rl_seg_say(why, whylen, "state file %s cannot be renewed: %s", path,
               r == 0 ? "it is changing" : strerror(-r));
    return r == 0 ? -EAGAIN : r;
}

