/* ownerlock.c — rl_ownerlock_ops: the default ops of the window lock. */
#include "util/ownerlock.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
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

bool rl_ownerlock_alive(uint64_t owner)
{
    int saved = errno;
    bool alive = true;

    if (syscall(SYS_tgkill, (pid_t)(owner >> 32), (pid_t)(uint32_t)owner,
                0) == -1 &&
        errno == ESRCH)
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
