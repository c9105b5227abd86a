/* hook_socket.c — socket, socketpair, accept, accept4: a fresh fd gets a
 * fresh mark.
 *
 * fd numbers are reused at once, and a close the shim never saw (a raw
 * system call, a library's internal close) leaves the old number's mark
 * behind. Every socket the program makes through these calls therefore
 * starts with a mark of its own: KNOWN, plus STREAM or DGRAM for an inet
 * socket of that type. The connect that follows needs no getsockopt, and
 * nothing stale (MATCHED, CHARGED) survives into the new socket. None of
 * these consult the config: they work before init and never block. */
#include <errno.h>
#include <sys/socket.h>

#include "shim/fdtab.h"
#include "shim/hooks.h"
#include "shim/real.h"
#include "shim/shim.h"

uint32_t rl_hook_new_socket_mark(int domain, int type)
{
    if (domain != AF_INET && domain != AF_INET6)
        return RL_FD_KNOWN; /* AF_UNIX and the rest: never charged */
    switch (type & 0xf) {   /* SOCK_NONBLOCK, SOCK_CLOEXEC masked off */
    case SOCK_STREAM:
        return RL_FD_KNOWN | RL_FD_STREAM;
    case SOCK_DGRAM:
        return RL_FD_KNOWN | RL_FD_DGRAM;
    default:
        return RL_FD_KNOWN;
    }
}

/* Mark a new fd (errno kept: a first mark may map a table page). In a
 * process with nothing to enforce there is nothing to keep. A mark that
 * cannot be kept (no page) leaves the fd unknown: the kernel is asked. */
static void mark_new(int fd, uint32_t mark)
{
    if (rl_shim_may_act())
        rl_fdtab_put(fd, mark);
}

RL_EXPORT int socket(int domain, int type, int protocol)
{
    int fd = REAL(socket)(domain, type, protocol);
    if (fd >= 0)
        mark_new(fd, rl_hook_new_socket_mark(domain, type));
    return fd;
}

RL_EXPORT int socketpair(int domain, int type, int protocol, int sv[2])
{
    int r = REAL(socketpair)(domain, type, protocol, sv);
    if (r == 0) {
        uint32_t m = rl_hook_new_socket_mark(domain, type);
        mark_new(sv[0], m);
        mark_new(sv[1], m);
    }
    return r;
}

/* An accepted socket has its listener's family and type, and is connected
 * inbound: never charged (only connects the shim saw are). */
static int accepted(int listener, int fd)
{
    if (fd >= 0)
        mark_new(fd, rl_fdtab_get(listener) &
                         (RL_FD_KNOWN | RL_FD_STREAM | RL_FD_DGRAM));
    return fd;
}

RL_EXPORT int accept(int fd, struct sockaddr *sa, socklen_t *len)
{
    return accepted(fd, REAL(accept)(fd, sa, len));
}

RL_EXPORT int accept4(int fd, struct sockaddr *sa, socklen_t *len, int flags)
{
    return accepted(fd, REAL(accept4)(fd, sa, len, flags));
}
