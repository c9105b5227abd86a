/* store_int.h — what the three halves of the store share, and nothing
 * else may use: store_file.c (the segment file: make, validate, open,
 * replace), store_attach.c (the CLI's attach and renew, and the sweep of
 * what no longer carries information) and store_slot.c (slots, their
 * storage and counters, allocating it as it is claimed, and budgets kept
 * in this process when the state dir is full). */
#ifndef RL_STATE_STORE_INT_H
#define RL_STATE_STORE_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "state/layout.h"
#include "state/store.h"

#define RL_SEG_PATH_MAX 4096

struct rl_local; /* a budget kept in this process only (store_slot.c) */

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
    /* The file behind a shared mapping: what `rlshim stat --all` reports,
     * and a way to allocate a range where madvise cannot (rl_seg_alloc). */
    char path[RL_SEG_PATH_MAX];
    dev_t dev;
    ino_t ino;
    uint64_t allocated; /* st_blocks * 512 when attached */
    /* Budgets that found no room, this process's (store_slot.c). A list
     * pushed with CAS, freed with the store. */
    _Atomic(struct rl_local *) locals;
    /* A bit per slot whose storage this process has made sure of, so that
     * a claim made again (a max_open area, per connect) costs no system
     * call; NULL: every claim makes sure. Relaxed: a lost bit costs one
     * madvise more. */
    _Atomic(unsigned char) *sure;
    /* pid << 32 | 1 of the process (or the holder a thread acts for)
     * whose pin (rl_store_pin) was last found here: relaxed, a cache. */
    _Atomic uint64_t pinned;
};

/* Give `s` its `sure` bits (store_slot.c); without memory it has none. */
void rl_seg_init_slots(struct rl_store *s);

struct rl_seg_geometry {
    uint32_t nslots;
    uint32_t noverflow;
    uint64_t arena_words;
    uint64_t overflow_words;
    uint64_t max_period_ns;
};

/* Map the file behind `fd` (size from fstat) when it is a valid segment.
 * Returns 1 and fills `s`, 0 when it is not valid (with *hdr_map set to a
 * mapping of its header when it has one, for the stale flag), or -errno. */
int rl_seg_map_valid(int fd, const struct stat *st, struct rl_store *s,
                     void **hdr_map);

/* Replace the bad file open as `fd` by a new segment, unless another
 * process has already replaced it. Returns 1 and fills `s` when we did, 0
 * when the caller should look again, or -errno. */
int rl_seg_replace(const char *dir, const char *path, int fd,
                   const struct stat *st, void *old_hdr,
                   const struct rl_seg_geometry *g, uint64_t hash,
                   uint32_t uid, struct rl_store *s);

/* Record the file `s` maps (path, identity, its allocated bytes now). */
/* store_build.c: point s at a mapping whose header has been validated or
 * just built; a new segment for geometry g in anonymous memory (0 or
 * -errno); one built complete in a fresh temporary file of `dir`, named
 * in tmp, mapped at *map of *size bytes, its file *st (0 or -errno). */
void rl_seg_bind_map(struct rl_store *s, void *map, uint64_t len, bool shared);
int rl_seg_map_anon(struct rl_store *s, const struct rl_seg_geometry *g,
                    uint64_t hash, uint32_t uid);
int rl_seg_build_file(const char *dir, uint32_t uid,
                      const struct rl_seg_geometry *g, uint64_t hash, char *tmp,
                      size_t tmplen, void **map, uint64_t *size,
                      struct stat *st);

void rl_seg_bind_file(struct rl_store *s, const char *path,
                      const struct stat *st);

/* The directory meant by `dir` (NULL or "": $RLSHIM_STATE_DIR, else
 * /dev/shm). */
const char *rl_seg_state_dir(const char *dir);

/* snprintf(why, whylen, fmt, path, what) when why is not NULL. */
void rl_seg_say(char *why, size_t whylen, const char *fmt, const char *path,
                const char *what);

/* Was a segment with this boot id made in another boot? */
bool rl_seg_other_boot(const uint64_t theirs[2]);

/* Is the header at `h` a complete segment of our layout, exactly `size`
 * bytes long? Reads only the header (which must be allocated). */
bool rl_seg_header_ok(struct rl_seg_header *h, uint64_t size);

/* Open `path` read-write without following a link or blocking on a FIFO;
 * -EPERM (and `why` says why) when it is not ours to use. The fd, or
 * -errno. */
int rl_seg_open_checked(const char *path, uid_t uid, struct stat *st,
                        char *why, size_t whylen);

/* Open the first of the RL_STORE_NAMES names of the segment of `uid` and
 * `hash` in `dir` that is ours to use (rl_seg_open_checked), skipping
 * those another made (foreign, or that we may not open: EACCES); its name
 * into `path` (RL_SEG_PATH_MAX bytes). The fd; -ENOENT when none is ours
 * and *free_nth is the first name free; -EPERM (and `why` says so) when
 * every name is taken; or another -errno. */
int rl_seg_open_first(const char *dir, uint32_t uid, uint64_t hash,
                      char *path, struct stat *st, int *free_nth, char *why,
                      size_t whylen);

/* Make sure the pages of [p, p + len) inside the store's mapping exist,
 * so that touching them can never fault: 0, or -ENOSPC (the state dir is
 * full), -ENOMEM, or another -errno. Never a SIGBUS. */
int rl_seg_alloc(struct rl_store *s, void *p, uint64_t len);

/* The same for memory mapped from a file that may be sparse, outside any
 * store (a header being validated): -EOPNOTSUPP when the kernel cannot
 * tell (no MADV_POPULATE_WRITE). */
int rl_seg_populate(void *p, uint64_t len);

/* Remove the temporary files of dead builders, and the uid's segments
 * that carry no information any more (store_attach.c). */
void rl_seg_sweep_temps(const char *dir, uint32_t uid);
void rl_seg_sweep_old(const char *dir, uint32_t uid, uint64_t keep_hash);

/* Does the segment whose header is `h` hold something live at `now`
 * (store_live.c): a hold not yet over, a pin of a live process, or a lost
 * pin? Then it is never removed as unused. */
bool rl_seg_live(struct rl_seg_header *h, uint64_t now);

/* Free what store_slot.c keeps for `s`: the budgets kept in this process,
 * the sure bits. */
void rl_seg_free_locals(struct rl_store *s);

#endif
