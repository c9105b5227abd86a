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
 * There is one supervisor per process: the state is this file's. */
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

static int listener;
static void (*on)(void *, const struct seccomp_notif *);
static void (*failed)(void *, int);
static void *arg;
static _Atomic int in_ioctl; /* receivers in (or going into) the ioctl */
/* Receivers that follow (wait on `called`), and the calls sent to them
 * that none has taken yet. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t called = PTHREAD_COND_INITIALIZER;
static int followers, calls;
/* Set by this receiver's connect that blocked. */
static __thread bool blocked;

static int start_receiver(void);

bool sup_receive_others_wait(void)
{
    return atomic_load(&in_ioctl) > 0;
}

int sup_receive_call(void)
{
    int r = 0;
    pthread_mutex_lock(&lock);
    if (followers > calls) {
        calls++;
        pthread_cond_signal(&called);
    } else
        r = start_receiver();
    pthread_mutex_unlock(&lock);
    return r;
}

void sup_receive_blocked(void)
{
    blocked = true;
}

/* Wait until called; false when this receiver should end instead
 * (SPARE_FOLLOWERS others follow already). */
static bool follow(void)
{
    pthread_mutex_lock(&lock);
    bool ok = followers < SPARE_FOLLOWERS;
    if (ok) {
        followers++;
        while (calls == 0)
            pthread_cond_wait(&called, &lock);
        calls--;
        followers--;
    }
    pthread_mutex_unlock(&lock);
    return ok;
}

/* After ENOENT: has every filtered task gone (the listener hangs up)? The
 * ioctl then answers ENOENT at once, for ever: no notification can come
 * any more. */
static bool targets_gone(void)
{
    struct pollfd p = {.fd = listener, .events = POLLIN};
    return poll(&p, 1, 0) == 1 && (p.revents & POLLHUP);
}

/* A place in the ioctl while fewer than `most` receivers have one. */
static bool place_in_ioctl(int most)
{
    int n = atomic_load(&in_ioctl);
    while (n < most)
        if (atomic_compare_exchange_weak(&in_ioctl, &n, n + 1))
            return true;
    return false;
}

/* A receiver. The followers never end once every filtered task has gone:
 * they wait on their condition until the process exits. */
static void *receive(void *unused)
{
    (void)unused;
    bool placed = place_in_ioctl(1);
    for (;;) {
        if (!placed) {
            if (!follow())
                break;
            atomic_fetch_add(&in_ioctl, 1); /* called to go there */
        }
        struct seccomp_notif req;
        memset(&req, 0, sizeof req);
        int r = ioctl(listener, SECCOMP_IOCTL_NOTIF_RECV, &req);
        int err = errno;
        atomic_fetch_sub(&in_ioctl, 1);
        blocked = false;
        if (r == 0)
            on(arg, &req);
        else if (err == ENOENT && targets_gone())
            break;
        else if (err != ENOENT && err != EINTR) {
            /* ENOENT: the caller was killed first. Anything else would
             * repeat for ever: the receivers stop, and the listener's
             * close makes the calls left fail. */
            failed(arg, err);
            break;
        }
        placed = place_in_ioctl(blocked ? 2 : 1);
    }
    sup_target_thread_end();
    return NULL;
}

static int start_receiver(void)
{
    pthread_attr_t attr;
    pthread_t th;
    if (pthread_attr_init(&attr) != 0)
        return -ENOMEM;
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int r = -pthread_create(&th, &attr, receive, NULL);
    pthread_attr_destroy(&attr);
    return r;
}

int sup_receive_start(int fd, void (*on_)(void *, const struct seccomp_notif *),
                      void (*failed_)(void *, int), void *arg_)
{
    listener = fd;
    on = on_;
    failed = failed_;
    arg = arg_;
    /* One in the ioctl, and one following. */
    int r = start_receiver();
    return r < 0 ? r : start_receiver();
}
