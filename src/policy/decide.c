/* decide.c — rl_decide and rl_settle: one entry for every kind of call
 * (see decide.h). A send is asked first: it is the call made most. */
#include "policy/decide.h"

#include "policy/decide_connect.h"
#include "policy/decide_request.h"
#include "policy/decide_send.h"

void rl_decide(struct rl_proc *p, const struct rl_call *c, union rl_answer v)
{
    if (__builtin_expect(c->kind == RL_CALL_SEND, 1)) {
        rl_decide_send(p, (const struct rl_send_question *)c, v.send);
        return;
    }
    if (c->kind == RL_CALL_CONNECT) {
        rl_decide_connect(p, (const struct rl_connect_question *)c, v.connect);
        return;
    }
    const struct rl_request_question *q = (const struct rl_request_question *)c;
    rl_decide_request(p, q->conn, q, v.request);
}

bool rl_settle(struct rl_proc *p, const struct rl_outcome *o)
{
    switch (o->kind) {
    case RL_CALL_SEND:
        rl_settle_send(p, o->send.a, o->send.leased, o->send.calls,
                       o->send.bytes);
        return false;
    case RL_CALL_CONNECT:
        rl_settle_connect(p, o->connect.a, o->connect.fd, o->connect.r,
                          o->connect.err);
        return false;
    default:
        return rl_settle_request(p, o->request.c, o->request.q, o->request.a,
                                 o->request.sent);
    }
}
