/* cmd_run_seccomp.c — the launcher of `rlshim run --seccomp` (see
 * cmd_run_seccomp.h).
 *
 * Order matters:
 *  1. the kernel is asked whether it has user notification at all (else
 *     one line and 126: never an unthrottled run);
 *  2. the config is loaded and the gate set up with PROGRAM's identity
 *     (RLSHIM_KEY, else with key = exe PROGRAM's name, else the uid), so
 *     the supervisor decides in the same shared segment as the preloaded
 *     shim: a Go crawler and a curl loop of one user share one budget;
 *  3. the filter is built with libseccomp here, before fork, and exported
 *     as BPF: the child then only makes system calls (prctl, seccomp,
 *     sendmsg, execve), nothing that could deadlock after fork. It is
 *     loaded with seccomp(2) directly, because Debian's libseccomp 2.5
 *     cannot ask for SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV (Go preempts
 *     its threads with SIGURG; without the flag a held call is interrupted
 *     and re-sent in a loop);
 *  4. the child tells its listener's fd number over a socketpair, this
 *     process takes the fd with pidfd_getfd (not SCM_RIGHTS: see struct
 *     hello) and reads a word of the child's memory with process_vm_readv:
 *     the two ways the supervisor looks into the program, each refused
 *     (EPERM) by Yama's ptrace_scope 2 or 3, an LSM or a container's
 *     policy, so refused here, before PROGRAM runs, with one line; the
 *     child closes its own listener and execs PROGRAM; this process
 *     becomes the supervisor (a child subreaper, so that it outlives no
 *     descendant), and the child dies with it (PR_SET_PDEATHSIG). */
#include "cli/cmd_run_seccomp.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <seccomp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/pidfd.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/seccomp_filter.h"
#include "cli/sup.h"
#include "cli/supervise.h"
#include "policy/config.h"
#include "policy/gate.h"
#include "policy/identity.h"
#include "policy/open.h"
#include "util/log.h"

#define EXIT_CANNOT_EXEC 126

/* Linux 6.6; Debian 12's headers predate it. The kernel answers EINVAL
 * (older) and we go on without it. */
#ifndef SECCOMP_IOCTL_NOTIF_SET_FLAGS
#define SECCOMP_IOCTL_NOTIF_SET_FLAGS SECCOMP_IOW(4, __u64)
#endif
#ifndef SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP
#define SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP (1UL << 0)
#endif

static const char me[] = "rlshim run --seccomp";

/* ---- can this kernel do it? -------------------------------------------*/

static bool kernel_has_user_notif(char *why, size_t len)
{
    char buf[256] = "";
    FILE *f = fopen("/proc/sys/kernel/seccomp/actions_avail", "re");
    if (f == NULL) {
        snprintf(why, len,
                 "this kernel has no seccomp filters "
                 "(/proc/sys/kernel/seccomp/actions_avail: %s)",
                 strerror(errno));
        return false;
    }
    bool ok = fgets(buf, sizeof buf, f) != NULL;
    fclose(f);
    buf[strcspn(buf, "\n")] = '\0';
    for (char *t = strtok(buf, " "); ok && t != NULL; t = strtok(NULL, " "))
        if (strcmp(t, "user_notif") == 0)
            return true;
    snprintf(why, len,
             "this kernel has no seccomp user notification "
             "(actions_avail: %s; Linux 5.6 or later needed)",
             buf);
    return false;
}

/* The supervisor takes the program's sockets with pidfd_getfd (Linux
 * 5.6): asked with an fd that cannot exist, a kernel that has it says
 * EBADF. */
static bool kernel_has_pidfd_getfd(char *why, size_t len)
{
    if (syscall(SYS_pidfd_getfd, -1, 0, 0) < 0 && errno == ENOSYS) {
        snprintf(why, len,
                 "this kernel has no pidfd_getfd (Linux 5.6 or "
                 "later needed)");
        return false;
    }
    return true;
}

/* A 32-bit program would make its calls through another system-call
 * table, which the filter does not decide: refuse it rather than run it
 * unthrottled (the filter kills a process that switches anyway). */
static bool is_foreign_elf(const char *path)
{
    unsigned char id[EI_NIDENT];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    bool foreign = false;
    if (fd < 0)
        return false;
    if (pread(fd, id, sizeof id, 0) == (ssize_t)sizeof id &&
        memcmp(id, ELFMAG, SELFMAG) == 0)
        foreign = id[EI_CLASS] != ELFCLASS64;
    close(fd);
    return foreign;
}

/* ---- the child -----------------------------------------------------------*/

/* What the child tells the parent before exec: the listener's fd number
 * in the child, or the errno of the step that failed. The parent takes
 * the fd itself with pidfd_getfd: passing it with SCM_RIGHTS would need a
 * sendmsg, which the child's own filter already sends to a supervisor
 * that does not have the listener yet. */
struct hello {
    int err;
    int step;     /* 0 prctl, 1 seccomp; in the parent: 2 pidfd_getfd,
                     3 process_vm_readv */
    int killable; /* WAIT_KILLABLE_RECV was accepted */
    int lfd;      /* the listener, in the child */
};

/* A word the parent reads in the child, at the address it has in both
 * (fork copies the address space): the probe of process_vm_readv. */
static volatile uint32_t probe_word = 0x726c7368u;

/* After fork: only system calls from here to exec. `parent` is the
 * supervisor's pid. */
static void child(int sock, const struct sock_fprog *prog, const char *path,
                  char *const argv[], pid_t parent)
{
    struct hello h = {0, 0, 1, -1};
    char ack;
    /* A program whose supervisor died would run on with every decided call
     * failing ENOSYS: it dies with it. The signal comes at the death of the
     * thread that forked, so the fork is made by the supervisor's main
     * thread (launch), which lives until the supervisor exits. If the
     * parent died before the prctl, no signal will come: getppid says so.
     * NO_NEW_PRIVS keeps a set-user-ID exec from clearing it; a program
     * that changes its own credentials clears it (the kernel's rule). Its
     * own children are not ended (they get ENOSYS, not a free run). */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0 || getppid() != parent)
        _exit(EXIT_CANNOT_EXEC);
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
        h.err = errno;
        goto fail;
    }
    h.step = 1;
    h.lfd = (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
                         SECCOMP_FILTER_FLAG_NEW_LISTENER |
                             SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV,
                         prog);
    if (h.lfd < 0 && errno == EINVAL) {
        /* Before Linux 5.19: the supervisor warns. */
        h.killable = 0;
        h.lfd = (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
                             SECCOMP_FILTER_FLAG_NEW_LISTENER, prog);
    }
    if (h.lfd < 0) {
        h.err = errno;
        goto fail;
    }
    /* write and read: calls the filter does not name. */
    if (write(sock, &h, sizeof h) != (ssize_t)sizeof h ||
        read(sock, &ack, 1) != 1)
        _exit(EXIT_CANNOT_EXEC); /* the parent is gone: never unsupervised */
    /* The program must not hold the listener: when the supervisor dies,
     * its pending and later calls must fail (ENOSYS), not hang. */
    close(h.lfd);
    close(sock);
    execv(path, argv);
    int e = errno;
    dprintf(2, "rlshim: %s: %s\n", path, strerror(e));
    _exit(e == ENOENT ? 127 : EXIT_CANNOT_EXEC);
fail:
    if (write(sock, &h, sizeof h) < 0)
        _exit(EXIT_CANNOT_EXEC);
    _exit(EXIT_CANNOT_EXEC);
}

/* The child's listener, taken into this process; -1 with h->err set (or
 * not, when the child died first). */
static int take_listener(int sock, pid_t pid, struct hello *h)
{
    ssize_t n;
    while ((n = read(sock, h, sizeof *h)) < 0 && errno == EINTR)
        ;
    if (n != (ssize_t)sizeof *h || h->err != 0)
        return -1;
    h->step = 2;
    int pfd = pidfd_open(pid, 0);
    int fd = pfd >= 0 ? pidfd_getfd(pfd, h->lfd, 0) : -1;
    if (fd < 0)
        h->err = errno;
    if (pfd >= 0)
        close(pfd);
    if (fd >= 0) {
        uint32_t word = 0;
        struct iovec local = {&word, sizeof word};
        struct iovec remote = {(void *)&probe_word, sizeof word};
        h->step = 3;
        errno = 0;
        if (process_vm_readv(pid, &local, 1, &remote, 1, 0) != sizeof word)
            h->err = errno != 0 ? errno : EIO;
        else if (word != probe_word)
            h->err = EIO;
        if (h->err != 0) {
            close(fd);
            return -1;
        }
    }
    if (fd >= 0 && write(sock, "k", 1) != 1) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Why we may not read the child: Yama's ptrace_scope when it forbids it
 * (2: only with CAP_SYS_PTRACE; 3: never), else the likely others. */
static const char *why_denied(void)
{
    char v[16] = "";
    FILE *f = fopen("/proc/sys/kernel/yama/ptrace_scope", "re");
    if (f != NULL) {
        if (fgets(v, sizeof v, f) == NULL)
            v[0] = '\0';
        fclose(f);
    }
    int scope = v[0] >= '0' && v[0] <= '9' ? atoi(v) : -1;
    return scope >= 3   ? "kernel.yama.ptrace_scope is 3: never, until a "
                          "reboot"
           : scope == 2 ? "kernel.yama.ptrace_scope is 2: only with "
                          "CAP_SYS_PTRACE; at 1 a parent may"
                        : "ptrace access refused: an LSM or the container's "
                          "seccomp policy?";
}

/* ---- what this mode can and cannot enforce --------------------------------*/

/* Requests (SPEC §11) are read from what a program writes on a
 * connection, which no notification shows: one line when the user's rule
 * or any site limits them, so that none is counted silently. */
static void warn_requests(const struct rl_config *cfg,
                          const struct rl_rule *rule)
{
    const struct rl_rule *by = NULL;
    if (rule != NULL && rule->nlimits[RL_KIND_REQUEST] > 0)
        by = rule;
    for (size_t i = 0; by == NULL && i < cfg->nrules; i++)
        if (cfg->rules[i].site != NULL &&
            cfg->rules[i].nlimits[RL_KIND_REQUEST] > 0)
            by = &cfg->rules[i];
    if (by == NULL)
        return;
    fprintf(stderr,
            "rlshim: warning: under --seccomp, requests are not counted "
            "([%s] request): the supervisor sees connects and addressed "
            "datagrams, not what the program writes on a connection\n",
            by->section);
}

/* One warning line for the limits of the rule that no notification can
 * see (SPEC §10): stream bytes and sends on connected sockets; and one
 * for requests. */
static void warn_unenforced(const struct rl_config *cfg,
                            const struct rl_identity *id)
{
    const struct rl_rule *rule =
        rl_config_find_rule(cfg, id->has_key ? id->key : NULL, id->uid,
                            id->has_login ? id->login : NULL);
    warn_requests(cfg, rule);
    if (rule == NULL)
        return;
    bool bytes = rule->nlimits[RL_KIND_SEND_BYTES] > 0;
    bool sends = rule->nlimits[RL_KIND_SEND] > 0;
    if (!bytes && !sends)
        return;
    fprintf(stderr,
            "rlshim: warning: under --seccomp, [%s] %s%s%s is enforced on "
            "datagrams sent to an address only, not on stream sockets nor "
            "on connected datagram sockets\n",
            rule->section, sends ? rl_kind_name(RL_KIND_SEND) : "",
            sends && bytes ? " and " : "",
            bytes ? rl_kind_name(RL_KIND_SEND_BYTES) : "");
}

/* librlshim.so has no business under the filter: a dynamically linked
 * descendant would be charged twice (by the shim and by the supervisor).
 * Take it out of LD_PRELOAD, leaving the rest. Returns true when it was
 * there. */
static bool drop_preload(void)
{
    const char *old = getenv("LD_PRELOAD");
    bool found = false;
    if (old == NULL)
        return false;
    char *val = calloc(1, strlen(old) + 1);
    if (val == NULL)
        return false;
    for (const char *p = old; *p;) {
        size_t n = strcspn(p, " :");
        const char *base = p;
        for (size_t i = 0; i < n; i++)
            if (p[i] == '/')
                base = p + i + 1;
        static const char lib[] = "librlshim.so";
        bool ours = (size_t)(p + n - base) == sizeof lib - 1 &&
                    strncmp(base, lib, sizeof lib - 1) == 0;
        found |= n > 0 && ours;
        if (n > 0 && !ours) {
            if (*val)
                strcat(val, " ");
            strncat(val, p, n);
        }
        p += n;
        p += strspn(p, " :");
    }
    if (*val)
        setenv("LD_PRELOAD", val, 1);
    else
        unsetenv("LD_PRELOAD");
    free(val);
    return found;
}

/* When librlshim.so was preloaded into this very process, its hooks would
 * charge (and in delay mode sleep in) the supervisor's own connects: run
 * this command again without it. Returns only when that fails. */
static void reexec_self(void)
{
    static char buf[65536];
    char *argv[1024];
    int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
    size_t argc = 0;
    if (fd >= 0)
        close(fd);
    if (n <= 0 || (size_t)n >= sizeof buf - 1)
        return;
    buf[n] = '\0';
    for (char *p = buf; p < buf + n && argc < 1023; p += strlen(p) + 1)
        argv[argc++] = p;
    argv[argc] = NULL;
    execv("/proc/self/exe", argv);
}

/* PROGRAM's identity: the supervisor's own (key from the environment, or
 * its cgroup, which PROGRAM starts in; uid, login), but with key = exe the
 * name of PROGRAM, not "rlshim". */
static void target_identity(const struct rl_config *cfg, const char *path,
                            struct rl_identity *id)
{
    rl_identity_resolve(id, cfg->key_mode == RL_KEY_CGROUP ? RL_KEY_CGROUP
                                                           : RL_KEY_ENV);
    if (!id->has_key && cfg->key_mode == RL_KEY_EXE) {
        const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
        snprintf(id->key, sizeof id->key, "%s", base);
        id->has_key = id->key[0] != '\0';
    }
}

static bool report_wanted(const struct rl_config *cfg)
{
    const char *s = getenv("RLSHIM_REPORT");
    return cfg->report || (s != NULL && strcmp(s, "1") == 0);
}

/* Nothing to enforce: PROGRAM runs as itself, no filter, no supervisor. */
static int exec_plain(const char *path, char *const argv[])
{
    execv(path, argv);
    int e = errno;
    fprintf(stderr, "rlshim: %s: %s\n", path, strerror(e));
    return e == ENOENT ? 127 : EXIT_CANNOT_EXEC;
}

/* ---- the launcher ---------------------------------------------------------*/

static int launch(struct rl_sup *sup, const char *path, char *const argv[])
{
    bool sends = rl_gate_charges_sends(&sup->proc), closes = sup->proc.open.on;
    struct sock_fprog prog = {0};
    int sp[2], r, st;
    r = rl_seccomp_filter(&prog, sends, closes);
    if (r < 0) {
        fprintf(stderr,
                "%s: cannot build the seccomp filter: %s; not "
                "running %s unthrottled\n",
                me, strerror(-r), argv[0]);
        return EXIT_CANNOT_EXEC;
    }
    if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0 ||
        socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) != 0) {
        fprintf(stderr, "%s: %s\n", me, strerror(errno));
        free(prog.filter);
        return 1;
    }
    fflush(NULL);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "%s: fork: %s\n", me, strerror(errno));
        free(prog.filter);
        return 1;
    }
    if (pid == 0) {
        close(sp[0]);
        child(sp[1], &prog, path, argv, parent);
    }
    close(sp[1]);
    free(prog.filter);
    struct hello h = {0};
    int lfd = take_listener(sp[0], pid, &h);
    close(sp[0]);
    if (lfd < 0) {
        if (h.step >= 2 && h.err == EPERM)
            fprintf(stderr,
                    "%s: the supervisor may not read the program's sockets "
                    "and memory (%s: %s; %s); not running %s unthrottled\n",
                    me, h.step == 2 ? "pidfd_getfd" : "process_vm_readv",
                    strerror(h.err), why_denied(), argv[0]);
        else if (h.err != 0)
            fprintf(stderr,
                    "%s: %s failed: %s (seccomp disabled in this "
                    "container?); not running %s unthrottled\n",
                    me,
                    h.step == 0   ? "prctl(PR_SET_NO_NEW_PRIVS)"
                    : h.step == 1 ? "seccomp(SECCOMP_SET_MODE_FILTER)"
                    : h.step == 2 ? "pidfd_getfd(the listener)"
                                  : "process_vm_readv(the child)",
                    strerror(h.err), argv[0]);
        else
            fprintf(stderr,
                    "%s: the filter's listener did not arrive; not "
                    "running %s unthrottled\n",
                    me, argv[0]);
        kill(pid, SIGKILL);
        waitpid(pid, &st, 0);
        return EXIT_CANNOT_EXEC;
    }
    if (!h.killable)
        fprintf(stderr,
                "rlshim: warning: this kernel (before Linux 5.19) lets a "
                "signal interrupt a held call; Go programs retry them in a "
                "loop and a delayed call may wait longer\n");
    /* Linux 6.6: answers wake the waiting thread on this CPU (no wake-up
     * across CPUs per call; bench_seccomp shows the cost); older kernels
     * say EINVAL and we go on without. */
    uint64_t flags = SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP;
    (void)ioctl(lfd, SECCOMP_IOCTL_NOTIF_SET_FLAGS, flags);
    r = rl_supervise(sup, lfd, pid);
    if (r < 0) {
        fprintf(stderr, "%s: the supervisor failed: %s; stopping %s\n", me,
                strerror(-r), argv[0]);
        kill(pid, SIGKILL);
        return EXIT_CANNOT_EXEC;
    }
    return r;
}

int rl_run_seccomp(const char *path, char *const argv[])
{
    char why[256];
    if (!kernel_has_user_notif(why, sizeof why) ||
        !kernel_has_pidfd_getfd(why, sizeof why)) {
        fprintf(stderr, "%s: %s; not running %s unthrottled\n", me, why,
                argv[0]);
        return EXIT_CANNOT_EXEC;
    }
    if (is_foreign_elf(path)) {
        fprintf(stderr,
                "%s: %s is not a 64-bit program; its calls would "
                "pass the filter undecided: not running it\n",
                me, argv[0]);
        return EXIT_CANNOT_EXEC;
    }
    if (drop_preload()) {
        reexec_self();
        fprintf(stderr,
                "%s: cannot run again without librlshim.so in "
                "LD_PRELOAD: %s\n",
                me, strerror(errno));
        return 1;
    }

    struct rl_config *cfg = NULL;
    struct rl_diag d = {0};
    int r = rl_config_load_env(&cfg, &d);
    if (r < 0) {
        for (size_t i = 0; i < d.n; i++)
            fprintf(stderr, "%s\n", d.msgs[i]);
        rl_diag_free(&d);
        return 1;
    }
    rl_diag_free(&d);
    if (cfg == NULL) {
        /* No config at all (cmd_run said so): nothing to enforce. */
        return exec_plain(path, argv);
    }
    /* The supervisor's one instance: static, as a receiver may still use
     * it after we return, until the process exits (cli/sup.h). */
    static struct rl_sup sup;
    rl_sup_init(&sup);
    if (rl_log_setup(&sup.proc.log, cfg->log_target, cfg->log_path) < 0) {
        fprintf(stderr, "%s: %s: log path too long\n", me, cfg->path);
        rl_config_free(cfg);
        return 1;
    }
    struct rl_identity id;
    target_identity(cfg, path, &id);
    why[0] = '\0';
    r = rl_gate_init(&sup.proc, cfg, &id, why, sizeof why);
    if (why[0] != '\0')
        fprintf(stderr, "%s\n", why);
    if (r < 0) {
        fprintf(stderr, "%s: cannot set up budgets: %s\n", me, strerror(-r));
        rl_config_free(cfg);
        return 1;
    }
    if (report_wanted(cfg))
        rl_gate_report_enable(&sup.proc);
    if (!rl_gate_active(&sup.proc)) {
        /* No section applies to this user: nothing is throttled, as under
         * the preload; no filter, no supervisor. */
        rl_gate_finish(&sup.proc);
        return exec_plain(path, argv);
    }
    warn_unenforced(cfg, &id);
    r = launch(&sup, path, argv);
    /* cfg stays: the gate reads it, and the supervisor's receiving thread
     * may still be in its ioctl until the process exits. */
    rl_gate_finish(&sup.proc);
    return r;
}
