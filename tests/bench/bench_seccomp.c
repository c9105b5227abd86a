/* bench_seccomp — what `rlshim run --seccomp` costs, measured in one run
 * against the same programs run bare and under the floor (tests/seccomp/
 * floor.h: a supervisor that answers every notification CONTINUE at once,
 * the kernel's own round trip):
 *
 *   - an intercepted call: a static client's addressed UDP sendto, and its
 *     connect + close (SO_LINGER 0) to a listener that accepts and closes
 *     (every sendto and connect goes to the supervisor and back) under a
 *     quota that never binds; the difference per call from bare is the
 *     supervisor's round trip, rlshim's and the floor's, and their ratio
 *     is held to the bar (<= 1.3); for the connect, also against
 *     the floor of a supervisor that makes the connect itself as rlshim's
 *     does (floor.h: the part of rlshim's cost that is that guarantee);
 *   - a call the filter does not name (getppid): the BPF filter alone;
 *   - a Go HTTP client (8 goroutines, a new connection per request, so a
 *     supervised connect per request) against a small server in this
 *     process: requests per second, bare and supervised (bar >= 0.8)
 *     under a rule with `to` (the supervisor makes each connect) and one
 *     without (the kernel does), and under both floors (what the kernel's
 *     round trip alone leaves);
 *   - a close-heavy static client (socket + close pairs) supervised with
 *     and without max_open in the config: with it, every close goes to
 *     the supervisor (which lets a close of an fd that holds no place
 *     through after a lock-free look).
 *
 * Rounds alternate bare, floor and supervised; medians are printed. It
 * prints and never fails: the figures depend on the machine. Skips,
 * saying why, without kernel support or clients.
 *
 *   bench_seccomp               the benchmark (make bench)
 *   bench_seccomp floor PROG..  run PROG under the floor supervisor
 *   bench_seccomp floor-connect PROG..  ... the one that makes connects */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../seccomp/clients.h"
#include "../seccomp/floor.h"

#define ROUNDS 9

static struct sc_clients cl;
static char cfg[256], cfg_open[256], cfg_any[256], floor_cmd[600],
    floor_connect_cmd[600];
static const char *use_cfg = cfg; /* the config of a supervised run */

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp);
    return v[n / 2];
}

/* Run a command line bare, under the floor or under --seccomp, and read
 * KEY=value. */
enum under { BARE, FLOOR, FLOOR_CONNECT, RLSHIM };

static double run_value(enum under u, const char *args, const char *key)
{
    char cmd[2048], line[256], rl[600];
    snprintf(rl, sizeof rl, "%s run --seccomp --", cl.rlshim);
    snprintf(cmd, sizeof cmd, "RLSHIM_CONFIG='%s' %s %s 2>/dev/null", use_cfg,
             u == BARE            ? ""
             : u == FLOOR         ? floor_cmd
             : u == FLOOR_CONNECT ? floor_connect_cmd
                                  : rl,
             args);
    FILE *p = popen(cmd, "r");
    double v = -1;
    size_t kl = strlen(key);
    if (p == NULL)
        return -1;
    while (fgets(line, sizeof line, p) != NULL)
        if (strncmp(line, key, kl) == 0 && line[kl] == '=')
            v = atof(line + kl + 1);
    pclose(p);
    return v;
}

/* A tiny HTTP/1.0 server: the Go client's requests cost it next to
 * nothing, so the client's side is what is measured. */
static int http_fd;

static void *serve(void *arg)
{
    (void)arg;
    static const char reply[] = "HTTP/1.0 200 OK\r\nContent-Length: 3\r\n"
                                "Connection: close\r\n\r\nok\n";
    for (;;) {
        int c = accept(http_fd, NULL, NULL);
        if (c < 0)
            continue;
        char buf[2048];
        size_t got = 0;
        ssize_t n;
        while (got < sizeof buf - 1 &&
               (n = read(c, buf + got, sizeof buf - 1 - got)) > 0) {
            got += (size_t)n;
            buf[got] = '\0';
            if (strstr(buf, "\r\n\r\n") != NULL)
                break;
        }
        if (write(c, reply, sizeof reply - 1) < 0)
            perror("write");
        close(c);
    }
    return NULL;
}

/* The connect workload's listener: each connection closed at once. */
static int abort_fd;

static void *accept_close(void *arg)
{
    (void)arg;
    for (;;) {
        int c = accept(abort_fd, NULL, NULL);
        if (c >= 0)
            close(c);
    }
    return NULL;
}

/* A socket of `type` on 127.0.0.1 (listening if a stream) in *fd; its
 * port, or -1. A long queue: a connect loop that outruns the accepting
 * thread would otherwise see SYNs dropped, each costing a second. */
static int listen_on(int type, int *fd_out)
{
    struct sockaddr_in a = {.sin_family = AF_INET};
    socklen_t l = sizeof a;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int fd = socket(AF_INET, type, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        (type == SOCK_STREAM && listen(fd, 4096) != 0) ||
        getsockname(fd, (struct sockaddr *)&a, &l) != 0)
        return -1;
    *fd_out = fd;
    return ntohs(a.sin_port);
}

static void line_for(const char *what, double bare, double floor_,
                     double sup)
{
    double f = floor_ - bare, r = sup - bare;
    printf("seccomp: %s: bare %.0f ns, floor %.0f ns, rlshim %.0f ns: "
           "per intercepted call floor %.2f us, rlshim %.2f us\n",
           what, bare, floor_, sup, f / 1000, r / 1000);
    if (f <= 0) /* the noise of a loaded machine exceeded the round trip */
        printf("bar: seccomp %s, rlshim / floor per intercepted call: none "
               "(the floor measured no cost over bare) (target <= 1.30): "
               "NOT MET\n",
               what);
    else
        printf("bar: seccomp %s, rlshim / floor per intercepted call: %.2f "
               "(target <= 1.30): %s\n",
               what, r / f, r / f <= 1.3 ? "met" : "NOT MET");
}

int main(int argc, char **argv)
{
    if (argc >= 3 && strcmp(argv[1], "floor") == 0)
        return sc_floor_run(argv + 2, 0);
    if (argc >= 3 && strcmp(argv[1], "floor-connect") == 0)
        return sc_floor_run(argv + 2, 1);
    const char *b = getenv("RLSHIM_BUILD"), *src = getenv("RLSHIM_SRC");
    const char *why = sc_kernel_lacks();
    if (b == NULL || src == NULL) {
        fprintf(stderr, "run through make bench\n");
        return 1;
    }
    if (why == NULL)
        why = sc_build_clients(b, src, &cl);
    if (why != NULL) {
        printf("seccomp: skipped: %s\n", why);
        return 0;
    }
    char dir[] = "/tmp/rlshim-bench-sc-XXXXXX";
    if (mkdtemp(dir) == NULL)
        return 1;
    snprintf(cfg, sizeof cfg, "%s/rlshim.ini", dir);
    FILE *f = fopen(cfg, "w");
    if (f == NULL)
        return 1;
    /* Never binding: every call is decided, none waits or fails. */
    fprintf(f, "[default]\nconnect = 1000000/s\nsend = 1000000/s\n"
               "to = 127.0.0.0/8\n");
    fclose(f);
    /* The same with max_open, which puts close in the filter. */
    snprintf(cfg_open, sizeof cfg_open, "%s/rlshim-open.ini", dir);
    f = fopen(cfg_open, "w");
    if (f == NULL)
        return 1;
    fprintf(f, "[default]\nconnect = 1000000/s\nsend = 1000000/s\n"
               "max_open = 1000\nto = 127.0.0.0/8\n");
    fclose(f);
    /* The same without `to`: every connect charged alike, so the
     * supervisor lets the kernel make it (sup_calls.c). */
    snprintf(cfg_any, sizeof cfg_any, "%s/rlshim-any.ini", dir);
    f = fopen(cfg_any, "w");
    if (f == NULL)
        return 1;
    fprintf(f, "[default]\nconnect = 1000000/s\nsend = 1000000/s\n");
    fclose(f);
    setenv("RLSHIM_CONFIG", cfg, 1);
    setenv("RLSHIM_STATE_DIR", dir, 1);
    unsetenv("LD_PRELOAD");

    int udp_fd, udp = listen_on(SOCK_DGRAM, &udp_fd);
    int http = listen_on(SOCK_STREAM, &http_fd);
    int ab = listen_on(SOCK_STREAM, &abort_fd);
    pthread_t th, th2;
    char self[512];
    ssize_t sl = readlink("/proc/self/exe", self, sizeof self - 1);
    if (udp < 0 || http < 0 || ab < 0 || sl <= 0 ||
        pthread_create(&th, NULL, serve, NULL) != 0 ||
        pthread_create(&th2, NULL, accept_close, NULL) != 0)
        return 1;
    self[sl] = '\0';
    snprintf(floor_cmd, sizeof floor_cmd, "'%s' floor", self);
    snprintf(floor_connect_cmd, sizeof floor_connect_cmd, "'%s' floor-connect",
             self);

    double bare[ROUNDS], flo[ROUNDS], sup[ROUNDS];
    double cb[ROUNDS], cf[ROUNDS], cs[ROUNDS], nb[ROUNDS], ns[ROUNDS];
    double cc[ROUNDS];
    double gb[ROUNDS], gf[ROUNDS], gc[ROUNDS], gs[ROUNDS], ga[ROUNDS],
        cn[ROUNDS], co[ROUNDS];
    char args[1024];
    for (int i = 0; i < ROUNDS; i++) {
        snprintf(args, sizeof args, "%s sendto %d 20000", cl.static_bin, udp);
        bare[i] = run_value(BARE, args, "ns_per_call");
        flo[i] = run_value(FLOOR, args, "ns_per_call");
        sup[i] = run_value(RLSHIM, args, "ns_per_call");
        snprintf(args, sizeof args, "%s connects %d 5000", cl.static_bin, ab);
        cb[i] = run_value(BARE, args, "ns_per_call");
        cf[i] = run_value(FLOOR, args, "ns_per_call");
        cc[i] = run_value(FLOOR_CONNECT, args, "ns_per_call");
        cs[i] = run_value(RLSHIM, args, "ns_per_call");
        snprintf(args, sizeof args, "%s count 2000000", cl.static_bin);
        nb[i] = run_value(BARE, args, "ns_per_call");
        ns[i] = run_value(RLSHIM, args, "ns_per_call");
        snprintf(args, sizeof args, "%s http://127.0.0.1:%d/ 1000 8", cl.go_bin,
                 http);
        gb[i] = run_value(BARE, args, "rps");
        gf[i] = run_value(FLOOR, args, "rps");
        gc[i] = run_value(FLOOR_CONNECT, args, "rps");
        gs[i] = run_value(RLSHIM, args, "rps");
        use_cfg = cfg_any;
        ga[i] = run_value(RLSHIM, args, "rps");
        use_cfg = cfg;
        snprintf(args, sizeof args, "%s closes 20000", cl.static_bin);
        cn[i] = run_value(RLSHIM, args, "ns_per_pair");
        use_cfg = cfg_open;
        co[i] = run_value(RLSHIM, args, "ns_per_pair");
        use_cfg = cfg;
    }
    double mnb = median(nb, ROUNDS), mns = median(ns, ROUNDS);
    double mgb = median(gb, ROUNDS), mgs = median(gs, ROUNDS);
    double mcn = median(cn, ROUNDS), mco = median(co, ROUNDS);
    printf("seccomp: medians of %d rounds, bare / floor / rlshim alternating "
           "(floor: a supervisor that answers CONTINUE at once)\n",
           ROUNDS);
    line_for("addressed UDP sendto", median(bare, ROUNDS),
             median(flo, ROUNDS), median(sup, ROUNDS));
    line_for("connect+close", median(cb, ROUNDS), median(cf, ROUNDS),
             median(cs, ROUNDS));
    /* The part of rlshim's connect cost that is making the connect itself
     * (issue 19's guarantee), and the rest. */
    double mcb = median(cb, ROUNDS), mcf = median(cf, ROUNDS) - mcb;
    double mcc = median(cc, ROUNDS) - mcb, mcs = median(cs, ROUNDS) - mcb;
    printf("seccomp: connect+close under a floor that makes the connect "
           "itself (the address read, pidfd_getfd, the connect on its copy; "
           "one thread): %.2f us per intercepted call, %+.2f us over the "
           "plain floor; rlshim %+.2f us over it (ratio %.2f)\n",
           mcc / 1000, (mcc - mcf) / 1000, (mcs - mcc) / 1000,
           mcc > 0 ? mcs / mcc : 0);
    printf("seccomp: a call the filter does not name (getppid): bare %.0f "
           "ns, under the filter %.0f ns (%+.0f ns)\n",
           mnb, mns, mns - mnb);
    double mga = median(ga, ROUNDS);
    printf("seccomp: Go HTTP client, 8 goroutines, a connect per request: "
           "bare %.0f req/s; supervised, a rule with `to` (the supervisor "
           "makes each connect) %.0f req/s (ratio %.2f), a rule without "
           "(the kernel makes it) %.0f req/s (ratio %.2f)\n",
           mgb, mgs, mgb > 0 ? mgs / mgb : 0, mga, mgb > 0 ? mga / mgb : 0);
    /* What the kernel's round trip alone leaves of the bar: the same
     * client under the two floors. */
    double mgf = median(gf, ROUNDS), mgc = median(gc, ROUNDS);
    printf("seccomp: Go HTTP client under the floors: %.0f req/s (ratio "
           "%.2f) answering CONTINUE, %.0f req/s (ratio %.2f) making the "
           "connect itself; rlshim / the latter %.2f\n",
           mgf, mgb > 0 ? mgf / mgb : 0, mgc, mgb > 0 ? mgc / mgb : 0,
           mgc > 0 ? mgs / mgc : 0);
    printf("bar: seccomp Go HTTP client, supervised / bare req/s, a rule "
           "without `to`: %.2f (target >= 0.80): %s\n",
           mgb > 0 ? mga / mgb : 0,
           mgb > 0 && mga / mgb >= 0.8 ? "met" : "NOT MET");
    printf("bar: seccomp Go HTTP client, supervised / bare req/s, a rule "
           "with `to`: %.2f (target >= 0.80): %s\n",
           mgb > 0 ? mgs / mgb : 0,
           mgb > 0 && mgs / mgb >= 0.8 ? "met" : "NOT MET");
    printf("seccomp: socket+close pairs, supervised: without max_open %.0f "
           "ns, with max_open (close notified) %.0f ns (ratio %.2f, %+.2f us "
           "per close)\n",
           mcn, mco, mcn > 0 ? mco / mcn : 0, (mco - mcn) / 1000);
    char rm[300];
    snprintf(rm, sizeof rm, "rm -rf '%s'", dir);
    if (system(rm) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return 0;
}
