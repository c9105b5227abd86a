/* bench_seccomp — what `rlshim run --seccomp` costs, measured in one run
 * against the same programs run bare:
 *
 *   - an intercepted call: a static client's addressed UDP sendto (every
 *     one goes to the supervisor and back) under a quota that never binds;
 *     the difference per call is the supervisor's round trip;
 *   - a call the filter does not name (getppid): the BPF filter alone;
 *   - a Go HTTP client (8 goroutines, a new connection per request, so a
 *     supervised connect per request) against a small server in this
 *     process: requests per second, bare and supervised;
 *   - a close-heavy static client (socket + close pairs) supervised with
 *     and without max_open in the config: with it, every close goes to
 *     the supervisor (which lets a close of an fd that holds no place
 *     through after a lock-free look).
 *
 * Rounds alternate bare and supervised; medians are printed. It prints
 * and never fails: the figures depend on the machine (the target
 * is <= 3 us per intercepted call with SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP,
 * Linux 6.6). Skips, saying why, without kernel support or clients. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../seccomp/clients.h"

#define ROUNDS 9

static struct sc_clients cl;
static char cfg[256], cfg_open[256];
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

/* Run a command line (bare or under --seccomp) and read KEY=value. */
static double run_value(bool supervised, const char *args, const char *key)
{
    char cmd[2048], line[256];
    snprintf(cmd, sizeof cmd, "RLSHIM_CONFIG='%s' %s%s %s 2>/dev/null", use_cfg,
             supervised ? cl.rlshim : "", supervised ? " run --seccomp --" : "",
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

/* A tiny HTTP/1.0 server: the Go client's requests cost it microseconds,
 * so the client's side is what is measured. */
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

static int listen_on(int type)
{
    struct sockaddr_in a = {.sin_family = AF_INET};
    socklen_t l = sizeof a;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int fd = socket(AF_INET, type, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        (type == SOCK_STREAM && listen(fd, 256) != 0) ||
        getsockname(fd, (struct sockaddr *)&a, &l) != 0)
        return -1;
    if (type == SOCK_STREAM)
        http_fd = fd;
    return ntohs(a.sin_port);
}

int main(void)
{
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
    setenv("RLSHIM_CONFIG", cfg, 1);
    setenv("RLSHIM_STATE_DIR", dir, 1);
    unsetenv("LD_PRELOAD");

    int udp = listen_on(SOCK_DGRAM), http = listen_on(SOCK_STREAM);
    pthread_t th;
    if (udp < 0 || http < 0 || pthread_create(&th, NULL, serve, NULL) != 0)
        return 1;

    double bare[ROUNDS], sup[ROUNDS], nb[ROUNDS], ns[ROUNDS];
    double gb[ROUNDS], gs[ROUNDS], cn[ROUNDS], co[ROUNDS];
    char args[1024];
    for (int i = 0; i < ROUNDS; i++) {
        snprintf(args, sizeof args, "%s sendto %d 20000", cl.static_bin, udp);
        bare[i] = run_value(false, args, "ns_per_call");
        sup[i] = run_value(true, args, "ns_per_call");
        snprintf(args, sizeof args, "%s count 2000000", cl.static_bin);
        nb[i] = run_value(false, args, "ns_per_call");
        ns[i] = run_value(true, args, "ns_per_call");
        snprintf(args, sizeof args, "%s http://127.0.0.1:%d/ 1000 8", cl.go_bin,
                 http);
        gb[i] = run_value(false, args, "rps");
        gs[i] = run_value(true, args, "rps");
        snprintf(args, sizeof args, "%s closes 20000", cl.static_bin);
        cn[i] = run_value(true, args, "ns_per_pair");
        use_cfg = cfg_open;
        co[i] = run_value(true, args, "ns_per_pair");
        use_cfg = cfg;
    }
    double mb = median(bare, ROUNDS), ms = median(sup, ROUNDS);
    double mnb = median(nb, ROUNDS), mns = median(ns, ROUNDS);
    double mgb = median(gb, ROUNDS), mgs = median(gs, ROUNDS);
    double mcn = median(cn, ROUNDS), mco = median(co, ROUNDS);
    printf("seccomp: intercepted sendto: bare %.0f ns, supervised %.0f ns: "
           "%.2f us per intercepted call\n",
           mb, ms, (ms - mb) / 1000);
    printf("seccomp: a call the filter does not name (getppid): bare %.0f "
           "ns, under the filter %.0f ns (%+.0f ns)\n",
           mnb, mns, mns - mnb);
    printf("seccomp: Go HTTP client, 8 goroutines, a connect per request: "
           "bare %.0f req/s, supervised %.0f req/s (ratio %.2f)\n",
           mgb, mgs, mgb > 0 ? mgs / mgb : 0);
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
