/* fleet_pipe.h — one connection to one Redis node, shared by every thread
 * of the process: commands are pipelined, so as many decisions are in
 * flight at once as threads make them, and none waits for another's
 * round trip (SPEC §8: a wait is a wait on Redis, never on a lock held by
 * a thread of ours that waits on Redis).
 *
 * Replies come back in the order the commands went out. A thread that
 * sent ticket k waits for its reply; whichever waiter holds the read side
 * reads replies in order and hands each to its owner, and when it has its
 * own it passes the read side to the next waiter. A waiter whose deadline
 * passes gives its ticket up (rl_fleet_pipe_wait's -ETIMEDOUT, then
 * rl_fleet_pipe_abandon): its reply, when it comes, is handed to the
 * pipe's `late` function with what the waiter left for it, so that a
 * script that ran after all is settled exactly once (fleet.c: a late
 * grant is set against what the fallback admitted), never charged twice
 * and never lost. Only a connection that fails (reset, protocol error)
 * loses the replies it still owed: `late` is then called with an error.
 *
 * The connection's life: closed -> opening (one thread connects and
 * loads the scripts, with a deadline of its own; the others wait for it)
 * -> open -> broken (a failure seen by anyone: no new command goes out)
 * -> closed again by the last thread to leave it: a socket is closed only
 * when no thread of ours is using it.
 *
 * Every system call goes through rl_sys (fleet_conn.h): the socket lives
 * above RL_SYS_FD_FLOOR and is checked to be ours before every use. */
#ifndef RL_FLEET_PIPE_H
#define RL_FLEET_PIPE_H

#include <hiredis/hiredis.h>
#include <stdbool.h>
#include <stdint.h>

#include "fleet/fleet_addr.h"
#include "fleet/fleet_conn.h"

/* Commands in flight on one connection (given up ones included), and
 * slots for them: a slot is held from its command's send until its owner
 * took the reply, which a thread the machine schedules late may do after
 * many more commands went out. */
#define RL_FLEET_PIPE_RING 128u
#define RL_FLEET_PIPE_SLOTS 256u /* order[] holds a slot in a byte */
#define RL_FLEET_RESULT_INTS 6u
#define RL_FLEET_RESULT_TEXT 64u

enum rl_fleet_reply_type {
    RL_FLEET_REPLY_INTS = 1, /* an array: its integers in v (others -2) */
    RL_FLEET_REPLY_ERROR,    /* an error reply: its text */
    RL_FLEET_REPLY_INTEGER,  /* an integer: v[0] */
    RL_FLEET_REPLY_OTHER,    /* anything else (a string's text kept) */
};

/* A reply as its owner gets it. */
struct rl_fleet_result {
    int err;  /* 0: the reply came; -errno: it never will (the connection
                 failed: the command may or may not have run) */
    int type; /* enum rl_fleet_reply_type, when err == 0 */
    unsigned n;
    int64_t v[RL_FLEET_RESULT_INTS];
    char text[RL_FLEET_RESULT_TEXT];
    redisReply *raw; /* the whole reply when the command asked for it
                        (the owner frees it; a late one is freed here) */
};

/* What a thread that gave its ticket up leaves for its reply: the
 * caller's own words, opaque here. */
struct rl_fleet_late {
    uint64_t w[6];
};

/* Called with the pipe's `ctx`, a reply that came after its owner left,
 * and what the owner left; from whichever thread reads it, holding the
 * read side (so it must not use the pipe). r->err != 0: the reply is
 * lost. */
typedef void (*rl_fleet_late_fn)(void *ctx, const struct rl_fleet_result *r,
                                 const struct rl_fleet_late *late);

/* How long a call waits on a pipe: for the send side and its reply until
 * `deadline`, and past it until `late` for as long as the node keeps being
 * heard within the last `quiet` (a reply read, a byte waiting on the
 * socket, or, on TCP, data at the kernel). A reply behind others that keep
 * coming, or one that no thread of ours was run to read, is late, not
 * lost: Redis is away only when nothing came from it for `quiet` while a
 * reply is owed (SPEC §8). late = deadline: no wait past it. */
struct rl_fleet_wait {
    uint64_t deadline, late, quiet;
};

/* Builds the command(s) in c->out (fleet_conn.h's rl_fleet_cmd_*), under
 * the send side; `sha` are the connection's scripts' SHA1s. */
typedef void (*rl_fleet_build_fn)(struct rl_fleet_conn *c,
                                  const char (*sha)[41], void *ctx);

struct rl_fleet_pipe_slot {
    _Atomic uint32_t st; /* see fleet_pipe.c */
    bool raw;
    unsigned skip; /* replies before the one that is the ticket's */
    struct rl_fleet_result res;
    struct rl_fleet_late late;
};

struct rl_fleet_pipe {
    struct rl_fleet_addr addr;
    rl_fleet_late_fn late;
    void *late_ctx;
    /* users (bits 0-15) | OPEN | OPENING | BROKEN: a futex word. */
    _Atomic uint32_t st;
    _Atomic uint32_t send_lock, read_lock; /* futex words: 0, 1, 2 */
    _Atomic uint64_t sent; /* commands written; changed under send_lock */
    _Atomic uint64_t got;  /* replies read; changed under read_lock */
    /* Coarse clock of the last reply read (or of the open, or of data
     * the kernel had that no thread read yet), and of the last command
     * sent when nothing was owed: relaxed (fleet_quiet.c). */
    _Atomic uint64_t last_reply, owed_since;
    /* The slot of ticket k's reply: order[k % RL_FLEET_PIPE_RING],
     * written under send_lock before `sent` counts k. */
    _Atomic uint8_t order[RL_FLEET_PIPE_RING];
    char sha[2][41];            /* written by the opener, read while open */
    char why[RL_FLEET_WHY_MAX]; /* the last failure, for the stderr line */
    struct rl_fleet_conn c;
    struct rl_fleet_pipe_slot slot[RL_FLEET_PIPE_SLOTS];
};

/* A closed pipe to the node at `addr`; late replies go to `late`, with
 * `ctx`. */
void rl_fleet_pipe_init(struct rl_fleet_pipe *p,
                        const struct rl_fleet_addr *addr, rl_fleet_late_fn late,
                        void *ctx);

/* Start using p: when it is closed, this thread opens it (connect, AUTH
 * with password_file, SELECT, SCRIPT LOAD; bounded by open_ns of its
 * own); while another opens it, or the last users of a broken one leave
 * it, wait until `deadline`. 0, or -errno with p->why saying why. Every
 * 0 is paired with one rl_fleet_pipe_leave. */
int rl_fleet_pipe_enter(struct rl_fleet_pipe *p, const char *password_file,
                        uint64_t open_ns, uint64_t deadline);

/* Stop using p; the last thread to leave a broken pipe closes it. */
void rl_fleet_pipe_leave(struct rl_fleet_pipe *p);

/* Send what `build` makes: `skip` + 1 commands written together (so that
 * nothing of another thread's comes between them: `ASKING` and the
 * command it is for), whose last reply is the ticket's and the others'
 * are dropped; raw: that reply kept whole in the result. 0 and *ticket (the
 * slot its reply will be in), -EBUSY (RL_FLEET_PIPE_RING commands owed, no free
 * slot, or the send side held past what w allows), -E2BIG, or -errno (the
 * pipe broke). */
int rl_fleet_pipe_send(struct rl_fleet_pipe *p, rl_fleet_build_fn build,
                       void *ctx, unsigned skip, bool raw,
                       const struct rl_fleet_wait *w, uint64_t *ticket);

/* Wait for ticket's reply as w allows: 0 and *out (out->err says whether
 * it came); -ETIMEDOUT: the ticket is still owed, and the caller must give
 * it up with rl_fleet_pipe_abandon. */
int rl_fleet_pipe_wait(struct rl_fleet_pipe *p, uint64_t ticket,
                       const struct rl_fleet_wait *w,
                       struct rl_fleet_result *out);

/* Give a timed-out ticket up, leaving `late` for its reply. A reply that
 * came meanwhile goes to p->late at once, in this thread. */
void rl_fleet_pipe_abandon(struct rl_fleet_pipe *p, uint64_t ticket,
                           const struct rl_fleet_late *late);

/* Mark p broken (a reply its owner could not use: a protocol error). */
void rl_fleet_pipe_break(struct rl_fleet_pipe *p, const char *why);

/* ---- Redis's silence (fleet_quiet.c) -----------------------------------*/

/* How long p's node has said nothing while replies were owed, at coarse
 * clock `cnow`: since the later of its last reply read (or data the kernel
 * had for p when a late call looked) and the first command owed on an
 * idle pipe; 0 when nothing is owed. A call that timed out on a node that
 * was not quiet that long was late, not met by Redis away. No system
 * call: any thread. */
uint64_t rl_fleet_pipe_quiet_ns(struct rl_fleet_pipe *p, uint64_t cnow);

/* rl_fleet_pipe_quiet_ns, and when that is `quiet` or more, what the
 * kernel says came on p's socket that no thread of ours has read yet
 * (which then moves last_reply on). Only by a thread that entered p. */
uint64_t rl_fleet_pipe_heard_ago(struct rl_fleet_pipe *p, uint64_t quiet);

/* A wait on p as w allows that reached `deadline` at `now`: the deadline
 * it goes on to while the node is not quiet (rl_fleet_pipe_heard_ago below
 * w->quiet) and w->late is not reached; else `deadline` itself (the wait
 * ends). Only by a thread that entered p. */
uint64_t rl_fleet_pipe_wait_on(struct rl_fleet_pipe *p,
                               const struct rl_fleet_wait *w, uint64_t deadline,
                               uint64_t now);

/* In the child after fork: the parent's connection and whatever its
 * threads were doing on it are dropped (the socket closed while it is
 * ours, the reader forgotten, not freed); the pipe is closed. */
void rl_fleet_pipe_atfork_child(struct rl_fleet_pipe *p);

#endif
