/* hook_write.c — write, writev, sendfile, sendfile64 on marked sockets.
 *
 * These are the hottest names in any program (files, pipes, terminals),
 * so an fd without the MATCHED mark costs one table load and goes
 * straight to libc. */
#include <errno.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "shim/fdtab.h"
#include "shim/hooks.h"
#include "shim/real.h"
#include "shim/shim.h"

/* The charged halves live out of line (noinline), so that the common case
 * in the exported name stays a table load, a test and a tail call into
 * libc, with no registers saved and no stack frame for a ticket. They
 * also take the rare unmarked call made before the real functions were
 * resolved (REAL resolves them). write shares send's, with the flags
 * dropped. */
static ssize_t real_write(int fd, const void *buf, size_t len, int flags)
{
    (void)flags;
    return REAL(write)(fd, buf, len);
}

RL_EXPORT ssize_t write(int fd, const void *buf, size_t len)
{
    uint32_t m = rl_fdtab_get(fd);
    if (__builtin_expect(!(m & RL_FD_MATCHED), 1))
        return rl_real.write(fd, buf, len); /* never NULL (real.h) */
    return rl_hook_plain_send(fd, buf, len, 0, m, "write", real_write);
}

static __attribute__((noinline)) ssize_t writev_marked(int fd,
                                                       const struct iovec *iov,
                                                       int iovcnt, uint32_t m)
{
    if (!(m & RL_FD_MATCHED) || iovcnt <= 0)
        return REAL(writev)(fd, iov, iovcnt);
    if (!rl_shim_enter()) {
        /* From a handler inside the shim (rl_hook_reentered). */
        size_t all = rl_hook_iov_len(iov, (size_t)iovcnt), rg;
        if (rl_hook_reentered(m, 1, all, false, &rg) == RL_HOOK_FAIL)
            return -1;
        if (rg >= all)
            return REAL(writev)(fd, iov, iovcnt);
        struct iovec cut[RL_HOOK_IOV_MAX];
        int k = (int)rl_hook_iov_trim(iov, (size_t)iovcnt, rg, cut,
                                      RL_HOOK_IOV_MAX, &rg);
        return REAL(writev)(fd, cut, k);
    }
    int saved = errno;
    struct rl_gate_ticket t;
    size_t len = rl_hook_iov_len(iov, (size_t)iovcnt);
    size_t grant = len;
    uint32_t kind = rl_hook_send_kind(fd, m, NULL, 0);
    int act =
        kind ? rl_hook_send_begin(fd, 0, kind, "writev", NULL, 0, len, &t,
                                    &grant)
             : RL_HOOK_PASS;
    /* A shorter grant: write a trimmed copy of the iovec's prefix. */
    struct iovec trimmed[RL_HOOK_IOV_MAX];
    const struct iovec *use = iov;
    int cnt = iovcnt;
    if (act == RL_HOOK_GO && grant < len) {
        cnt = (int)rl_hook_iov_trim(iov, (size_t)iovcnt, grant, trimmed,
                                    RL_HOOK_IOV_MAX, &grant);
        use = trimmed;
    }
    rl_shim_leave();
    if (rl_hook_apply(act, &t, saved) < 0)
        return -1;
    ssize_t r = REAL(writev)(fd, use, cnt);
    if (act == RL_HOOK_GO)
        rl_hook_send_end(&t, r);
    return r;
}

RL_EXPORT ssize_t writev(int fd, const struct iovec *iov, int iovcnt)
{
    uint32_t m = rl_fdtab_get(fd);
    if (__builtin_expect(!(m & RL_FD_MATCHED), 1))
        return rl_real.writev(fd, iov, iovcnt); /* never NULL (real.h) */
    return writev_marked(fd, iov, iovcnt, m);
}

/* What sendfile can actually carry from a regular file: no more than is
 * left of it. Charging the whole `count` (python asks for up to 1 GiB at
 * a time, and once more at EOF) would make a delayed caller sleep for
 * bytes that never exist. Other inputs (pipes, sockets): count. */
static size_t file_left(int in, int64_t off, size_t count)
{
    struct stat st;
    if (fstat(in, &st) != 0 || !S_ISREG(st.st_mode))
        return count;
    if (off < 0)
        off = lseek(in, 0, SEEK_CUR);
    if (off < 0 || off >= st.st_size)
        return 0;
    uint64_t left = (uint64_t)(st.st_size - off);
    return left < count ? (size_t)left : count;
}

/* Both sendfile names: one decision, then the caller's real function.
 * `off` is the caller's offset, or -1 for the file position. */
static int sendfile_begin(int out, int in, int64_t off, size_t count,
                          const char *call, struct rl_gate_ticket *t,
                          size_t *grant, int *saved)
{
    uint32_t m = rl_fdtab_get(out);
    if (__builtin_expect(!(m & RL_FD_MATCHED), 1))
        return RL_HOOK_PASS;
    if (!rl_shim_enter()) {
        /* From a handler inside the shim (rl_hook_reentered): nothing to
         * give back afterwards, so the hook sees PASS with the grant. */
        size_t len = file_left(in, off, count), rg;
        if (len == 0)
            return RL_HOOK_PASS;
        if (rl_hook_reentered(m, 1, len, false, &rg) == RL_HOOK_FAIL) {
            t->err = errno;
            return RL_HOOK_FAIL;
        }
        *grant = rg;
        *saved = errno;
        return RL_HOOK_PASS;
    }
    *saved = errno;
    int act = RL_HOOK_PASS;
    uint32_t kind = rl_hook_send_kind(out, m, NULL, 0);
    size_t len = kind ? file_left(in, off, count) : 0;
    if (len > 0) {
        act = rl_hook_send_begin(out, 0, kind, call, NULL, 0, len, t, grant);
    }
    rl_shim_leave();
    return act;
}

RL_EXPORT ssize_t sendfile(int out, int in, off_t *off, size_t count)
{
    struct rl_gate_ticket t;
    size_t grant = count;
    int saved = errno;
    int act = sendfile_begin(out, in, off != NULL ? (int64_t)*off : -1, count,
                             "sendfile", &t, &grant, &saved);
    if (rl_hook_apply(act, &t, saved) < 0)
        return -1;
    ssize_t r = REAL(sendfile)(out, in, off, grant);
    if (act == RL_HOOK_GO)
        rl_hook_send_end(&t, r);
    return r;
}

RL_EXPORT ssize_t sendfile64(int out, int in, off64_t *off, size_t count)
{
    struct rl_gate_ticket t;
    size_t grant = count;
    int saved = errno;
    int act = sendfile_begin(out, in, off != NULL ? (int64_t)*off : -1, count,
                             "sendfile64", &t, &grant, &saved);
    if (rl_hook_apply(act, &t, saved) < 0)
        return -1;
    ssize_t r = REAL(sendfile64)(out, in, off, grant);
    if (act == RL_HOOK_GO)
        rl_hook_send_end(&t, r);
    return r;
}
