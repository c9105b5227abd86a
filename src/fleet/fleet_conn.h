/* fleet_conn.h — one connection to the fleet's Redis: the socket, the
 * handshake, commands out as RESP written by hand, replies in through
 * hiredis's reader (the only part of hiredis used, so that every socket
 * call is ours and bounded by poll). Every wait ends at a deadline.
 *
 * The socket is the shim's inside a program that owns every other number,
 * so:
 * - it lives above RL_SYS_FD_FLOOR (util/sys.h), where a program's dup2
 *   over its low numbers never lands;
 * - what it is (st_dev, st_ino) is recorded at connect, and checked before
 *   every send, receive and close: a number the program closed and reused,
 *   or dup2'd over, is the program's, never written, read or closed here
 *   (the connection is then forgotten, and the next call opens another);
 * - every system call goes through rl_sys, never a name the shim hooks.
 *
 * Buffers (the command being built, what is read, why it failed) are in
 * the connection, not on the caller's stack: a program thread that makes a
 * fleet decision lends the shim a few hundred bytes of its stack, not
 * kilobytes. Not thread-safe: its owner serialises the calls (fleet.c
 * under its lock). */
#ifndef RL_FLEET_CONN_H
#define RL_FLEET_CONN_H

#include <hiredis/hiredis.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "fleet/fleet_addr.h"

#define RL_FLEET_CMD_MAX 8192
#define RL_FLEET_WHY_MAX 256

struct rl_fleet_conn {
    /* -1: none. Stored after dev and ino, so that a forked child (which
     * reads it without the lock, fleet.c) never sees a number without
     * what it must be. */
    _Atomic int fd;
    dev_t dev;
    ino_t ino;
    redisReader *rd;
    size_t len;    /* of the command in out */
    bool overflow; /* the command did not fit: it is not sent */
    char out[RL_FLEET_CMD_MAX];
    char in[4096];
    char why[RL_FLEET_WHY_MAX]; /* the last failure, for the stderr line */
};

/* Connect c (fd -1) to `addr`, then in one write: AUTH with the password
 * in `password_file` (NULL: none), SELECT addr->db, SCRIPT LOAD of both
 * scripts, whose SHA1s go to sha[0] (bucket) and sha[1] (window). Returns
 * 0, or -errno with c closed and c->why saying what failed. */
int rl_fleet_conn_open(struct rl_fleet_conn *c,
                       const struct rl_fleet_addr *addr,
                       const char *password_file, char (*sha)[41],
                       uint64_t deadline);

/* The handshake of rl_fleet_conn_open again, on c as it is (after
 * NOSCRIPT: Redis restarted, or SCRIPT FLUSH). */
int rl_fleet_conn_handshake(struct rl_fleet_conn *c,
                            const struct rl_fleet_addr *addr,
                            const char *password_file, char (*sha)[41],
                            uint64_t deadline);

/* Is c's number still the socket c connected? */
bool rl_fleet_conn_ours(const struct rl_fleet_conn *c);

/* Forget c's connection, closing its number only while it is still ours;
 * frees the reader. */
void rl_fleet_conn_close(struct rl_fleet_conn *c);

/* In a forked child: the connection is the parent's. Close the child's copy
 * of the number (when it is still that socket), and forget the reader
 * without freeing it: a thread of the parent may have been inside it. */
void rl_fleet_conn_abandon(struct rl_fleet_conn *c);

/* Grow the process's fd table past RL_SYS_FD_FLOOR now: cheap while the
 * process has one thread (a forked child), an RCU grace period for the
 * kernel once it has several. Only where no other thread can run. */
void rl_fleet_fd_table_grow(void);

/* Building a command in c->out: start one (of nargs bulk strings), then
 * its arguments; rl_fleet_cmd_cat's is its n parts end to end,
 * rl_fleet_cmd_lua's a script's text. rl_fleet_cmd_reset empties c->out first.
 * No printf: glibc's formatting takes kilobytes of the caller's stack. */
void rl_fleet_cmd_reset(struct rl_fleet_conn *c);
void rl_fleet_cmd_start(struct rl_fleet_conn *c, unsigned nargs);
void rl_fleet_cmd_str(struct rl_fleet_conn *c, const char *s);
void rl_fleet_cmd_u64(struct rl_fleet_conn *c, uint64_t v);
void rl_fleet_cmd_cat(struct rl_fleet_conn *c, const char *const *parts,
                      unsigned n);
struct rl_fleet_lua;
void rl_fleet_cmd_lua(struct rl_fleet_conn *c, const struct rl_fleet_lua *s);

/* v in decimal, in buf; returns where it starts. */
const char *rl_fleet_dec(char buf[24], uint64_t v);

/* Send c->out (-E2BIG when it overflowed), then wipe it. */
int rl_fleet_conn_send(struct rl_fleet_conn *c, uint64_t deadline);

/* Send `n` bytes of `buf` as they are. */
int rl_fleet_conn_send_raw(struct rl_fleet_conn *c, const char *buf, size_t n,
                           uint64_t deadline);

/* How long ago anything came from c's peer, by the kernel's account: 0
 * when bytes wait on the socket to be read, else (TCP) the time since
 * data last arrived; UINT64_MAX when it cannot say (a unix socket with
 * nothing waiting, a number no longer ours). Whether a reply is read in
 * time depends on this process's threads being run; whether it arrived
 * does not. Safe beside a reader: nothing is consumed. */
uint64_t rl_fleet_conn_heard_ns(const struct rl_fleet_conn *c);

/* The next reply (free it with freeReplyObject). */
int rl_fleet_conn_reply(struct rl_fleet_conn *c, redisReply **out,
                        uint64_t deadline);

/* An error reply `r` to `what`: c->why says it; -EAGAIN (LOADING,
 * READONLY), -EACCES (NOAUTH, WRONGPASS) or -EPROTO. */
int rl_fleet_conn_error(struct rl_fleet_conn *c, const redisReply *r,
                        const char *what);

/* c->why = the formatted text. */
void rl_fleet_conn_why(struct rl_fleet_conn *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Read at most len - 1 bytes of the file at `path` into buf, NUL ended;
 * its number is closed only while it is still that file, and what was
 * read is dropped (-EBADF) when the number changed meanwhile. */
int rl_fleet_read_file(const char *path, int flags, char *buf, size_t len);

#endif
