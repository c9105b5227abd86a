/* netns_hosts.h — simulated hosts on a network of their own: one network
 * namespace per host (`ip netns add`), each with a veth pair whose other
 * end is on a bridge the test makes, the bridge's address being where the
 * servers listen (Redis, the sink). Each host reaches them over its own
 * interface and address, as a machine of a fleet does. Made by the test,
 * removed after (the namespaces, the bridge, the host ends of the veths
 * with them). Needs root and iproute2; where either is missing (or the
 * kernel refuses), the caller falls back to state dirs alone and says so.
 * Include after harness.h. */
#ifndef RL_TEST_NETNS_HOSTS_H
#define RL_TEST_NETNS_HOSTS_H

#include <sched.h>

#define NETNS_MAX 32

struct nethosts {
    int n;              /* namespaces made */
    bool on;            /* made: hosts run in them */
    char prefix[16];    /* "rl<pid>": every name starts with it */
    char bridge_ip[32]; /* the servers' address */
    char why[256];      /* why not, when !on */
};

/* `ip ARGS`, output to /dev/null; 0 when it worked. */
H_FN int netns_ip(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
H_FN int netns_ip(const char *fmt, ...)
{
    char args[400], cmd[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    snprintf(cmd, sizeof cmd, "ip %s >/dev/null 2>&1", args);
    return system(cmd);
}

H_FN void nethosts_remove(struct nethosts *h)
{
    for (int i = 0; i < h->n; i++)
        netns_ip("netns del %sn%d", h->prefix, i);
    if (h->prefix[0] != '\0')
        netns_ip("link del %sb", h->prefix);
    h->n = 0;
    h->on = false;
}

/* n namespaces on a bridge of a /24 of 10.0.0.0/8 picked from the pid (a
 * test running beside another picks another); false, with h->why, when
 * they cannot be made here. */
H_FN bool nethosts_make(struct nethosts *h, int n)
{
    memset(h, 0, sizeof *h);
    if (n > NETNS_MAX) {
        snprintf(h->why, sizeof h->why, "more than %d hosts", NETNS_MAX);
        return false;
    }
    if (geteuid() != 0) {
        snprintf(h->why, sizeof h->why, "network namespaces need root");
        return false;
    }
    if (!h_have("ip")) {
        snprintf(h->why, sizeof h->why, "no ip (iproute2)");
        return false;
    }
    int pid = (int)getpid();
    snprintf(h->prefix, sizeof h->prefix, "rl%d", pid % 10000000);
    int net = 16 + pid % 200, sub = (pid / 200) % 250 + 1;
    snprintf(h->bridge_ip, sizeof h->bridge_ip, "10.%d.%d.1", net, sub);
    if (netns_ip("link add %sb type bridge", h->prefix) != 0 ||
        netns_ip("addr add %s/24 dev %sb", h->bridge_ip, h->prefix) != 0 ||
        netns_ip("link set %sb up", h->prefix) != 0) {
        snprintf(h->why, sizeof h->why,
                 "cannot make a bridge (ip link add type bridge)");
        netns_ip("link del %sb", h->prefix);
        return false;
    }
    for (int i = 0; i < n; i++) {
        const char *p = h->prefix;
        if (netns_ip("netns add %sn%d", p, i) != 0) {
            snprintf(h->why, sizeof h->why,
                     "cannot make a network namespace "
                     "(ip netns add)");
            nethosts_remove(h);
            return false;
        }
        h->n = i + 1;
        if (netns_ip("link add %sa%d type veth peer name %sv%d", p, i, p, i) !=
                0 ||
            netns_ip("link set %sv%d netns %sn%d", p, i, p, i) != 0 ||
            netns_ip("link set %sa%d master %sb up", p, i, p) != 0 ||
            netns_ip("-n %sn%d addr add 10.%d.%d.%d/24 dev %sv%d", p, i, net,
                     sub, i + 2, p, i) != 0 ||
            netns_ip("-n %sn%d link set %sv%d up", p, i, p, i) != 0 ||
            netns_ip("-n %sn%d link set lo up", p, i) != 0) {
            snprintf(h->why, sizeof h->why,
                     "cannot wire a veth pair to the "
                     "bridge");
            nethosts_remove(h);
            return false;
        }
    }
    h->on = true;
    return true;
}

/* In a forked child: move into host i's namespace. */
H_FN int nethosts_enter(const struct nethosts *h, int i)
{
    char path[128];
    snprintf(path, sizeof path, "/run/netns/%sn%d", h->prefix, i);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int r = setns(fd, CLONE_NEWNET);
    close(fd);
    return r;
}

#endif
