/* sys.h — the one seam for the system calls rlshim itself makes.
 *
 * Inside a preloaded librlshim.so, libc's `close`, `send`, `poll`,
 * `syscall`, … resolve to the shim's own exported hooks, so the core
 * (policy/, state/, util/, fleet/) never calls those names: it calls
 * through this table. It starts out as the system calls themselves (safe in
 * any context: before the shim resolved libc, in a forked child, inside a
 * signal handler); `shim/` replaces the entries with the real libc functions
 * behind its hooks (so sanitizers still see them), the CLI and the tests
 * with libc's own (rl_sys_use_libc, in cli/sys_libc.c). A lint in `make test`
 * (tests/lint.sh: `nm -u librlcore.a` against the exported hook names) keeps
 * the core off the hooked names.
 *
 * Every entry returns as the libc function does: -1 and errno on error. */
#ifndef RL_UTIL_SYS_H
#define RL_UTIL_SYS_H

#include <poll.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>

struct rl_sys {
    int (*socket)(int domain, int type, int proto);
    int (*connect)(int fd, const struct sockaddr *sa, socklen_t len);
    ssize_t (*send)(int fd, const void *buf, size_t n, int flags);
    ssize_t (*recv)(int fd, void *buf, size_t n, int flags);
    int (*poll)(struct pollfd *fds, nfds_t n, int timeout_ms);
    int (*close)(int fd);
    ssize_t (*read)(int fd, void *buf, size_t n);
    ssize_t (*write)(int fd, const void *buf, size_t n);
    int (*openat)(int dirfd, const char *path, int flags, mode_t mode);
    /* fcntl with an int argument (F_GETFL, F_SETFL, F_DUPFD_CLOEXEC, …). */
    int (*fcntl)(int fd, int cmd, int arg);
    int (*getsockopt)(int fd, int level, int name, void *val, socklen_t *len);
    /* Not a name the shim hooks: the raw system call in the .so too. */
    int (*getpeername)(int fd, struct sockaddr *sa, socklen_t *len);
    int (*setsockopt)(int fd, int level, int name, const void *val,
                      socklen_t len);
    /* futex(2) on a 32-bit word: FUTEX_WAIT with a relative timeout (or
     * NULL), FUTEX_WAKE; the result as the system call gives it. */
    long (*futex)(uint32_t *word, int op, uint32_t val,
                  const struct timespec *timeout);
};

extern struct rl_sys rl_sys;

/* The system call `nr` with six arguments, made directly (never through
 * libc's syscall(), which the shim wraps). -1 with errno on error. */
long rl_raw_syscall(long nr, long a1, long a2, long a3, long a4, long a5,
                    long a6);

/* Point the table at libc's own functions: the CLI and the tests, where
 * no hook stands in front of them. Defined outside the core library. */
void rl_sys_use_libc(void);

/* write(2) until all of `n` is written, retrying EINTR; gives up on any
 * other error. Through the table: never the hooked name. */
void rl_sys_write_all(int fd, const void *buf, size_t n);

/* The lowest fd at or above which the shim keeps its own descriptors, so
 * that a program's dup2 over its low numbers (0, 1, 2, 3 …) never lands on
 * one of ours. */
#define RL_SYS_FD_FLOOR 512

#endif
