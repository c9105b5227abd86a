/* sup_probe.c — the supervisor's answers to policy's probes (see
 * sup_probe.h): fixed by how a notified call waits, never a system
 * call. */
#include "cli/sup_probe.h"

int sup_probe_waits(int fd)
{
    (void)fd;
    return 0;
}

static bool send_waits(int fd, int flags)
{
    (void)flags;
    return sup_probe_waits(fd) != 0;
}

/* A call let go is answered by the kernel, its pending error too. */
static int kernel_answers_later(int fd)
{
    (void)fd;
    return 0;
}

static uint64_t answer_unbounded(int fd)
{
    (void)fd;
    return 0;
}

/* Never asked: "fd N" alone, were it. */
static const struct sockaddr *no_peer(int fd, struct sockaddr_storage *ss,
                                      socklen_t *len)
{
    (void)fd;
    (void)ss;
    *len = 0;
    return NULL;
}

const struct rl_send_probe sup_send_probe = {
    .nonblocking = send_waits,
    .kernel_says = kernel_answers_later,
    .send_timeout = answer_unbounded,
    .peer = no_peer,
};
