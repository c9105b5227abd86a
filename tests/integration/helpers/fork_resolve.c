/* fork_resolve — the pre-fork pattern (python's multiprocessing, gunicorn,
 * a crawler's workers): threads resolving names in a loop while the main
 * thread forks children that each resolve once and exit.
 *
 *   fork_resolve THREADS CHILDREN TIMEOUT_MS [NAME]
 *
 * THREADS threads call getaddrinfo(NAME) (default localhost) until the end;
 * the main thread forks CHILDREN children, at most 8 alive at once; each
 * child calls getaddrinfo(NAME) once and _exits 0 (3 when it failed), as
 * python's multiprocessing children do. A child still alive TIMEOUT_MS
 * after its fork is stuck, and killed; one that was runnable then, or had
 * used 20 ms of CPU (a lookup of a hosts-file name costs about 1 ms), was
 * spinning, not blocked; one blocked in a futex wait on a word of libc's
 * own (its resolver's lock, which a fork can copy held: resolv_conf.c in
 * glibc 2.36) is counted apart from one blocked elsewhere. Prints the
 * lines
 *   children=N
 *   exited=N
 *   failed=N
 *   stuck=N
 *   spinning=N
 *   in_libc=N
 *   elsewhere=N
 * and, for the first child stuck elsewhere, its state and what holds the
 * word it waits on as first_elsewhere="...". */
#include <dlfcn.h>
#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define ALIVE_MAX 8

static const char *name = "localhost";
static atomic_int stop;

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int resolve(void)
{
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
    int r = getaddrinfo(name, "80", &hints, &res);
    if (r == 0)
        freeaddrinfo(res);
    return r;
}

static void *resolver(void *arg)
{
    (void)arg;
    while (!atomic_load(&stop))
        resolve();
    return NULL;
}

struct kid {
    pid_t pid;
    double born;
};

/* Where a blocked child waits: the object (its file's base name) whose
 * memory holds the futex word it sleeps on, found with dladdr in this
 * process (the child is a copy of it: the same mappings), "anon" for a
 * word outside every object, "-" when it is in no futex wait. */
static void waits_in(pid_t pid, char *where, size_t len)
{
    char path[64], buf[512];
    FILE *f;
    long nr = -1;
    unsigned long word = 0;

    snprintf(where, len, "-");
    snprintf(path, sizeof path, "/proc/%d/syscall", (int)pid);
    if ((f = fopen(path, "r")) == NULL)
        return;
    if (fgets(buf, sizeof buf, f) == NULL ||
        sscanf(buf, "%ld %lx", &nr, &word) != 2)
        nr = -1;
    fclose(f);
    if (nr != SYS_futex)
        return;
    Dl_info info;
    if (dladdr((void *)word, &info) == 0 || info.dli_fname == NULL) {
        snprintf(where, len, "anon");
        return;
    }
    const char *base = strrchr(info.dli_fname, '/');
    snprintf(where, len, "%s", base != NULL ? base + 1 : info.dli_fname);
}

/* The process's state letter and CPU time (ms), from /proc. */
static char state_of(pid_t pid, double *cpu_ms)
{
    char path[64], buf[1024];
    FILE *f;
    char st = '?';

    *cpu_ms = 0;
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    if ((f = fopen(path, "r")) != NULL) {
        if (fgets(buf, sizeof buf, f) != NULL) {
            char *p = strrchr(buf, ')');
            unsigned long ut, stime;
            /* After the name: state, then 10 fields, utime, stime. */
            if (p != NULL && sscanf(p + 2, "%c %*d %*d %*d %*d %*d %*u "
                                           "%*u %*u %*u %*u %lu %lu",
                                    &st, &ut, &stime) == 3)
                *cpu_ms = (double)(ut + stime) * 1000.0 /
                          (double)sysconf(_SC_CLK_TCK);
        }
        fclose(f);
    }
    return st;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: fork_resolve THREADS CHILDREN TIMEOUT_MS "
                        "[NAME]\n");
        return 2;
    }
    int nthreads = atoi(argv[1]), nchildren = atoi(argv[2]);
    double timeout = atof(argv[3]);
    if (argc > 4)
        name = argv[4];
    if (nthreads < 0 || nthreads > 64 || nchildren <= 0)
        return 2;
    pthread_t t[64];
    for (int i = 0; i < nthreads; i++)
        if (pthread_create(&t[i], NULL, resolver, NULL) != 0)
            return 2;

    struct kid alive[ALIVE_MAX];
    int nalive = 0, forked = 0, exited = 0, failed = 0, stuck = 0, spinning = 0,
        in_libc = 0;
    char first[160] = "";
    while (forked < nchildren || nalive > 0) {
        if (forked < nchildren && nalive < ALIVE_MAX) {
            pid_t pid = fork();
            if (pid == 0) {
                /* A stuck child dies with this process, even one killed
                 * at the test's timeout. */
                prctl(PR_SET_PDEATHSIG, SIGKILL);
                _exit(resolve() == 0 ? 0 : 3);
            }
            if (pid < 0) {
                usleep(1000);
                continue;
            }
            alive[nalive++] = (struct kid){pid, now_ms()};
            forked++;
            continue;
        }
        usleep(1000);
        for (int i = 0; i < nalive;) {
            int st;
            pid_t w = waitpid(alive[i].pid, &st, WNOHANG);
            if (w == alive[i].pid) {
                if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
                    exited++;
                else
                    failed++;
                alive[i] = alive[--nalive];
                continue;
            }
            if (now_ms() - alive[i].born > timeout) {
                char where[64];
                double cpu;
                char s = state_of(alive[i].pid, &cpu);
                waits_in(alive[i].pid, where, sizeof where);
                stuck++;
                if (s == 'R' || cpu >= 20)
                    spinning++;
                else if (strncmp(where, "libc.so", 7) == 0)
                    in_libc++;
                else if (first[0] == '\0')
                    snprintf(first, sizeof first,
                             "state %c cpu %.0f ms futex in %s", s, cpu,
                             where);
                kill(alive[i].pid, SIGKILL);
                waitpid(alive[i].pid, &st, 0);
                alive[i] = alive[--nalive];
                continue;
            }
            i++;
        }
    }
    atomic_store(&stop, 1);
    for (int i = 0; i < nthreads; i++)
        pthread_join(t[i], NULL);
    printf("children=%d\nexited=%d\nfailed=%d\nstuck=%d\nspinning=%d\n"
           "in_libc=%d\nelsewhere=%d\n",
           forked, exited, failed, stuck, spinning, in_libc,
           stuck - spinning - in_libc);
    if (first[0] != '\0')
        printf("first_elsewhere=\"%s\"\n", first);
    return 0;
}
