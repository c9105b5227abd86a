/* ownerlock.c — a lock as a robust, process-shared pthread mutex in
 * shared memory (see ownerlock.h).
 *
 * The words start zeroed (a new segment, a reset ring). A zeroed
 * pthread_mutex_t is a valid mutex, but a private, non-robust one; the
 * attributes live in a few of its bytes (glibc: the `kind` field). So the
 * image of a mutex made by pthread_mutex_init with our attributes is
 * computed once per process, and before every lock each word where that
 * image is not zero is put in place by a CAS from zero: every process
 * writes the same values, the words that change while the mutex is used
 * (lock word, owner, robust list links) are zero in the image and never
 * touched, and no process locks before the attributes are in. No separate
 * "initialised" flag, so nothing for a killed initialiser to leave half
 * done.
 *
 * Re-entry: a signal handler that decides a send while its thread is
 * inside a window's lock (waiting, holding, or in glibc's robust-list
 * bookkeeping) must neither deadlock nor touch that bookkeeping: `inside`
 * (a thread-local flag set before the mutex call and cleared after the
 * unlock returns) makes such a lock return RL_OWNERLOCK_BUSY, which the
 * window turns into a denial. */
#include "util/ownerlock.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "util/sys.h"

_Static_assert(sizeof(pthread_mutex_t) <= RL_OWNERLOCK_WORDS * 8,
               "the mutex fits the lock's words (layout.h)");
_Static_assert(_Alignof(pthread_mutex_t) <= 8,
               "state words are 8-byte aligned");

/* Atomic words: racing first callers store the same values. `image_bits`
 * has bit i set when image[i] is not zero, and READY once `image` is
 * complete (release, paired with the acquire in image_words). */
static _Atomic uint64_t image[RL_OWNERLOCK_WORDS];
static atomic_uint image_bits;
#define READY (1u << 31)

static __thread volatile sig_atomic_t inside
    __attribute__((tls_model("initial-exec")));

/* pthread_mutex_init on a local mutex only writes memory: safe to redo by
 * racing first callers, which all compute the same image. */
static unsigned make_image(void)
{
    union {
        pthread_mutex_t m;
        uint64_t w[RL_OWNERLOCK_WORDS];
    } u;
    pthread_mutexattr_t a;
    unsigned bits = READY;

    memset(&u, 0, sizeof u);
    pthread_mutexattr_init(&a);
    pthread_mutexattr_settype(&a, PTHREAD_MUTEX_NORMAL);
    pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
    pthread_mutex_init(&u.m, &a);
    pthread_mutexattr_destroy(&a);
    for (unsigned i = 0; i < RL_OWNERLOCK_WORDS; i++) {
        atomic_store_explicit(&image[i], u.w[i], memory_order_relaxed);
        if (u.w[i])
            bits |= 1u << i;
    }
    atomic_store_explicit(&image_bits, bits, memory_order_release);
    return bits;
}

/* Which words of the image are not zero (bits), once it is made. */
static inline unsigned image_words(void)
{
    unsigned bits = atomic_load_explicit(&image_bits, memory_order_acquire);

    return (bits ? bits : make_image()) & ~READY;
}

uint64_t rl_ownerlock_self(void)
{
    (void)image_words();
    return ((uint64_t)(uint32_t)getpid() << 32) | (uint32_t)gettid();
}

/* Put the attributes in (see the top). A word that is neither zero nor
 * the image was never written by a process of ours there: written over. */
static inline void ensure_mutex(rl_atomic_u64 *lk)
{
    for (unsigned bits = image_words(); bits; bits &= bits - 1) {
        unsigned i = (unsigned)__builtin_ctz(bits);
        uint64_t want = atomic_load_explicit(&image[i], memory_order_relaxed);
        /* Relaxed is enough for the fast path: the CAS (seq_cst) below or
         * an earlier one orders the words before glibc reads them;
         * glibc's own lock CAS orders the rest. */
        uint64_t cur = atomic_load_explicit(&lk[i], memory_order_relaxed);

        if (cur == want)
            continue;
        if (!atomic_compare_exchange_strong(&lk[i], &cur, want) && cur != want)
            atomic_store(&lk[i], want);
    }
}

#define SPINS 100
#define YIELDS 64

static void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static void deadline(struct timespec *ts)
{
    clock_gettime(CLOCK_REALTIME, ts);
    ts->tv_sec += (time_t)(RL_OWNERLOCK_WAIT_NS / 1000000000ull);
    ts->tv_nsec += (long)(RL_OWNERLOCK_WAIT_NS % 1000000000ull);
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

int rl_ownerlock_lock(rl_atomic_u64 *lk)
{
    pthread_mutex_t *m = (pthread_mutex_t *)(void *)lk;
    struct timespec ts;
    int r;

    if (inside)
        return RL_OWNERLOCK_BUSY;
    inside = 1;
    atomic_signal_fence(memory_order_seq_cst);
    ensure_mutex(lk);
    r = pthread_mutex_trylock(m);
    /* A holder is inside for well under a microsecond: look at the lock
     * word a little before sleeping in the kernel (glibc keeps the
     * holder's tid in the mutex's first int; only a hint, trylock
     * decides). A stopped or dead holder costs these few loads. */
    for (unsigned spin = 0; r == EBUSY && spin < SPINS + YIELDS; spin++) {
        if ((uint32_t)atomic_load_explicit(&lk[0], memory_order_relaxed) == 0)
            r = pthread_mutex_trylock(m);
        else if (spin < SPINS)
            cpu_relax();
        else
            sched_yield(); /* a holder preempted on a busy machine */
    }
    if (r == EBUSY) {
        deadline(&ts);
        r = pthread_mutex_timedlock(m, &ts);
    }
    if (r == ENOTRECOVERABLE) {
        /* Unlocked once without being made consistent (by no code of
         * ours): no one can hold it, so a fresh mutex is as good. */
        for (unsigned i = 0; i < RL_OWNERLOCK_WORDS; i++)
            atomic_store(&lk[i], atomic_load(&image[i]));
        r = pthread_mutex_trylock(m);
    }
    if (r == EOWNERDEAD) {
        pthread_mutex_consistent(m);
        return RL_OWNERLOCK_RECOVERED;
    }
    if (r == 0)
        return RL_OWNERLOCK_OK;
    atomic_signal_fence(memory_order_seq_cst);
    inside = 0;
    return RL_OWNERLOCK_BUSY;
}

void rl_ownerlock_unlock(rl_atomic_u64 *lk)
{
    pthread_mutex_unlock((pthread_mutex_t *)(void *)lk);
    atomic_signal_fence(memory_order_seq_cst);
    inside = 0;
}

/* ---- holders by pid ---------------------------------------------------*/

uint64_t rl_pid_start(int pid, bool *zombie)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    int saved = errno;
    int fd = rl_sys.openat(AT_FDCWD, path, O_RDONLY | O_CLOEXEC, 0);
    if (fd < 0) {
        errno = saved;
        return 0;
    }
    /* One read: the kernel makes the whole line at once (it is well under
     * 512 bytes up to field 22 whatever the name). */
    ssize_t n = rl_sys.read(fd, buf, sizeof buf - 1);
    rl_sys.close(fd);
    errno = saved;
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    char *p = strrchr(buf, ')'); /* the name may hold blanks and ')' */
    if (p == NULL)
        return 0;
    unsigned long long v = 0;
    char state = '?';
    /* After ')': state (field 3) ... starttime (field 22). */
    if (sscanf(p + 1,
               " %c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d "
               "%*d %*d %*d %*d %llu",
               &state, &v) != 2)
        return 0;
    if (zombie != NULL)
        *zombie = state == 'Z' || state == 'X';
    return v;
}

bool rl_pid_gone(uint32_t pid, uint64_t start)
{
    if (pid == (uint32_t)getpid())
        return false;
    int saved = errno;
    bool dead = kill((pid_t)pid, 0) != 0 && errno == ESRCH;
    errno = saved;
    if (dead)
        return true;
    bool zombie = false;
    uint64_t now_start = rl_pid_start((int)pid, &zombie);
    return zombie || (start != 0 && now_start != 0 && now_start != start);
}
