/* dest.c — `to` entries: parsing, printing, matching (see dest.h). */
#include "policy/dest.h"

#include <arpa/inet.h>
#include <endian.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "policy/names.h"
#include "util/parse.h"

/* Zero the host bits, so that matching compares whole bytes. */
static void mask_prefix(uint8_t *addr, unsigned bytes, unsigned prefix)
{
    for (unsigned i = 0; i < bytes; i++) {
        unsigned bit = i * 8;
        if (prefix >= bit + 8)
            continue;
        addr[i] &= prefix <= bit ? 0 : (uint8_t)(0xff << (8 - (prefix - bit)));
    }
}

/* ::ffff:0:0/96 (IN6_IS_ADDR_V4MAPPED wants an aligned struct in6_addr). */
static bool v4mapped(const uint8_t *a)
{
    static const uint8_t head[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    return memcmp(a, head, sizeof head) == 0;
}

static const char *parse_port(const char *port, struct rl_dest *d)
{
    uint64_t v;
    size_t pl = strlen(port);
    if (pl == 0 || pl > 5 || rl_parse_u64_n(port, (unsigned)pl, &v) < 0 ||
        v == 0 || v > 65535)
        return "bad port (1 to 65535)";
    d->port = (uint16_t)v;
    return NULL;
}

/* Is s ("HOST" or "HOST:PORT") a name rather than an address? HOST is
 * letters, digits, '-', '_' and '.', with a letter in its last label (no
 * top-level domain is all digits, so "10.0.0.300" stays a bad address). */
static bool is_name(const char *s)
{
    size_t n = strcspn(s, ":");
    const char *last = s;
    bool alpha = false;

    if (n == 0 || (s[n] == ':' && strchr(s + n + 1, ':') != NULL))
        return false;
    if (n > 1 && s[n - 1] == '.')
        n--; /* "example.com." is fully qualified */
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == '.') {
            last = s + i + 1;
            alpha = false;
        } else if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                   c == '-' || c == '_') {
            alpha = true;
        } else if (!(c >= '0' && c <= '9')) {
            return false;
        }
    }
    return alpha && last < s + n;
}

/* "example.com[:PORT]", "*.example.com[:PORT]". */
static const char *parse_name(const char *s, struct rl_dest *d)
{
    char buf[RL_NAME_MAX + 1];
    bool below = s[0] == '*' && s[1] == '.';
    const char *h = below ? s + 2 : s;
    size_t n = strcspn(h, ":");

    if (below && !is_name(h))
        return "bad name after '*.'";
    if (h[n] == ':') {
        const char *why = parse_port(h + n + 1, d);
        if (why != NULL)
            return why;
    }
    size_t cn = rl_name_canon(h, n, buf);
    if (cn == 0 || strstr(buf, "..") != NULL || buf[0] == '.')
        return "bad name (letters, digits, '-', '_' and '.' only)";
    if (strchr(buf, '*') != NULL)
        return "'*' only as '*.' before a name";
    d->name = malloc(cn + 1);
    if (d->name == NULL)
        return "out of memory";
    memcpy(d->name, buf, cn + 1);
    d->namelen = (uint8_t)cn;
    d->form = below ? RL_DEST_BELOW : RL_DEST_NAME;
    d->family = AF_UNSPEC;
    return NULL;
}

void rl_dest_clear(struct rl_dest *d)
{
    free(d->name);
    d->name = NULL;
    d->namelen = 0;
}

void rl_dests_free(struct rl_dest *list, size_t n)
{
    if (list == NULL)
        return;
    for (size_t i = 0; i < n; i++)
        rl_dest_clear(&list[i]);
    free(list);
}

/* "A.B.C.D[/P][:PORT]", "[V6][/P][:PORT]", "[V6/P][:PORT]", "V6[/P]",
 * "*:PORT", and the name forms. */
const char *rl_dest_parse(const char *s, struct rl_dest *d)
{
    char addr[64] = "";
    const char *p = s, *port = NULL, *pfx = NULL, *pfx_end = NULL;
    uint64_t v;
    int family;
    size_t n;

    memset(d, 0, sizeof *d);
    if ((s[0] == '*' && s[1] == '.') || is_name(s))
        return parse_name(s, d);
    if (*s == '[') {
        const char *close = strchr(s, ']');
        if (close == NULL)
            return "missing ']'";
        n = (size_t)(close - s - 1);
        if (n == 0 || n >= sizeof addr)
            return "bad IPv6 address";
        memcpy(addr, s + 1, n);
        addr[n] = '\0';
        char *slash = strchr(addr, '/');
        if (slash != NULL) {
            *slash = '\0';
            pfx = s + 1 + (slash - addr) + 1;
            pfx_end = close;
        }
        p = close + 1;
        if (*p == '/') {
            if (pfx != NULL)
                return "two prefix lengths";
            pfx = p + 1;
            p += strcspn(p, ":");
            pfx_end = p;
        }
        if (*p == ':')
            port = p + 1;
        else if (*p != '\0')
            return "unexpected text after ']'";
        family = AF_INET6;
    } else if (*s == '*') {
        if (s[1] != ':')
            return "'*' needs a port ('*:PORT')";
        port = s + 2;
        family = AF_UNSPEC;
    } else if (strchr(s, '.') != NULL && strchr(s, ':') == strrchr(s, ':')) {
        /* IPv4: at most one ':' (the port). */
        n = strcspn(s, "/:");
        if (n >= sizeof addr)
            return "bad IPv4 address";
        memcpy(addr, s, n);
        addr[n] = '\0';
        p = s + n;
        if (*p == '/') {
            pfx = p + 1;
            p += strcspn(p, ":");
            pfx_end = p;
        }
        if (*p == ':')
            port = p + 1;
        family = AF_INET;
    } else {
        /* A bare IPv6 address: no port possible, "::1/128". */
        n = strcspn(s, "/");
        if (n >= sizeof addr)
            return "bad IPv6 address";
        memcpy(addr, s, n);
        addr[n] = '\0';
        if (s[n] == '/') {
            pfx = s + n + 1;
            pfx_end = pfx + strlen(pfx);
        }
        family = AF_INET6;
    }

    if (family == AF_INET) {
        if (inet_pton(AF_INET, addr, d->addr) != 1)
            return "bad IPv4 address";
        d->prefix = 32;
    } else if (family == AF_INET6) {
        if (inet_pton(AF_INET6, addr, d->addr) != 1)
            return "bad IPv6 address";
        d->prefix = 128;
    }
    d->form = family == AF_UNSPEC ? RL_DEST_ANY : RL_DEST_ADDR;
    d->family = (uint8_t)family;

    if (pfx != NULL) {
        size_t pl = (size_t)(pfx_end - pfx);
        if (pl == 0 || pl > 3 || rl_parse_u64_n(pfx, (unsigned)pl, &v) < 0 ||
            v > (family == AF_INET ? 32u : 128u))
            return family == AF_INET ? "bad prefix length (0 to 32)"
                                     : "bad prefix length (0 to 128)";
        d->prefix = (uint8_t)v;
    }
    if (port != NULL) {
        const char *why = parse_port(port, d);
        if (why != NULL)
            return why;
    }
    if (family == AF_INET6 && d->prefix >= 96 && v4mapped(d->addr)) {
        /* ::ffff:a.b.c.d is matched as IPv4 (SPEC §1). */
        memmove(d->addr, d->addr + 12, 4);
        memset(d->addr + 4, 0, 12);
        d->family = AF_INET;
        d->prefix = (uint8_t)(d->prefix - 96);
    }
    if (d->family == AF_INET)
        mask_prefix(d->addr, 4, d->prefix);
    else if (d->family == AF_INET6)
        mask_prefix(d->addr, 16, d->prefix);
    return NULL;
}

int rl_dest_format(const struct rl_dest *d, char *buf, size_t len)
{
    char a[INET6_ADDRSTRLEN] = "";
    char port[8] = "";

    if (d->port != 0)
        snprintf(port, sizeof port, ":%u", d->port);
    if (d->form == RL_DEST_ANY)
        return snprintf(buf, len, "*%s", port);
    if (d->form == RL_DEST_NAME || d->form == RL_DEST_BELOW)
        return snprintf(buf, len, "%s%s%s", d->form == RL_DEST_BELOW ? "*." : "",
                        d->name, port);
    inet_ntop(d->family == AF_INET ? AF_INET : AF_INET6, d->addr, a, sizeof a);
    if (d->family == AF_INET) {
        if (d->prefix == 32)
            return snprintf(buf, len, "%s%s", a, port);
        return snprintf(buf, len, "%s/%u%s", a, d->prefix, port);
    }
    if (d->prefix == 128)
        return snprintf(buf, len, "[%s]%s", a, port);
    return snprintf(buf, len, "[%s]/%u%s", a, d->prefix, port);
}

/* AF_INET or AF_INET6 when sa is a whole address of that family, else 0
 * (sa may be unaligned). */
static sa_family_t inet_family(const void *sa, unsigned salen)
{
    sa_family_t fam;

    if (sa == NULL || salen < sizeof fam)
        return 0;
    memcpy(&fam, sa, sizeof fam);
    if ((fam == AF_INET && salen >= sizeof(struct sockaddr_in)) ||
        (fam == AF_INET6 && salen >= sizeof(struct sockaddr_in6)))
        return fam;
    return 0;
}

bool rl_peer_from_addr(struct rl_names *names, const void *sa, unsigned salen,
                       struct rl_peer *p)
{
    sa_family_t fam = inet_family(sa, salen);

    if (fam == 0)
        return false;
    p->names = names;
    p->namelen = -1;
    p->name = NULL;
    if (fam == AF_INET) {
        struct sockaddr_in in;
        memcpy(&in, sa, sizeof in);
        memcpy(p->addr, &in.sin_addr, 4);
        p->port = p->conn_port = ntohs(in.sin_port);
        p->family = AF_INET;
        return true;
    }
    struct sockaddr_in6 in6;
    memcpy(&in6, sa, sizeof in6);
    p->port = p->conn_port = ntohs(in6.sin6_port);
    if (IN6_IS_ADDR_V4MAPPED(&in6.sin6_addr)) {
        memcpy(p->addr, in6.sin6_addr.s6_addr + 12, 4);
        p->family = AF_INET;
    } else {
        memcpy(p->addr, in6.sin6_addr.s6_addr, 16);
        p->family = AF_INET6;
    }
    return true;
}

/* The first `prefix` bits of 64 bits at a and b are equal (b's host bits
 * are zero, a's may not be). Whole words, in network order. */
static inline bool word_match(const uint8_t *a, const uint8_t *b,
                              unsigned prefix)
{
    uint64_t x, y, mask;

    if (prefix == 0)
        return true;
    memcpy(&x, a, 8);
    memcpy(&y, b, 8);
    mask = prefix >= 64 ? ~0ull : ~(~0ull >> prefix);
    return (be64toh(x) & mask) == be64toh(y);
}

int rl_peer_name(struct rl_peer *p, char *buf)
{
    if (p->namelen < 0) {
        p->namelen = (int16_t)rl_names_find(p->names, p->family, p->addr, buf);
        p->name = buf;
    }
    return p->namelen;
}

/* A name entry against the peer's name (looked up already). */
static bool name_match(const struct rl_dest *d, const struct rl_peer *p)
{
    size_t n = p->namelen > 0 ? (size_t)p->namelen : 0, dn = d->namelen;
    if (d->form == RL_DEST_NAME)
        return n == dn && memcmp(p->name, d->name, dn) == 0;
    return n > dn + 1 && p->name[n - dn - 1] == '.' &&
           memcmp(p->name + n - dn, d->name, dn) == 0;
}

static inline bool match(const struct rl_dest *d, const struct rl_peer *p)
{
    /* An address form matches the address the connection went to, whatever
     * the request names (SPEC §11). */
    uint16_t port =
        d->form == RL_DEST_ADDR && p->conn_port != 0 ? p->conn_port : p->port;
    if (d->port != 0 && d->port != port)
        return false;
    if (d->form == RL_DEST_ANY)
        return true;
    if (d->form >= RL_DEST_NAME)
        return name_match(d, p);
    if (d->family != p->family)
        return false;
    if (d->family == AF_INET) {
        uint32_t x, y, mask;
        if (d->prefix == 0)
            return true;
        memcpy(&x, p->addr, 4);
        memcpy(&y, d->addr, 4);
        mask = ~(~0u >> 1 >> (d->prefix - 1));
        return (ntohl(x) & mask) == ntohl(y);
    }
    if (d->prefix <= 64)
        return word_match(p->addr, d->addr, d->prefix);
    return memcmp(p->addr, d->addr, 8) == 0 &&
           word_match(p->addr + 8, d->addr + 8, d->prefix - 64u);
}

bool rl_dest_match(const struct rl_dest *d, const struct rl_peer *p)
{
    return match(d, p);
}

bool rl_dests_cover_peer(const struct rl_dest *list, size_t n,
                         struct rl_peer *p, char *name)
{
    if (n == 0)
        return true;
    for (size_t i = 0; i < n; i++) {
        if (list[i].form >= RL_DEST_NAME)
            rl_peer_name(p, name); /* once: cached in p */
        if (match(&list[i], p))
            return true;
    }
    return false;
}

bool rl_dests_cover(struct rl_names *names, const struct rl_dest *list,
                    size_t n, const void *sa, unsigned salen)
{
    struct rl_peer p;
    char name[RL_NAME_MAX + 1];

    if (n == 0)
        /* No `to`: every inet address rl_peer_from_addr would read, with
         * nothing to match (every connect of a rule without `to`). */
        return inet_family(sa, salen) != 0;
    if (!rl_peer_from_addr(names, sa, salen, &p))
        return false;
    return rl_dests_cover_peer(list, n, &p, name);
}
