/* sup_target.h — how the supervisor of `rlshim run --seccomp` reaches into
 * the program for a notification: reads what its arguments point to and
 * takes a copy of the fd they name, from the calling thread (its number,
 * as the notification gives it), checking that the number still named the
 * caller. Used by the receivers (supervise.c), each with a cache of its
 * own of the pidfds of recent callers, and by the loop's thread with one
 * more; sup_id_valid from any thread. */
#ifndef RL_CLI_SUP_TARGET_H
#define RL_CLI_SUP_TARGET_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* What was learnt of the kernel and of our rights in the program, shared
 * by every thread of the supervisor (a member of struct rl_sup,
 * cli/sup.h): each word goes from false to true once, relaxed (a thread
 * that has not seen it yet asks the kernel once more and learns it). */
struct sup_kernel {
    atomic_bool no_thread_pidfds; /* pidfd_open refused PIDFD_THREAD */
    atomic_bool no_pidfd_info;    /* ioctl refused PIDFD_GET_INFO */
    atomic_bool said_denied;      /* sup_denied's line was written */
};

/* pidfds of recent target threads, so that a thread's next call costs no
 * pidfd_open (see sup_target.c). One per thread that reads the program
 * (each receiver's, the loop's), so no lock. */
#define SUP_PIDFD_CACHE 64
struct sup_pidfd {
    pid_t tid; /* 0: empty */
    int pfd;
    uint64_t made; /* the `notif` it was opened for */
};
struct sup_pidfds {
    struct sup_kernel *kernel;
    struct sup_pidfd cache[SUP_PIDFD_CACHE];
    uint64_t notif; /* counts this thread's notifications */
};

/* An empty cache that learns into `kernel`. */
void sup_pidfds_init(struct sup_pidfds *p, struct sup_kernel *kernel);

/* The thread that owns `p` ends: the pidfds it kept are closed. */
void sup_pidfds_close(struct sup_pidfds *p);

/* Is notification `id` still pending (its thread still waits in it)? */
bool sup_id_valid(int listener, uint64_t id);

/* A receiver takes a new notification: pidfds it opens from now on were
 * not opened before this one came. */
void sup_target_next(struct sup_pidfds *p);

/* `len` bytes at `addr` in thread `tid`: 0, or -errno (-EFAULT for a
 * short read: the program passed a bad pointer). The caller makes sure
 * that the number named the caller (sup_grab, sup_target_tgid, or
 * sup_id_valid after it). */
int sup_peek(pid_t tid, uint64_t addr, void *buf, size_t len);

/* Our copy of fd `fd` of thread `tid`, the caller of notification `id`:
 * an fd of ours, or -errno. */
int sup_grab(struct sup_pidfds *p, int listener, pid_t tid, uint64_t id,
             int fd);

/* The process (thread group) of thread `tid`, the caller of notification
 * `id`, or -1 when it is gone. */
pid_t sup_target_tgid(struct sup_pidfds *p, int listener, pid_t tid,
                      uint64_t id);

/* EPERM from a look into the program: said once on stderr (it became
 * non-dumpable or changed credentials). Returns `err`. */
int sup_denied(struct sup_kernel *k, int err);

#endif
