/* reqheld.h — a request whose bytes went ahead of its turn (SPEC §11,
 * §12): a TLS write into a memory BIO, whose program moves the
 * ciphertext itself later. The write cannot wait for its turn (its bytes
 * are in the BIO once it returns), so its socket does (policy/ready.h
 * RL_READY_TURN), and at that turn the request is decided again as the
 * other carriers' are at theirs (rl_gate_request_again): a pause of its
 * destination that came meanwhile holds it still.
 *
 * Detached from its connection (a copy of what the decision needs), so
 * that it may outlive the session and be decided from any thread: a
 * wait call that finds the turn come, or the socket's next send. */
#ifndef RL_POLICY_REQHELD_H
#define RL_POLICY_REQHELD_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "http/http.h"
#include "policy/names.h"

struct rl_proc;

struct rl_reqheld {
    uint64_t turn;    /* when it may go (CLOCK_MONOTONIC ns) */
    uint32_t units;   /* the requests of the write, each decided again */
    uint16_t port;    /* as charged (0: the peer's) */
    bool named;       /* `name` is its name; else the connection's */
    int fd;           /* as in its decision's log line */
    const char *call; /* the TLS call's name (a string literal) */
    struct sockaddr_storage sa; /* the connection's peer (salen 0: none) */
    socklen_t salen;
    char name[RL_HTTP_NAME_MAX + 1];
    char method[RL_HTTP_METHOD_MAX + 1];
    char target[RL_HTTP_TARGET_MAX + 1];
};

/* h at its turn, reached at `now` (at or after h->turn). Returns 0: it
 * goes now; -EAGAIN: a pause holds it until *until (h->turn moved there:
 * decided again then; its new turn is logged and counted as the other
 * carriers' are); or a positive errno: refused (the pause ends past
 * max_delay), the error its socket's sends are to fail with (said once
 * on stderr, overdue.h). */
int rl_reqheld_again(struct rl_proc *p, struct rl_reqheld *h, uint64_t now,
                     uint64_t *until);

#endif
