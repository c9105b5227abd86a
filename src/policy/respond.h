/* respond.h — the made-up responses of one connection (SPEC §15,
 * on_deny = respond): a request over its budget is not sent, and the
 * program reads, where the server's answer would have been,
 *
 *     HTTP/1.1 429 Too Many Requests
 *     Retry-After: N
 *     Content-Type: text/plain
 *     Content-Length: L
 *     Connection: keep-alive
 *
 *     rlshim: request limit of [site:api] (10/s)
 *
 * A queue per connection, in the order the requests were refused, each
 * entry behind the server's answers owed when it was made: HTTP/1.x
 * answers come in order, so a made-up one is handed out only once the
 * answers to the requests sent before it were read in full.
 *
 * Pure: no I/O, no clock, no locks; the caller holds the connection's
 * shared state (reqconn.h rl_reqconn_hold). Allocated at the first
 * refusal only: a connection never refused costs a NULL pointer. */
#ifndef RL_POLICY_RESPOND_H
#define RL_POLICY_RESPOND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

/* Room for one response: its head and a body naming a section. */
#define RL_MADEUP_MAX 512
/* Refusals waiting at once per connection: a client reads its answers
 * before it asks many more; past this, a refusal fails as under fail. */
#define RL_RESPOND_MAX 16

struct rl_madeup {
    uint16_t len;   /* bytes of the response */
    uint16_t off;   /* handed to the program so far */
    uint8_t after;  /* the server's answers owed before it */
    char bytes[RL_MADEUP_MAX];
};

struct rl_respond {
    struct rl_madeup q[RL_RESPOND_MAX]; /* a ring from head */
    unsigned head, n;
};

/* The response to a request refused with `status` (429 or 503), asking
 * the client to wait retry_s seconds, its body naming `section` and its
 * request limit `rate` ("10/s"). Returns its length, 0 when it does not
 * fit in len. */
size_t rl_respond_format(char *buf, size_t len, int status, uint64_t retry_s,
                         const char *section, const char *rate);

/* Queue the response formatted as above behind `after` answers of the
 * server, allocating *r at first use. false: no room or memory (the
 * refusal then fails, as under fail). */
bool rl_respond_push(struct rl_respond **r, int status, uint64_t retry_s,
                     const char *section, const char *rate, unsigned after);

/* The server's final answer to a request sent before the queued ones
 * began (respconn.c pairs them): each entry owes one fewer. */
void rl_respond_answered(struct rl_respond *r);

/* Is a made-up response's byte the program's next one? `between`: the
 * server's stream is between two answers (none partly read). */
static inline bool rl_respond_due(const struct rl_respond *r, bool between)
{
    return r != NULL && r->n > 0 && r->q[r->head].after == 0 &&
           (between || r->q[r->head].off > 0);
}

/* Copy the due response's next bytes into iov[0..n) (when `consume`,
 * they are taken; a peek leaves them). Returns the bytes copied: the
 * rest of one response at most, so a read ends where it does. */
size_t rl_respond_take(struct rl_respond *r, const struct iovec *iov,
                       size_t n, bool consume);

void rl_respond_free(struct rl_respond *r);

#endif
