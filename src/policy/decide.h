/* decide.h — the one entry through which a carrier (the shim's hooks, the
 * --seccomp supervisor) asks policy about a call and tells it what came
 * of it: classify, ask (rl_decide), apply, settle (rl_settle).
 *
 * A call is described by its kind's question (decide_send.h,
 * decide_connect.h, decide_request.h), each of which begins with a
 * `struct rl_call` naming the kind, so one entry answers every kind; the
 * answer goes where the carrier keeps it, named by the verdict. The
 * kinds' own functions are policy's, and its unit tests'. */
#ifndef RL_POLICY_DECIDE_H
#define RL_POLICY_DECIDE_H

#include <stdbool.h>
#include <stdint.h>

struct rl_proc;
struct rl_send_answer;
struct rl_connect_answer;
struct rl_request_answer;
struct rl_request_question;
struct rl_reqconn;

enum rl_call_kind {
    RL_CALL_SEND = 0, /* struct rl_send_question */
    RL_CALL_CONNECT,  /* struct rl_connect_question */
    RL_CALL_REQUEST,  /* struct rl_request_question */
};

/* The first member of every question: which kind of call it describes. */
struct rl_call {
    int kind; /* enum rl_call_kind */
};

/* Where the answer goes: the member of the call's kind. Passed by value
 * (one pointer: a register). */
union rl_answer {
    struct rl_send_answer *send;
    struct rl_connect_answer *connect;
    struct rl_request_answer *request;
};

/* Decide the call `c` (the first member of its question) into v. */
void rl_decide(struct rl_proc *p, const struct rl_call *c, union rl_answer v);

/* What came of a decided call, for rl_settle. */
struct rl_outcome {
    int kind; /* enum rl_call_kind */
    union {
        struct { /* rl_settle_send */
            struct rl_send_answer *a;
            bool leased;
            uint64_t calls, bytes;
        } send;
        struct { /* rl_settle_connect */
            struct rl_connect_answer *a;
            int fd, r, err;
        } connect;
        struct { /* rl_settle_request */
            struct rl_reqconn *c;
            const struct rl_request_question *q;
            struct rl_request_answer *a;
            long sent;
        } request;
    };
};

/* Settle o (its kind's settle). Returns what rl_settle_request returns
 * for a request (true: plain, the fd's requests are counted no further),
 * else false. */
bool rl_settle(struct rl_proc *p, const struct rl_outcome *o);

#endif
