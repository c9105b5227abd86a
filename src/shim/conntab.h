/* conntab.h — the plaintext TCP connections whose requests are counted
 * (SPEC §11): fd → struct rl_reqconn (policy/reqconn.h).
 *
 * A connection is added at its connect when a request limit applies in
 * the process, and carries the fd mark RL_FD_HTTP; its close (any close
 * path, dup2 over it) removes it. A signal handler neither allocates nor
 * locks: its connect only marks the fd (RL_FD_HTTP_LATE), and the
 * connection is made at the first send or read outside a handler; its
 * close leaves the entry, stale, for the number's next connect to
 * replace.
 * A write holds its connection from the plan to the commit (acquire ...
 * release), across the sleep and the real call, and a read from the
 * real call's return to the end of its look at the answers; the two
 * hold it apart, so a thread that reads while another's write sleeps
 * for its turn sees the answers (a 429 that pauses that write among
 * them). What both sides touch is taken only for a moment
 * (rl_reqconn_hold, policy/reqconn.h), never across a sleep or a call.
 * A close meanwhile only unlinks it, and the last holder frees it when
 * it lets go. A second thread writing on the same connection at the same
 * time is not scanned (its bytes would interleave anyway), nor a second
 * one reading. The table's lock is held only to look up, link and
 * unlink, never across a call; the fork child re-makes it
 * (rl_conntab_atfork_child). */
#ifndef RL_SHIM_CONNTAB_H
#define RL_SHIM_CONNTAB_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "policy/reqconn.h" /* RL_TLS_RANDOM: its hello */

struct rl_reqconn;

/* The table (a member of the shim's struct rl_shim, shim/self.h). All
 * zero: empty (a zero mutex is PTHREAD_MUTEX_INITIALIZER on glibc). */
struct rl_conntab {
    pthread_mutex_t lock;
    struct rl_reqconn **by_fd; /* [cap], NULL: none */
    unsigned cap;
    atomic_uint n; /* linked: the close of any fd looks only when > 0 */
    atomic_bool tls_loaded; /* once seen, a library stays */
};

/* Count the requests of fd, connecting to sa. Returns true when fd now
 * has a connection (mark it RL_FD_HTTP). */
/* The record of a connection whose requests are counted, to `sa` (NULL:
 * not known), made by policy (rl_policy_fd_event); NULL when there is no
 * memory. rl_conn_over lets it go (c NULL: nothing). */
struct rl_reqconn *rl_conn_begun(const struct sockaddr *sa, socklen_t len);
void rl_conn_over(struct rl_reqconn *c);

bool rl_conntab_open(int fd, const struct sockaddr *sa, socklen_t len);

/* fd's mark carries RL_FD_HTTP_LATE (its connect was a signal
 * handler's): make its connection now, to fd's peer, and take the bit
 * off. Outside a handler, the guard held. While fd has no peer yet (its
 * connect in progress) the bit stays, for the next call. Keeps errno. */
void rl_conntab_late(int fd);

/* fd's connection, held by the caller's write until rl_conntab_release;
 * NULL when fd has none or another write holds it. A read may hold it
 * too. */
struct rl_reqconn *rl_conntab_acquire(int fd);
void rl_conntab_release(struct rl_reqconn *c);

/* The same for a read (hook_recv.c), until rl_conntab_release_read: when
 * another read holds the connection, the bytes this read returns go by
 * unseen, and its response side is told so (rl_reqconn_lost) before NULL
 * is returned. A write may hold it too. */
struct rl_reqconn *rl_conntab_acquire_read(int fd);
void rl_conntab_release_read(struct rl_reqconn *c);

/* fd is closed or replaced: its connection goes (now, or when its last
 * holder lets go). Cheap when the table is empty. */
void rl_conntab_forget(int fd);
void rl_conntab_forget_range(unsigned first, unsigned last);

/* A TLS layer counts fd's requests from now on (the socket layer stops). */
void rl_conntab_tls_owned(int fd);

/* The port of the CONNECT tunnel fd's connection carries (0: none, or
 * not a connection the table knows): a TLS session on fd names its
 * requests' port by it (policy/reqconn.h). */
uint16_t rl_conntab_tunnel_port(int fd);

/* The socket whose stream began with the ClientHello of client random
 * `random` and that no TLS layer owns yet: from now on its requests are
 * the TLS layer's and its sends wait while that session's writes wait
 * (tls_paced; a memory BIO's session). Returns the fd, or -1. Walks the
 * table: called at most a few times per session (shim/tlswrite.c). */
int rl_conntab_claim_hello(const uint8_t random[RL_TLS_RANDOM]);

/* Is a TLS library the shim reads (libssl, libgnutls) loaded in this
 * process? A TLS connection seen on a plaintext socket is then taken as
 * that library's (its writes are counted there); otherwise it is TLS the
 * shim cannot see. */
bool rl_conntab_tls_visible(void);

/* In the fork child: the lock is re-made; the parent's connections stay
 * (the child shares their sockets) but none is held, nor their state. */
void rl_conntab_atfork_child(void);

#endif
