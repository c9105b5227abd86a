/* seccomp_filter.c — the filter of `rlshim run --seccomp` (see
 * seccomp_filter.h), built with libseccomp and exported as BPF. */
#include "cli/seccomp_filter.h"

#include <errno.h>
#include <fcntl.h>
#include <seccomp.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

/* connect always; sendto only with an address (a stream send or a send on
 * a connected socket passes without a round trip); sendmsg and sendmmsg
 * (the address is in memory, which BPF cannot read). When the rule charges
 * no sends, only MSG_FASTOPEN sends, which are connects. When a section
 * has max_open, the calls that give an fd up (close, dup2 and dup3 over
 * it, close_range), so that a connection's place comes back at its close;
 * never otherwise (close is a frequent call). */
static int add_rules(scmp_filter_ctx ctx, bool sends, bool closes)
{
    int r = seccomp_rule_add(ctx, SCMP_ACT_NOTIFY, SCMP_SYS(connect), 0);
    if (r == 0 && closes)
        r = seccomp_rule_add(ctx, SCMP_ACT_NOTIFY, SCMP_SYS(close), 0);
#ifdef SYS_dup2
    if (r == 0 && closes)
        r = seccomp_rule_add(ctx, SCMP_ACT_NOTIFY, SCMP_SYS(dup2), 0);
#endif
    if (r == 0 && closes)
        r = seccomp_rule_add(ctx, SCMP_ACT_NOTIFY, SCMP_SYS(dup3), 0);
    if (r == 0 && closes)
        r = seccomp_rule_add(ctx, SCMP_ACT_NOTIFY, SCMP_SYS(close_range), 0);
    /* io_uring's connects and sends never pass through seccomp: as under
     * the library (SPEC §1), io_uring_setup answers ENOSYS, and runtimes
     * fall back to the calls decided here. */
    if (r == 0)
        r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS),
                             SCMP_SYS(io_uring_setup), 0);
    if (r == 0 && sends) {
        r = seccomp_rule_add(ctx, SCMP_ACT_NOTIFY, SCMP_SYS(sendto), 1,
                             SCMP_A4(SCMP_CMP_NE, 0));
        if (r == 0)
            r = seccomp_rule_add(ctx, SCMP_ACT_NOTIFY, SCMP_SYS(sendmsg), 0);
        if (r == 0)
            r = seccomp_rule_add(ctx, SCMP_ACT_NOTIFY, SCMP_SYS(sendmmsg), 0);
    } else if (r == 0) {
        r = seccomp_rule_add(
            ctx, SCMP_ACT_NOTIFY, SCMP_SYS(sendto), 2,
            SCMP_A3(SCMP_CMP_MASKED_EQ, MSG_FASTOPEN, MSG_FASTOPEN),
            SCMP_A4(SCMP_CMP_NE, 0));
        if (r == 0)
            r = seccomp_rule_add(
                ctx, SCMP_ACT_NOTIFY, SCMP_SYS(sendmsg), 1,
                SCMP_A2(SCMP_CMP_MASKED_EQ, MSG_FASTOPEN, MSG_FASTOPEN));
    }
    return r;
}

int rl_seccomp_filter(struct sock_fprog *prog, bool sends, bool closes)
{
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
    int mfd = -1, r;
    if (ctx == NULL)
        return -ENOMEM;
    r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
    if (r == 0)
        r = add_rules(ctx, sends, closes);
    if (r < 0)
        goto out;
    /* libseccomp 2.5 exports to an fd only. */
    mfd = memfd_create("rlshim-filter", MFD_CLOEXEC);
    if (mfd < 0) {
        r = -errno;
        goto out;
    }
    r = seccomp_export_bpf(ctx, mfd);
    if (r < 0)
        goto out;
    off_t size = lseek(mfd, 0, SEEK_END);
    if (size <= 0 || size % sizeof(struct sock_filter) != 0 ||
        size / sizeof(struct sock_filter) > BPF_MAXINSNS) {
        r = -EINVAL;
        goto out;
    }
    prog->filter = malloc((size_t)size);
    if (prog->filter == NULL) {
        r = -ENOMEM;
        goto out;
    }
    if (pread(mfd, prog->filter, (size_t)size, 0) != size) {
        free(prog->filter);
        prog->filter = NULL;
        r = -EIO;
        goto out;
    }
    prog->len = (unsigned short)(size / sizeof(struct sock_filter));
    r = 0;
out:
    if (mfd >= 0)
        close(mfd);
    seccomp_release(ctx);
    return r;
}
