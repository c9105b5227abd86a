/* waitbuf.h — what a wait call that loops keeps between its real calls,
 * off the program's stack (hook_wait.c). */
#ifndef RL_SHIM_WAITBUF_H
#define RL_SHIM_WAITBUF_H

#include <poll.h>
#include <stdatomic.h>
#include <stdint.h>

#include "policy/ready.h"

/* Held sockets a wait call looks at, at most. */
#define VIEW_MAX 256

/* One entry of a poll array the call changed: its index, fd and events,
 * to be put back. */
struct poll_saved {
    nfds_t i;
    int fd;
    short events;
};

/* What a wait call that loops keeps between its real calls: the sockets
 * hidden now and, for poll, what it changed in the caller's array. 8 KiB:
 * kept off the program's stack (a thread with a small one, a handler on a
 * sigaltstack), in buffers made once and shared by every thread, one per
 * call at a time. A slot is taken by CAS on a bitmap, so a signal handler
 * that waits inside a wait call takes another one: no lock, nothing
 * allocated but by mmap (a system call, handler-safe), nothing lost when a
 * thread ends. With every slot in use, a call maps a buffer of its own
 * for its length. */
struct rl_waitbuf {
    struct rl_ready_view v[VIEW_MAX];
    struct poll_saved saved[VIEW_MAX];
};

/* The buffers made so far, and which are taken (a member of the shim's
 * struct rl_shim, shim/self.h). All zero: none. */
#define RL_WAITBUFS 64
struct rl_waitbufs {
    struct rl_waitbuf *bufs[RL_WAITBUFS];
    _Atomic uint64_t taken;
};

/* A buffer for this call (*slot: its slot, or one of its own), or NULL
 * when none can be had (the call then passes through). */
struct rl_waitbuf *rl_waitbuf_take(unsigned *slot);

/* Give back what rl_waitbuf_take gave. */
void rl_waitbuf_give(struct rl_waitbuf *b, unsigned slot);

/* In a fork child: only the forking thread's buffers are in use (the
 * other threads are not there). Called by init.c's one fork handler. */
void rl_wait_atfork_child(void);

#endif
