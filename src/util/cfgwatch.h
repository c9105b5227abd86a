/* cfgwatch.h — has the config file changed since it was read? (SPEC §16)
 *
 * A file's identity is what an edit changes: device and inode (an atomic
 * replace, `mv` over the file, makes a new inode), size and modification
 * time (an in-place write). A process looks at most once a second, on a
 * call that needs the config: between looks the only cost is one compare
 * of a clock reading the caller already has against `next_look`; no
 * thread, no signal. One stat(2) per look.
 *
 * The gate is lock-free: the thread whose compare-and-swap moves
 * `next_look` on is the one that looks; the others go on with the config
 * they have. Clock readings are passed in (the tests step time by hand). */
#ifndef RL_UTIL_CFGWATCH_H
#define RL_UTIL_CFGWATCH_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* One look a second at most. */
#define RL_CFGWATCH_PERIOD_NS 1000000000ull

struct rl_cfgid {
    bool present; /* false: no file at the path (ENOENT, ENOTDIR) */
    uint64_t dev, ino, size;
    int64_t mtime_s;
    long mtime_ns;
};

struct rl_cfgwatch {
    /* The coarse clock's reading from which the next look may be taken;
     * 0 until rl_cfgwatch_start (no look before the config was read). */
    _Atomic uint64_t next_look;
    /* The file as it was when the config in use was read: written only
     * by the thread that won the look. */
    struct rl_cfgid id;
};

/* The identity of the file at `path` into *id: 0 (id->present false when
 * there is none), or -errno when it cannot be told (EACCES, EIO, ...). */
int rl_cfgid_read(const char *path, struct rl_cfgid *id);

/* Do a and b name the same file, unchanged? Two absent files are. */
bool rl_cfgid_same(const struct rl_cfgid *a, const struct rl_cfgid *b);

/* Start watching from `now` with the identity the config was read at. */
void rl_cfgwatch_start(struct rl_cfgwatch *w, const struct rl_cfgid *id,
                       uint64_t now);

/* Is a look due at `now`? The one test between looks: a load and a
 * compare. */
static inline bool rl_cfgwatch_due(struct rl_cfgwatch *w, uint64_t now)
{
    uint64_t next = atomic_load_explicit(&w->next_look, memory_order_relaxed);
    return __builtin_expect(next != 0 && now >= next, 0);
}

/* Claim the look due at `now`: true for one caller per period (the next
 * look is then a period on), false for the others and when not due. */
bool rl_cfgwatch_claim(struct rl_cfgwatch *w, uint64_t now);

/* The claimed look: has the file at `path` changed since w->id? true with
 * its new identity in *now_id. A file that cannot be told (-errno) counts
 * as unchanged (the next look asks again). */
bool rl_cfgwatch_changed(struct rl_cfgwatch *w, const char *path,
                         struct rl_cfgid *now_id);

#endif
