/* fdlife.c — see fdlife.h. */
#include "policy/fdlife.h"

#include "policy/decide_request.h"
#include "policy/open.h"
#include "policy/proc.h"
#include "policy/ready.h"

/* A close lets go of the fd's connection, then of its entry; a copy
 * forgets the entry of the number it replaces, then shares the
 * connection of `first`. */
void rl_policy_fd_event(struct rl_proc *p, const struct rl_fd_event *ev)
{
    struct rl_open *o = &p->open;
    bool ready = ev->may_lock && rl_ready_any(&p->ready);
    switch (ev->what) {
    case RL_FDLIFE_CLOSED:
        if (o->on)
            rl_open_forget(o, (int)ev->first);
        if (ready)
            rl_ready_forget(p, (int)ev->first);
        break;
    case RL_FDLIFE_CLOSED_RANGE:
        if (ev->first > ev->last)
            break;
        if (o->on)
            rl_open_forget_range(o, ev->first, ev->last);
        if (ready)
            rl_ready_forget_range(p, ev->first, ev->last);
        break;
    case RL_FDLIFE_DUPED:
        if (ready)
            rl_ready_forget(p, (int)ev->last);
        /* a dup is the same connection */
        if (o->on && ev->first != ev->last)
            rl_open_dup(o, (int)ev->first, (int)ev->last);
        break;
    case RL_FDLIFE_CONN_BEGUN: {
        struct rl_reqconn *c = rl_request_conn_new(ev->sa, ev->salen);
        *ev->conn = c;
        break;
    }
    case RL_FDLIFE_CONN_OVER:
        rl_request_conn_free(*ev->conn);
        *ev->conn = NULL;
        break;
    }
}
