/* robotsread.h — a robots.txt answer read as the program reads it (SPEC
 * §14): the response side (respconn.c) starts one at a `200` to a
 * `GET /robots.txt` (HTTP/1.x, or HTTP/2, whose body is taken out of
 * the answer's stream by http/h2body.h), feeds it the bytes after the
 * head, and at the body's end (or its first RL_ROBOTS_BODY_MAX bytes) the Crawl-delay
 * for the request's User-Agent goes to gate_crawl.h, named as the
 * request was charged. A body cut short, in a coding not read, or framed
 * before the server closed the connection changes nothing; one framed by
 * that close is read at it (rl_robotsread_end).
 *
 * A gzip or deflate body is inflated by a libz.so.1 loaded at the first
 * one (zlibload.h); a process that cannot load it reads none of them.
 * The state (zlib's window with it) is allocated for a robots.txt answer
 * alone and freed at its end: a connection holds one pointer otherwise.
 * Called holding the connection (rl_reqconn_hold). */
#ifndef RL_POLICY_ROBOTSREAD_H
#define RL_POLICY_ROBOTSREAD_H

#include <stddef.h>
#include <stdint.h>

#include "http/respscan.h"

struct rl_proc;
struct rl_reqconn;
struct rl_reqread;

/* The answer e (e->robots, a 200) begins: its body is read from the next
 * rl_robotsread_feed, to be charged as `name` (NULL: the connection's
 * destination) and `port`. One at a time: a read still going is dropped.
 * Nothing is read when there is no memory for it. */
void rl_robotsread_start(struct rl_reqconn *c, const struct rl_resp_event *e,
                         const char *name, uint16_t port);

/* The program read buf[0..n) after the head: the body's part of it is
 * read (what comes after the body is left); at its end the delay is
 * written and the state freed. No-op without a read going. */
void rl_robotsread_feed(struct rl_proc *proc, struct rl_reqconn *c,
                        const uint8_t *buf, size_t n,
                        const struct rl_reqread *r);

/* The server ended the connection (EOF): a body framed by the close is
 * read whole, and its delay written; any other going was cut short. */
void rl_robotsread_end(struct rl_proc *proc, struct rl_reqconn *c,
                       const struct rl_reqread *r);

/* Drops a read going, writing nothing (the responses are read no
 * further, or the connection ends). */
void rl_robotsread_drop(struct rl_reqconn *c);

#endif
