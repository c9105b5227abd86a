/* names.h — per process, the host name each address was last resolved
 * from (SPEC §1: a destination's *name*).
 *
 * The shim's resolver hooks note every (address, name) pair a lookup
 * returned; the connect path asks for the name of the address it is about
 * to charge. The table (struct rl_names, a member of the process's struct
 * rl_proc) is process memory (its entries mapped at the first note: a
 * program that resolves nothing maps none of it, and a look-up then costs
 * one relaxed load),
 * bounded (RL_NAMES_SLOTS pairs, 4-way sets, the oldest of a set replaced),
 * written under a per-entry sequence word and read lock-free: a reader
 * that races a writer retries a few times and then reports no name, never
 * a torn one. A reader never waits (no allocation, no system call, no
 * lock: async-signal-safe, though a handler interrupting a writer of the
 * same entry on its own thread reads "no name"); writers take turns on
 * one word (yielding while another writes, for a few hundred ns), and a
 * note made in a handler that interrupted a note of its own thread is
 * dropped. fork() keeps the table (a copy; see rl_names_atfork_child);
 * exec drops it. */
#ifndef RL_POLICY_NAMES_H
#define RL_POLICY_NAMES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/atomics.h"

/* The longest name kept, without its NUL (a DNS name is at most 253). */
#define RL_NAME_MAX 253

/* Pairs kept (a power of two, a multiple of the 4 ways). */
#define RL_NAMES_SLOTS 8192u

#define RL_NAMES_NAME_WORDS ((RL_NAME_MAX + 1 + 7) / 8)

/* One pair. Every word is atomic (names.c says why). */
struct rl_names_entry {
    rl_atomic_u64 seq;    /* odd while written */
    rl_atomic_u64 key[3]; /* family (0: empty), then the 16 address bytes */
    rl_atomic_u64 len;
    rl_atomic_u64 stamp; /* when written: the oldest of a set goes first */
    rl_atomic_u64 name[RL_NAMES_NAME_WORDS];
};

/* The table. All zero is empty. The entries (2.4 MiB) are mapped by the
 * first note, not kept in the library's bss: every process of a host maps
 * that at load, and most never resolve a name (SPEC §13). */
struct rl_names {
    _Atomic(struct rl_names_entry *) table; /* RL_NAMES_SLOTS, or NULL */
    rl_atomic_u64 noted;  /* notes so far: 0 = nothing to look up */
    rl_atomic_u64 writer; /* 0, or the writing thread's pthread_self */
    rl_atomic_u64 busy;   /* 1 + the index of the entry being written */
};

/* Put `name` (n bytes, not NUL-terminated) in canonical form into `out`
 * (RL_NAME_MAX + 1 bytes): ASCII lower case, one trailing dot dropped.
 * Returns its length, or 0 when it is empty, too long, or holds a byte
 * that no host name has (a NUL, blank, '/', ':', '[', ']', '@'...). */
size_t rl_name_canon(const char *name, size_t n, char *out);

/* Is `s` (n bytes) an address literal rather than a name: IPv4 in any
 * form getaddrinfo reads as one (dotted quad, 127.1, 0x7f000001), IPv6
 * (with a %zone or not)? A lookup of a literal names its addresses by
 * themselves (rl_names_forget). */
bool rl_name_is_literal(const char *s, size_t n);

/* Remember that `addr` (family AF_INET: 4 bytes, AF_INET6: 16 bytes;
 * IPv4-mapped IPv6 is kept as IPv4) was resolved from `name` (canonical
 * form, `n` bytes). Later notes of the same address replace earlier. */
void rl_names_note(struct rl_names *t, int family, const void *addr,
                   const char *name, size_t n);

/* A lookup of an address literal resolved to `addr` (family as for
 * rl_names_note): its last name is now its literal, i.e. none is kept
 * (SPEC §1: a program that fetched http://localhost/ and then
 * http://127.0.0.1/ is charged by name, then by literal). */
void rl_names_forget(struct rl_names *t, int family, const void *addr);

struct addrinfo;
struct hostent;

/* A lookup's answer as the resolver hooks have it (the one question they
 * ask): `node` as the program spelled it, whether AI_NUMERICHOST was asked
 * (a literal, whatever it reads like), and the answer: getaddrinfo's list
 * or gethostbyname*'s entry (the other NULL). */
struct rl_name_answer {
    const char *node;
    bool numeric;
    const struct addrinfo *ai;
    const struct hostent *h;
};

/* Note every AF_INET/AF_INET6 address of the answer under its node's
 * name (canonical form: rl_name_canon); a literal's addresses are named by
 * themselves again (rl_names_forget); a node that is no name that can be
 * kept notes nothing. No system call. */
void rl_names_resolved(struct rl_names *t, const struct rl_name_answer *a);

/* The name last noted in t for `addr` (family AF_INET or AF_INET6, as an
 * rl_peer holds it: IPv4-mapped already folded), copied into `buf`
 * (RL_NAME_MAX + 1 bytes, NUL-terminated). Returns its length, or 0 when
 * the address was never resolved (or a writer kept the entry busy, or t
 * is NULL: no table). */
size_t rl_names_find(struct rl_names *t, int family, const uint8_t *addr,
                     char *buf);

/* Forget everything (tests). */
void rl_names_clear(struct rl_names *t);

/* The fork step, in the child (pthread_atfork): a note that another
 * thread of the parent was making when it forked is dropped, and the
 * writers' word it held is freed, so the child's own notes never wait on
 * a thread it does not have. Async-signal-safe; no system call. */
void rl_names_atfork_child(struct rl_names *t);

/* Unmap t's entries (t is empty after it). For a table that is not the
 * process's own (the CLI's): never while another thread may use t. */
void rl_names_unmap(struct rl_names *t);

#endif
