/* stress_sink.h — helpers/stress_sink started by a test (one thread,
 * epoll, a backlog of 4096: it accepts as fast as hundreds of clients
 * connect, where sink.py's accept queue overflows and SYNs wait a second
 * to be sent again) and its counts read when it stops. Include after
 * harness.h. */
#ifndef RL_TEST_STRESS_SINK_H
#define RL_TEST_STRESS_SINK_H

struct stress_sink {
    pid_t pid;
    int tport, uport; /* its two ports: "T" and "U" in its counts */
    char log[300];
};

/* Start it (it dies with the test's process); its ports in s. */
H_FN void stress_sink_start(struct stress_sink *s)
{
    char bin[512];
    snprintf(s->log, sizeof s->log, "%s/sink.counts", h_dir);
    int p[2];
    cr_assert_eq(pipe(p), 0);
    s->pid = fork();
    cr_assert_neq(s->pid, -1);
    if (s->pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        dup2(p[1], 1);
        close(p[0]);
        close(p[1]);
        unsetenv("LD_PRELOAD");
        execl(h_helper("stress_sink", bin, sizeof bin), "stress_sink", s->log,
              (char *)NULL);
        _exit(127);
    }
    close(p[1]);
    char buf[64] = "";
    ssize_t n = read(p[0], buf, sizeof buf - 1);
    close(p[0]);
    buf[n > 0 ? n : 0] = '\0';
    cr_assert_eq(sscanf(buf, "PORT %d %d", &s->tport, &s->uport), 2,
                 "stress_sink did not start: '%s'", buf);
}

/* Stop it (it reads until nothing has come for 200 ms first) and read
 * what it counted: connections and bytes on each port, and connections
 * still open. */
H_FN void stress_sink_counts(struct stress_sink *s, long long *tc,
                             long long *tb, long long *uc, long long *ub,
                             long long *open_now)
{
    kill(s->pid, SIGTERM);
    waitpid(s->pid, NULL, 0);
    s->pid = 0;
    FILE *f = fopen(s->log, "r");
    cr_assert_not_null(f, "the sink wrote no counts");
    int got = fscanf(f, "T %lld %lld\nU %lld %lld\nOPEN %lld", tc, tb, uc, ub,
                     open_now);
    fclose(f);
    cr_assert_eq(got, 5);
}

/* Kill it, if it still runs (a test's .fini). */
H_FN void stress_sink_kill(struct stress_sink *s)
{
    if (s->pid > 0) {
        kill(s->pid, SIGKILL);
        waitpid(s->pid, NULL, 0);
        s->pid = 0;
    }
}

#endif
