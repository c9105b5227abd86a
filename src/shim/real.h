/* real.h — the libc functions behind the hooks.
 *
 * Resolved with dlsym(RTLD_NEXT) once (at load, or by the first hook that
 * needs them before the constructor ran), refusing our own symbol: RTLD_NEXT
 * keeps any preload loaded after us in the chain, which dlopen of libc
 * would skip. A name libc does not have (or that resolves to ourselves)
 * falls back to the raw system call, so no pointer is ever NULL. */
#ifndef RL_SHIM_REAL_H
#define RL_SHIM_REAL_H

#include <stddef.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "util/sys.h" /* rl_raw_syscall */

struct rl_real {
    int (*connect)(int, const struct sockaddr *, socklen_t);
    int (*getsockopt)(int, int, int, void *, socklen_t *);
    ssize_t (*send)(int, const void *, size_t, int);
    ssize_t (*sendto)(int, const void *, size_t, int, const struct sockaddr *,
                      socklen_t);
    ssize_t (*sendmsg)(int, const struct msghdr *, int);
    int (*sendmmsg)(int, struct mmsghdr *, unsigned int, int);
    ssize_t (*write)(int, const void *, size_t);
    ssize_t (*writev)(int, const struct iovec *, int);
    ssize_t (*sendfile)(int, int, off_t *, size_t);
    ssize_t (*sendfile64)(int, int, off64_t *, size_t);
    int (*close)(int);
    int (*close_range)(unsigned int, unsigned int, int);
    void (*closefrom)(int);
    int (*dup)(int);
    int (*dup2)(int, int);
    int (*dup3)(int, int, int);
    int (*fcntl)(int, int, ...);
    int (*fcntl64)(int, int, ...);
    int (*fclose)(FILE *);
    int (*socket)(int, int, int);
    int (*socketpair)(int, int, int, int[2]);
    int (*accept)(int, struct sockaddr *, socklen_t *);
    int (*accept4)(int, struct sockaddr *, socklen_t *, int);
    long (*syscall)(long, ...);
    /* The receive family (hook_recv.c): a connection's responses. */
    ssize_t (*read)(int, void *, size_t);
    ssize_t (*readv)(int, const struct iovec *, int);
    ssize_t (*recv)(int, void *, size_t, int);
    ssize_t (*recvfrom)(int, void *, size_t, int, struct sockaddr *,
                        socklen_t *);
    ssize_t (*recvmsg)(int, struct msghdr *, int);
};

/* Written once by rl_real_resolve (every writer stores the same values),
 * then only read. `write`, `writev`, `read` and `recv` are never NULL:
 * they start as trampolines that resolve first. */
extern struct rl_real rl_real;

/* dlsym(RTLD_NEXT, name), or `fallback` when libc has no such name or
 * the chain finds only `self` (our own definition): every resolver of
 * the shim finds its real functions through this one. */
void *rl_real_next(const char *name, void *self, void *fallback);

/* The index of a member of struct rl_real, for rl_real_slot. */
#define RL_REAL_INDEX(name) (offsetof(struct rl_real, name) / sizeof(void *))

/* The real function of member `i`, looked up now if it was not yet (one
 * dlsym; racing callers store the same value). */
void *rl_real_slot(unsigned i);

/* Resolve every pointer and fill util/sys.h's table with them (at the
 * set-up: the core's own system calls then go to libc's functions);
 * idempotent and cheap after the first call. */
void rl_real_resolve(void);

/* The real function `name`, looked up on first use. */
#define REAL(name)                                                             \
    (__builtin_expect(rl_real.name != NULL, 1)                                 \
         ? rl_real.name                                                        \
         : (__typeof__(rl_real.name))rl_real_slot(RL_REAL_INDEX(name)))

#endif
