/* hash.h — FNV-1a, 64 bits: stable across builds and hosts, so it can name
 * things in shared memory (slot tags) and fingerprint a parsed config. Not
 * a defence against chosen collisions: every writer of a segment is the
 * same uid anyway. */
#ifndef RL_UTIL_HASH_H
#define RL_UTIL_HASH_H

#include <stddef.h>
#include <stdint.h>

#define RL_HASH_INIT 0xcbf29ce484222325ull

static inline uint64_t rl_hash_bytes(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

static inline uint64_t rl_hash_u64(uint64_t h, uint64_t v)
{
    unsigned char b[8];
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)(v >> (8 * i)); /* fixed byte order */
    return rl_hash_bytes(h, b, sizeof b);
}

static inline uint64_t rl_hash_str(uint64_t h, const char *s)
{
    size_t n = 0;
    while (s[n])
        n++;
    /* The length goes in too, so ("ab","c") and ("a","bc") differ. */
    return rl_hash_u64(rl_hash_bytes(h, s, n), n);
}

#endif
