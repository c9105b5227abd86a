/* sup_receive.c — the receivers of the supervisor (see sup_receive.h).
 *
 * A receiver blocks in SECCOMP_IOCTL_NOTIF_RECV itself (not in epoll: the
 * synchronous wake-up of SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP hands the CPU
 * straight from the target to a thread waiting in the ioctl, and back
 * with the answer). But the kernel wakes every thread that waits in the
 * ioctl for each notification (all but one go back to sleep): so a
 * receiver goes back into the ioctl only when none is there, or after a
 * blocking connect when one is (two then: the next connect is likely
 * blocking too, and a needless wake-up costs less than calling a thread
 * there for each); else it waits on a condition variable until called (it
 * follows). A receiver that would follow while SPARE_FOLLOWERS others do
 * ends (so a burst of blocking connects leaves no crowd of threads).
 * The receivers' shared state is their struct sup_receive; each one's own
 * is a struct sup_receiver on its stack. */
#include "cli/sup_receive.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/ioctl.h>

#include "cli/sup_target.h"

/* Followers kept when none has work: one goes into the ioctl when the
 * only receiver there makes a blocking connect, without a thread started
 * for it. */
#define SPARE_FOLLOWERS 2

static int start_receiver(struct sup_receive *rx);

void sup_receive_init(struct sup_receive *rx, struct sup_kernel *kernel)
{
    memset(rx, 0, sizeof *rx);
    rx->listener = -1;
    rx->kernel = kernel;
    pthread_mutex_init(&rx->lock, NULL);
    pthread_cond_init(&rx->called, NULL);
}

bool sup_receive_others_wait(struct sup_receive *rx)
{
    return atomic_load(&rx->in_ioctl) > 0;
}

int sup_receive_call(struct sup_receive *rx)
{
    int r = 0;
    pthread_mutex_lock(&rx->lock);
    if (rx->followers > rx->calls) {
        rx->calls++;
        pthread_cond_signal(&rx->called);
    } else
        r = start_receiver(rx);
    pthread_mutex_unlock(&rx->lock);
    return r;
}

void sup_receive_blocked(struct sup_receiver *self)
{
    self->blocked = true;
}

/* Wait until called; false when this receiver should end instead
 * (SPARE_FOLLOWERS others follow already). */
static bool follow(struct sup_receive *rx)
{
    pthread_mutex_lock(&rx->lock);
    bool ok = rx->followers < SPARE_FOLLOWERS;
    if (ok) {
        rx->followers++;
        while (rx->calls == 0)
            pthread_cond_wait(&rx->called, &rx->lock);
        rx->calls--;
        rx->followers--;
    }
    pthread_mutex_unlock(&rx->lock);
    return ok;
}

/* After ENOENT: has every filtered task gone (the listener hangs up)? The
 * ioctl then answers ENOENT at once, for ever: no notification can come
 * any more. */
static bool targets_gone(const struct sup_receive *rx)
{
    struct pollfd p = {.fd = rx->listener, .events = POLLIN};
    return poll(&p, 1, 0) == 1 && (p.revents & POLLHUP);
}

/* A place in the ioctl while fewer than `most` receivers have one. */
static bool place_in_ioctl(struct sup_receive *rx, int most)
{
    int n = atomic_load(&rx->in_ioctl);
    while (n < most)
        if (atomic_compare_exchange_weak(&rx->in_ioctl, &n, n + 1))
            return true;
    return false;
}

/* A receiver. The followers never end once every filtered task has gone:
 * they wait on their condition until the process exits. */
static void *receive(void *arg)
{
    struct sup_receiver self = {.rx = arg};
    struct sup_receive *rx = self.rx;
    sup_pidfds_init(&self.pidfds, rx->kernel);
    bool placed = place_in_ioctl(rx, 1);
    for (;;) {
        if (!placed) {
            if (!follow(rx))
                break;
            atomic_fetch_add(&rx->in_ioctl, 1); /* called to go there */
        }
        struct seccomp_notif req;
        memset(&req, 0, sizeof req);
        int r = ioctl(rx->listener, SECCOMP_IOCTL_NOTIF_RECV, &req);
        int err = errno;
        atomic_fetch_sub(&rx->in_ioctl, 1);
        self.blocked = false;
        if (r == 0)
            rx->on(rx->arg, &self, &req);
        else if (err == ENOENT && targets_gone(rx))
            break;
        else if (err != ENOENT && err != EINTR) {
            /* ENOENT: the caller was killed first. Anything else would
             * repeat for ever: the receivers stop, and the listener's
             * close makes the calls left fail. */
            rx->failed(rx->arg, err);
            break;
        }
        placed = place_in_ioctl(rx, self.blocked ? 2 : 1);
    }
    sup_pidfds_close(&self.pidfds);
    return NULL;
}

static int start_receiver(struct sup_receive *rx)
{
    pthread_attr_t attr;
    pthread_t th;
    if (pthread_attr_init(&attr) != 0)
        return -ENOMEM;
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int r = -pthread_create(&th, &attr, receive, rx);
    pthread_attr_destroy(&attr);
    return r;
}

int sup_receive_start(struct sup_receive *rx, int listener,
                      void (*on)(void *, struct sup_receiver *,
                                 const struct seccomp_notif *),
                      void (*failed)(void *, int), void *arg)
{
    rx->listener = listener;
    rx->on = on;
    rx->failed = failed;
    rx->arg = arg;
    /* One in the ioctl, and one following. */
    int r = start_receiver(rx);
    return r < 0 ? r : start_receiver(rx);
}
