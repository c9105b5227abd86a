/* fleet_addr.h — where the fleet's Redis is, from the `fleet` key.
 *
 * A pure parser (no I/O, no name lookup): `redis://HOST[:PORT][/DB]` with
 * HOST an IPv4 address, `[IPv6]` or `localhost`, or `unix:/path.sock`.
 * Names other than localhost are refused, since a lookup (DNS) is a wait
 * that cannot be bounded, and every wait on Redis must be. */
#ifndef RL_FLEET_ADDR_H
#define RL_FLEET_ADDR_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#define RL_FLEET_DEFAULT_PORT 6379u

struct rl_fleet_addr {
    struct sockaddr_storage sa; /* AF_INET, AF_INET6 or AF_UNIX */
    socklen_t salen;
    uint32_t db; /* SELECT db; 0 by default */
};

/* Parse `v`. Returns NULL and *out, or what is wrong (a static string). */
const char *rl_fleet_addr_parse(const char *v, struct rl_fleet_addr *out);

#endif
