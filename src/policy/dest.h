/* dest.h — the destinations of a rule's `to` list, and matching them on
 * the connect path.
 *
 * An entry is parsed once from the config and matched against the
 * address of every covered connect and addressed send, so matching takes
 * the sockaddr apart once (rl_peer) and then compares bytes: no
 * allocation, no system call, no lock.
 *
 * Forms today: an address prefix with an optional port, and "*:PORT".
 * The name forms of SPEC §4 ("example.com", "*.example.com") are a new
 * enum rl_dest_form value, a branch in rl_dest_parse, rl_dest_format and
 * rl_dest_match, and a name in struct rl_peer filled by rl_peer_from_addr
 * (from the shim's record of what each address was resolved from) only
 * when a list holds a name entry: callers keep calling rl_dests_cover with
 * the sockaddr they have. */
#ifndef RL_POLICY_DEST_H
#define RL_POLICY_DEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum rl_dest_form {
    RL_DEST_ADDR = 0, /* family, addr/prefix, port (0 = any) */
    RL_DEST_ANY = 1,  /* "*:PORT": every inet address on that port */
};

/* One entry of a `to` list. */
struct rl_dest {
    uint8_t form;     /* enum rl_dest_form */
    uint8_t family;   /* RL_DEST_ADDR: AF_INET or AF_INET6 (IPv4-mapped
                         IPv6 is stored as AF_INET); else AF_UNSPEC */
    uint8_t prefix;   /* prefix length in bits */
    uint16_t port;    /* host order; 0 = any port */
    uint8_t addr[16]; /* network order, host bits zeroed; AF_INET uses the
                         first 4 bytes */
};

/* Where a call goes, taken apart once for matching against every entry. */
struct rl_peer {
    uint8_t family;   /* AF_INET (also for IPv4-mapped IPv6) or AF_INET6 */
    uint16_t port;    /* host order */
    uint8_t addr[16]; /* network order */
};

/* Parse one entry ("10.0.0.0/8", "127.0.0.1:8080", "[::1]:443", "::1/128",
 * "*:53"; no blanks around it). Returns NULL, or why it is wrong (a
 * phrase for messages: "bad port (1 to 65535)"). */
const char *rl_dest_parse(const char *s, struct rl_dest *d);

/* The entry as the file would spell it. Returns what snprintf returns. */
int rl_dest_format(const struct rl_dest *d, char *buf, size_t len);

/* `sa` (struct sockaddr of `salen` bytes, perhaps unaligned) as a peer.
 * false for families other than AF_INET/AF_INET6 and short addresses. */
bool rl_peer_from_addr(const void *sa, unsigned salen, struct rl_peer *p);

bool rl_dest_match(const struct rl_dest *d, const struct rl_peer *p);

/* Does a list of n entries cover `sa`? An empty list covers every inet
 * destination; no list covers another family. */
bool rl_dests_cover(const struct rl_dest *list, size_t n, const void *sa,
                    unsigned salen);

#endif
