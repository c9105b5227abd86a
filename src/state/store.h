/* store.h — the state segment: where budgets live so that every process of
 * a uid shares them, with no daemon.
 *
 * The store knows nothing about quotas. It holds a fixed table of slots,
 * each claimed once (lock-free, CAS) for a 64-bit tag, with storage carved
 * from an arena and allocated on first claim: a printable label,
 * RL_STORE_COUNTERS statistics words and a run of zeroed state words.
 * Limiter algorithms keep their state in those words.
 *
 * Shared mode: one file per uid and config in /dev/shm (or
 * $RLSHIM_STATE_DIR), named rlshim-UID-HASH after the budget-shaping hash of
 * the config, so that two configs in use at once keep apart. Mode 0600,
 * created race-free, sparse: paid for as it is used (its header and slot
 * table at creation, a slot's storage when the slot is first claimed; no
 * process touches a page that was never allocated), validated before it is trusted
 * (magic, layout version, size, config hash, boot id), replaced when it is
 * ours but wrong, refused when it is foreign. The creator of a new segment
 * removes the uid's segments unused for longer than the longest period
 * they hold (every budget in them has refilled) and holding nothing live
 * (no pause running, no pin of a live process: rl_store_hold,
 * rl_store_pin), or made in another boot.
 * Process mode: the same layout in this process's anonymous memory (shared
 * with forked children, gone at exec). The store keeps no file descriptor
 * open.
 *
 * Known limits: a segment deleted by hand is not noticed by processes
 * already attached to it (they keep the orphan, new processes make a new
 * one); a process whose decision is in flight while its segment is swept
 * as unused spends that one decision in the old segment. */
#ifndef RL_STATE_STORE_H
#define RL_STATE_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/atomics.h"

/* Statistics per slot: [kind * RL_STORE_STATS_PER_KIND + stat] with stats
 * allowed, denied, delayed, delayed_ns (see enum rl_stat). */
#define RL_STORE_KINDS 4
#define RL_STORE_STATS_PER_KIND 4
#define RL_STORE_COUNTERS (RL_STORE_KINDS * RL_STORE_STATS_PER_KIND)
#define RL_STORE_LABEL_MAX 64 /* bytes, including the NUL */

enum rl_stat {
    RL_STAT_ALLOWED = 0, /* delayed calls included */
    RL_STAT_DENIED = 1,
    RL_STAT_DELAYED = 2,
    RL_STAT_DELAYED_NS = 3,
};

struct rl_store_opts {
    bool shared;          /* false: process-local memory */
    const char *dir;      /* NULL: $RLSHIM_STATE_DIR, else /dev/shm */
    uint32_t uid;         /* whose segment */
    uint64_t config_hash; /* a segment made for another config is replaced */
    uint32_t nslots;      /* table slots, one per (rule, user); 0: 4096 */
    uint64_t arena_words; /* state words for table slots; 0: 16 a slot */
    /* Overflow slots live apart from the table, with their own arena, so
     * they always exist however full the table is: one per rule is
     * enough. 0: 64 + nslots / 64 slots; 0 words: a quarter of arena_words
     * + 4096. */
    uint32_t noverflow;
    uint64_t overflow_words;
    /* The longest period of any budget in the segment: unused for longer
     * than that, it carries no information and may be removed. 0: not
     * known, kept RL_STORE_KEEP_UNKNOWN_NS. */
    uint64_t max_period_ns;
};

#define RL_STORE_KEEP_UNKNOWN_NS (24ull * 3600 * 1000000000ull) /* a day */
/* last_used is written at most this often, and a segment is removed only
 * this much after its period has passed (the coarse clock's slack). */
#define RL_STORE_TOUCH_NS 100000000ull  /* 100 ms */
#define RL_STORE_SWEEP_SLACK_NS 1000000000ull /* 1 s */

/* Bounds on what opts may ask for; beyond them users overflow. A segment
 * is sparse (only the storage of claimed slots is allocated), so these
 * bound the address space taken, not the memory. */
#define RL_STORE_SLOTS_MAX (1u << 22)
#define RL_STORE_ARENA_MAX (1ull << 27) /* words: 1 GiB */

struct rl_store;

/* A claimed slot, valid while the store is open. */
struct rl_slot {
    uint32_t index;          /* UINT32_MAX when local */
    rl_atomic_u64 *counters; /* RL_STORE_COUNTERS words */
    rl_atomic_u64 *words;    /* the state words asked for at first claim */
    uint32_t nwords;
    bool local; /* the state dir had no room: this process's memory */
};

/* Open (creating or replacing as needed) the segment described by `o`.
 * When a shared segment is refused or cannot be made, falls back to
 * process memory and writes one line into `why` (may be NULL). Returns 0
 * or -errno. */
int rl_store_open(struct rl_store **out, const struct rl_store_opts *o,
                  char *why, size_t whylen);
void rl_store_close(struct rl_store *s);
bool rl_store_is_shared(const struct rl_store *s);

/* Find the slot for `tag` (non-zero), claiming it on first use with
 * `label` and `nwords` zeroed state words. When the table or the arena is
 * full, returns the shared overflow slot for `overflow_tag` instead and
 * sets *overflowed (saying so once is the caller's job). The overflow
 * slot's label is `label` up to and including its last '|', then "*".
 * When a shared segment's state dir has no room for the slot's storage,
 * returns a budget of this process only instead (out->local), the same
 * one to every thread, and says so in one stderr line per budget; the
 * next process to claim `tag` tries the state dir again.
 * Returns 0, -EINVAL (a zero tag, or a slot made with fewer words than
 * asked: another config), or -ENOSPC when even the overflow area is full.
 * Safe from many threads and processes at once; never blocks for long: a
 * claimer that died half-way is taken over after RL_STORE_CLAIM_WAIT_NS. */
int rl_store_slot(struct rl_store *s, uint64_t tag, const char *label,
                  uint32_t nwords, uint64_t overflow_tag, struct rl_slot *out,
                  bool *overflowed);

/* True when the segment this process is attached to has been replaced by
 * another process (or removed as unused); one relaxed load, for the hot
 * path. The caller then re-opens and re-claims its slots. Also records
 * that the segment is in use (last_used, a coarse clock read and at most
 * one relaxed store every RL_STORE_TOUCH_NS): the gate calls it once per
 * decision. */
bool rl_store_is_stale(const struct rl_store *s);

/* The host's two fleet words in s's header (layout.h): shared by every
 * process of the segment. */
rl_atomic_u64 *rl_store_fleet_words(struct rl_store *s);

#define RL_STORE_CLAIM_WAIT_NS 20000000ull /* 20 ms */

/* Add `n` to one counter of a slot (relaxed: statistics only). */
static inline void rl_store_count(const struct rl_slot *sl, unsigned kind,
                                  enum rl_stat stat, uint64_t n)
{
    rl_add_relaxed_u64(&sl->counters[kind * RL_STORE_STATS_PER_KIND + stat], n);
}

/* The slot's request word after its counters (layout.h's struct
 * rl_seg_store, shared or kept in the process alike). */
#define RL_STORE_TLS_UNSEEN RL_STORE_COUNTERS
/* And the one after it: requests answered in the process (SPEC §15). */
#define RL_STORE_RESPONDED (RL_STORE_COUNTERS + 1)

/* The pause table of s (layout.h's struct rl_seg_pauses, its entries
 * after it; policy/pauses.h reads and writes it, and keeps the segment
 * with rl_store_hold while a pause runs): *n entries. */
struct rl_seg_pauses;
struct rl_seg_pauses *rl_store_pauses(struct rl_store *s, uint32_t *n);

/* One more TLS connection whose requests the shim cannot see (SPEC §11):
 * relaxed, like the counters. */
static inline void rl_store_count_tls_unseen(const struct rl_slot *sl)
{
    rl_add_relaxed_u64(&sl->counters[RL_STORE_TLS_UNSEEN], 1);
}

/* `n` more requests answered in the process under on_deny = respond (SPEC
 * §15), kept apart from `denied`: relaxed, like the counters. */
static inline void rl_store_count_responded(const struct rl_slot *sl,
                                            uint64_t n)
{
    rl_add_relaxed_u64(&sl->counters[RL_STORE_RESPONDED], n);
}

/* What keeps a segment from being removed as unused (SPEC §5), whatever
 * its last use (store_live.c). Both are lock-free (atomics, and for a pin
 * at most a kill(2) and a read of /proc per record of a process that may
 * be gone), safe from many processes at once.
 *
 * rl_store_hold: the segment carries information until `until_ns`
 * (CLOCK_MONOTONIC: a pause's end). rl_store_pin: the process `pid`
 * (started at `start`, rl_pid_start) holds something counted in the
 * segment (a max_open connection): kept while that process lives. Made
 * once per process (a cached load after that); a process with no record
 * left keeps the segment for good rather than lose what it holds. */
void rl_store_hold(struct rl_store *s, uint64_t until_ns);
void rl_store_pin(struct rl_store *s, uint32_t pid, uint64_t start);

/* What the segment was made for, for `rlshim stat`. */
uint64_t rl_store_config_hash(const struct rl_store *s);

/* The segment's file name for `uid` and `config_hash` in `dir` (NULL: as
 * rl_store_open). Returns 0 or -ENAMETOOLONG. A name anyone can predict:
 * when another user made a file there first, every process of the uid
 * tries the next names, in this order (rl_store_path_nth 1 ..
 * RL_STORE_NAMES - 1: the same name and ".N"), and they all meet at the
 * first that is theirs (SPEC §5); only when every one is taken are the
 * budgets kept in the process. */
#define RL_STORE_NAMES 8u
int rl_store_path(char *buf, size_t len, const char *dir, uint32_t uid,
                  uint64_t config_hash);
int rl_store_path_nth(char *buf, size_t len, const char *dir, uint32_t uid,
                      uint64_t config_hash, unsigned nth);

/* What `rlshim stat --all` shows of a segment. */
struct rl_store_desc {
    uint64_t config_hash;
    uint64_t max_period_ns;
    uint64_t last_used_ns; /* coarse CLOCK_MONOTONIC ns; 0: never */
    uint64_t size_bytes;      /* the file's length (sparse); 0: not shared */
    uint64_t allocated_bytes; /* what it costs: st_blocks * 512 of the file */
    bool shared;
};
void rl_store_describe(const struct rl_store *s, struct rl_store_desc *out);

/* Read API for `rlshim stat`/`reset`: never disturbs running processes. */
struct rl_slot_info {
    uint32_t index;
    uint64_t tag;
    char label[RL_STORE_LABEL_MAX];
    uint64_t counters[RL_STORE_COUNTERS];
    uint64_t tls_unseen; /* TLS connections whose requests were not seen */
    uint64_t responded;  /* requests answered under on_deny = respond */
    uint32_t nwords;
    bool overflow; /* one of the overflow slots */
};

/* Calls fn for every claimed slot; stops when fn returns non-zero. */
int rl_store_each(struct rl_store *s,
                  int (*fn)(const struct rl_slot_info *info,
                            struct rl_slot *slot, void *arg),
                  void *arg);

/* Zero a slot's state words and counters (a full budget again): one
 * relaxed store per word, so processes keep running; a word being updated
 * by a CAS at that moment keeps the value of whichever lands last. */
void rl_store_reset_slot(struct rl_store *s, uint32_t index);

/* Zero only counters, or only state words [first, first + n) of a slot. */
void rl_store_reset_counters(struct rl_store *s, uint32_t index);
void rl_store_reset_words(struct rl_store *s, uint32_t index, uint32_t first,
                          uint32_t n);

/* Open the existing segment of `uid` and `config_hash` read-write without
 * creating or replacing it (for the CLI). -ENOENT when there is none,
 * -EPERM when it is foreign, -EINVAL when it is not a valid segment of
 * this layout and boot; `why` says which. */
int rl_store_attach(struct rl_store **out, const char *dir, uint32_t uid,
                    uint64_t config_hash, char *why, size_t whylen);

/* Call fn with the config hash of every segment file of `uid` in `dir`
 * (by name: attach each to know more), in no particular order; stops when
 * fn returns non-zero and returns that, else 0 (or -errno when the
 * directory cannot be read). */
int rl_store_each_segment(const char *dir, uint32_t uid,
                          int (*fn)(uint64_t config_hash, void *arg),
                          void *arg);

/* Replace the segment `s` is attached to by a fresh one (every budget
 * full, every counter zero): its users move over at their next decision
 * (rl_store_is_stale). For `rlshim reset` when it cannot tell a
 * segment's layout. Returns 0 or -errno. */
int rl_store_renew(struct rl_store *s, const char *dir, uint32_t uid,
                   char *why, size_t whylen);

#endif
