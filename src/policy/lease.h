/* lease.h — units a thread takes ahead from a budget and spends with no
 * clock read but the coarse one (see lease.c for the invariants). */
#ifndef RL_POLICY_LEASE_H
#define RL_POLICY_LEASE_H

#include <pthread.h>
#include <stdalign.h>
#include <stdbool.h>
#include <stdint.h>

#include "policy/config.h"
#include "util/atomics.h"

struct budget;
struct rl_report;

/* Threads of one process that may hold a lease at once; others decide
 * every call on their own. */
#define RL_LEASE_HOLDERS 64

/* A thread's side of its lease. Only its thread writes it (and, at exit,
 * the exiting thread reads `spent`: relaxed atomics). */
struct rl_lease_holder {
    alignas(64) rl_atomic_u64 in_use;   /* claimed by a thread */
    struct budget *from;                /* NULL: holds no record */
    rl_atomic_u64 *rec;                 /* the record's words */
    uint64_t word;                      /* word 0 as last written */
    uint64_t tick;                      /* coarse time of the stamp */
    unsigned index;                     /* the record's bit */
    rl_atomic_u64 spent[RL_KIND_COUNT]; /* not yet in the report */
    const struct rl_leases *owner;      /* the table it is a holder of */
    struct rl_report *report;           /* which: its process's */
};

/* The process's leases (a member of struct rl_proc). All zero: none. */
struct rl_leases {
    struct rl_lease_holder holders[RL_LEASE_HOLDERS];
    pthread_key_t key; /* a thread's holder, given back at its exit */
    bool keyed;        /* key was made */
};
struct rl_proc;

/* At init, once the rule is known: fill g->lease (on, sizes), g the
 * gate of the generation being built (policy/proc.h's struct rl_gen). */
struct rl_gate;
void rl_lease_setup(struct rl_proc *p, struct rl_gate *g);

/* One send call out of the calling thread's lease: rl_lease_take, inline
 * in policy/lease_take.h. */

/* Empty the calling thread's lease (what is left goes back to the budget
 * it came from, what was spent is counted), keeping its record for the
 * next refill. */
void rl_lease_drop(struct rl_proc *p);

/* Give the calling thread's lease and its record back (process exit). */
void rl_lease_finish(struct rl_proc *p);

/* After a send decided on its own that granted `bytes` without a wait:
 * fill the calling thread's lease again from b when b is far from
 * binding. */
void rl_lease_refill(struct rl_proc *p, struct budget *b, uint64_t now,
                     uint64_t bytes);

/* Give back to the thread's lease what a leased send did not use. */
void rl_lease_refund(struct rl_proc *p, uint64_t calls, uint64_t bytes);

/* Before a decision of `calls` and `bytes` at `now` (any thread, any
 * process): when b's buckets are short of them or under half full, take
 * back every record idle for RL_LEASE_IDLE_NS: units left go back to the
 * bucket, units spent into the counters. */
void rl_lease_reclaim(struct budget *b, uint64_t now, uint64_t calls,
                      uint64_t bytes);

/* At exit, before the report: add what every thread of this process
 * spent from its lease and did not fold yet. */
void rl_lease_report(struct rl_proc *p);

/* In the child after fork: the leases are the parent's. */
void rl_lease_atfork_child(struct rl_proc *p);

#endif
