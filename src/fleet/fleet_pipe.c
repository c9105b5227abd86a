/* fleet_pipe.c — one pipelined connection shared by a process's threads
 * (see fleet_pipe.h).
 *
 * Shared data, and who writes what:
 * - st: the life word (users | OPEN | OPENING | BROKEN | CLOSING), CAS by
 *   any thread; a futex word for threads waiting on an opener or closer.
 * - send_lock guards c.out, c.len, c.overflow and the order of `sent`:
 *   ticket k is the k-th command written. sent is stored (release) after
 *   the command went out; readers do not need it to match a reply (its
 *   slot says), only the break's sweep does (under both locks).
 * - read_lock guards c.rd, c.in and `got` (replies read: the next reply
 *   is ticket got's, in slot order[got % RING]; got is atomic only so
 *   that a sender can count what is owed).
 * - A slot goes FREE -> WAITING (the sender, under send_lock: only
 *   senders take free slots, so a free one found there stays free until
 *   taken, before its command goes out) -> DONE (the reader, reply in res) ->
 * FREE (its owner, after copying res out). A waiter out of time moves WAITING
 * -> LEAVING, and then (abandon) LEAVING -> GAVE_UP with its late record in
 * place; a reply for a LEAVING slot makes it LATE (the owner settles it in
 * abandon), one for a GAVE_UP slot is settled by the reader. Every change is a
 * CAS or a store of the one thread that owns the slot in that state; res and
 * late are written before the release that hands the slot over and read after
 * the acquire that takes it.
 * - NUDGE on a WAITING slot: "take the read side": set by a reader that
 *   leaves, so that a waiter asleep on its slot's word wakes (its
 *   FUTEX_WAIT sees the value change, so no wake-up is lost between its
 *   look at the read lock and its sleep). */
#include "fleet/fleet_pipe.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "util/clock.h"
#include "util/waitlock.h"
#include "util/sys.h"

enum {
    S_FREE = 0,
    S_WAITING = 1,
    S_DONE = 2,
    S_LEAVING = 3,
    S_LATE = 4,
    S_GAVE_UP = 5,
    S_NUDGE = 0x100,
};

#define P_USERS 0xffffu
#define P_OPEN (1u << 16)
#define P_OPENING (1u << 17)
#define P_BROKEN (1u << 18)
#define P_CLOSING (1u << 19)

/* ---- futex words ------------------------------------------------------*/

static void futex_wait(_Atomic uint32_t *w, uint32_t v, uint64_t deadline)
{
    uint64_t now = rl_clock_now_ns();
    if (now >= deadline)
        return;
    struct timespec ts = {.tv_sec = (time_t)((deadline - now) / 1000000000u),
                          .tv_nsec = (long)((deadline - now) % 1000000000u)};
    rl_sys.futex((uint32_t *)w, FUTEX_WAIT_PRIVATE, v, &ts);
}

static void futex_wake(_Atomic uint32_t *w, int n)
{
    rl_sys.futex((uint32_t *)w, FUTEX_WAKE_PRIVATE, (uint32_t)n, NULL);
}

/* The send and read locks are util/waitlock.h words (0 free, 1 held, 2
 * held with waiters), kept _Atomic here for the loads and stores this
 * file makes of them itself. */
static uint32_t *word_of(_Atomic uint32_t *l)
{
    return (uint32_t *)l;
}

static bool trylock(_Atomic uint32_t *l)
{
    uint32_t free = 0;
    return atomic_compare_exchange_strong_explicit(
        l, &free, 1, memory_order_acquire, memory_order_relaxed);
}

/* *l, waited for until `deadline` (CLOCK_MONOTONIC ns); the clock is read
 * only when the word is held. */
static bool lock_until(_Atomic uint32_t *l, uint64_t deadline)
{
    if (trylock(l))
        return true;
    uint64_t now = rl_clock_now_ns();
    return rl_waitlock_take(word_of(l), deadline > now ? deadline - now : 0);
}

static void unlock(_Atomic uint32_t *l)
{
    rl_waitlock_let_go(word_of(l));
}

/* ---- set-up -------------------------------------------------------------*/

void rl_fleet_pipe_init(struct rl_fleet_pipe *p,
                        const struct rl_fleet_addr *addr, rl_fleet_late_fn late,
                        void *ctx)
{
    p->addr = *addr;
    p->late = late;
    p->late_ctx = ctx;
    p->c.fd = -1;
    p->c.rd = NULL;
    atomic_store_explicit(&p->st, 0, memory_order_relaxed);
    atomic_store_explicit(&p->send_lock, 0, memory_order_relaxed);
    atomic_store_explicit(&p->read_lock, 0, memory_order_relaxed);
    atomic_store_explicit(&p->sent, 0, memory_order_relaxed);
    atomic_store_explicit(&p->got, 0, memory_order_relaxed);
    for (unsigned i = 0; i < RL_FLEET_PIPE_SLOTS; i++)
        atomic_store_explicit(&p->slot[i].st, S_FREE, memory_order_relaxed);
}

/* ---- replies ------------------------------------------------------------*/

static void to_result(redisReply *rep, bool raw, struct rl_fleet_result *r)
{
    memset(r, 0, sizeof *r);
    if (rep->type == REDIS_REPLY_ERROR) {
        r->type = RL_FLEET_REPLY_ERROR;
    } else if (rep->type == REDIS_REPLY_ARRAY) {
        r->type = RL_FLEET_REPLY_INTS;
        r->n = rep->elements < RL_FLEET_RESULT_INTS ? (unsigned)rep->elements
                                                    : RL_FLEET_RESULT_INTS;
        for (unsigned i = 0; i < r->n; i++)
            r->v[i] = rep->element[i]->type == REDIS_REPLY_INTEGER
                          ? rep->element[i]->integer
                          : -2;
    } else if (rep->type == REDIS_REPLY_INTEGER) {
        r->type = RL_FLEET_REPLY_INTEGER;
        r->n = 1;
        r->v[0] = rep->integer;
    } else {
        r->type = RL_FLEET_REPLY_OTHER;
    }
    if ((rep->type == REDIS_REPLY_ERROR || rep->type == REDIS_REPLY_STRING ||
         rep->type == REDIS_REPLY_STATUS) &&
        rep->str != NULL) {
        size_t n = rep->len < RL_FLEET_RESULT_TEXT - 1
                       ? rep->len
                       : RL_FLEET_RESULT_TEXT - 1;
        memcpy(r->text, rep->str, n);
        r->text[n] = '\0';
    }
    if (raw)
        r->raw = rep;
    else
        freeReplyObject(rep);
}

/* A reply that nobody will take: settled through p->late, slot freed. */
static void settle(struct rl_fleet_pipe *p, struct rl_fleet_pipe_slot *s)
{
    if (p->late != NULL)
        p->late(p->late_ctx, &s->res, &s->late);
    if (s->res.raw != NULL)
        freeReplyObject(s->res.raw);
    s->res.raw = NULL;
    atomic_store_explicit(&s->st, S_FREE, memory_order_release);
}

/* The slot of ticket k (k < sent). */
static struct rl_fleet_pipe_slot *slot_of(struct rl_fleet_pipe *p, uint64_t k)
{
    return &p->slot[atomic_load_explicit(&p->order[k % RL_FLEET_PIPE_RING],
                                         memory_order_relaxed)];
}

/* Hand ticket got's result (already in s->res) to its owner. -EPROTO
 * when the slot owes nothing: the replies no longer match the tickets. */
static int hand_over(struct rl_fleet_pipe *p, struct rl_fleet_pipe_slot *s)
{
    uint32_t v = atomic_load_explicit(&s->st, memory_order_acquire);
    for (;;) {
        uint32_t to;
        switch (v & ~(uint32_t)S_NUDGE) {
        case S_WAITING:
            to = S_DONE;
            break;
        case S_LEAVING:
            to = S_LATE;
            break;
        case S_GAVE_UP:
            /* Acquire (above, or the failed CAS) pairs with abandon's
             * release CAS: the late record is there. */
            settle(p, s);
            return 0;
        default:
            if (s->res.raw != NULL)
                freeReplyObject(s->res.raw);
            s->res.raw = NULL;
            return -EPROTO;
        }
        /* Release: the owner reads res after its acquire of DONE/LATE. */
        if (atomic_compare_exchange_weak_explicit(
                &s->st, &v, to, memory_order_acq_rel, memory_order_acquire)) {
            futex_wake(&s->st, 1);
            return 0;
        }
    }
}

/* Every owed ticket fails with err (the connection broke: its replies
 * will never come). Holds the read side; takes the send side so that
 * `sent` stands still (no new command goes out on a broken pipe). */
static void fail_all(struct rl_fleet_pipe *p, int err)
{
    bool locked = rl_waitlock_take(word_of(&p->send_lock), 1000000000ull);
    uint64_t sent = atomic_load_explicit(&p->sent, memory_order_acquire);
    uint64_t got = atomic_load_explicit(&p->got, memory_order_relaxed);
    for (; got < sent; got++) {
        struct rl_fleet_pipe_slot *s = slot_of(p, got);
        if (atomic_load_explicit(&s->st, memory_order_acquire) == S_FREE)
            continue;
        memset(&s->res, 0, sizeof s->res);
        s->res.err = err;
        (void)hand_over(p, s);
    }
    atomic_store_explicit(&p->got, got, memory_order_relaxed);
    if (locked)
        unlock(&p->send_lock);
}

/* Wake every waiter (a broken pipe): each sees its slot failed, or
 * takes the read side and fails them. */
static void nudge_all(struct rl_fleet_pipe *p)
{
    for (unsigned i = 0; i < RL_FLEET_PIPE_SLOTS; i++) {
        struct rl_fleet_pipe_slot *s = &p->slot[i];
        uint32_t v = S_WAITING;
        if (atomic_compare_exchange_strong_explicit(
                &s->st, &v, S_WAITING | S_NUDGE, memory_order_acq_rel,
                memory_order_relaxed))
            futex_wake(&s->st, 1);
    }
}

void rl_fleet_pipe_break(struct rl_fleet_pipe *p, const char *why)
{
    uint32_t v =
        atomic_fetch_or_explicit(&p->st, P_BROKEN, memory_order_acq_rel);
    if (!(v & P_BROKEN))
        snprintf(p->why, sizeof p->why, "%s", why);
    nudge_all(p);
}

/* The first waiting ticket in [from, to) takes the read side. */
static void nudge_next(struct rl_fleet_pipe *p, uint64_t from, uint64_t to)
{
    for (uint64_t k = from; k < to && k - from < RL_FLEET_PIPE_RING; k++) {
        struct rl_fleet_pipe_slot *s = slot_of(p, k);
        uint32_t v = S_WAITING;
        if (atomic_compare_exchange_strong_explicit(
                &s->st, &v, S_WAITING | S_NUDGE, memory_order_acq_rel,
                memory_order_relaxed)) {
            futex_wake(&s->st, 1);
            return;
        }
        if (v == (S_WAITING | S_NUDGE))
            return; /* already told */
    }
}

/* Holding the read side: read replies in order until ticket's slot is
 * answered, the deadline passes or the pipe breaks. */
static void read_until(struct rl_fleet_pipe *p, struct rl_fleet_pipe_slot *mine,
                       uint64_t deadline)
{
    for (;;) {
        uint32_t v = atomic_load_explicit(&mine->st, memory_order_acquire);
        if ((v & ~(uint32_t)S_NUDGE) != S_WAITING)
            return;
        if (atomic_load_explicit(&p->st, memory_order_acquire) & P_BROKEN) {
            fail_all(p, -ECONNRESET);
            return;
        }
        redisReply *rep = NULL;
        int r = rl_fleet_conn_reply(&p->c, &rep, deadline);
        if (r == -ETIMEDOUT)
            return;
        if (r < 0) {
            rl_fleet_pipe_break(p, strerror(-r));
            fail_all(p, r);
            return;
        }
        uint64_t got = atomic_load_explicit(&p->got, memory_order_relaxed);
        /* The reply can come before its sender counted it: it is about
         * to (acquire pairs with the sender's release of sent, after its
         * order[] and slot). */
        while (atomic_load_explicit(&p->sent, memory_order_acquire) <= got)
            if (rl_clock_now_ns() >= deadline + 1000000000ull) {
                freeReplyObject(rep);
                rl_fleet_pipe_break(p, "a reply no command asked for");
                fail_all(p, -EPROTO);
                return;
            }
        struct rl_fleet_pipe_slot *s = slot_of(p, got);
        if (s->skip > 0) {
            /* A reply before the ticket's own (ASKING's +OK). */
            s->skip--;
            freeReplyObject(rep);
            continue;
        }
        to_result(rep, s->raw, &s->res);
        if (hand_over(p, s) != 0) {
            rl_fleet_pipe_break(p, "a reply no command asked for");
            fail_all(p, -EPROTO);
            return;
        }
        atomic_store_explicit(&p->got, got + 1, memory_order_relaxed);
        atomic_store_explicit(&p->last_reply, rl_clock_coarse_ns(),
                              memory_order_relaxed);
    }
}

/* ---- entering and leaving ----------------------------------------------*/

/* The last user of a broken pipe: close it, settle what it still owed. */
static void close_now(struct rl_fleet_pipe *p)
{
    for (unsigned i = 0; i < RL_FLEET_PIPE_SLOTS; i++) {
        struct rl_fleet_pipe_slot *s = &p->slot[i];
        if (atomic_load_explicit(&s->st, memory_order_acquire) == S_GAVE_UP) {
            memset(&s->res, 0, sizeof s->res);
            s->res.err = -ECONNRESET;
            settle(p, s);
        }
        atomic_store_explicit(&s->st, S_FREE, memory_order_relaxed);
    }
    rl_fleet_conn_close(&p->c);
    atomic_store_explicit(&p->sent, 0, memory_order_relaxed);
    atomic_store_explicit(&p->got, 0, memory_order_relaxed);
    atomic_store_explicit(&p->st, 0, memory_order_release);
    futex_wake(&p->st, INT_MAX);
}

void rl_fleet_pipe_leave(struct rl_fleet_pipe *p)
{
    uint32_t v = atomic_fetch_sub_explicit(&p->st, 1, memory_order_acq_rel);
    if ((v & P_USERS) != 1 || !(v & P_BROKEN))
        return;
    uint32_t want = v - 1;
    if (atomic_compare_exchange_strong_explicit(&p->st, &want, want | P_CLOSING,
                                                memory_order_acq_rel,
                                                memory_order_relaxed))
        close_now(p);
}

static int open_now(struct rl_fleet_pipe *p, const char *password_file,
                    uint64_t open_ns)
{
    p->c.fd = -1;
    int r = rl_fleet_conn_open(&p->c, &p->addr, password_file, p->sha,
                               rl_clock_now_ns() + open_ns);
    if (r < 0)
        snprintf(p->why, sizeof p->why, "%s", p->c.why);
    else
        atomic_store_explicit(&p->last_reply, rl_clock_coarse_ns(),
                              memory_order_relaxed);
    atomic_store_explicit(&p->sent, 0, memory_order_relaxed);
    atomic_store_explicit(&p->got, 0, memory_order_relaxed);
    return r;
}

int rl_fleet_pipe_enter(struct rl_fleet_pipe *p, const char *password_file,
                        uint64_t open_ns, uint64_t deadline)
{
    uint32_t v = atomic_load_explicit(&p->st, memory_order_acquire);
    for (;;) {
        if (v & (P_OPENING | P_CLOSING | P_BROKEN)) {
            /* Opened, or closed by its last user (who is on the way out:
             * a broken pipe fails every call it owes at once), soon. */
            if (rl_clock_now_ns() >= deadline)
                return -ETIMEDOUT;
            futex_wait(&p->st, v, deadline);
            v = atomic_load_explicit(&p->st, memory_order_acquire);
            continue;
        }
        if ((v & P_USERS) == P_USERS)
            return -EBUSY;
        uint32_t to = (v & P_OPEN) ? v + 1 : (v + 1) | P_OPENING;
        if (!atomic_compare_exchange_weak_explicit(
                &p->st, &v, to, memory_order_acq_rel, memory_order_acquire))
            continue;
        if (v & P_OPEN)
            return 0;
        break;
    }
    /* This thread opens it; others wait on st. */
    int r = open_now(p, password_file, open_ns);
    if (r == 0)
        atomic_fetch_xor_explicit(&p->st, P_OPENING | P_OPEN,
                                  memory_order_acq_rel);
    else
        atomic_fetch_sub_explicit(&p->st, P_OPENING + 1, memory_order_acq_rel);
    futex_wake(&p->st, INT_MAX);
    return r;
}

/* ---- commands -----------------------------------------------------------*/

int rl_fleet_pipe_send(struct rl_fleet_pipe *p, rl_fleet_build_fn build,
                       void *ctx, unsigned skip, bool raw,
                       const struct rl_fleet_wait *w, uint64_t *ticket)
{
    uint64_t deadline = w->deadline;
    /* The send side held by a thread of ours (one the machine does not
     * run) is no sign of Redis: waited for as a late reply is. */
    while (!lock_until(&p->send_lock, deadline)) {
        uint64_t next =
            rl_fleet_pipe_wait_on(p, w, deadline, rl_clock_now_ns());
        if (next == deadline)
            return -EBUSY;
        deadline = next;
    }
    int r = 0;
    uint64_t k = atomic_load_explicit(&p->sent, memory_order_relaxed);
    struct rl_fleet_pipe_slot *s = NULL;
    if (atomic_load_explicit(&p->st, memory_order_acquire) & P_BROKEN) {
        r = -ECONNRESET;
        goto out;
    }
    if (k - atomic_load_explicit(&p->got, memory_order_relaxed) >=
        RL_FLEET_PIPE_RING) {
        /* RL_FLEET_PIPE_RING commands owed: whether Redis is away then
         * is what the kernel says came last (rl_fleet_pipe_quiet_ns). */
        (void)rl_fleet_pipe_heard_ago(p, w->quiet);
        r = -EBUSY;
        goto out;
    }
    /* A free slot stays free until a sender takes it, and senders hold
     * send_lock. Acquire pairs with the release that freed it. */
    unsigned i;
    for (i = 0; i < RL_FLEET_PIPE_SLOTS; i++)
        if (atomic_load_explicit(&p->slot[(k + i) % RL_FLEET_PIPE_SLOTS].st,
                                 memory_order_acquire) == S_FREE)
            break;
    if (i == RL_FLEET_PIPE_SLOTS) {
        r = -EBUSY;
        goto out;
    }
    i = (unsigned)((k + i) % RL_FLEET_PIPE_SLOTS);
    s = &p->slot[i];
    rl_fleet_cmd_reset(&p->c);
    build(&p->c, (const char(*)[41])p->sha, ctx);
    if (p->c.overflow) {
        r = -E2BIG;
        goto out;
    }
    s->raw = raw;
    s->skip = skip;
    s->res.raw = NULL;
    atomic_store_explicit(&p->order[k % RL_FLEET_PIPE_RING], (uint8_t)i,
                          memory_order_relaxed);
    /* Waiting before the command goes out: its reply may be read (by
     * another thread) before this one gets further. */
    atomic_store_explicit(&s->st, S_WAITING, memory_order_release);
    r = rl_fleet_conn_send(&p->c, deadline);
    if (r < 0) {
        /* Some of it may have gone: the stream is no longer whole. */
        atomic_store_explicit(&s->st, S_FREE, memory_order_release);
        unlock(&p->send_lock);
        rl_fleet_pipe_break(p, strerror(-r));
        return r;
    }
    /* The first command owed on an idle pipe: Redis's silence counts from
     * here (rl_fleet_pipe_quiet_ns), not from its last reply before. */
    if (atomic_load_explicit(&p->got, memory_order_relaxed) == k)
        atomic_store_explicit(&p->owed_since, rl_clock_coarse_ns(),
                              memory_order_relaxed);
    /* Release: the reader's acquire of sent sees order[] and the slot. */
    atomic_store_explicit(&p->sent, k + 1, memory_order_release);
    *ticket = i;
out:
    unlock(&p->send_lock);
    return r;
}

/* Holding the read side: read until slot s is answered or `deadline`,
 * then hand the read side on to the next waiter. */
static void read_turn(struct rl_fleet_pipe *p, struct rl_fleet_pipe_slot *s,
                      uint64_t deadline)
{
    read_until(p, s, deadline);
    uint64_t from = atomic_load_explicit(&p->got, memory_order_relaxed);
    uint64_t to = atomic_load_explicit(&p->sent, memory_order_acquire);
    unlock(&p->read_lock);
    nudge_next(p, from, to);
}

int rl_fleet_pipe_wait(struct rl_fleet_pipe *p, uint64_t ticket,
                       const struct rl_fleet_wait *w,
                       struct rl_fleet_result *out)
{
    struct rl_fleet_pipe_slot *s = &p->slot[ticket % RL_FLEET_PIPE_SLOTS];
    uint64_t deadline = w->deadline;
    bool late_look = false;
    for (;;) {
        uint32_t v = atomic_load_explicit(&s->st, memory_order_acquire);
        if (v == S_DONE) {
            /* Acquire (above) pairs with hand_over's release CAS. */
            *out = s->res;
            s->res.raw = NULL;
            atomic_store_explicit(&s->st, S_FREE, memory_order_release);
            return 0;
        }
        uint64_t now = rl_clock_now_ns();
        if (now >= deadline && !late_look)
            deadline = rl_fleet_pipe_wait_on(p, w, deadline, now);
        if (now >= deadline && !late_look && trylock(&p->read_lock)) {
            /* Out of time: a last look at what already arrived (a reply
             * in the socket that no thread was scheduled to read is a
             * loaded host's delay, not Redis's). */
            late_look = true;
            read_turn(p, s, now);
            continue;
        }
        if (now >= deadline) {
            if (atomic_compare_exchange_strong_explicit(&s->st, &v, S_LEAVING,
                                                        memory_order_acq_rel,
                                                        memory_order_acquire))
                return -ETIMEDOUT;
            continue; /* answered meanwhile */
        }
        if (trylock(&p->read_lock)) {
            if (v & S_NUDGE)
                atomic_compare_exchange_strong_explicit(&s->st, &v, S_WAITING,
                                                        memory_order_acq_rel,
                                                        memory_order_relaxed);
            read_turn(p, s, deadline);
            continue;
        }
        if (v & S_NUDGE) {
            /* Told to read, but another thread got there first. */
            atomic_compare_exchange_strong_explicit(&s->st, &v, S_WAITING,
                                                    memory_order_acq_rel,
                                                    memory_order_relaxed);
            continue;
        }
        futex_wait(&s->st, v, deadline);
    }
}

void rl_fleet_pipe_abandon(struct rl_fleet_pipe *p, uint64_t ticket,
                           const struct rl_fleet_late *late)
{
    struct rl_fleet_pipe_slot *s = &p->slot[ticket % RL_FLEET_PIPE_SLOTS];
    s->late = *late;
    uint32_t v = S_LEAVING;
    /* Release: the reader that settles it reads `late` after its
     * acquire (hand_over). */
    if (atomic_compare_exchange_strong_explicit(
            &s->st, &v, S_GAVE_UP, memory_order_acq_rel, memory_order_acquire))
        return;
    /* LATE: the reply came while we decided without it. */
    settle(p, s);
}

void rl_fleet_pipe_atfork_child(struct rl_fleet_pipe *p)
{
    rl_fleet_conn_abandon(&p->c);
    rl_fleet_pipe_init(p, &p->addr, p->late, p->late_ctx);
}
