/* dest.h — the destinations of a rule's `to` list, and matching them on
 * the connect path.
 *
 * An entry is parsed once from the config and matched against the
 * address of every covered connect and addressed send, so matching takes
 * the sockaddr apart once (rl_peer) and then compares bytes: no
 * allocation, no system call, no lock.
 *
 * Forms: an address prefix with an optional port, "*:PORT", and the name
 * forms of SPEC §4: "example.com" (that name) and "*.example.com" (every
 * name below it, not itself), each with an optional ":PORT". A name entry
 * matches the destination's name (names.h: what the process last resolved
 * that address from), which rl_dests_cover looks up only when it meets a
 * name entry, once per call: address-only lists never look a name up. */
#ifndef RL_POLICY_DEST_H
#define RL_POLICY_DEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum rl_dest_form {
    RL_DEST_ADDR = 0, /* family, addr/prefix, port (0 = any) */
    RL_DEST_ANY = 1,  /* "*:PORT": every inet address on that port */
    RL_DEST_NAME = 2, /* "example.com[:PORT]": that name */
    RL_DEST_BELOW = 3, /* "*.example.com[:PORT]": names below it */
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
    uint8_t namelen;  /* name forms: strlen(name) */
    char *name;       /* name forms: canonical (names.h), without "*.";
                         owned: rl_dest_clear frees it. NULL otherwise */
};

struct rl_names;

/* Where a call goes, taken apart once for matching against every entry. */
struct rl_peer {
    uint8_t family;   /* AF_INET (also for IPv4-mapped IPv6) or AF_INET6 */
    uint16_t port;    /* host order */
    uint16_t conn_port; /* the port the connection went to, for address
                           forms (a request through a proxy names another
                           in `port`); 0: `port` */
    uint8_t addr[16]; /* network order */
    int16_t namelen;  /* -1: not looked up yet; 0: never resolved */
    const char *name; /* namelen > 0: the name, canonical */
    struct rl_names *names; /* where its name is looked up (NULL: none) */
};

/* Parse one entry ("10.0.0.0/8", "127.0.0.1:8080", "[::1]:443", "::1/128",
 * "*:53", "example.com", "*.example.com:443"; no blanks around it).
 * Returns NULL, or why it is wrong (a phrase for messages: "bad port (1 to
 * 65535)"). A name entry allocates its name: rl_dest_clear frees it (also
 * after an error, harmlessly). */
const char *rl_dest_parse(const char *s, struct rl_dest *d);

/* Free what rl_dest_parse allocated in `d`. */
void rl_dest_clear(struct rl_dest *d);

/* Free a list of n entries (NULL is fine). */
void rl_dests_free(struct rl_dest *list, size_t n);

/* The entry as the file would spell it. Returns what snprintf returns. */
int rl_dest_format(const struct rl_dest *d, char *buf, size_t len);

/* `sa` (struct sockaddr of `salen` bytes, perhaps unaligned) as a peer,
 * its name not looked up yet (it will be in `names`, the process's table
 * of names.h; NULL: it has none). false for families other than
 * AF_INET/AF_INET6 and short addresses. */
bool rl_peer_from_addr(struct rl_names *names, const void *sa, unsigned salen,
                       struct rl_peer *p);

/* Look the peer's name up (in p->names) into `buf` (RL_NAME_MAX + 1
 * bytes) unless done already. Returns p->namelen. */
int rl_peer_name(struct rl_peer *p, char *buf);

/* Does entry d match p? A name entry needs p's name looked up first
 * (rl_peer_name); an entry's port applies to every form. */
bool rl_dest_match(const struct rl_dest *d, const struct rl_peer *p);

/* Does a list of n entries cover `sa` (its name looked up in `names`)? An
 * empty list covers every inet destination; no list covers another
 * family. */
bool rl_dests_cover(struct rl_names *names, const struct rl_dest *list,
                    size_t n, const void *sa, unsigned salen);

/* The same for a peer taken apart already; `name` (RL_NAME_MAX + 1 bytes)
 * receives its name when a name entry needs it (kept in p for the next
 * list). */
bool rl_dests_cover_peer(const struct rl_dest *list, size_t n,
                         struct rl_peer *p, char *name);

#endif
