/* robotsread.c — see robotsread.h. */
#include "policy/robotsread.h"

#include <stdlib.h>
#include <string.h>

#include "http/h2body.h"
#include "http/robots_body.h"
#include "policy/gate.h"
#include "policy/gate_crawl.h"
#include "policy/names.h"
#include "policy/reqconn.h"
#include "policy/zlibload.h"

struct rl_robotsread {
    char name[RL_NAME_MAX + 1]; /* "": the connection's destination */
    uint16_t port;
    /* HTTP/2: the body is its stream's DATA, taken out of the frames of
     * every stream the program reads (h2body.h). */
    bool h2;
    struct rl_h2body h2b;
    struct rl_robots_body body; /* last: its arena is never zeroed */
};

void rl_robotsread_drop(struct rl_reqconn *c)
{
    free(c->robots);
    c->robots = NULL;
}

void rl_robotsread_start(struct rl_reqconn *c, const struct rl_resp_event *e,
                         const char *name, uint16_t port)
{
    rl_robotsread_drop(c);
    enum rl_robots_coding coding =
        rl_robots_coding(e->coding, strlen(e->coding));
    /* zlib is loaded by the first compressed answer; without it such an
     * answer is one in a coding not read. */
    const struct rl_robots_zlib *zlib = NULL;
    if (coding != RL_ROBOTS_IDENTITY && coding != RL_ROBOTS_UNREADABLE)
        zlib = rl_zlibload_process();
    if (coding == RL_ROBOTS_UNREADABLE ||
        (coding != RL_ROBOTS_IDENTITY && zlib == NULL))
        return; /* no answer to be had: no memory spent */
    /* Only the body's head is zeroed (rl_robots_body_init): zlib's arena
     * is written before it is read. */
    struct rl_robotsread *rr = malloc(sizeof *rr);
    if (rr == NULL)
        return;
    size_t n = name != NULL ? strnlen(name, RL_NAME_MAX) : 0;
    memcpy(rr->name, name != NULL ? name : "", n);
    rr->name[n] = '\0';
    rr->port = port;
    rr->h2 = e->stream_id != 0;
    if (rr->h2)
        rl_h2body_init(&rr->h2b, e->stream_id, e->h2_skip);
    const char *ua = c->http.robots_ua;
    rl_robots_body_init(&rr->body, ua, strlen(ua), e->chunked, e->length,
                        coding, zlib);
    c->robots = rr;
}

/* The read is over: the delay its body gave, if it was read whole, goes
 * to the gate; the state is freed. */
static void settle(struct rl_proc *proc, struct rl_reqconn *c,
                   const struct rl_reqread *r)
{
    struct rl_robotsread *rr = c->robots;
    if (rl_robots_body_state(&rr->body) == RL_ROBOTS_READ) {
        uint64_t delay = 0;
        /* No Crawl-delay for the agent is an answer too: it clears the
         * delay an earlier robots.txt set (read again, it replaces). */
        if (!rl_robots_body_delay(&rr->body, &delay))
            delay = 0;
        struct rl_gate_req q = {
            .call = r->call,
            .fd = r->fd,
            .sa = c->salen > 0 ? &c->peer : NULL,
            .salen = c->salen,
            .name = rr->name[0] != '\0' ? rr->name : NULL,
            .port = rr->port,
            .units = 1,
        };
        (void)rl_gate_crawl_delay(proc, &q, delay);
    }
    rl_robotsread_drop(c);
}

void rl_robotsread_feed(struct rl_proc *proc, struct rl_reqconn *c,
                        const uint8_t *buf, size_t n,
                        const struct rl_reqread *r)
{
    struct rl_robotsread *rr = c->robots;
    if (rr == NULL)
        return;
    if (rr->h2)
        rl_h2body_feed(&rr->h2b, buf, n, &rr->body);
    else
        rl_robots_body_feed(&rr->body, buf, n);
    if (rl_robots_body_state(&rr->body) != RL_ROBOTS_READING)
        settle(proc, c, r);
    else if (rr->h2 && rl_h2body_done(&rr->h2b))
        rl_robotsread_drop(c); /* the stream was cut short */
}

void rl_robotsread_end(struct rl_proc *proc, struct rl_reqconn *c,
                       const struct rl_reqread *r)
{
    struct rl_robotsread *rr = c->robots;
    if (rr == NULL)
        return;
    /* An HTTP/2 body ends with its stream: the connection's end before
     * that cut it short. */
    if (rr->h2) {
        rl_robotsread_drop(c);
        return;
    }
    rl_robots_body_close(&rr->body);
    settle(proc, c, r);
}
