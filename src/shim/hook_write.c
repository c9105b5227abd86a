/* hook_write.c — write, writev, sendfile, sendfile64 on marked sockets.
 *
 * These are the hottest names in any program (files, pipes, terminals),
 * so an fd without the MATCHED mark costs one table load and goes
 * straight to libc; a marked one takes the one shape of a charged send
 * (rl_send_begin, hook_send.c). */
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
 * libc, with no registers saved and no stack frame for a decision. They
 * also take the rare unmarked call made before the real functions were
 * resolved (REAL resolves them). */
static __attribute__((noinline)) ssize_t write_shaped(int fd, const void *buf,
                                                      size_t len, uint32_t m)
{
    struct rl_send s;
    struct iovec one = {(void *)buf, len};
    rl_send_init(&s, fd, m, "write", len);
    rl_send_bytes(&s, &one, 1);
    int b = rl_send_begin(&s);
    if (b != 0)
        return b < 0 ? -1 : rl_send_taken(&s);
    ssize_t r = REAL(write)(fd, buf, s.grant);
    rl_send_end(&s, r);
    return r;
}

/* The first call after a scan became due (inherited fds: inherit.c): the
 * scan, then the mark it left, the whole shape for a charged call. Out of
 * line: it calls before the real call. */
static __attribute__((noinline)) ssize_t write_scanned(int fd, const void *buf,
                                                       size_t len, uint32_t m)
{
    m = rl_hook_mark_scanned(fd, m);
    if (!(m & RL_FD_SLOW))
        return REAL(write)(fd, buf, len);
    return write_shaped(fd, buf, len, m);
}

/* The leased way first (hooks.h), with no call of the shim's before the
 * real one; the whole shape and the scan out of line, as tail calls. */
static __attribute__((noinline)) ssize_t write_marked(int fd, const void *buf,
                                                      size_t len, uint32_t m)
{
    if (__builtin_expect(rl_shim_scan_due(), 0))
        return write_scanned(fd, buf, len, m);
    if (!(m & RL_FD_SLOW))
        return rl_real.write(fd, buf, len);
    struct rl_lease_holder *h = NULL;
    size_t g = rl_send_fast_fits(m) ? rl_send_fast(m, len, &h) : 0;
    if (g == 0)
        return write_shaped(fd, buf, len, m);
    ssize_t r = rl_real.write(fd, buf, g);
    rl_send_fast_end(g, r, h);
    return r;
}

RL_EXPORT ssize_t write(int fd, const void *buf, size_t len)
{
    uint32_t m = rl_fdtab_get(fd);
    if (__builtin_expect(!(m & RL_FD_SLOW) && !rl_shim_scan_due(), 1))
        return rl_real.write(fd, buf, len); /* never NULL (real.h) */
    return write_marked(fd, buf, len, m);
}

/* A shorter grant: write a trimmed copy of the iovec's prefix (out of
 * line: the copy is on the stack only for this call, never beside a
 * decision). *grant becomes what the copy holds. */
static __attribute__((noinline)) ssize_t
writev_trimmed(int fd, const struct iovec *iov, int iovcnt, size_t *grant)
{
    struct iovec trimmed[RL_HOOK_IOV_MAX];
    int cnt = (int)rl_hook_iov_trim(iov, (size_t)iovcnt, *grant, trimmed,
                                    RL_HOOK_IOV_MAX, grant);
    return REAL(writev)(fd, trimmed, cnt);
}

static __attribute__((noinline)) ssize_t
writev_marked(int fd, const struct iovec *iov, int iovcnt, uint32_t m)
{
    m = rl_hook_mark_scanned(fd, m);
    if (!(m & RL_FD_SLOW) || iovcnt <= 0)
        return REAL(writev)(fd, iov, iovcnt);
    struct rl_send s;
    size_t total = rl_hook_iov_len(iov, (size_t)iovcnt);
    rl_send_init(&s, fd, m, "writev", total);
    rl_send_bytes(&s, iov, (size_t)iovcnt);
    int b = rl_send_begin(&s);
    if (b != 0)
        return b < 0 ? -1 : rl_send_taken(&s);
    ssize_t r = s.grant < total ? writev_trimmed(fd, iov, iovcnt, &s.grant)
                                : REAL(writev)(fd, iov, iovcnt);
    rl_send_end(&s, r);
    return r;
}

RL_EXPORT ssize_t writev(int fd, const struct iovec *iov, int iovcnt)
{
    uint32_t m = rl_fdtab_get(fd);
    if (__builtin_expect(!(m & RL_FD_SLOW) && !rl_shim_scan_due(), 1))
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

/* Both sendfile names: one decision on what the file can carry, then the
 * caller's real function. `off` is the caller's offset, or -1 for the file
 * position. */
static int sendfile_begin(struct rl_send *s, int out, int in, int64_t off,
                          size_t count, const char *call)
{
    uint32_t m = rl_fdtab_get(out);
    rl_send_init(s, out, m, call, count);
    if (__builtin_expect(!(m & RL_FD_SLOW) && !rl_shim_scan_due(), 1))
        return 0;
    s->mark = m = rl_hook_mark_scanned(out, m);
    if (!(m & RL_FD_SLOW))
        return 0;
    int saved = errno;
    s->len = file_left(in, off, count);
    errno = saved;
    if (s->len == 0) {
        s->len = count; /* nothing to carry: nothing to charge */
        return 0;
    }
    return rl_send_begin(s);
}

RL_EXPORT ssize_t sendfile(int out, int in, off_t *off, size_t count)
{
    struct rl_send s;
    if (sendfile_begin(&s, out, in, off != NULL ? (int64_t)*off : -1, count,
                       "sendfile") < 0)
        return -1;
    ssize_t r = REAL(sendfile)(out, in, off, s.grant);
    rl_send_end(&s, r);
    return r;
}

RL_EXPORT ssize_t sendfile64(int out, int in, off64_t *off, size_t count)
{
    struct rl_send s;
    if (sendfile_begin(&s, out, in, off != NULL ? (int64_t)*off : -1, count,
                       "sendfile64") < 0)
        return -1;
    ssize_t r = REAL(sendfile64)(out, in, off, s.grant);
    rl_send_end(&s, r);
    return r;
}
