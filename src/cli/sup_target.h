/* sup_target.h — how the supervisor of `rlshim run --seccomp` reaches into
 * the program for a notification: reads what its arguments point to and
 * takes a copy of the fd they name, from the calling thread (its number,
 * as the notification gives it), checking that the number still named the
 * caller. Used by the receivers (supervise.c), each with a cache of its
 * own of the pidfds of recent callers; sup_id_valid from any thread. */
#ifndef RL_CLI_SUP_TARGET_H
#define RL_CLI_SUP_TARGET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Is notification `id` still pending (its thread still waits in it)? */
bool sup_id_valid(int listener, uint64_t id);

/* A receiver takes a new notification: pidfds it opens from now on were
 * not opened before this one came. */
void sup_target_next(void);

/* `len` bytes at `addr` in thread `tid`: 0, or -errno (-EFAULT for a
 * short read: the program passed a bad pointer). The caller makes sure
 * that the number named the caller (sup_grab, sup_target_tgid, or
 * sup_id_valid after it). */
int sup_peek(pid_t tid, uint64_t addr, void *buf, size_t len);

/* Our copy of fd `fd` of thread `tid`, the caller of notification `id`:
 * an fd of ours, or -errno. */
int sup_grab(int listener, pid_t tid, uint64_t id, int fd);

/* The process (thread group) of thread `tid`, the caller of notification
 * `id`, or -1 when it is gone. */
pid_t sup_target_tgid(int listener, pid_t tid, uint64_t id);

/* EPERM from a look into the program: said once on stderr (it became
 * non-dumpable or changed credentials). Returns `err`. */
int sup_denied(int err);

/* A receiver ends: the pidfds it kept are closed. */
void sup_target_thread_end(void);

#endif
