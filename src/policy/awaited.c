/* awaited.c — see awaited.h. */
#include "policy/awaited.h"

#include <string.h>

#include "limit/adapt.h"
#include "policy/gate.h"
#include "policy/proc.h"
#include "policy/reqconn.h"
#include "util/waitlock.h"

/* How long joining or leaving waits for a walk (which holds the word
 * only while it copies). */
#define LIST_WAIT_MAX_NS 200000000ull

/* Late requests one walk counts: more wait for the next. */
#define WALK_MAX 4

static bool try_take(uint32_t *word)
{
    uint32_t free = 0;
    /* Acquire: pairs with the release in rl_waitlock_let_go. */
    return __atomic_compare_exchange_n(word, &free, 1, false,
                                       __ATOMIC_ACQUIRE, __ATOMIC_RELAXED);
}

static bool in_list(const struct rl_awaited *a, const struct rl_reqconn *c)
{
    return c->aw == a && c->aw_epoch == a->epoch;
}

void rl_awaited_join(struct rl_proc *p, struct rl_reqconn *c)
{
    struct rl_awaited *a = &p->awaited;
    if (in_list(a, c) || rl_gate_response_timeout(p) == 0)
        return;
    if (!rl_waitlock_take(&a->lock, LIST_WAIT_MAX_NS))
        return;
    c->aw = a;
    c->aw_epoch = a->epoch;
    c->aw_prev = NULL;
    c->aw_next = a->head;
    if (a->head != NULL)
        a->head->aw_prev = c;
    a->head = c;
    rl_waitlock_let_go(&a->lock);
}

void rl_awaited_leave(struct rl_reqconn *c)
{
    struct rl_awaited *a = c->aw;
    if (a == NULL)
        return;
    /* Not had (a holder that never came back): the list would keep a
     * freed connection, so it is given up whole. */
    bool had = rl_waitlock_take(&a->lock, LIST_WAIT_MAX_NS);
    if (!had) {
        a->head = NULL;
        __atomic_add_fetch(&a->epoch, 1, __ATOMIC_RELAXED);
        return;
    }
    if (in_list(a, c)) {
        if (c->aw_prev != NULL)
            c->aw_prev->aw_next = c->aw_next;
        else
            a->head = c->aw_next;
        if (c->aw_next != NULL)
            c->aw_next->aw_prev = c->aw_prev;
    }
    c->aw = NULL;
    rl_waitlock_let_go(&a->lock);
}

void rl_awaited_orphan(struct rl_proc *p, const struct rl_awaited_req *o)
{
    struct rl_awaited *a = &p->awaited;
    if (!rl_waitlock_take(&a->lock, LIST_WAIT_MAX_NS))
        return;
    int slot = -1;
    for (int i = 0; i < RL_AWAITED_ORPHANS; i++) {
        if (!a->orphaned[i]) {
            slot = i;
            break;
        }
        if (a->orphan[i].sent_ns > o->sent_ns &&
            (slot < 0 || a->orphan[i].sent_ns > a->orphan[slot].sent_ns))
            slot = i;
    }
    if (slot >= 0) {
        a->orphan[slot] = *o;
        a->orphaned[slot] = true;
    }
    rl_waitlock_let_go(&a->lock);
}

void rl_awaited_count(struct rl_proc *p, const struct rl_awaited_req *o,
                      const char *call, int fd, uint64_t now)
{
    const struct rl_gate_req q = {
        .call = call,
        .fd = fd,
        .sa = o->salen > 0 ? &o->peer : NULL,
        .salen = o->salen,
        .name = o->name[0] != '\0' ? o->name : NULL,
        .port = o->port,
        .units = 1,
    };
    rl_gate_request_failed_at(p, &q, RL_ADAPT_CAUSE_TIMEOUT,
                              now > o->sent_ns ? now - o->sent_ns : 0, now);
}

void rl_awaited_look(struct rl_proc *p, struct rl_reqconn *self,
                     const char *call, uint64_t now)
{
    struct rl_awaited *a = &p->awaited;
    uint64_t next = __atomic_load_n(&a->next_look, __ATOMIC_RELAXED);
    if (now < next)
        return;
    uint64_t limit = rl_gate_response_timeout(p);
    if (limit == 0 || !try_take(&a->lock))
        return;
    __atomic_store_n(&a->next_look, now + limit / 8, __ATOMIC_RELAXED);
    struct rl_awaited_req late[WALK_MAX];
    unsigned n = 0;
    for (int i = 0; i < RL_AWAITED_ORPHANS && n < WALK_MAX; i++) {
        if (!a->orphaned[i] || now < a->orphan[i].sent_ns ||
            now - a->orphan[i].sent_ns < limit)
            continue;
        late[n++] = a->orphan[i];
        a->orphaned[i] = false;
    }
    for (struct rl_reqconn *c = a->head; c != NULL && n < WALK_MAX;
         c = c->aw_next) {
        /* A connection another thread holds is its to look at. */
        if (c == self || !try_take(&c->busy))
            continue;
        if (rl_reqconn_late_take(c, now, limit, &late[n]))
            n++;
        rl_waitlock_let_go(&c->busy);
    }
    rl_waitlock_let_go(&a->lock);
    /* Counted outside the word: a fleet pause asks Redis. */
    for (unsigned i = 0; i < n; i++)
        rl_awaited_count(p, &late[i], call, -1, now);
}

void rl_awaited_atfork_child(struct rl_awaited *a)
{
    a->lock = 0;
    a->head = NULL;
    a->epoch++;
    memset(a->orphaned, 0, sizeof a->orphaned);
}
