/* layout.h — the bytes of a state segment, shared by every process of a uid
 * and by every build that carries the same RL_LAYOUT_VERSION.
 *
 * Fixed-width only: uint32_t, uint64_t, 64-bit atomic words and chars; no
 * pointers, no long. One exception, in the arena: a sliding window's first
 * RL_OWNERLOCK_WORDS state words hold a robust process-shared
 * pthread_mutex_t (util/ownerlock.c), and so does the pause table's head
 * (in the fixed part), because only the kernel's robust
 * futex list releases a lock whose holder was killed, at once and in any
 * PID namespace, while its waiters sleep. Its bytes are glibc's ABI for
 * process-shared mutexes (the same in every process of one host's libc);
 * its size is pinned below so that it can never outgrow its words. Any
 * change to a field, its size or
 * its offset bumps RL_LAYOUT_VERSION; the _Static_asserts below and the unit
 * test `layout` pin them, so a change cannot go unnoticed.
 *
 * A segment is, in order:
 *   struct rl_seg_header                 (RL_SEG_HEADER_SIZE bytes)
 *   struct rl_seg_slot[nslots]           the table, open addressing
 *   struct rl_seg_slot[noverflow]        overflow slots, reserved up front
 *   (zero padding up to 64 bytes)
 *   struct rl_seg_pauses                 the pause table (SPEC §12): its
 *   struct rl_seg_pause[RL_SEG_PAUSES]   head, then its entries
 *   (zero padding up to RL_SEG_ALIGN)    the end of the fixed part
 *   uint64 arena[arena_words]            storage of table slots
 *   uint64 overflow_arena[overflow_words] storage of overflow slots
 * A slot's storage, carved from its arena when the slot is first claimed,
 * is a struct rl_seg_store (its label and counters) and then the state
 * words asked for, rounded up to RL_SEG_CARVE_WORDS words.
 *
 * The memory is paid for as it is used (SPEC §5): the file is as long as
 * the whole layout but sparse. Its fixed part (header and slot tables, 16
 * bytes a slot) is allocated when the file is made (posix_fallocate: a
 * full tmpfs is an error then); a slot's storage is allocated by its
 * claimer before it is published (store_slot.c), and again (a no-op, or
 * an error instead of a fault) by every process before it touches it. No
 * process ever touches a page that was not allocated: on tmpfs that is a
 * SIGBUS. Zero is what every state word and counter starts at. */
#ifndef RL_STATE_LAYOUT_H
#define RL_STATE_LAYOUT_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "state/store.h"
#include "util/atomics.h"
#include "util/ownerlock.h"

#define RL_LAYOUT_MAGIC 0x47455348534c5200ull /* "\0RLSHSEG" little-endian */
#define RL_LAYOUT_VERSION 9u
#define RL_SEG_READY 0x5245414459ull /* "READY": anything else is not */

/* Written once by the process that builds the segment, before the segment
 * is published (link/rename into place, after the release store of
 * `ready`); read-only after that, except:
 *   ready      release store by the creator in build_segment; readers load
 *              it with acquire (validate) before trusting any other field;
 *   stale      set to 1 (release) by a process that replaces this segment;
 *              attached processes poll it with one relaxed load
 *              (rl_store_is_stale) and re-open;
 *   arena_used, overflow_used
 *              bump allocators of address space (never of memory: a
 *              range is allocated after it is carved), atomic fetch-add
 *              by any claimer;
 *   last_used  CLOCK_MONOTONIC_COARSE ns of the latest decision, relaxed
 *              stores by any user at most every RL_STORE_TOUCH_NS, read
 *              by the creator of another segment to remove this one once
 *              it has been unused for longer than max_period_ns;
 *   fleet      the host's words of its fleet budgets (fleet.h's
 *              RL_FLEET_HOST_*: when Redis last came back, how many hosts
 *              it counted), relaxed loads and stores by any process;
 *   hold_until CLOCK_MONOTONIC ns until which the segment carries
 *              information whatever its last use: the latest end of any
 *              pause the pause table has held, only ever moved later (CAS,
 *              by whoever sets a pause), read by the sweep from the header
 *              alone;
 *   npauses, pause_size
 *              the pause table's entries and their size (RL_SEG_PAUSES,
 *              sizeof(struct rl_seg_pause)), checked when validated;
 *   pins, pins_lost
 *              the processes that hold something counted here while they
 *              live (a max_open connection): each record pid << 32 | 1
 *              and the pid's start time, claimed by CAS from 0 (start
 *              written first), taken over from a process that is gone;
 *              pins_lost counts pins that found no record.
 * No segment whose hold_until is still ahead, or that a live process
 * pins (or whose pins were lost), is removed as unused (SPEC §5).
 * boot_id is /proc/sys/kernel/random/boot_id as 16 bytes: CLOCK_MONOTONIC
 * readings (the window's stamps, the bucket's time) mean nothing in another
 * boot, so a segment of another boot is replaced, never trusted. */
#define RL_SEG_PINS 32u /* processes pinning a segment at once */

struct rl_seg_header {
    uint64_t magic;          /* RL_LAYOUT_MAGIC */
    uint32_t version;        /* RL_LAYOUT_VERSION */
    uint32_t header_size;    /* sizeof(struct rl_seg_header) */
    uint64_t total_size;     /* bytes of the whole (sparse) file */
    uint64_t config_hash;    /* the config this segment was made for */
    uint32_t nslots;         /* table slots */
    uint32_t noverflow;      /* overflow slots after the table */
    uint32_t slot_size;      /* sizeof(struct rl_seg_slot) */
    uint32_t uid;            /* the owner, for `rlshim stat` */
    uint64_t arena_words;    /* words in the table arena, storage heads
                                included */
    uint64_t overflow_words; /* words in the overflow arena, likewise */
    rl_atomic_u64 ready;     /* RL_SEG_READY once built */
    rl_atomic_u64 stale;     /* non-zero: replaced, re-open */
    rl_atomic_u64 arena_used;
    rl_atomic_u64 overflow_used;
    uint64_t boot_id[2];     /* the boot it was made in; 0: unknown */
    uint64_t max_period_ns;  /* the longest period of its budgets */
    rl_atomic_u64 last_used; /* coarse monotonic ns */
    rl_atomic_u64 fleet[2];  /* the host's fleet words (fleet.h) */
    rl_atomic_u64 hold_until; /* kept until then (ns), whatever its use */
    rl_atomic_u64 pins_lost;  /* pins that found no record */
    uint32_t npauses;         /* RL_SEG_PAUSES */
    uint32_t pause_size;      /* sizeof(struct rl_seg_pause) */
    rl_atomic_u64 pins[RL_SEG_PINS][2]; /* pid << 32 | 1, start time */
};

#define RL_SEG_HEADER_SIZE (168u + 16u * RL_SEG_PINS)

/* A slot's meta word says where its storage is and how far it got:
 *   0                     tag claimed (or not), nothing carved yet
 *   PENDING | n | off     storage carved at `off`, being allocated
 *   PENDING | NOSPACE ... its allocation failed (the state dir is full):
 *                         the next claimer of the tag tries again
 *   READY | n | off       allocated and labelled: published
 *   READY | FULL          no storage could be carved: its users overflow
 * Every change is a CAS (acq_rel) from the value seen: 0 -> PENDING by the
 * carver (or READY|FULL), PENDING -> READY by whoever allocated the range
 * and wrote the label, PENDING -> PENDING|NOSPACE -> PENDING by a failed
 * and a new attempt. Readers load it with acquire (pairs with the CAS to
 * READY in store_slot.c): label and counters are complete then. A claimer
 * that sits in PENDING (or 0) longer than RL_STORE_CLAIM_WAIT_NS (it may
 * have died) is taken over: the range is allocated again (a no-op) by the
 * one who waited, and published. */
#define RL_META_READY (1ull << 63) /* published */
#define RL_META_FULL (1ull << 62)  /* no words could be had: overflow */
#define RL_META_NWORDS_SHIFT 40    /* bits 40..61: nwords (< 2^22) */
#define RL_META_NWORDS_MAX ((1ull << 22) - 1)
#define RL_META_PENDING (1ull << 39) /* carved, not yet allocated */
#define RL_META_NOSPACE (1ull << 38) /* its allocation failed last */
#define RL_META_OFF_MASK ((1ull << 38) - 1) /* bits 0..37: arena offset */

/* One per (rule, user) in the fixed table: what is claimed, and where its
 * storage is. tag is claimed once with CAS 0 -> tag and never changes
 * after; meta as above. */
struct rl_seg_slot {
    rl_atomic_u64 tag;
    rl_atomic_u64 meta;
};

#define RL_SEG_SLOT_SIZE 16u

/* The head of a slot's storage in the arena. label is written by the
 * publisher before meta turns READY; counters are statistics, relaxed
 * adds, read by `rlshim stat` without synchronisation and zeroed by
 * `rlshim reset`. The state words that follow belong to the limiter
 * algorithms. */
struct rl_seg_store {
    char label[RL_STORE_LABEL_MAX];
    rl_atomic_u64 counters[RL_STORE_COUNTERS];
    /* Requests (SPEC §11): TLS connections whose requests could not be
     * counted (relaxed adds, like the counters). */
    rl_atomic_u64 tls_unseen;
    /* Requests answered in the process under on_deny = respond (SPEC
     * §15), which the request kind's `denied` does not count (relaxed
     * adds, like the counters). */
    rl_atomic_u64 responded;
};

/* 208: with a token bucket's word, one budget is four lines of 64 bytes. */
#define RL_SEG_STORE_SIZE 208u
#define RL_SEG_STORE_WORDS (RL_SEG_STORE_SIZE / 8)
/* The pause table (SPEC §12, §14; policy/pauses.c reads and writes it),
 * each entry a destination's pace: a pause belongs to one destination of one section and user, never to a
 * budget, so it is kept apart from the budgets, in a bounded table of its
 * own in the fixed part (allocated with the file: setting a pause never
 * needs room). Its head holds the insert lock (a robust process-shared
 * mutex, util/ownerlock.h, in RL_OWNERLOCK_WORDS words); an entry is
 *   key      hash of (section, user, destination name); 0: never used,
 *            1: being re-keyed under the lock. Lock-free readers load it
 *            (acquire) before and after the others and trust them only
 *            when it did not change;
 *   until    paused until: CLOCK_MONOTONIC ns, its lowest bit saying why
 *            (1: the backoff, 0: a Retry-After), only ever moved later;
 *   backoff  errors without Retry-After in a row (bits 0-31; 0: none)
 *            and the last one's cause (bits 32-47: an HTTP status, or
 *            1 reset, 2 timeout; policy/pauses.h reads it);
 *   rule     the section's index in the config, + 1 (for `rlshim stat`);
 *   latency, crawl, last
 *            the destination's pace (SPEC §14): limit/adapt.h's words of
 *            the same names (its `pause` word is until and backoff here);
 *   label    "USER|NAME", cut to fit (for `rlshim stat`).
 * Every write is made under the lock; when the entries near a key's home
 * are all taken, the one whose pause ends first gives way. */
#define RL_SEG_PAUSES 1024u
#define RL_SEG_PAUSE_LABEL 72u
struct rl_seg_pauses {
    rl_atomic_u64 lock[RL_OWNERLOCK_WORDS];
    rl_atomic_u64 said; /* "the table is full" said once */
    rl_atomic_u64 pad;
};
struct rl_seg_pause {
    rl_atomic_u64 key;
    rl_atomic_u64 until;
    rl_atomic_u64 backoff;
    rl_atomic_u64 rule;
    rl_atomic_u64 latency;
    rl_atomic_u64 crawl;
    rl_atomic_u64 last;
    rl_atomic_u64 label[RL_SEG_PAUSE_LABEL / 8];
};
#define RL_SEG_PAUSES_HEAD_SIZE 64u
#define RL_SEG_PAUSE_SIZE 128u

/* Storage is carved in lines of 64 bytes: two users' words never share a
 * cache line. */
#define RL_SEG_CARVE_WORDS 8u
/* The fixed part ends (and the arena starts) on a page boundary. */
#define RL_SEG_ALIGN 4096u

_Static_assert(sizeof(struct rl_seg_header) == RL_SEG_HEADER_SIZE,
               "header size is part of the layout version");
_Static_assert(offsetof(struct rl_seg_header, magic) == 0, "magic first");
_Static_assert(offsetof(struct rl_seg_header, version) == 8, "version");
_Static_assert(offsetof(struct rl_seg_header, total_size) == 16, "size");
_Static_assert(offsetof(struct rl_seg_header, config_hash) == 24, "hash");
_Static_assert(offsetof(struct rl_seg_header, nslots) == 32, "nslots");
_Static_assert(offsetof(struct rl_seg_header, arena_words) == 48, "arena");
_Static_assert(offsetof(struct rl_seg_header, ready) == 64, "ready");
_Static_assert(offsetof(struct rl_seg_header, stale) == 72, "stale");
_Static_assert(offsetof(struct rl_seg_header, arena_used) == 80, "used");
_Static_assert(offsetof(struct rl_seg_header, boot_id) == 96, "boot id");
_Static_assert(offsetof(struct rl_seg_header, max_period_ns) == 112, "period");
_Static_assert(offsetof(struct rl_seg_header, last_used) == 120, "last used");
_Static_assert(offsetof(struct rl_seg_header, fleet) == 128, "fleet");
_Static_assert(offsetof(struct rl_seg_header, hold_until) == 144, "hold");
_Static_assert(offsetof(struct rl_seg_header, npauses) == 160, "pauses");
_Static_assert(offsetof(struct rl_seg_header, pins) == 168, "pins");
_Static_assert(sizeof(struct rl_seg_pauses) == RL_SEG_PAUSES_HEAD_SIZE,
               "the pause table's head is part of the layout version");
_Static_assert(sizeof(struct rl_seg_pause) == RL_SEG_PAUSE_SIZE &&
                   offsetof(struct rl_seg_pause, until) == 8 &&
                   offsetof(struct rl_seg_pause, latency) == 32 &&
                   offsetof(struct rl_seg_pause, label) == 56,
               "a pause entry is part of the layout version");
_Static_assert(sizeof(struct rl_seg_slot) == RL_SEG_SLOT_SIZE,
               "slot size is part of the layout version");
_Static_assert(offsetof(struct rl_seg_slot, tag) == 0, "tag");
_Static_assert(offsetof(struct rl_seg_slot, meta) == 8, "meta");
_Static_assert(offsetof(struct rl_seg_store, tls_unseen) ==
                   offsetof(struct rl_seg_store, counters) +
                       8 * RL_STORE_COUNTERS,
               "store.h reaches the request words after the counters");
_Static_assert(offsetof(struct rl_seg_store, responded) ==
                   offsetof(struct rl_seg_store, tls_unseen) + 8,
               "store.h reaches `responded` after tls_unseen");
_Static_assert(sizeof(struct rl_seg_store) == RL_SEG_STORE_SIZE,
               "storage head size is part of the layout version");
_Static_assert(offsetof(struct rl_seg_store, label) == 0, "label");
_Static_assert(offsetof(struct rl_seg_store, counters) == 64, "counters");
_Static_assert(sizeof(pthread_mutex_t) <= RL_OWNERLOCK_WORDS * 8 &&
                   _Alignof(pthread_mutex_t) <= 8,
               "a lock's words hold a pthread_mutex_t (see the top)");
/* The limiters' state words in the arena are limit/'s: a window's are
 * pinned where both are seen, policy/gate.c. */
_Static_assert(RL_OWNERLOCK_WORDS == 6,
               "the lock's words are part of the layout version");
_Static_assert(RL_SEG_HEADER_SIZE % 8 == 0 && RL_SEG_SLOT_SIZE % 8 == 0,
               "every word stays 8-byte aligned");

/* Words of arena a slot of `nwords` state words takes. */
static inline uint64_t rl_seg_carve(uint64_t nwords)
{
    uint64_t w = RL_SEG_STORE_WORDS + nwords;
    return (w + RL_SEG_CARVE_WORDS - 1) / RL_SEG_CARVE_WORDS *
           RL_SEG_CARVE_WORDS;
}

/* Where the pause table starts: after the slot tables, on a line of 64
 * bytes. */
static inline uint64_t rl_seg_pauses_off(uint64_t nslots, uint64_t noverflow)
{
    uint64_t b = RL_SEG_HEADER_SIZE + (nslots + noverflow) * RL_SEG_SLOT_SIZE;
    return (b + 63) / 64 * 64;
}

/* The bytes of the fixed part (header, slot tables and the pause table,
 * padded): where the arena starts. 0 when the geometry is out of bounds. */
static inline uint64_t rl_seg_fixed_size(uint64_t nslots, uint64_t noverflow)
{
    if (nslots == 0 || noverflow == 0 || nslots > UINT32_MAX ||
        noverflow > UINT32_MAX)
        return 0;
    uint64_t b = rl_seg_pauses_off(nslots, noverflow) +
                 RL_SEG_PAUSES_HEAD_SIZE +
                 (uint64_t)RL_SEG_PAUSES * RL_SEG_PAUSE_SIZE;
    return (b + RL_SEG_ALIGN - 1) / RL_SEG_ALIGN * RL_SEG_ALIGN;
}

/* The byte size of a segment of this geometry; 0 when it overflows or is
 * out of the bounds the meta word can address. */
static inline uint64_t rl_seg_size(uint64_t nslots, uint64_t noverflow,
                                   uint64_t arena_words,
                                   uint64_t overflow_words)
{
    const uint64_t lim = RL_META_OFF_MASK;
    uint64_t fixed = rl_seg_fixed_size(nslots, noverflow);
    if (fixed == 0 || arena_words >= lim || overflow_words >= lim)
        return 0;
    return fixed + (arena_words + overflow_words) * 8;
}

#endif
