/* readahead.h — a write waiting for its turn looks at what the server
 * sent meanwhile (SPEC §12: an answer the program has not read yet still
 * pauses the requests waiting behind it).
 *
 * A client that guards a connection with one lock (httpcore's HTTP/2
 * connection; any writer and reader sharing a socket that way) reads
 * nothing while its writer waits in the shim for a turn: a 429 that came
 * meanwhile would be read only after that turn, and the request would go
 * inside the pause. So the wait also wakes when the socket turns
 * readable, and then looks:
 *   - plaintext: a peek (MSG_PEEK) of the stream from the program's next
 *     byte goes to the connection's response side as read ahead, and the
 *     program's own reads of those bytes later are not read again
 *     (policy/decide_request.h RL_READ_AHEAD);
 *   - TLS (OpenSSL, a non-blocking socket): a library's peek shows one
 *     record only, so the look reads what the session has for the
 *     program, holds it for the program's reads, which return it first,
 *     and has the wait calls report the socket readable meanwhile
 *     (tlstab.h rl_tlstab_look).
 * At the turn the write is decided again, and a pause that came holds
 * it. A blocking write waits asleep (rl_readahead_sleep: plaintext); a
 * non-blocking one in the program's poll (waitlook.h: both).
 *
 * A look is made only while no read of the program is under way on that
 * connection (readers.h); after one, the socket is looked at again only
 * when the bytes waiting in it changed, every RL_LOOK_SLICE_NS at most,
 * so bytes the program has not read yet never make a wait spin. */
#ifndef RL_SHIM_READAHEAD_H
#define RL_SHIM_READAHEAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct rl_reqconn;

/* A plaintext connection to look at: its socket and its connection. */
struct rl_look {
    int fd;
    struct rl_reqconn *c;
};

/* How often a socket looked at already is looked at again, at most. */
#define RL_LOOK_SLICE_NS 20000000ull

/* A blocking write's sleep to its turn: rl_shim_sleep_on (shim.h),
 * looking at fd's stream as above when it turns readable; look NULL: not
 * at all. Holds nothing; keeps errno. True: fd hung up. */
bool rl_readahead_sleep(int fd, uint64_t deadline_ns,
                        const struct rl_look *look);

/* One look at a plaintext stream, when no read of the program is under
 * way there: true when made (whether or not it saw anything new). */
bool rl_readahead_look(const struct rl_look *l);

/* For the wait calls (waitlook.h), which know a held socket by its fd:
 * can its stream be looked at (counted plaintext requests, or a TLS
 * session that can be read ahead over it)? And one look at it. */
bool rl_readahead_can(int fd);
void rl_readahead_look_fd(int fd);

/* The bytes waiting in fd's receive queue (FIONREAD; 0 when unknown). */
int rl_readahead_waiting(int fd);

#endif
