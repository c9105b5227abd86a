/* redis_server.h — a real redis-server for the fleet tests, started on a
 * free port of 127.0.0.1 by the test itself and stopped after (it dies
 * with the test process too: PR_SET_PDEATHSIG). Header-only, static. */
#ifndef RL_TEST_REDIS_SERVER_H
#define RL_TEST_REDIS_SERVER_H

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct redis {
    pid_t pid;
    int port;
    char pass[64]; /* requirepass, "" for none */
    char bind[32]; /* the address it listens on; "" for 127.0.0.1 */
};

static __attribute__((unused)) const char *redis_addr(const struct redis *r)
{
    return r->bind[0] != '\0' ? r->bind : "127.0.0.1";
}

static __attribute__((unused)) bool redis_have(void)
{
    return system("command -v redis-server >/dev/null 2>&1") == 0;
}

/* A port nothing listens on now (the kernel's pick, released). */
static __attribute__((unused)) int redis_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t l = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &l) != 0)
        return -1;
    close(fd);
    return ntohs(a.sin_port);
}

/* Does the server at addr:port answer PING (or NOAUTH)? */
static __attribute__((unused)) bool redis_answers_at(const char *addr, int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    inet_pton(AF_INET, addr, &a.sin_addr);
    bool ok = false;
    if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) == 0) {
        char buf[64] = "";
        struct timeval tv = {1, 0};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        if (write(fd, "PING\r\n", 6) == 6 && read(fd, buf, sizeof buf - 1) > 0)
            ok = buf[0] == '+' || strncmp(buf, "-NOAUTH", 7) == 0;
    }
    if (fd >= 0)
        close(fd);
    return ok;
}

static __attribute__((unused)) bool redis_answers(int port)
{
    return redis_answers_at("127.0.0.1", port);
}

/* Start redis-server on r (its port, 0: a free one; its address) with
 * no persistence and `more` arguments after those (NULL ended), and wait
 * until it answers. Its output goes nowhere; it dies with the test. */
static __attribute__((unused)) bool redis_start_with(struct redis *r,
                                                     char *const *more)
{
    if (r->port == 0)
        r->port = redis_free_port();
    char port[16];
    snprintf(port, sizeof port, "%d", r->port);
    /* Protected mode would refuse the simulated hosts on a bridge
     * (clients from another address than loopback, no password). */
    char *argv[32] = {"redis-server",
                      "--port",
                      port,
                      "--bind",
                      (char *)redis_addr(r),
                      "--save",
                      "",
                      "--appendonly",
                      "no",
                      "--protected-mode",
                      "no"};
    int n = 11;
    if (r->pass[0] != '\0') {
        argv[n++] = "--requirepass";
        argv[n++] = r->pass;
    }
    for (int i = 0; more != NULL && more[i] != NULL && n < 31; i++)
        argv[n++] = more[i];
    argv[n] = NULL;
    r->pid = fork();
    if (r->pid < 0)
        return false;
    if (r->pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        unsetenv("LD_PRELOAD");
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 1);
        dup2(null, 2);
        execvp("redis-server", argv);
        _exit(127);
    }
    for (int i = 0; i < 300; i++) {
        if (redis_answers_at(redis_addr(r), r->port))
            return true;
        usleep(10000);
    }
    return false;
}

/* Start redis-server on r->port (0: a free one), no persistence. */
static __attribute__((unused)) bool redis_start(struct redis *r)
{
    return redis_start_with(r, NULL);
}

/* SIGKILL it (an outage), and reap it. */
static __attribute__((unused)) void redis_kill(struct redis *r)
{
    if (r->pid > 0) {
        kill(r->pid, SIGKILL);
        waitpid(r->pid, NULL, 0);
        r->pid = 0;
    }
}

/* `redis-cli` on r with ARGS; its first output line into out. */
static __attribute__((unused)) int
redis_cli(const struct redis *r, const char *args, char *out, size_t len)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "redis-cli -h %s -p %d %s%s %s 2>/dev/null",
             redis_addr(r), r->port, r->pass[0] ? "--no-auth-warning -a " : "",
             r->pass, args);
    FILE *p = popen(cmd, "r");
    if (p == NULL)
        return -1;
    out[0] = '\0';
    if (fgets(out, (int)len, p) == NULL)
        out[0] = '\0';
    out[strcspn(out, "\n")] = '\0';
    return pclose(p);
}

/* How many times Redis ran `cmd` (INFO commandstats), e.g. "evalsha". */
static __attribute__((unused)) long redis_calls(const struct redis *r,
                                                const char *cmd)
{
    char c[512];
    snprintf(c, sizeof c,
             "redis-cli -h %s -p %d %s%s INFO commandstats 2>/dev/null | "
             "grep '^cmdstat_%s:'",
             redis_addr(r), r->port, r->pass[0] ? "--no-auth-warning -a " : "",
             r->pass, cmd);
    FILE *p = popen(c, "r");
    char line[512] = "";
    long n = 0;
    if (p != NULL && fgets(line, sizeof line, p) != NULL) {
        char *k = strstr(line, "calls=");
        if (k != NULL)
            n = strtol(k + 6, NULL, 10);
    }
    if (p != NULL)
        pclose(p);
    return n;
}

#endif
