/* sup_target.c — the supervisor's reach into the program (see
 * sup_target.h).
 *
 * What the arguments of a notified call point to is read with
 * process_vm_readv by the calling thread's number, and its fds are taken
 * with pidfd_getfd from a pidfd of that thread. A number names the caller
 * only while the caller lives (it waits in its notification): each look
 * is followed by a check that the notification still waits, or vouched
 * for by a pidfd of the caller found alive (see sup_grab). */
#include "cli/sup_target.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/seccomp.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/pidfd.h>
#include <sys/uio.h>
#include <unistd.h>

/* A pidfd of one thread rather than its process (Linux 6.9); older
 * kernels refuse it and we look the process up instead. */
#ifndef PIDFD_THREAD
#define PIDFD_THREAD O_EXCL
#endif

/* PIDFD_GET_INFO (Linux 6.13): a pidfd's thread group, in one ioctl
 * rather than a read of /proc. Only the first fields are asked for; the
 * kernel takes the size from the request. */
struct rl_pidfd_info {
    uint64_t mask;
    uint64_t cgroupid;
    uint32_t pid, tgid, ppid, ruid, rgid, euid, egid, suid, sgid, fsuid, fsgid,
        spare0;
};
#define RL_PIDFD_GET_INFO _IOWR(0xFF, 11, struct rl_pidfd_info)
#define RL_PIDFD_INFO_PID 1u

bool sup_id_valid(int listener, uint64_t id)
{
    return ioctl(listener, SECCOMP_IOCTL_NOTIF_ID_VALID, &id) == 0;
}

/* `len` bytes at `addr` in thread `pid`: 0, or -errno (-EFAULT for a
 * short read: the program passed a bad pointer). */
int sup_peek(pid_t pid, uint64_t addr, void *buf, size_t len)
{
    if (len == 0)
        return 0;
    struct iovec local = {buf, len};
    struct iovec remote = {(void *)(uintptr_t)addr, len};
    ssize_t n = process_vm_readv(pid, &local, 1, &remote, 1, 0);
    if (n < 0)
        return -errno;
    return (size_t)n == len ? 0 : -EFAULT;
}

/* The thread group of a thread, from /proc (kernels before PIDFD_THREAD). */
static pid_t tgid_of(pid_t tid)
{
    char path[64], line[128];
    snprintf(path, sizeof path, "/proc/%d/status", (int)tid);
    FILE *f = fopen(path, "re");
    pid_t tgid = -1;
    if (f == NULL)
        return -1;
    while (fgets(line, sizeof line, f) != NULL)
        if (strncmp(line, "Tgid:", 5) == 0) {
            tgid = (pid_t)strtol(line + 5, NULL, 10);
            break;
        }
    fclose(f);
    return tgid;
}

/* The pidfd cache (struct sup_pidfds): only thread pidfds (PIDFD_THREAD)
 * are kept: one names that thread for ever, so a thread number reused by
 * another thread finds a pidfd of a dead thread (pidfd_getfd: ESRCH) and
 * is opened again; a process pidfd kept under a thread number could name
 * the wrong process. Each entry says which of its thread's notifications
 * it was opened for (see sup_grab). */
void sup_pidfds_init(struct sup_pidfds *p, struct sup_kernel *kernel)
{
    memset(p, 0, sizeof *p);
    p->kernel = kernel;
}

void sup_target_next(struct sup_pidfds *p)
{
    p->notif++;
}

/* A pidfd of thread `tid`: a thread pidfd kept in the cache (*cached; the
 * caller must not close it), *earlier when it was opened before the
 * notification at hand was received; or a process pidfd to close after
 * use (kernels before PIDFD_THREAD); -1. */
static int open_pidfd(struct sup_pidfds *p, pid_t tid, bool *cached,
                      bool *earlier)
{
    unsigned h = (unsigned)tid % SUP_PIDFD_CACHE;
    struct sup_pidfd *cache = p->cache;
    *cached = *earlier = false;
    if (tid != 0 && cache[h].tid == tid) {
        *cached = true;
        *earlier = cache[h].made != p->notif;
        return cache[h].pfd;
    }
    if (!atomic_load_explicit(&p->kernel->no_thread_pidfds,
                              memory_order_relaxed)) {
        int pfd = pidfd_open(tid, PIDFD_THREAD);
        if (pfd >= 0) {
            if (cache[h].tid != 0)
                close(cache[h].pfd);
            cache[h].tid = tid;
            cache[h].pfd = pfd;
            cache[h].made = p->notif;
            *cached = true;
            return pfd;
        }
        if (errno != EINVAL)
            return -1;
        atomic_store(&p->kernel->no_thread_pidfds, true); /* before 6.9 */
    }
    pid_t tgid = tgid_of(tid);
    return tgid > 0 ? pidfd_open(tgid, 0) : -1;
}

void sup_pidfds_close(struct sup_pidfds *p)
{
    for (unsigned h = 0; h < SUP_PIDFD_CACHE; h++)
        if (p->cache[h].tid != 0) {
            close(p->cache[h].pfd);
            p->cache[h].tid = 0;
        }
}

static void forget_pidfd(struct sup_pidfds *p, pid_t tid)
{
    unsigned h = (unsigned)tid % SUP_PIDFD_CACHE;
    if (tid != 0 && p->cache[h].tid == tid) {
        close(p->cache[h].pfd);
        p->cache[h].tid = 0;
    }
}

/* The process (thread group) of the calling thread, or -1 when it is gone.
 * From the cached thread pidfd where the kernel tells (a live thread's
 * pidfd names it: its number cannot have been reused), else from /proc;
 * the notification is checked after, so the number named the caller,
 * unless the pidfd was opened before the notification came (see sup_grab). */
pid_t sup_target_tgid(struct sup_pidfds *p, int listener, pid_t tid,
                      uint64_t id)
{
    pid_t tgid = -1;
    bool proven = false;
    for (int attempt = 0;
         attempt < 2 &&
         !atomic_load_explicit(&p->kernel->no_pidfd_info, memory_order_relaxed);
         attempt++) {
        bool cached, earlier;
        int pfd = open_pidfd(p, tid, &cached, &earlier);
        if (pfd < 0)
            return -1;
        if (!cached) { /* a process pidfd: kernels before PIDFD_THREAD */
            close(pfd);
            break;
        }
        struct rl_pidfd_info info;
        memset(&info, 0, sizeof info);
        info.mask = RL_PIDFD_INFO_PID;
        if (ioctl(pfd, RL_PIDFD_GET_INFO, &info) == 0) {
            tgid = (pid_t)info.tgid;
            proven = earlier;
            break;
        }
        if (errno == ESRCH)
            forget_pidfd(p, tid); /* a dead thread's: its number reused */
        else
            /* ENOTTY, EINVAL: before Linux 6.13 */
            atomic_store(&p->kernel->no_pidfd_info, true);
    }
    if (tgid <= 0)
        tgid = tgid_of(tid);
    return tgid > 0 && (proven || sup_id_valid(listener, id)) ? tgid : -1;
}

/* The launcher probed that we may read the program (cmd_run_seccomp.c);
 * a program can still take that away later (an exec of a file it may not
 * read makes it non-dumpable; a root program that changes its uid). Its
 * decided calls then fail with EPERM: said once, not at every call. */
int sup_denied(struct sup_kernel *k, int err)
{
    if (err == EPERM && !atomic_exchange(&k->said_denied, true)) {
        fprintf(stderr,
                "rlshim run --seccomp: the supervisor may no longer read "
                "the program's sockets and memory (EPERM: it became "
                "non-dumpable or changed credentials); its connects fail "
                "with EPERM\n");
    }
    return err;
}

/* Our copy of fd `fd` of the calling thread: an fd of ours, or -errno. A
 * pidfd opened now is checked after its opening, by the notification
 * still waiting, to name the caller (the caller lives, so its number was
 * not reused). A thread pidfd this receiver opened before it received the
 * notification needs no check: if pidfd_getfd finds its thread alive,
 * that thread had the caller's number when the notification came, and two
 * live threads never share one, so it is the caller; and it was alive
 * through the reads of the caller's memory before this (by its number).
 * Kept for a thread that died, the pidfd makes pidfd_getfd fail (ESRCH)
 * and is opened again. */
int sup_grab(struct sup_pidfds *p, int listener, pid_t tid, uint64_t id, int fd)
{
    for (int attempt = 0; attempt < 2; attempt++) {
        bool cached, earlier;
        int pfd = open_pidfd(p, tid, &cached, &earlier);
        if (pfd < 0)
            return -ESRCH;
        if (!earlier && !sup_id_valid(listener, id)) {
            if (!cached)
                close(pfd);
            return -ESRCH;
        }
        int s = pidfd_getfd(pfd, fd, 0);
        int err = errno;
        if (!cached)
            close(pfd);
        if (s >= 0)
            return s;
        if (err != ESRCH || !cached)
            return -sup_denied(p->kernel, err);
        forget_pidfd(p, tid); /* a thread that is gone; its number reused */
    }
    return -ESRCH;
}
