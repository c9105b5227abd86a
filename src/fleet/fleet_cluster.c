/* fleet_cluster.c — a Redis Cluster's slots, redirections and maps (see
 * fleet_cluster.h). */
#include "fleet/fleet_cluster.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <string.h>

/* ---- slots --------------------------------------------------------------*/

/* CRC16-CCITT as XMODEM computes it (polynomial 0x1021, start 0, no
 * reflection): the checksum Redis Cluster's key slots are defined by.
 * Bit by bit: a key is a few dozen bytes, a table would be 512 bytes of
 * .rodata for nothing measurable. */
static uint16_t crc16(const unsigned char *p, size_t n)
{
    uint16_t crc = 0;
    for (size_t i = 0; i < n; i++) {
        crc ^= (uint16_t)(p[i] << 8);
        for (int b = 0; b < 8; b++)
            crc = (crc & 0x8000) ? (uint16_t)((crc << 1) ^ 0x1021)
                                 : (uint16_t)(crc << 1);
    }
    return crc;
}

unsigned rl_fleet_tag_slot(const char *tag, size_t n)
{
    return crc16((const unsigned char *)tag, n) % RL_FLEET_SLOTS;
}

unsigned rl_fleet_key_slot(const char *key, size_t len)
{
    const char *open = memchr(key, '{', len);
    if (open != NULL) {
        size_t from = (size_t)(open - key) + 1;
        const char *close = memchr(open + 1, '}', len - from);
        if (close != NULL && close > open + 1)
            return crc16((const unsigned char *)open + 1,
                         (size_t)(close - open - 1)) %
                   RL_FLEET_SLOTS;
    }
    return crc16((const unsigned char *)key, len) % RL_FLEET_SLOTS;
}

/* ---- addresses ----------------------------------------------------------*/

/* host (n bytes, not NUL ended; empty: asked's) and port into *out. */
static int make_addr(const char *host, size_t n, long port,
                     const struct rl_fleet_addr *asked,
                     struct rl_fleet_addr *out)
{
    char h[INET6_ADDRSTRLEN];
    if (port <= 0 || port > 65535)
        return -EINVAL;
    memset(out, 0, sizeof *out);
    if (n == 0) {
        /* Redis's "the node you asked, on this port". */
        if (asked == NULL)
            return -EINVAL;
        *out = *asked;
        out->db = 0;
        if (out->sa.ss_family == AF_INET)
            ((struct sockaddr_in *)&out->sa)->sin_port = htons((uint16_t)port);
        else if (out->sa.ss_family == AF_INET6)
            ((struct sockaddr_in6 *)&out->sa)->sin6_port =
                htons((uint16_t)port);
        else
            return -EINVAL; /* a unix socket has no port */
        return 0;
    }
    if (n >= sizeof h)
        return -EINVAL;
    memcpy(h, host, n);
    h[n] = '\0';
    struct sockaddr_in *in = (struct sockaddr_in *)&out->sa;
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&out->sa;
    if (inet_pton(AF_INET, h, &in->sin_addr) == 1) {
        in->sin_family = AF_INET;
        in->sin_port = htons((uint16_t)port);
        out->salen = sizeof *in;
    } else if (inet_pton(AF_INET6, h, &in6->sin6_addr) == 1) {
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons((uint16_t)port);
        out->salen = sizeof *in6;
    } else {
        return -EINVAL; /* a host name: no lookup here */
    }
    return 0;
}

static bool same_addr(const struct rl_fleet_addr *a,
                      const struct rl_fleet_addr *b)
{
    if (a->sa.ss_family != b->sa.ss_family)
        return false;
    if (a->sa.ss_family == AF_INET) {
        const struct sockaddr_in *x = (const void *)&a->sa;
        const struct sockaddr_in *y = (const void *)&b->sa;
        return x->sin_port == y->sin_port &&
               x->sin_addr.s_addr == y->sin_addr.s_addr;
    }
    if (a->sa.ss_family == AF_INET6) {
        const struct sockaddr_in6 *x = (const void *)&a->sa;
        const struct sockaddr_in6 *y = (const void *)&b->sa;
        return x->sin6_port == y->sin6_port &&
               memcmp(&x->sin6_addr, &y->sin6_addr, sizeof x->sin6_addr) == 0;
    }
    return a->salen == b->salen && memcmp(&a->sa, &b->sa, a->salen) == 0;
}

/* A decimal number of at most 5 digits at p (n bytes), or -1. */
static long small_number(const char *p, size_t n)
{
    long v = 0;
    if (n == 0 || n > 5)
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9')
            return -1;
        v = v * 10 + (p[i] - '0');
    }
    return v;
}

/* ---- redirections -------------------------------------------------------*/

int rl_fleet_redirect_parse(const char *err, size_t len,
                            const struct rl_fleet_addr *asked,
                            struct rl_fleet_redirect *out)
{
    size_t skip;
    if (len > 6 && memcmp(err, "MOVED ", 6) == 0) {
        out->kind = RL_FLEET_MOVED;
        skip = 6;
    } else if (len > 4 && memcmp(err, "ASK ", 4) == 0) {
        out->kind = RL_FLEET_ASK;
        skip = 4;
    } else {
        return RL_FLEET_NO_REDIRECT;
    }
    const char *p = err + skip, *end = err + len;
    const char *sp = memchr(p, ' ', (size_t)(end - p));
    if (sp == NULL)
        return -EINVAL;
    long slot = small_number(p, (size_t)(sp - p));
    if (slot < 0 || slot >= (long)RL_FLEET_SLOTS)
        return -EINVAL;
    out->slot = (unsigned)slot;
    /* HOST:PORT, the port after the last colon (an IPv6 host has its
     * own colons and no brackets). */
    const char *host = sp + 1, *colon = NULL;
    for (const char *q = host; q < end; q++)
        if (*q == ':')
            colon = q;
    if (colon == NULL)
        return -EINVAL;
    long port = small_number(colon + 1, (size_t)(end - colon - 1));
    if (make_addr(host, (size_t)(colon - host), port, asked, &out->to) != 0)
        return -EINVAL;
    return out->kind;
}

/* ---- slot maps ----------------------------------------------------------*/

static bool is_int(const redisReply *r)
{
    return r != NULL && r->type == REDIS_REPLY_INTEGER;
}

static bool is_str(const redisReply *r)
{
    return r != NULL &&
           (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS);
}

static bool str_is(const redisReply *r, const char *s)
{
    return is_str(r) && r->len == strlen(s) && memcmp(r->str, s, r->len) == 0;
}

static int range(rl_fleet_range_fn fn, void *ctx, long long first,
                 long long last, const redisReply *ip, long long port,
                 const struct rl_fleet_addr *asked)
{
    if (first < 0 || last < first || last >= (long long)RL_FLEET_SLOTS)
        return -EPROTO;
    if (!is_str(ip))
        return -EPROTO;
    if (ip->len == 1 && ip->str[0] == '?')
        return 0; /* no known endpoint: a later map says */
    struct rl_fleet_addr a;
    if (make_addr(ip->str, ip->len, (long)port, asked, &a) != 0)
        return -EINVAL;
    return fn(ctx, (unsigned)first, (unsigned)last, &a);
}

int rl_fleet_cluster_slots(const redisReply *r,
                           const struct rl_fleet_addr *asked,
                           rl_fleet_range_fn fn, void *ctx)
{
    if (r == NULL || r->type != REDIS_REPLY_ARRAY)
        return -EPROTO;
    for (size_t i = 0; i < r->elements; i++) {
        const redisReply *e = r->element[i];
        if (e == NULL || e->type != REDIS_REPLY_ARRAY || e->elements < 3 ||
            !is_int(e->element[0]) || !is_int(e->element[1]))
            return -EPROTO;
        const redisReply *m = e->element[2];
        if (m == NULL || m->type != REDIS_REPLY_ARRAY || m->elements < 2 ||
            !is_int(m->element[1]))
            return -EPROTO;
        int rc = range(fn, ctx, e->element[0]->integer, e->element[1]->integer,
                       m->element[0], m->element[1]->integer, asked);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* The value after `key` in a flat array of key, value pairs (RESP2's form
 * of a map), or NULL. */
static const redisReply *field(const redisReply *map, const char *key)
{
    if (map == NULL || map->type != REDIS_REPLY_ARRAY)
        return NULL;
    for (size_t i = 0; i + 1 < map->elements; i += 2)
        if (str_is(map->element[i], key))
            return map->element[i + 1];
    return NULL;
}

int rl_fleet_cluster_shards(const redisReply *r,
                            const struct rl_fleet_addr *asked,
                            rl_fleet_range_fn fn, void *ctx)
{
    if (r == NULL || r->type != REDIS_REPLY_ARRAY)
        return -EPROTO;
    for (size_t i = 0; i < r->elements; i++) {
        const redisReply *slots = field(r->element[i], "slots");
        const redisReply *nodes = field(r->element[i], "nodes");
        if (slots == NULL || slots->type != REDIS_REPLY_ARRAY ||
            slots->elements % 2 != 0 || nodes == NULL ||
            nodes->type != REDIS_REPLY_ARRAY)
            return -EPROTO;
        const redisReply *master = NULL;
        for (size_t j = 0; j < nodes->elements && master == NULL; j++)
            if (str_is(field(nodes->element[j], "role"), "master"))
                master = nodes->element[j];
        if (master == NULL)
            continue; /* no master now (a failover under way) */
        const redisReply *ip = field(master, "ip");
        const redisReply *port = field(master, "port");
        if (!is_int(port))
            return -EPROTO;
        for (size_t k = 0; k < slots->elements; k += 2) {
            if (!is_int(slots->element[k]) || !is_int(slots->element[k + 1]))
                return -EPROTO;
            int rc =
                range(fn, ctx, slots->element[k]->integer,
                      slots->element[k + 1]->integer, ip, port->integer, asked);
            if (rc != 0)
                return rc;
        }
    }
    return 0;
}

/* ---- the map ------------------------------------------------------------*/

int rl_fleet_map_node(struct rl_fleet_map *m, unsigned slot)
{
    if (slot >= RL_FLEET_SLOTS)
        return -1;
    return (int)atomic_load_explicit(&m->node[slot], memory_order_relaxed) - 1;
}

int rl_fleet_map_find(struct rl_fleet_map *m, const struct rl_fleet_addr *a)
{
    /* Acquire pairs with the release store of n below: the addresses
     * below n are complete. */
    unsigned n = atomic_load_explicit(&m->n, memory_order_acquire);
    for (unsigned i = 0; i < n; i++)
        if (same_addr(&m->nodes[i], a))
            return (int)i;
    if (n >= RL_FLEET_NODES)
        return -ENOSPC;
    if (atomic_flag_test_and_set_explicit(&m->adding, memory_order_acquire))
        return -EAGAIN;
    /* Another adder may have published meanwhile: look again. */
    unsigned n2 = atomic_load_explicit(&m->n, memory_order_acquire);
    int found = -1;
    for (unsigned i = n; i < n2 && found < 0; i++)
        if (same_addr(&m->nodes[i], a))
            found = (int)i;
    if (found < 0 && n2 < RL_FLEET_NODES) {
        m->nodes[n2] = *a;
        m->nodes[n2].db = 0;
        atomic_store_explicit(&m->n, n2 + 1, memory_order_release);
        found = (int)n2;
    } else if (found < 0) {
        found = -ENOSPC;
    }
    atomic_flag_clear_explicit(&m->adding, memory_order_release);
    return found;
}

void rl_fleet_map_set(struct rl_fleet_map *m, unsigned first, unsigned last,
                      int i)
{
    if (i < 0 || i >= (int)RL_FLEET_NODES || last >= RL_FLEET_SLOTS)
        return;
    for (unsigned s = first; s <= last; s++)
        atomic_store_explicit(&m->node[s], (uint8_t)(i + 1),
                              memory_order_relaxed);
}
