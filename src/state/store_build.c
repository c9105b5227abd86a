/* store_build.c — a new segment, built complete before anyone sees it:
 * its header filled and published (init_header), in anonymous memory
 * (state = process, or no room for a file) or in a temporary file of the
 * state directory that store_file.c then links into place; and a mapping
 * bound to its struct rl_store. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "state/store_int.h"
#include "util/bootid.h"
#include "util/clock.h"
#include "util/sys.h"

/* Point `s` at a mapping whose header has been validated or just built. */
void rl_seg_bind_map(struct rl_store *s, void *map, uint64_t len, bool shared)
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
    s->arena =
        (rl_atomic_u64 *)(base + rl_seg_fixed_size(s->nslots, s->noverflow));
    s->oarena = s->arena + s->arena_words;
}

void rl_seg_bind_file(struct rl_store *s, const char *path,
                      const struct stat *st)
{
    snprintf(s->path, sizeof s->path, "%s", path);
    s->dev = st->st_dev;
    s->ino = st->st_ino;
    s->allocated = (uint64_t)st->st_blocks * 512;
}

/* Fill the header of zeroed memory and publish it. */
static void init_header(void *map, uint64_t size,
                        const struct rl_seg_geometry *g, uint64_t hash,
                        uint32_t uid)
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
    rl_bootid(boot);
    h->boot_id[0] = boot[0];
    h->boot_id[1] = boot[1];
    h->max_period_ns = g->max_period_ns;
    h->npauses = RL_SEG_PAUSES;
    h->pause_size = RL_SEG_PAUSE_SIZE;
    rl_store_relaxed_u64(&h->last_used, rl_clock_coarse_ns());
    /* Pairs with the acquire load of `ready` in rl_seg_header_ok: every
     * field above is visible to whoever sees READY. */
    rl_store_release_u64(&h->ready, RL_SEG_READY);
}

bool rl_seg_header_ok(struct rl_seg_header *h, uint64_t size)
{
    /* Pairs with the release store in init_header. */
    if (rl_load_acquire_u64(&h->ready) != RL_SEG_READY)
        return false;
    if (h->magic != RL_LAYOUT_MAGIC || h->version != RL_LAYOUT_VERSION ||
        h->header_size != RL_SEG_HEADER_SIZE ||
        h->slot_size != RL_SEG_SLOT_SIZE || h->npauses != RL_SEG_PAUSES ||
        h->pause_size != RL_SEG_PAUSE_SIZE)
        return false;
    return h->total_size == size &&
           rl_seg_size(h->nslots, h->noverflow, h->arena_words,
                       h->overflow_words) == size;
}

int rl_seg_map_anon(struct rl_store *s, const struct rl_seg_geometry *g,
                    uint64_t hash, uint32_t uid)
{
    uint64_t size =
        rl_seg_size(g->nslots, g->noverflow, g->arena_words, g->overflow_words);
    void *map;

    if (size == 0 || size > SIZE_MAX)
        return -EINVAL;
    /* MAP_SHARED, not MAP_PRIVATE: the memory is still this process's only
     * (nothing else can name it, and exec drops it), but a forked child
     * shares its parent's budgets as SPEC §1 asks, instead of getting a
     * fresh copy of them. Anonymous shared memory starts zeroed, and
     * only the pages touched are ever made. */
    map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
               -1, 0);
    if (map == MAP_FAILED)
        return -errno;
    init_header(map, size, g, hash, uid);
    rl_seg_bind_map(s, map, size, false);
    return 0;
}

/* Build a complete segment under a fresh temporary name in `dir`. On
 * success `tmp` names it, *map and *size describe its mapping and *st the
 * file. */
int rl_seg_build_file(const char *dir, uint32_t uid,
                      const struct rl_seg_geometry *g, uint64_t hash, char *tmp,
                      size_t tmplen, void **map, uint64_t *size,
                      struct stat *st)
{
    uint64_t sz =
        rl_seg_size(g->nslots, g->noverflow, g->arena_words, g->overflow_words);
    uint64_t fixed = rl_seg_fixed_size(g->nslots, g->noverflow);
    int fd = -1;
    int r;

    if (sz == 0 || sz > SIZE_MAX || sz > (uint64_t)INT64_MAX)
        return -EINVAL;
    /* pid and the clock make the name unique (a name taken, by a racing
     * thread or a file a dead process left, is tried again later). */
    for (int i = 0; i < 16 && fd < 0; i++) {
        int n = snprintf(tmp, tmplen, "%s/.rlshim-%u.%ld.%llu.tmp", dir, uid,
                         (long)getpid(),
                         (unsigned long long)rl_clock_now_ns() + (unsigned)i);
        if (n < 0 || (size_t)n >= tmplen)
            return -ENAMETOOLONG;
        fd = rl_sys.openat(AT_FDCWD, tmp,
                           O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                           0600);
        if (fd < 0 && errno != EEXIST)
            return -errno;
    }
    if (fd < 0)
        return -EEXIST;
    /* The umask may only have removed bits; validation wants exactly 0600. */
    if (fchmod(fd, 0600) < 0 || ftruncate(fd, (off_t)sz) < 0) {
        r = -errno;
        goto fail;
    }
    /* The fixed part now, or ENOSPC now (see the top). */
    r = posix_fallocate(fd, 0, (off_t)fixed);
    if (r != 0) {
        r = -r;
        goto fail;
    }
    *map = mmap(NULL, sz, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (*map == MAP_FAILED) {
        r = -errno;
        goto fail;
    }
    if (fstat(fd, st) < 0) {
        r = -errno;
        munmap(*map, sz);
        goto fail;
    }
    rl_sys.close(fd);
    init_header(*map, sz, g, hash, uid);
    *size = sz;
    return 0;
fail:
    rl_sys.close(fd);
    unlink(tmp);
    return r;
}
