/* sys_libc.c — the CLI's system calls: libc's own, no hook in front. */
#include "util/sys.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

static int libc_openat(int dirfd, const char *path, int flags, mode_t mode)
{
    return openat(dirfd, path, flags, mode);
}

static int libc_fcntl(int fd, int cmd, int arg)
{
    return fcntl(fd, cmd, arg);
}

static long libc_futex(uint32_t *word, int op, uint32_t val,
                       const struct timespec *timeout)
{
    return syscall(SYS_futex, word, op, val, timeout, NULL, 0);
}

void rl_sys_use_libc(void)
{
    rl_sys.socket = socket;
    rl_sys.connect = connect;
    rl_sys.send = send;
    rl_sys.recv = recv;
    rl_sys.poll = poll;
    rl_sys.close = close;
    rl_sys.read = read;
    rl_sys.write = write;
    rl_sys.openat = libc_openat;
    rl_sys.fcntl = libc_fcntl;
    rl_sys.getsockopt = getsockopt;
    rl_sys.getpeername = getpeername;
    rl_sys.setsockopt = setsockopt;
    rl_sys.futex = libc_futex;
}
