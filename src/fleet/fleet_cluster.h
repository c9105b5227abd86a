/* fleet_cluster.h — what a Redis Cluster says, read without a cluster
 * client (hiredis 0.14 has none): the slot of a key, the redirections
 * (`MOVED`, `ASK`), and the slot map (`CLUSTER SLOTS`, `CLUSTER SHARDS`).
 *
 * Pure: replies in, addresses and slots out. No I/O, no clock, no name
 * lookup (a node named by a host name rather than an address is refused,
 * as fleet_addr.h refuses one in the `fleet` key: a lookup is a wait that
 * cannot be bounded).
 *
 * Key naming (fleet.c): every key of one script is
 * `rlshim:{LABEL}:...`, LABEL the budget's label ("SECTION|USER", a
 * site's "site:S|USER", a per-destination one "...|NAME"). The hash tag
 * is the budget and nothing else, so a script's keys are always in one
 * slot (a Cluster runs a script only on the node of all its keys), and
 * two budgets (a user's rule and the site a call is also charged to) are
 * spread over the slots rather than held together: no call needs two
 * budgets in one script. A label holding `{` or `}` still gives one slot
 * per script: every key of it starts with the same `rlshim:{LABEL}`, and
 * the tag is decided by that prefix. */
#ifndef RL_FLEET_CLUSTER_H
#define RL_FLEET_CLUSTER_H

#include <hiredis/hiredis.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "fleet/fleet_addr.h"

#define RL_FLEET_SLOTS 16384u
/* Masters a process can know at once (node indices fit a byte). */
#define RL_FLEET_NODES 32u

/* The slot of `key`: CRC16 (XMODEM) of its hash tag — the bytes between
 * the first `{` and the first `}` after it, when there are some — else of
 * the whole key, mod 16384. */
unsigned rl_fleet_key_slot(const char *key, size_t len);

/* The slot of a hash tag's n bytes (CRC16 of them, mod 16384). */
unsigned rl_fleet_tag_slot(const char *tag, size_t n);

enum rl_fleet_redirect_kind {
    RL_FLEET_NO_REDIRECT = 0,
    RL_FLEET_MOVED, /* the slot lives there now: learn it */
    RL_FLEET_ASK,   /* this once, there, after ASKING (a slot migrating) */
};

struct rl_fleet_redirect {
    enum rl_fleet_redirect_kind kind;
    unsigned slot;
    struct rl_fleet_addr to;
};

/* Read an error reply's text (`err`, `len` bytes, without the leading
 * '-'): "MOVED SLOT HOST:PORT" or "ASK SLOT HOST:PORT". HOST is an IPv4
 * or IPv6 address (unbracketed, as Redis writes it) or empty, which means
 * the host of the node that answered (`asked`). Returns the kind (and
 * fills *out), RL_FLEET_NO_REDIRECT for any other error, or -EINVAL when
 * it is a redirection that cannot be followed (a host name, a bad port). */
int rl_fleet_redirect_parse(const char *err, size_t len,
                            const struct rl_fleet_addr *asked,
                            struct rl_fleet_redirect *out);

/* Called once per range of slots [first, last] and the address of the
 * master that serves it; nonzero stops the walk (and is returned). */
typedef int (*rl_fleet_range_fn)(void *ctx, unsigned first, unsigned last,
                                 const struct rl_fleet_addr *master);

/* Walk a `CLUSTER SLOTS` reply: [[first, last, [ip, port, id, ...],
 * replicas...], ...]. An empty ip is `asked`'s host; a range whose master
 * has no known endpoint ("?") is skipped. Returns 0, fn's nonzero, or
 * -EPROTO (the reply is not that shape), -EINVAL (a master named by host
 * name). */
int rl_fleet_cluster_slots(const redisReply *r,
                           const struct rl_fleet_addr *asked,
                           rl_fleet_range_fn fn, void *ctx);

/* Walk a `CLUSTER SHARDS` reply (Redis 7): each shard's "slots" pairs and
 * the node whose "role" is "master". As rl_fleet_cluster_slots. */
int rl_fleet_cluster_shards(const redisReply *r,
                            const struct rl_fleet_addr *asked,
                            rl_fleet_range_fn fn, void *ctx);

/* ---- the slot map a process learns ------------------------------------
 *
 * Which master serves each slot, as far as the process knows: learnt from
 * CLUSTER SLOTS and corrected by each MOVED. Read by every thread without
 * a lock, changed by any (relaxed byte stores: a stale read only costs a
 * MOVED, which corrects it). The node table only grows: an entry, once
 * published (release store of `n`, after its address), keeps its address
 * for the life of the process, so an index read from `node` always means
 * the same master (or one that was: its connection then gets MOVED). */
struct rl_fleet_map {
    _Atomic uint8_t node[RL_FLEET_SLOTS]; /* index + 1; 0: not known */
    _Atomic unsigned n;                   /* nodes published */
    struct rl_fleet_addr nodes[RL_FLEET_NODES];
    atomic_flag adding; /* one adder at a time */
};

/* The node index serving `slot`, or -1 when not known. */
int rl_fleet_map_node(struct rl_fleet_map *m, unsigned slot);

/* The index of the node at `a` (same family, address and port), added
 * when new. -ENOSPC when the table is full, -EAGAIN when another thread
 * is adding one (ask again). */
int rl_fleet_map_find(struct rl_fleet_map *m, const struct rl_fleet_addr *a);

/* Slots [first, last] are served by node `i`. */
void rl_fleet_map_set(struct rl_fleet_map *m, unsigned first, unsigned last,
                      int i);

#endif
