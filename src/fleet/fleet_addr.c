/* fleet_addr.c — the `fleet` key's value (see fleet_addr.h). */
#include "fleet/fleet_addr.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stddef.h>
#include <string.h>
#include <sys/un.h>

#include "util/parse.h"

static const char *parse_port_db(const char *p, struct rl_fleet_addr *out,
                                 uint16_t *port)
{
    char num[16];
    uint64_t v;

    *port = RL_FLEET_DEFAULT_PORT;
    if (*p == ':') {
        size_t n = strcspn(p + 1, "/");
        if (n == 0 || n >= sizeof num)
            return "bad port";
        memcpy(num, p + 1, n);
        num[n] = '\0';
        if (rl_parse_u64(num, &v) != 0 || v == 0 || v > 65535)
            return "bad port";
        *port = (uint16_t)v;
        p += 1 + n;
    }
    if (*p == '/') {
        if (p[1] == '\0')
            return NULL;
        if (rl_parse_u64(p + 1, &v) != 0 || v > 65535)
            return "bad database number";
        out->db = (uint32_t)v;
    } else if (*p != '\0') {
        return "junk after the host";
    }
    return NULL;
}

const char *rl_fleet_addr_parse(const char *v, struct rl_fleet_addr *out)
{
    memset(out, 0, sizeof *out);
    if (strncmp(v, "unix:", 5) == 0) {
        struct sockaddr_un *un = (struct sockaddr_un *)&out->sa;
        const char *path = v + 5;
        if (path[0] != '/')
            return "a unix socket needs an absolute path";
        if (strlen(path) >= sizeof un->sun_path)
            return "socket path too long";
        un->sun_family = AF_UNIX;
        strcpy(un->sun_path, path);
        out->salen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) +
                                 strlen(path) + 1);
        return NULL;
    }
    if (strncmp(v, "redis://", 8) != 0)
        return "use redis://HOST[:PORT][/DB] or unix:/path.sock";
    const char *h = v + 8;
    char host[64];
    if (strchr(h, '@') != NULL)
        return "no password in the address: use fleet_password = FILE";
    const char *rest;
    if (*h == '[') {
        const char *e = strchr(h, ']');
        if (e == NULL || (size_t)(e - h - 1) >= sizeof host)
            return "bad IPv6 address";
        memcpy(host, h + 1, (size_t)(e - h - 1));
        host[e - h - 1] = '\0';
        rest = e + 1;
    } else {
        size_t n = strcspn(h, ":/");
        if (n == 0 || n >= sizeof host)
            return "no host";
        memcpy(host, h, n);
        host[n] = '\0';
        rest = h + n;
    }
    uint16_t port;
    const char *why = parse_port_db(rest, out, &port);
    if (why != NULL)
        return why;
    struct sockaddr_in *in = (struct sockaddr_in *)&out->sa;
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&out->sa;
    if (strcmp(host, "localhost") == 0)
        strcpy(host, "127.0.0.1");
    if (inet_pton(AF_INET, host, &in->sin_addr) == 1) {
        in->sin_family = AF_INET;
        in->sin_port = htons(port);
        out->salen = sizeof *in;
    } else if (inet_pton(AF_INET6, host, &in6->sin6_addr) == 1) {
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons(port);
        out->salen = sizeof *in6;
    } else {
        return "the host must be an IP address or localhost (a name lookup "
               "cannot be bounded in time)";
    }
    return NULL;
}
