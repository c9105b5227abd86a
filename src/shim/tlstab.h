/* tlstab.h — the TLS sessions whose requests are counted (SPEC §11): an
 * SSL* or gnutls_session_t → its struct rl_reqconn (policy/reqconn.h).
 *
 * An entry is made by the session's first counted write (or, GnuTLS, by
 * the server name the program sets before it) and goes at SSL_free /
 * gnutls_deinit. The lock is held only to look up, link and unlink; an
 * entry is used outside it by the thread that writes on its session (the
 * library itself forbids freeing a session another thread writes on).
 *
 * Fork: the child inherits the table with its sessions (their sockets
 * and library state are the child's too), so a child that goes on
 * writing on a session goes on counting it from where the parent was; a
 * write the parent had in flight in another thread is not in the child.
 * rl_tlstab_atfork_child re-makes the lock (another thread may have held
 * it at the fork); links are made with one pointer store after the entry
 * is complete, so the child never sees half an entry. */
#ifndef RL_SHIM_TLSTAB_H
#define RL_SHIM_TLSTAB_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "policy/names.h"

struct rl_reqconn;

/* Chained buckets: a process holds a few sessions to a few hundred, and a
 * chain is walked under the lock only. */
#define RL_TLSTAB_BUCKETS 256

/* The table (a member of the shim's struct rl_shim, shim/self.h). All
 * zero: empty. */
struct rl_tlstab {
    pthread_mutex_t lock;
    _Atomic unsigned n;
    struct rl_tlsent *head[RL_TLSTAB_BUCKETS];
};

struct rl_tlsent {
    const void *key;
    struct rl_tlsent *next;
    struct rl_reqconn *c; /* NULL until the first counted write */
    int fd;               /* the session's socket (-1: not known) */
    /* Its library's read that never waits (tlswrite.h), when fd is
     * known: NULL, none. */
    long (*read_ahead)(void *session, void *buf, size_t n);
    /* Plaintext a look read from the session before the program did
     * (readahead.h), held for the program's reads: the first held_n
     * bytes of `held` (RL_TLS_HELD_MAX allocated; NULL: none yet). */
    char *held;
    uint32_t held_n;
    int wire;             /* fd -1: the socket its ciphertext was seen on
                             (a BIO of the program's, curl's; -1: none) */
    bool membio;          /* its ciphertext goes through a BIO the program
                             empties (wire: found by its handshake) */
    unsigned char hello_looks; /* times its wire was looked for so */
    char name[RL_NAME_MAX + 1]; /* GnuTLS: the server name set ("": none) */
    /* A write that went in pieces and stopped before its end (a piece's
     * turn is later, or the library asked for the piece again): its
     * length (0: none), a hash of its bytes, and the bytes that went. The
     * program's retry of the same bytes goes on from there (tlswrite.c). */
    size_t part_n, part_done;
    uint64_t part_hash;
};

/* The entry of `key`; made (zeroed, fd and wire -1) when `make` and there is none.
 * NULL when there is none (or no memory). Allocates: never from a signal
 * handler. */
struct rl_tlsent *rl_tlstab_get(const void *key, bool make);

/* The session `key` is freed: its entry goes. Cheap when the table is
 * empty. */
void rl_tlstab_drop(const void *key);

/* Is there a session over the socket fd whose stream a write waiting for
 * its turn may look at (readahead.h)? With `look`, one look at it, made
 * under the table's lock (the session is not freed meanwhile): what the
 * library has for the program is read now, up to RL_TLS_HELD_MAX held,
 * and goes to the response side at once; the program's reads of the
 * session return it first (hook_tls_read.c), and the wait calls report
 * the socket readable while any is held. True when made. */
#define RL_TLS_HELD_MAX 65536u
bool rl_tlstab_look(int fd, bool look);

/* Is a made-up answer (SPEC §15) due on the connection of the session
 * whose socket is fd (its fd, or its wire when it has none): would its
 * next read return it? Walks the table under its lock (asked only while
 * some fd has an answer queued), so a session freed meanwhile is never
 * looked at. A connection another thread holds counts as due: that
 * thread is inside a call on the session, and is out of it soon. */
bool rl_tlstab_madeup_due(int fd);

/* In the fork child (shim/init.c's handler, beside
 * rl_conntab_atfork_child). */
void rl_tlstab_atfork_child(void);

#endif
