/* fleet_ping.c — `rlshim check`'s look at the fleet's Redis (fleet.h's
 * rl_fleet_ping): a connection of its own, the handshake, one PING, its
 * round trip; nothing of the process's struct rl_fleet. On purpose: the
 * CLI checks a config file, and has no process's fleet (route, pipes,
 * budgets) to borrow a connection from; the socket, the handshake and
 * the reply are fleet_conn.c's, as the pipes' are. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "fleet/fleet.h"
#include "fleet/fleet_addr.h"
#include "fleet/fleet_conn.h"
#include "util/clock.h"

int rl_fleet_ping(const struct rl_config *cfg, uint64_t *rtt_ns, char *why,
                  size_t whylen)
{
    struct rl_fleet_addr addr;
    const char *bad = rl_fleet_addr_parse(cfg->fleet, &addr);
    if (bad != NULL) {
        snprintf(why, whylen, "%s", bad);
        return -EINVAL;
    }
    /* A connection of its own (the CLI's): on the heap, it is 12 KiB. */
    struct rl_fleet_conn *c = calloc(1, sizeof *c);
    int r = c != NULL ? 0 : -ENOMEM;
    char sha[2][41] = {"", ""};
    uint64_t t0 = rl_clock_now_ns();
    if (c != NULL) {
        c->fd = -1;
        r = rl_fleet_conn_open(c, &addr, cfg->fleet_password, sha,
                               t0 + 10 * (uint64_t)RL_FLEET_WAIT_NS);
        snprintf(why, whylen, "%s", c->why);
    }
    if (r == 0) {
        uint64_t t1 = rl_clock_now_ns();
        static const char ping[] = "*1\r\n$4\r\nPING\r\n";
        redisReply *rep = NULL;
        r = rl_fleet_conn_send_raw(c, ping, sizeof ping - 1,
                                   t1 + 10 * (uint64_t)RL_FLEET_WAIT_NS);
        if (r == 0)
            r = rl_fleet_conn_reply(c, &rep,
                                    t1 + 10 * (uint64_t)RL_FLEET_WAIT_NS);
        *rtt_ns = rl_clock_now_ns() - t1;
        if (r < 0)
            snprintf(why, whylen, "%s", strerror(-r));
        else if (rep->type != REDIS_REPLY_STATUS) {
            r = rl_fleet_conn_error(c, rep, "PING");
            snprintf(why, whylen, "%s", c->why);
        }
        if (rep != NULL)
            freeReplyObject(rep);
        rl_fleet_conn_close(c);
    }
    free(c);
    return r;
}
