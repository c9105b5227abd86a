/* sup_calls.h — what the supervisor decides for one notified system call
 * (connect, sendto, sendmsg, sendmmsg; close, dup2, dup3 and close_range
 * when a rule has max_open), and the target's memory and fds it reads to
 * decide. The event loop (supervise.c) owns the answering,
 * the timer queue and the threads; this part only decides. */
#ifndef RL_CLI_SUP_CALLS_H
#define RL_CLI_SUP_CALLS_H

#include <linux/seccomp.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "cli/sup_open.h"
#include "cli/sup_target.h"
#include "policy/decide_connect.h"
#include "policy/decide_send.h"
#include "policy/open.h"

/* The supervisor (cli/sup.h): its gate (`proc`, set up by
 * cmd_run_seccomp.c before the target starts) decides; `kernel`, `open`
 * and the listener serve the decision. */
struct rl_sup;

/* One notification on its way to an answer. The loop owns it; a thread
 * that makes a blocking connect owns it while it does. */
struct sup_job {
    uint64_t id;  /* the notification's cookie */
    pid_t pid;    /* the calling thread (our PID namespace) */
    int fd;       /* the program's fd number (for log lines) */
    int sock;     /* our copy of the program's socket (closed after the
                     answer), or -1 */
    int err;      /* SUP_ERROR: the errno to answer */
    bool connect; /* when due: make the connect here (else continue) */
    bool charged; /* the answer took units (a refund gives them back) */
    bool unread;  /* a connect decided without its address (on_connect) */
    uint64_t due; /* SUP_DUE: CLOCK_MONOTONIC ns of the call's turn */
    /* max_open: the target process the answer's places (t.open) are held
     * for, until sup_settle binds them to its fd or gives them back. */
    struct rl_open_holder holder;
    socklen_t salen;
    struct sockaddr_storage sa;
    /* policy's answer (decide_connect.h, decide_send.h): a send's when
     * `is_send`, else a connect's (a connect, or a MSG_FASTOPEN send's). */
    bool is_send;
    union {
        struct rl_connect_answer connect;
        struct rl_send_answer send;
    } answer;
};

enum sup_act {
    SUP_CONTINUE = 0,  /* let the kernel run the call as the program made it */
    SUP_ERROR = 1,     /* answer -1 with job->err, nothing done */
    SUP_CONNECT = 2,   /* make the connect here now, answer its result */
    SUP_DUE = 3,       /* wait until job->due, then CONNECT or CONTINUE */
    SUP_OPEN_WAIT = 4, /* max_open reached, delay mode: sup_redecide when
                          sup_open_ready */
};

/* Decide one notification; fills `job` (zeroed by the caller, with id and
 * pid set, sock = -1). `pidfds` is the calling thread's cache (a
 * receiver's). The notification is checked to be still alive
 * (SECCOMP_IOCTL_NOTIF_ID_VALID on s->listener) after reading the
 * target's memory and before taking its fd. */
enum sup_act sup_decide(struct rl_sup *s, struct sup_pidfds *pidfds,
                        const struct seccomp_notif *req, struct sup_job *job);

/* Right before a granted connect is answered: the places it holds are
 * bound to the target's fd when `holds` (it connected, or is connecting),
 * else given back. */
void sup_settle(struct sup_open *o, struct sup_job *job, bool holds);

/* SUP_OPEN_WAIT: may a place have freed (or is the wait over) at `now`? */
bool sup_open_ready(const struct sup_job *job, uint64_t now);

/* SUP_OPEN_WAIT: decide the connect again (any thread, with its own
 * `pidfds`). SUP_ERROR with ESRCH when the caller is gone. */
enum sup_act sup_redecide(struct rl_sup *s, struct sup_pidfds *pidfds,
                          struct sup_job *job);

/* Give back what a job's ticket took, its max_open places too (its
 * caller is gone before its turn). */
void sup_refund(struct rl_sup *s, struct sup_job *job);

#endif
