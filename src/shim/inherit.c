/* inherit.c — connected inet sockets a process inherits across exec.
 *
 * A new process image starts with an empty mark table, so a socket that
 * its parent connected (a shell's `exec 3<>/dev/tcp/...`, a supervisor
 * handing over a connection) would go unmarked and its sends free. Once,
 * before the first send-like call of the process (rl_shim_scan_now: most
 * processes never make one, and pay nothing), the shim lists the open fds
 * (/proc/self/fd: a few getdents64 calls, not one call per possible fd
 * number), asks each unmarked one getpeername (ENOTSOCK for a file or
 * pipe: one call), and for a connected inet socket its type. Those get a
 * provisional mark, MATCHED | INHERITED: their first send leaves the fast
 * path, and the rule, once set up, says whether its peer is covered
 * (rl_hook_inherited_kind). A socket made behind the shim's back (a raw
 * system call) and connected before that scan is treated the same. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "policy/gate.h"
#include "shim/fdtab.h"
#include "shim/hooks.h"
#include "shim/real.h"

/* The highest fd given a provisional mark, for rl_hook_inherited_drop;
 * written by the scan only (once, before anyone reads them). */
static unsigned highest;
static bool any;

static unsigned parse_fd(const char *s)
{
    unsigned v = 0;
    if (*s == '\0')
        return ~0u;
    for (; *s != '\0'; s++) {
        if (*s < '0' || *s > '9' || v > (RL_FDTAB_MAX - 1) / 10)
            return ~0u;
        v = v * 10 + (unsigned)(*s - '0');
    }
    return v;
}

static void look_at(int fd)
{
    /* A mark already: a socket made through the shim since start-up (the
     * scan runs at the first send-like call, not at start-up). */
    if (rl_fdtab_get(fd) != 0)
        return;
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    if (getpeername(fd, (struct sockaddr *)&ss, &sl) != 0)
        return; /* not a socket, or not connected */
    if (ss.ss_family != AF_INET && ss.ss_family != AF_INET6)
        return;
    uint32_t type = rl_hook_sock_type(fd, 0);
    if (type == 0)
        return;
    /* A connected stream was charged as a connection by whoever made it:
     * CHARGED, so a confirming connect costs nothing. */
    uint32_t m = RL_FD_KNOWN | type | RL_FD_MATCHED | RL_FD_INHERITED |
                 (type == RL_FD_STREAM ? RL_FD_CHARGED : 0);
    if (rl_fdtab_set(fd, m) == 0) {
        any = true;
        if ((unsigned)fd > highest)
            highest = (unsigned)fd;
    }
}

void rl_hook_inherited_scan(void)
{
    int dir = (int)rl_raw_syscall(SYS_openat, AT_FDCWD, (long)"/proc/self/fd",
                                  O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0, 0, 0);
    if (dir < 0)
        return; /* no /proc: nothing inherited is marked */
    /* 64-bit aligned: getdents64 records start with 64-bit fields. */
    uint64_t buf[512];
    for (;;) {
        long n =
            rl_raw_syscall(SYS_getdents64, dir, (long)buf, sizeof buf, 0, 0, 0);
        if (n <= 0)
            break;
        for (long off = 0; off < n;) {
            const struct dirent64 *d =
                (const struct dirent64 *)((const char *)buf + off);
            off += d->d_reclen;
            unsigned fd = parse_fd(d->d_name);
            if (fd != ~0u && (int)fd != dir)
                look_at((int)fd);
        }
    }
    rl_raw_syscall(SYS_close, dir, 0, 0, 0, 0, 0);
}

void rl_hook_inherited_drop(void)
{
    if (any)
        rl_fdtab_drop_with(highest, RL_FD_INHERITED);
}

uint32_t rl_hook_inherited_kind(int fd, uint32_t m)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    uint32_t type = m & (RL_FD_STREAM | RL_FD_DGRAM);
    uint32_t next = RL_FD_KNOWN | type | (m & RL_FD_CHARGED);
    int saved = errno;
    if (getpeername(fd, (struct sockaddr *)&ss, &sl) == 0 &&
        rl_gate_charges_sends() && rl_gate_covers(&ss, sl))
        next |= RL_FD_MATCHED;
    errno = saved;
    /* CAS: only the provisional mark is replaced (a close or socket() of
     * another thread may have changed the number meanwhile). */
    uint32_t expect = m;
    rl_fdtab_cas(fd, &expect, next);
    return next & RL_FD_MATCHED ? type : 0;
}
