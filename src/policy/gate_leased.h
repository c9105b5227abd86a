/* gate_leased.h — the gate's hot path, inline in the send hooks: a send of
 * one call and `len` bytes out of the calling thread's lease (lease.c),
 * or out of a fleet budget's host lease (fleet_lease.h; out of line).
 *
 * It is split in two around the real call. The take calls nothing: no
 * clock read, one uncontended CAS, nothing logged. The record's stamp (a
 * clock read, out of line) comes after the real call. So the hook saves
 * few registers, and a leased send is one call of the shim's beside the
 * real one. rl_gate_send_leased (gate.h) is both halves at once. */
#ifndef RL_POLICY_GATE_LEASED_H
#define RL_POLICY_GATE_LEASED_H

#include <stdbool.h>
#include <stdint.h>

#include "policy/decide_send.h"
#include "policy/gate.h"
#include "policy/lease_take.h"
#include "policy/proc.h"

/* What a send of `len` bytes asks: a stream send may be cut to
 * the gate's max_bytes. */
static inline uint64_t rl_gate_send_want(const struct rl_gate *g, uint64_t len,
                                         bool stream)
{
    return stream && len > g->max_bytes ? g->max_bytes : len;
}

/* A fleet budget's host lease, asked of the send entry (out of line:
 * the hot path keeps no frame for its question). */
static __attribute__((noinline, cold, unused)) uint64_t
rl_gate_send_fleet_leased(struct rl_proc *p, uint64_t len, bool stream)
{
    const struct rl_send_question q = {.head = {RL_CALL_SEND},
                                       .want = len,
                                       .stream = stream,
                                       .asker = RL_SEND_LEASE_ONLY};
    struct rl_send_answer a;
    rl_decide(p, &q.head, (union rl_answer){.send = &a});
    return a.act == RL_GATE_GO ? a.t.bytes : 0;
}

/* The bytes granted out of the thread's lease, or 0 when the lease
 * cannot cover the call: then decide it with rl_gate_send. Calls nothing
 * (but the send entry for a fleet budget's host lease). *h is what to
 * stamp after the real call (rl_gate_send_leased_done, or the carrier's
 * settle when rl_lease_stamp_due). */
static inline __attribute__((always_inline)) uint64_t
rl_gate_send_leased_take(struct rl_proc *p, uint64_t len, bool stream,
                         struct rl_lease_holder **h)
{
    struct rl_gen *G = rl_proc_gen(p);
    const struct rl_gate *g = &G->gate;
    if (__builtin_expect(!g->lease.on, 0))
        return g->fleet_lease ? rl_gate_send_fleet_leased(p, len, stream) : 0;
    uint64_t want = rl_gate_send_want(g, len, stream);
    if (want == 0 || (*h = rl_lease_take_hot(p, G, want)) == NULL)
        return 0;
    return want;
}

/* After the real call of a send the lease covered: stamp the record (the
 * stamp is never later than the holder's last call: it is read now). */
static inline void rl_gate_send_leased_done(struct rl_lease_holder *h)
{
    if (h != NULL)
        rl_lease_stamp(h);
}

#endif
