/* cfgwatch.c — see cfgwatch.h. */
#include "util/cfgwatch.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

int rl_cfgid_read(const char *path, struct rl_cfgid *id)
{
    struct stat st;

    memset(id, 0, sizeof *id);
    if (stat(path, &st) != 0) {
        if (errno == ENOENT || errno == ENOTDIR)
            return 0; /* no file: a config removed, or not yet written */
        return -errno;
    }
    id->present = true;
    id->dev = (uint64_t)st.st_dev;
    id->ino = (uint64_t)st.st_ino;
    id->size = (uint64_t)st.st_size;
    id->mtime_s = (int64_t)st.st_mtim.tv_sec;
    id->mtime_ns = st.st_mtim.tv_nsec;
    return 0;
}

bool rl_cfgid_same(const struct rl_cfgid *a, const struct rl_cfgid *b)
{
    if (!a->present || !b->present)
        return a->present == b->present;
    return a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
           a->mtime_s == b->mtime_s && a->mtime_ns == b->mtime_ns;
}

void rl_cfgwatch_start(struct rl_cfgwatch *w, const struct rl_cfgid *id,
                       uint64_t now)
{
    w->id = *id;
    /* Never 0, which means "not watching". */
    atomic_store_explicit(&w->next_look, now + RL_CFGWATCH_PERIOD_NS,
                          memory_order_release);
}

bool rl_cfgwatch_claim(struct rl_cfgwatch *w, uint64_t now)
{
    uint64_t next = atomic_load_explicit(&w->next_look, memory_order_acquire);
    if (next == 0 || now < next)
        return false;
    /* The winner moves the gate a period on from now (not from `next`: a
     * process idle for an hour looks once, not 3,600 times). */
    return atomic_compare_exchange_strong_explicit(
        &w->next_look, &next, now + RL_CFGWATCH_PERIOD_NS,
        memory_order_acq_rel, memory_order_relaxed);
}

bool rl_cfgwatch_changed(struct rl_cfgwatch *w, const char *path,
                         struct rl_cfgid *now_id)
{
    if (rl_cfgid_read(path, now_id) < 0)
        return false;
    return !rl_cfgid_same(&w->id, now_id);
}
