/* inherit.c — connected inet sockets a process inherits across exec.
 *
 * A new process image starts with an empty mark table, so a socket that
 * its parent connected (a shell's `exec 3<>/dev/tcp/...`, a supervisor
 * handing over a connection) would go unmarked and its sends free. Once,
 * before the first send-like call of the process (rl_shim_scan_now: most
 * processes never make one, and pay nothing), the shim finds the open fds
 * and asks each unmarked one getpeername (ENOTSOCK for a file or pipe: one
 * call), and for a connected inet socket its type. Those get a provisional
 * mark, MATCHED | INHERITED: their first send leaves the fast path, and
 * the rule, once set up, says whether its peer is covered
 * (rl_hook_inherited_kind). A socket made behind the shim's back (a raw
 * system call) and connected before that scan is treated the same.
 *
 * Finding the open fds: one ppoll with a zero timeout over a block of
 * numbers answers POLLNVAL for every closed one, so a block of 256 numbers
 * costs one call (listing /proc/self/fd costs more, and more with each
 * open fd). The blocks go up to the fd table's size: the soft
 * RLIMIT_NOFILE when it is the usual 1024 or less, else FDSize from
 * /proc/self/status (containers set the limit to 2^20). */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "policy/decide_send.h"
#include "shim/fdtab.h"
#include "shim/hooks.h"
#include "shim/real.h"
#include "shim/self.h"

#define BLOCK 256 /* pollfds per call: 2 KiB of stack, handler-safe */

/* The number after "FDSize:" in /proc/self/status, 0 when unknown. */
static unsigned fd_table_size(void)
{
    char buf[1024];
    int fd =
        (int)rl_raw_syscall(SYS_openat, AT_FDCWD, (long)"/proc/self/status",
                            O_RDONLY | O_CLOEXEC, 0, 0, 0);
    if (fd < 0)
        return 0;
    long n = rl_raw_syscall(SYS_read, fd, (long)buf, sizeof buf - 1, 0, 0, 0);
    rl_raw_syscall(SYS_close, fd, 0, 0, 0, 0, 0);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    const char *p = strstr(buf, "\nFDSize:");
    if (p == NULL)
        return 0;
    p += 8;
    while (*p == ' ' || *p == '\t')
        p++;
    unsigned v = 0;
    for (; *p >= '0' && *p <= '9' && v < RL_FDTAB_MAX; p++)
        v = v * 10 + (unsigned)(*p - '0');
    return v;
}

/* How far open fds may go: every open fd is below this. */
static unsigned fd_bound(unsigned *block)
{
    struct rlimit rl;
    if (rl_raw_syscall(SYS_prlimit64, 0, RLIMIT_NOFILE, 0, (long)&rl, 0, 0) < 0)
        rl.rlim_cur = 1024;
    unsigned lim =
        rl.rlim_cur < RL_FDTAB_MAX ? (unsigned)rl.rlim_cur : RL_FDTAB_MAX;
    /* ppoll refuses more entries than RLIMIT_NOFILE. */
    *block = lim < BLOCK ? lim : BLOCK;
    if (lim <= 1024)
        return lim;
    /* A raised limit: the table is likely far smaller. A table the kernel
     * grew past the soft limit (a lowered limit) is covered by FDSize. */
    unsigned size = fd_table_size();
    return size != 0 ? size : lim;
}

static void look_at(int fd)
{
    struct rl_inherit *in = &rl_shim_self->inherit;
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
        in->any = true;
        if ((unsigned)fd > in->highest)
            in->highest = (unsigned)fd;
    }
}

void rl_hook_inherited_scan(void)
{
    unsigned block;
    unsigned bound = fd_bound(&block);
    struct pollfd p[BLOCK];
    struct timespec zero = {0, 0};
    for (unsigned base = 0; block > 0 && base < bound; base += block) {
        unsigned n = bound - base < block ? bound - base : block;
        for (unsigned i = 0; i < n; i++)
            p[i] = (struct pollfd){.fd = (int)(base + i), .events = 0};
        /* The raw call: the program's poll may be wrapped too. */
        if (rl_raw_syscall(SYS_ppoll, (long)p, n, (long)&zero, 0, 8, 0) < 0)
            return;
        for (unsigned i = 0; i < n; i++)
            if (!(p[i].revents & POLLNVAL))
                look_at(p[i].fd);
    }
}

void rl_hook_inherited_drop(void)
{
    struct rl_inherit *in = &rl_shim_self->inherit;
    if (in->any)
        rl_fdtab_drop_with(in->highest, RL_FD_INHERITED);
}

uint32_t rl_hook_inherited_kind(int fd, uint32_t m)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    uint32_t type = m & (RL_FD_STREAM | RL_FD_DGRAM);
    uint32_t next = RL_FD_KNOWN | type | (m & RL_FD_CHARGED);
    int saved = errno;
    /* Its connect was made (and charged) by whoever made it: only
     * whether its sends are charged is left to ask. */
    if (getpeername(fd, (struct sockaddr *)&ss, &sl) == 0 &&
        rl_decide_send_charged(rl_shim_proc(), (struct sockaddr *)&ss, sl))
        next |= RL_FD_MATCHED;
    errno = saved;
    /* CAS: only the provisional mark is replaced (a close or socket() of
     * another thread may have changed the number meanwhile). */
    uint32_t expect = m;
    rl_fdtab_cas(fd, &expect, next);
    return next & RL_FD_MATCHED ? type : 0;
}
