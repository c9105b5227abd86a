/* readahead.c — the looks of a write waiting for its turn (readahead.h),
 * and the wait of a read for a look (readers.h). */
#include "shim/readahead.h"

#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>

#include "policy/decide_request.h"
#include "shim/conntab.h"
#include "shim/fdtab.h"
#include "shim/real.h"
#include "shim/self.h"
#include "shim/shim.h"
#include "shim/tlstab.h"
#include "shim/wreal.h"
#include "util/clock.h"

/* What one look reads at most: a 429's head behind the rest of an answer
 * the program is reading. */
#define LOOK_BYTES 65536

void rl_readers_wait(atomic_uint *slot)
{
    /* A look is a peek and a scan that waits for nothing. */
    for (unsigned i = 0;
         atomic_load_explicit(slot, memory_order_acquire) & RL_READERS_LOOK;
         i++) {
        if (i < 64) {
            sched_yield();
        } else {
            struct timespec ts = {0, 50000};
            nanosleep(&ts, NULL);
        }
    }
}

int rl_readahead_waiting(int fd)
{
    int n = 0;
    return ioctl(fd, FIONREAD, &n) == 0 ? n : 0;
}

/* One peek at a plaintext stream, fed to its response side as read
 * ahead (its fd's slot taken by the caller: no read of the program is
 * under way). */
static void peek_plain(int fd, struct rl_reqconn *c)
{
    char *buf = malloc(LOOK_BYTES);
    if (buf == NULL)
        return;
    long k = REAL(recv)(fd, buf, LOOK_BYTES, MSG_PEEK | MSG_DONTWAIT);
    if (k > 0 && rl_shim_enter()) {
        const struct iovec one = {buf, (size_t)k};
        const struct rl_reqread r = {fd, "recv", RL_READ_AHEAD};
        (void)rl_request_received(rl_shim_proc(), c, RL_CARRY_PLAIN, &r,
                                  false, &one, 1, (size_t)k);
        rl_shim_leave();
    }
    free(buf);
}

bool rl_readahead_look(const struct rl_look *l)
{
    struct rl_readers *t = &rl_shim_self->readers;
    if (!rl_readers_look(t, (uintptr_t)l->fd))
        return false;
    peek_plain(l->fd, l->c);
    rl_readers_looked(t, (uintptr_t)l->fd);
    return true;
}

bool rl_readahead_can(int fd)
{
    return (rl_fdtab_get(fd) & RL_FD_HTTP) || rl_tlstab_look(fd, false);
}

void rl_readahead_look_fd(int fd)
{
    int saved = errno;
    uint32_t m = rl_fdtab_get(fd);
    if (m & RL_FD_HTTP) {
        /* The slot first: the connection's read side is then nobody's
         * (a second reader of it turns its response side off). Not with
         * a made-up answer queued, whose reads take that side first. */
        struct rl_readers *t = &rl_shim_self->readers;
        if (!(m & RL_FD_MADEUP) && rl_readers_look(t, (uintptr_t)fd)) {
            struct rl_reqconn *c = rl_conntab_acquire_read(fd);
            if (c != NULL) {
                peek_plain(fd, c);
                rl_conntab_release_read(c);
            }
            rl_readers_looked(t, (uintptr_t)fd);
        }
    } else {
        (void)rl_tlstab_look(fd, true);
    }
    errno = saved;
}

bool rl_readahead_sleep(int fd, uint64_t deadline_ns,
                        const struct rl_look *look)
{
    if (look == NULL || fd < 0)
        return rl_shim_sleep_on(fd, deadline_ns);
    /* A socket that reports a hang-up (or is not connected yet) already:
     * rl_shim_sleep_on's. */
    struct pollfd p = {fd, 0, 0};
    if (WREAL(poll)(&p, 1, 0) != 0)
        return rl_shim_sleep_on(fd, deadline_ns);
    int saved = errno;
    bool hung = false, watch = true;
    int seen = 0; /* bytes waiting in the socket after the last look */
    for (;;) {
        uint64_t now = rl_clock_now_ns();
        if (now >= deadline_ns)
            break;
        uint64_t left = deadline_ns - now;
        if (!watch && left > RL_LOOK_SLICE_NS)
            left = RL_LOOK_SLICE_NS;
        struct timespec ts = {(time_t)(left / 1000000000u),
                              (long)(left % 1000000000u)};
        p = (struct pollfd){fd, watch ? POLLIN : 0, 0};
        int r = WREAL(ppoll)(&p, 1, &ts, NULL);
        if (r < 0 && errno == EINTR)
            continue;
        if (r == 1 && (p.revents & POLLHUP)) {
            hung = true;
            break;
        }
        if (r < 0 || (r == 1 && !(p.revents & POLLIN))) {
            /* The error queue, or the fd gone: nothing a look hears, and
             * a poll that would say it again at once. */
            rl_shim_sleep_until(deadline_ns);
            break;
        }
        if (r == 0 && watch)
            continue;
        watch = false;
        int now_waiting = rl_readahead_waiting(fd);
        if (now_waiting > 0 && now_waiting != seen &&
            rl_readahead_look(look))
            seen = rl_readahead_waiting(fd);
    }
    errno = saved;
    return hung;
}
