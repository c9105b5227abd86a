/* gate.h — one decision per call: is this call charged, and may it go?
 *
 * The gate holds the process's rule (found once from its identity), the
 * budget slot in the state store, and the log settings. The shim asks it;
 * it never sleeps and never touches an fd of the program: it returns how
 * long to sleep and the hook does that with nothing held. Counters in the
 * slot are updated here (relaxed adds: statistics only), counting units
 * when spent: a unit leased ahead counts when a call spends it, a unit
 * given back (rl_gate_refund) is taken off, never below zero.
 *
 * Each decision reads the clock once; the *_at forms take `now` instead,
 * for tests that step time by hand. Not async-signal-safe: a call from a
 * signal handler is decided by rl_gate_handler. */
#ifndef RL_POLICY_GATE_H
#define RL_POLICY_GATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "policy/config.h"
#include "policy/identity.h"
#include "util/atomics.h"

struct budget;
struct rl_proc;

enum rl_gate_act {
    RL_GATE_GO = 0,   /* call the real function, after sleeping wait_ns */
    RL_GATE_FAIL = 1, /* return -1 with errno = err, do nothing */
};

/* One budget a call is charged to, and what the decision took there.
 * A call may be charged to several (RL_GATE_MAX_CHARGES): the user's rule
 * (or its budget for the destination, `per = destination`) and the first
 * site section that covers the destination (or the site's budget for the
 * destination). All must allow, and a refund goes back to each. */
#define RL_GATE_MAX_CHARGES 2
struct rl_gate_charge {
    struct budget *budget;      /* gate-private: its counters (and leases) */
    const struct rl_rule *rule; /* whose limits and deny settings */
    /* The limiters taken from: the budget's own, or a per-destination
     * entry's (policy/dests.h), whose key is checked again after taking. */
    rl_word *states[RL_KIND_COUNT][RL_MAX_RATES];
    rl_atomic_u64 *key_word;
    uint64_t key;
    rl_atomic_u64 *open_area; /* a per-destination entry's max_open area */
    /* The key of its destination's pause and pace (SPEC §12, §14;
     * policy/pauses.h) in its budget's store: 0 when none (not a
     * request, or its section neither obeys 429/503 nor keeps a pace,
     * policy/pace.h), and that of the destination not told ("-"),
     * which every request of the section obeys too. */
    uint64_t pause_key, pause_key_untold;
    bool took[RL_KIND_COUNT];
    uint64_t granted[RL_KIND_COUNT];
    bool fleet[RL_KIND_COUNT]; /* decided by fleet.c: never refunded */
    /* Its fleet budget's owner (NULL: the user's rule budget, named at
     * rl_fleet_init) and whether it is the one of t->dest. */
    const char *fleet_owner;
    bool fleet_dest;
    /* Each limit's verdict, for a give-back: one row per kind a call can
     * take (a connect: RL_KIND_CONNECT; a send: RL_KIND_SEND and
     * RL_KIND_SEND_BYTES), row rl_gate_vrow(kind). Last, and never
     * zero-filled: written by the take that reads it. */
    struct rl_verdict v[2][RL_MAX_RATES];
};

static inline unsigned rl_gate_vrow(int kind)
{
    return kind == RL_KIND_SEND_BYTES;
}

/* What a line of the shim's log says about a decision (gate_log.h). */
struct rl_gate_line {
    const char *what; /* "denied", "would deny", "delayed" */
    int kind;         /* denied: the kind over quota */
    uint64_t units;   /* denied: how many were asked */
    uint64_t wait_ns; /* delayed: for how long */
    bool dry;
    const struct rl_rule *by; /* denied: the section that said no (NULL:
                                 the rule) */
    uint32_t max_open;        /* denied for max_open: its N; else 0 */
};

/* What one decision granted, kept by the hook until the real call has
 * returned, so that what the kernel did not take can be given back. */
struct rl_gate_ticket {
    /* Set by every decision first (rl_gate_ticket_init). */
    uint64_t now;      /* the clock reading of the decision */
    uint64_t calls;    /* `send` units granted (connect: 1) */
    uint64_t bytes;    /* `send_bytes` units granted */
    uint64_t retry_ns; /* RL_GATE_FAIL: ns until the denied units could
                          go (UINT64_MAX: never, or not known) */
    /* The config's generation the decision loaded once at its start
     * (policy/proc.h's rl_proc_gen) and its every step and its settle
     * use: set by each entry that starts a decision. */
    struct rl_gen *gen;
    /* Zero-filled by rl_gate_ticket_init, from wait_ns up to charge[]:
     * kept small and packed, as every connect's decision fills it. */
    uint64_t wait_ns; /* sleep until now + wait_ns before the call */
    int err;          /* RL_GATE_FAIL: the errno to set */
    unsigned ncharges;
    bool leased; /* granted from the thread's lease (rl_gate_send) */
    /* Decided in a signal handler (rl_gate_handler): every step of the
     * pipeline async-signal-safe (gate_signal.c says which). */
    bool handler;
    /* A line of the shim's log owed the send's destination (say, below):
     * the hook writes it with rl_gate_say_peer. */
    bool say_due;
    /* A connect the rule's lone connect limit granted at once
     * (rl_gate_connect_now): no charges (ncharges 0), but the
     * budget in charge[0].budget and the grant's stamp in
     * charge[0].v[0][0], so that rl_gate_refund gives its unit back as
     * it would a charge's. */
    bool alone;
    /* max_open (policy/open.h): the open areas this connect holds until
     * rl_gate_connected, and when one was full, which and its sequence. */
    unsigned nopen;
    uint32_t open_seq;
    rl_atomic_u64 *open[RL_GATE_MAX_CHARGES];
    rl_atomic_u64 *open_full;
    const struct rl_rule *denier; /* RL_GATE_FAIL: the section that said no */
    /* A request a pause held (SPEC §12): the reason the decision log
     * gives, "retry_after" or "backoff"; NULL: none held it. */
    const char *reason;
    /* rl_gate_request_again: the earlier turn the request gives up (the
     * decision log's moved_ns); 0 otherwise. */
    uint64_t moved_ns;
    /* A request's jitter (SPEC §14) where a fleet budget counts it: Redis
     * moves the turn it grants that much later (gate_decide.c); 0: none. */
    uint64_t fleet_jitter_ns;
    /* RL_GATE_FAIL of a request that q->respond lets the carrier answer
     * (on_deny = respond): the Retry-After to give, whole seconds in ns,
     * at least one second; 0 otherwise. respond_by: the section whose
     * on_deny, respond_status and request limit the answer names. */
    uint64_t respond_ns;
    const struct rl_rule *respond_by;
    /* charge[0, ncharges) only: the others are never read, so never
     * zero-filled. */
    struct rl_gate_charge charge[RL_GATE_MAX_CHARGES];
    /* Gate-private, while deciding only: the destination's name for a
     * per-destination fleet budget, in the decision's own frame. */
    char *dest;
    /* say_due: the line (never zero-filled: read only then). */
    struct rl_gate_line say;
};

/* Set the process up: find the rule for `id` in `cfg` (kept, not copied:
 * it must outlive the process's use of the gate), open the state store
 * and claim the slot. On a store problem, one line goes into `why` and the
 * gate keeps budgets in process memory. Returns 0 or -errno. */
int rl_gate_init(struct rl_proc *p, const struct rl_config *cfg,
                 const struct rl_identity *id, char *why, size_t whylen);

/* The same set-up into G, a generation not yet published (a reload's,
 * policy/reload.c): the per-process state it touches (the decision
 * log's file, max_open's map, the fleet, the leases' key) is p's. */
struct rl_gen;
int rl_gate_init_gen(struct rl_proc *p, struct rl_gen *G,
                     const struct rl_config *cfg,
                     const struct rl_identity *id, char *why, size_t whylen);

/* Is anything enforced for this process (a rule, or unknown = deny)? */
bool rl_gate_active(const struct rl_proc *p);

/* Are sends charged at all (a send or send_bytes limit, or unknown =
 * deny)? When not, the shim leaves sockets unmarked for sends, so they
 * cost nothing. */
bool rl_gate_charges_sends(const struct rl_proc *p);

/* Does the process's rule cover this destination (AF_INET/AF_INET6 only,
 * IPv4-mapped IPv6 as IPv4)? */
bool rl_gate_covers(struct rl_proc *p, const void *sa, unsigned salen);
/* The same under G, the generation the caller's decision loaded. */
struct rl_gen;
bool rl_gate_covers_in(struct rl_proc *p, const struct rl_gen *G,
                       const void *sa, unsigned salen);

/* Is every inet connect charged alike whatever address it names, and
 * nothing kept per connection: a rule without `to`, no site, no
 * per-destination budget, no max_open? (The --seccomp supervisor then
 * lets the kernel make a connect it charged.) */
bool rl_gate_connects_alike(const struct rl_proc *p);

/* A new stream connection attempt to `sa` (covered). `call` and `fd` name
 * the call in a log line. */
/* rl_gate_connect_at in its two steps, for a caller that has loaded
 * t->gen (its decision's one load, policy/proc.h's rl_proc_gen) and read
 * the clock itself (the reading its reload look was due by); two calls
 * rather than one so that the common connect passes through no frame that
 * only holds the call's words for the second step. First the common
 * connect: charged to the rule alone, which its one limit grants now,
 * taken and counted (t says go). false: nothing was taken, and
 * rl_gate_connect_whole decides it (waits, denies, logs). */
bool rl_gate_connect_now(struct rl_gate_ticket *t, uint64_t now);
int rl_gate_connect_whole(struct rl_proc *p, struct rl_gate_ticket *t,
                          uint64_t now, const char *call, int fd,
                          const void *sa, unsigned salen);
int rl_gate_connect(struct rl_proc *p, struct rl_gate_ticket *t,
                    const char *call, int fd, const void *sa, unsigned salen);
int rl_gate_connect_at(struct rl_proc *p, struct rl_gate_ticket *t,
                       uint64_t now, const char *call, int fd, const void *sa,
                       unsigned salen);

/* After the real connect of a granted attempt: `holds` when it made a
 * connection (or one is in progress): the connection counts against
 * max_open until its last fd is closed; else what it held goes back. */
void rl_gate_connected(struct rl_proc *p, struct rl_gate_ticket *t, int fd,
                       bool holds);

/* A connect denied because a max_open was reached: should the caller
 * (a blocking socket) wait for a close and decide again? Sets *deadline
 * on the first call (0 on entry); false in fail mode, for another denial,
 * or past the deadline (the section's max_delay). */
bool rl_gate_open_waits(const struct rl_gate_ticket *t, uint64_t *deadline);

/* Sleep until a connection of the full area closes (or a while: a killed
 * holder wakes nobody), holding nothing. */
void rl_gate_open_wait(const struct rl_gate_ticket *t, uint64_t deadline);

/* Without sleeping: has the full area of a connect denied for max_open
 * freed a place since (a close, or a holder that died)? Deciding again is
 * worth it only then. */
bool rl_gate_open_freed(const struct rl_gate_ticket *t);

/* Does a decision need the destination of a send without an address (a
 * site, a per-destination budget, the decision log)? Then the hook asks
 * the kernel for the fd's peer and hands it over as `sa`: the gate never
 * asks about the program's fds. (The shim's log asks for it only for a
 * line it writes: rl_gate_say_peer.) */
bool rl_gate_needs_peer(const struct rl_proc *p);

/* A send of `calls` units (calls_min of them at least: sendmmsg may send a
 * prefix) carrying `bytes` (bytes_min at least; a stream send passes 1, a
 * datagram its whole size). `sa` is the destination: the explicit one, or
 * the fd's peer as the hook found it (rl_gate_needs_peer), or NULL when
 * not known (the rule's own budget is charged; `fd` names the call in log
 * lines). On GO, t->calls and t->bytes say
 * what was granted; the caller trims its call to that. In delay mode a
 * part is granted only when 1/16 of the byte burst is free at least (else
 * the whole is reserved and slept for), so that a client coming straight
 * back gets a sleep, not a few bytes per call. */
int rl_gate_send(struct rl_proc *p, struct rl_gate_ticket *t, const char *call,
                 int fd, const void *sa, unsigned salen, uint64_t calls,
                 uint64_t calls_min, uint64_t bytes, uint64_t bytes_min);
/* rl_gate_send under generation G, which the caller loaded once for its
 * whole decision (proc.h's rl_proc_gen): its checks before the gate's and
 * the gate's own are of one config. */
struct rl_gen;
int rl_gate_send_in(struct rl_proc *p, struct rl_gen *G,
                    struct rl_gate_ticket *t, const char *call, int fd,
                    const void *sa, unsigned salen, uint64_t calls,
                    uint64_t calls_min, uint64_t bytes, uint64_t bytes_min);
/* rl_gate_send_at under t->gen, loaded by the caller. */
int rl_gate_send_loaded_at(struct rl_proc *p, struct rl_gate_ticket *t,
                           uint64_t now, const char *call, int fd,
                           const void *sa, unsigned salen, uint64_t calls,
                           uint64_t calls_min, uint64_t bytes,
                           uint64_t bytes_min);
int rl_gate_send_at(struct rl_proc *p, struct rl_gate_ticket *t, uint64_t now,
                    const char *call, int fd, const void *sa, unsigned salen,
                    uint64_t calls, uint64_t calls_min, uint64_t bytes,
                    uint64_t bytes_min);

/* After a decision of a send made without its destination (`sa` NULL)
 * that left t->say_due: write the shim's log line, naming `sa` (the fd's
 * peer as the hook found it now; NULL: "fd N" only). The rate limit
 * admitted the line already; nothing when t->say_due is not set. */
void rl_gate_say_peer(struct rl_proc *p, struct rl_gate_ticket *t,
                      const char *call, int fd, const void *sa, unsigned salen);

/* One question about `units` HTTP requests (SPEC §11), as the request
 * layer (policy/reqconn.h) hands it over: the connection (fd, -1 when not
 * known: a TLS library writing to a memory BIO; its peer `sa`, NULL when
 * not known), the name the requests are charged to (the first's Host or
 * absolute-form authority, else the TLS server name; NULL: the
 * connection's name, policy/names.h) and its port (0: the connection's),
 * and, for the decision log, the first request's method and target. The
 * gate never asks the kernel anything about the connection. */
struct rl_gate_req {
    const char *call; /* the libc or TLS name, for log lines */
    int fd;
    const void *sa;
    unsigned salen;
    const char *name;
    uint16_t port;
    const char *method, *target;
    uint64_t units; /* all or none */
    /* A request the write is cut before should it be refused: the write
     * that then starts with it asks again, and that decision is the one
     * counted and logged (a dry run's "would deny" goes now, and is). */
    bool cut;
    /* The carrier can answer it itself (SPEC §15: a plaintext HTTP/1.x
     * request the shim sees): a denial under on_deny = respond is then
     * RL_GATE_FAIL with t->respond_ns set, counted and logged as
     * "respond"; false: such a denial fails as under fail. */
    bool respond;
};

/* Decide q: RL_GATE_GO (after sleeping t->wait_ns: the turn is reserved)
 * or RL_GATE_FAIL (t->err; t->retry_ns says when `units` could go, or
 * UINT64_MAX). A connection with no request budget at all is GO with no
 * charge (t->ncharges 0). Give a granted request back with
 * rl_gate_refund(t, RL_KIND_REQUEST, units). */
int rl_gate_request(struct rl_proc *p, struct rl_gate_ticket *t,
                    const struct rl_gate_req *q);
int rl_gate_request_at(struct rl_proc *p, struct rl_gate_ticket *t,
                       uint64_t now, const struct rl_gate_req *q);

/* Would every budget that charges q (none dry-run) make a request over
 * it wait for its turn (on_deny = delay) rather than refuse it? Decides
 * and takes nothing: a write of several requests then asks a turn for
 * each (SPEC §11), never one for all that a burst smaller than them
 * refuses, and that would count as denied. */
bool rl_gate_request_delays(struct rl_proc *p, const struct rl_gate_req *q);

/* Would every budget that charges q (none dry-run) answer a request over
 * it (on_deny = respond, SPEC §15)? Decides and takes nothing: a TLS
 * write of several HTTP/2 streams then has each decided and answered
 * apart, not all refused together. */
bool rl_gate_request_responds(struct rl_proc *p, const struct rl_gate_req *q);

/* A request that rl_gate_request granted a later turn, decided again at
 * that turn (`turn`, CLOCK_MONOTONIC ns; `now` at or after it), q as it
 * was decided then (SPEC §12: a pause of its destination that came while
 * it waited holds it too). RL_GATE_GO with t->wait_ns 0 and nothing
 * taken: no pause, it goes now. RL_GATE_GO with t->wait_ns > 0: a new
 * turn after the pause, taken like any request's (the old turn stays
 * spent: once later turns were reserved behind it, it cannot be given
 * back exactly, and a give-back that may be lost is under-use, never a
 * burst). RL_GATE_FAIL: the pause ends past max_delay (or fail mode). */
int rl_gate_request_again(struct rl_proc *p, struct rl_gate_ticket *t,
                          uint64_t now, uint64_t turn,
                          const struct rl_gate_req *q);

/* What the server answered to a request decided by rl_gate_request (SPEC
 * §12), as the receive side hands it over: q names the request as it did
 * for the decision (the same budgets are found), `status` is the
 * response's status code, and `has_retry_after` says whether it carried a
 * well-formed Retry-After, whose wait is `retry_after_ns` from now
 * (http/retry_after.h; saturated values welcome). A 429 or 503 pauses
 * every request budget of q whose section obeys retry_after until
 * now + min(Retry-After, max_retry_after) or, without the header, for one
 * turn of the budget's slowest request limit, doubling with each 429/503
 * in a row, capped alike. A pause only ever moves later. Any other final
 * status (1xx is not one) ends the doubling. SPEC §14: which statuses
 * pause without Retry-After is the section's backoff_on (429 and 503
 * by default; 5xx: any 500-599); a 2xx-4xx it does not list ends the
 * doubling, a 5xx it does not list changes nothing. Budgets with
 * `retry_after = ignore`, or without a request limit, are left alone. */
void rl_gate_request_outcome(struct rl_proc *p, const struct rl_gate_req *q,
                             int status, bool has_retry_after,
                             uint64_t retry_after_ns);
void rl_gate_request_outcome_at(struct rl_proc *p, const struct rl_gate_req *q,
                                int status, bool has_retry_after,
                                uint64_t retry_after_ns, uint64_t now);

/* The request q was answered `response_ns` after its head went (SPEC
 * §14): each of its budgets whose section adapts to latency moves its
 * destination's interval (limit/adapt.h's rl_adapt_latency), written
 * only when it moved. policy/gate_pace.c. */
void rl_gate_request_latency(struct rl_proc *p, const struct rl_gate_req *q,
                             uint64_t response_ns, uint64_t now);

/* A request decided by rl_gate_request got no answer, at `now` (SPEC §14
 * backoff_on): `cause` is limit/adapt.h's RL_ADAPT_CAUSE_RESET (the
 * server reset or closed its connection before the answer began) or
 * _TIMEOUT (none began within response_timeout; `waited_ns` is how long
 * it waited). Each request budget of q whose section obeys retry_after
 * and lists the cause (a timeout: and whose response_timeout it waited)
 * counts it as a 429 without Retry-After: one more in a row, the pause
 * doubled. */
void rl_gate_request_failed_at(struct rl_proc *p, const struct rl_gate_req *q,
                               unsigned cause, uint64_t waited_ns,
                               uint64_t now);

/* The shortest response_timeout of a section that lists backoff_on =
 * timeout (0: none does): a request outstanding less long is not late. */
uint64_t rl_gate_response_timeout(const struct rl_proc *p);

/* One call made from a signal handler, as the hook hands it over whole:
 * its kind (RL_KIND_CONNECT, or RL_KIND_SEND with `bytes`, at least
 * `bytes_min` of them: 0 or 1 for a stream, all for a datagram), `calls`
 * units (all or none), and its destination (the explicit one, or the
 * fd's peer the hook asked the kernel for; NULL when it has none). */
struct rl_gate_q {
    int kind;
    const void *sa;
    unsigned salen;
    uint64_t calls, bytes, bytes_min;
    /* The generation the caller's decision loaded for its own checks
     * (proc.h's rl_proc_gen), decided under; NULL: loaded here. */
    struct rl_gen *gen;
};

/* Decide q with async-signal-safe steps only (gate_signal.c says which):
 * every budget of the call, none made, nothing waited for (delay mode
 * fails at once), a fleet budget only from the host's lease, nothing
 * logged, nothing to give back later. On GO *granted says how many bytes
 * may go; on FAIL *err is the errno to set. */
int rl_gate_handler(struct rl_proc *p, const struct rl_gate_q *q,
                    uint64_t *granted, int *err);

/* Give back `units` of `kind` granted by the ticket (the kernel took less,
 * or the call failed). Also lowers the allowed counter. */
void rl_gate_refund(struct rl_proc *p, struct rl_gate_ticket *t, int kind,
                    uint64_t units);

/* In the child after fork: drop what a thread of the parent may have been
 * doing (re-opening a replaced segment), which no thread of the child
 * will finish. Async-signal-safe. */
void rl_gate_atfork_child(struct rl_proc *p);

/* The hot path of a send of one call and `len` bytes (a stream send may
 * be cut to the gate's max_bytes): the units come out of the calling
 * thread's lease (policy/lease.c), with no clock read but the coarse one,
 * one uncontended CAS on a cache line of the thread's own, nothing
 * logged. Returns the bytes granted, or 0 when the lease cannot
 * cover the call (then decide it with rl_gate_send). */
uint64_t rl_gate_send_leased(struct rl_proc *p, uint64_t len, bool stream);

/* Give back to the thread's lease what a leased send did not use. */
void rl_gate_lease_refund(struct rl_proc *p, uint64_t calls, uint64_t bytes);

/* Count this process's decisions for rl_gate_finish's report. Call at
 * load, before any hook acts. */
void rl_gate_report_enable(struct rl_proc *p);

/* At process exit: give the calling thread's lease back and, when the
 * report is on, write one stderr line per limit of the rule (calls seen,
 * allowed, denied, delayed by this process, leased units counted as
 * spent, as `rlshim stat` counts them), or one line saying why nothing
 * was throttled. Other threads' leases go back when idle (lease.c). */
void rl_gate_finish(struct rl_proc *p);

/* ns from now until one send call carrying `bytes` could go without
 * waiting (every limit of send and send_bytes has them free); 0 when it
 * could go now, UINT64_MAX when it never could. Asks each limit (eta in
 * limit.h), so it changes no budget; a sliding window whose lock could
 * not be had says RL_GATE_ETA_RETRY_NS (ask again then). For the wait
 * calls of non-blocking sockets (policy/ready.h). */
#define RL_GATE_ETA_RETRY_NS 10000000u
uint64_t rl_gate_send_eta(struct rl_proc *p, uint64_t bytes);
/* The same under generation G, the caller's decision's one load. */
uint64_t rl_gate_send_eta_in(const struct rl_gen *G, uint64_t bytes);

/* The least part of a stream send worth granting when it cannot go whole:
 * 1/16 of the gate's max_bytes (at least 1), capped at `want`. With 1
 * byte as the least, a client that comes back a few microseconds after a
 * short grant gets the few bytes refilled meanwhile, call after call: a
 * busy loop of tiny sends, never a wait. */
uint64_t rl_gate_send_least(const struct rl_gen *G, uint64_t want);

/* The same for a non-blocking socket, which is held, not put to sleep,
 * when denied: no more than the slowest byte rate refills in 10 ms
 * either. A client that comes back sooner than that is denied and held;
 * a slow budget's last bytes (or a refund) are granted as they are. */
uint64_t rl_gate_send_least_nonblocking(const struct rl_gen *G, uint64_t want);

#endif
