/* ownerlock.c — rl_ownerlock_ops: the default ops of the window lock. */
#include "util/ownerlock.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Written only by its own thread; reset in a fork child, whose only thread
 * has a new tid and a new pid. */
static __thread uint64_t self_id;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static void forget_self(void)
{
    self_id = 0;
}

static void install_atfork(void)
{
    pthread_atfork(NULL, NULL, forget_self);
}

uint64_t rl_ownerlock_self(void)
{
    if (self_id == 0) {
        pthread_once(&atfork_once, install_atfork);
        self_id = ((uint64_t)(uint32_t)getpid() << 32) | (uint32_t)gettid();
    }
    return self_id;
}

/* A killed process that its parent has not reaped yet is a zombie: its
 * main thread still answers tgkill, yet it will never release a lock, and
 * a parent that never calls wait() would wedge the window for good. The
 * state letter follows the last ')' of /proc/PID/task/TID/stat (the
 * command name before it may hold anything). Without /proc, tgkill's word
 * stands. Slow path only: asked after a holder has kept the lock ~1 ms. */
static bool is_zombie(pid_t pid, pid_t tid)
{
    char path[64], buf[256];
    snprintf(path, sizeof path, "/proc/%d/task/%d/stat", (int)pid, (int)tid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return false;
    buf[n] = '\0';
    const char *p = strrchr(buf, ')');
    return p != NULL && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X');
}

bool rl_ownerlock_alive(uint64_t owner)
{
    int saved = errno;
    pid_t pid = (pid_t)(owner >> 32), tid = (pid_t)(uint32_t)owner;
    bool alive = true;

    if (syscall(SYS_tgkill, pid, tid, 0) == -1 && errno == ESRCH)
        alive = false;
    else if (is_zombie(pid, tid))
        alive = false;
    errno = saved;
    return alive;
}

static void yield_cpu(void)
{
    sched_yield();
}

const struct rl_lock_ops rl_ownerlock_ops = {
    .self = rl_ownerlock_self,
    .alive = rl_ownerlock_alive,
    .yield = yield_cpu,
    .in_critical = NULL,
};
