/* reqheld.c — a request decided again at its turn after its bytes went
 * ahead (see reqheld.h). */
#include "policy/reqheld.h"

#include <errno.h>

#include "policy/gate.h"
#include "policy/overdue.h"
#include "util/clock.h"

int rl_reqheld_again(struct rl_proc *p, struct rl_reqheld *h, uint64_t now,
                     uint64_t *until)
{
    const struct rl_gate_req q = {h->call,
                                  h->fd,
                                  h->salen > 0 ? &h->sa : NULL,
                                  (unsigned)h->salen,
                                  h->named ? h->name : NULL,
                                  h->port,
                                  h->method[0] != '\0' ? h->method : NULL,
                                  h->target[0] != '\0' ? h->target : NULL,
                                  1,
                                  false,
                                  false};
    struct rl_gate_ticket t;
    uint64_t wake = 0;
    /* One by one, as reqconn.c's decide_again: each request its own turn
     * after the pause; none paused means none of them is. */
    for (uint32_t i = 0; i < (h->units > 0 ? h->units : 1); i++) {
        if (rl_gate_request_again(p, &t, now, h->turn, &q) == RL_GATE_FAIL) {
            int err = t.err > 0 ? t.err : ETIMEDOUT;
            if (rl_overdue(&t, &err))
                rl_overdue_say(p, &t, q.name, q.sa, q.salen);
            return err;
        }
        if (t.wait_ns == 0)
            break;
        if (rl_add_sat_u64(now, t.wait_ns) > wake)
            wake = rl_add_sat_u64(now, t.wait_ns);
    }
    if (wake == 0)
        return 0;
    h->turn = wake;
    *until = wake;
    return -EAGAIN;
}
