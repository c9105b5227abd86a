/* waitlook.c — the looks of the poll family (waitlook.h). */
#include "shim/waitlook.h"

#include "shim/readahead.h"

#define READING (POLLIN | POLLRDNORM)

/* fd's entry, made at its first round (whether its stream can be looked
 * at is asked then, once); -1 when it cannot be, or there is no room. */
static int find(struct rl_waitlook *w, int fd)
{
    for (unsigned j = 0; j < w->n; j++)
        if (w->e[j].fd == fd)
            return w->e[j].can ? (int)j : -1;
    if (w->n == RL_WAITLOOK_MAX)
        return -1;
    w->e[w->n].fd = fd;
    w->e[w->n].seen = -1;
    w->e[w->n].armed = false;
    w->e[w->n].can = rl_readahead_can(fd);
    return w->e[w->n++].can ? (int)w->n - 1 : -1;
}

uint64_t rl_waitlook_arm(struct rl_waitlook *w, struct pollfd *f,
                         const struct poll_saved *saved, unsigned k)
{
    uint64_t most = UINT64_MAX;
    for (unsigned s = 0; s < k; s++) {
        /* The program reads this one itself; one it hid all of is not
         * connected yet (fd -1). */
        if ((saved[s].events & READING) || f[saved[s].i].fd < 0)
            continue;
        int j = find(w, saved[s].fd);
        if (j < 0)
            continue;
        if (w->e[j].seen >= 0 &&
            rl_readahead_waiting(w->e[j].fd) == w->e[j].seen) {
            most = RL_LOOK_SLICE_NS;
            continue;
        }
        f[saved[s].i].events |= POLLIN;
        w->e[j].i = saved[s].i;
        w->e[j].armed = true;
    }
    return most;
}

int rl_waitlook_take(struct rl_waitlook *w, struct pollfd *f, int r)
{
    w->took = false;
    for (unsigned j = 0; j < w->n; j++) {
        if (!w->e[j].armed)
            continue;
        w->e[j].armed = false;
        struct pollfd *p = &f[w->e[j].i];
        if (r <= 0 || !(p->revents & READING))
            continue;
        p->revents &= (short)~READING;
        if (p->revents == 0) {
            r--;
            w->took = true;
        }
        rl_readahead_look_fd(w->e[j].fd);
        w->e[j].seen = rl_readahead_waiting(w->e[j].fd);
    }
    return r;
}
