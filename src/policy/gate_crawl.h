/* gate_crawl.h — robots.txt's Crawl-delay (SPEC §14): what a robots.txt
 * read through the shim says becomes the pace of the destination its
 * request was charged by, in each section that obeys it, for every
 * process of the user. The body is read by policy/robotsread.c; the
 * requests that wait for the delay are gate_decide.c's. */
#ifndef RL_POLICY_GATE_CRAWL_H
#define RL_POLICY_GATE_CRAWL_H

#include <stdbool.h>
#include <stdint.h>

#include "policy/config.h"

struct rl_proc;
struct rl_gate_req;

/* Does section r space requests by robots.txt (crawl_delay = obey, and a
 * request limit to space)? */
bool rl_crawl_obeyed(const struct rl_rule *r);

/* A robots.txt answered (200) to the request q names, as it was charged,
 * gives `delay_ns` for its agent (0: none, which clears a delay read
 * before): each section of its budgets that obeys it spaces that
 * destination's requests so far apart (cut at max_crawl_delay) for a day
 * from `now` or until robots.txt is read again. Returns how many pace
 * entries it changed. */
unsigned rl_gate_crawl_delay_at(struct rl_proc *p, const struct rl_gate_req *q,
                                uint64_t delay_ns, uint64_t now);

/* rl_gate_crawl_delay_at now. */
unsigned rl_gate_crawl_delay(struct rl_proc *p, const struct rl_gate_req *q,
                             uint64_t delay_ns);

#endif
