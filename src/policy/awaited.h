/* awaited.h — requests awaiting an answer, seen from their destination
 * rather than their connection (SPEC §14 backoff_on = timeout: "noticed
 * at the destination's next request or decision").
 *
 * A connection's record of its requests (reqconn.h's sent[]) is looked
 * at by that connection's own next request, read and close. That misses
 * a program that leaves a connection hanging and asks again on another
 * one, and one that gives up on a request before response_timeout and
 * closes its connection: the request then never gets an answer, and the
 * destination never hears of it. So the process keeps, when some section
 * lists backoff_on = timeout:
 *   - a list of its connections that have carried requests, which any
 *     request's decision walks (at most once per eighth of the shortest
 *     response_timeout), counting each one's oldest late request;
 *   - a few requests whose connection was closed by the program before
 *     their answer began and before response_timeout ran out (orphans),
 *     counted by the first decision after it has.
 * Every count goes to rl_gate_request_failed_at, which pauses the
 * request's destination in the segment (and Redis), for every process.
 *
 * Locks: the list's word is taken with a wait only to join or leave it
 * (never in a signal handler: conntab.c frees connections outside them),
 * and only tried by a walk; a walk only tries a connection's word too,
 * so a thread holding its own connection never waits for another's. */
#ifndef RL_POLICY_AWAITED_H
#define RL_POLICY_AWAITED_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "policy/names.h"

struct rl_proc;
struct rl_reqconn;

/* One request late or orphaned, copied out of its connection (which may
 * be freed before it is counted). */
struct rl_awaited_req {
    char name[RL_NAME_MAX + 1]; /* as it was charged; "" : the peer's */
    uint16_t port;
    struct sockaddr_storage peer;
    socklen_t salen;
    uint64_t sent_ns; /* when the write that carried it returned */
};

#define RL_AWAITED_ORPHANS 8

struct rl_awaited {
    uint32_t lock;  /* util/waitlock.h word: the list and the orphans */
    uint32_t epoch; /* a fork child's list starts again: a connection
                       joined in another epoch is in no list */
    struct rl_reqconn *head;
    uint64_t next_look; /* atomic, relaxed: no walk before (mono ns) */
    struct rl_awaited_req orphan[RL_AWAITED_ORPHANS];
    bool orphaned[RL_AWAITED_ORPHANS];
};

/* c (held by the caller) joins p's list, once, when some section lists
 * backoff_on = timeout. */
void rl_awaited_join(struct rl_proc *p, struct rl_reqconn *c);

/* c leaves the list it joined (before it is freed; no word of c held). */
void rl_awaited_leave(struct rl_reqconn *c);

/* The program closed the connection of request *o before its answer
 * began and before response_timeout ran out: kept, to be counted once it
 * has. The one sent last gives way when the orphans are full. */
void rl_awaited_orphan(struct rl_proc *p, const struct rl_awaited_req *o);

/* A request's decision (of connection `self`, held by the caller; its
 * own records are its caller's to look at) at `now`: the late requests
 * of the process's other connections and its orphans go to
 * rl_gate_request_failed_at as timeouts. `call`: the caller's name in
 * log lines. */
void rl_awaited_look(struct rl_proc *p, struct rl_reqconn *self,
                     const char *call, uint64_t now);

/* Count *o as a timeout of `waited` ns at `now` (log lines name `call`,
 * `fd`). */
void rl_awaited_count(struct rl_proc *p, const struct rl_awaited_req *o,
                      const char *call, int fd, uint64_t now);

/* A fork child's: the list and its word start again. */
void rl_awaited_atfork_child(struct rl_awaited *a);

#endif
