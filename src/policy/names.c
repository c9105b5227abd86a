/* names.c — the address → name table (see names.h).
 *
 * Every word of an entry is atomic, so a reader racing a writer reads
 * whole words (never undefined behaviour) and the sequence word tells it
 * whether what it read belongs together: a writer makes `seq` odd, writes,
 * then makes it even again (release); a reader loads `seq` (acquire),
 * copies, fences (acquire) and loads `seq` again: equal and even, the
 * copy is one writer's work. Writers are rare (one per resolved address)
 * and take one process-wide word, so that two of them never pick the same
 * victim or note one address twice in a set. The table and its words are
 * one struct rl_names (names.h), a member of the process's struct
 * rl_proc.
 *
 * fork() copies that word as it is: a child forked while another thread
 * was writing would find it held by a thread it does not have (and wait
 * for ever). So the word holds the writer's pthread_self and `busy` the
 * entry it is writing, and the child's fork step (rl_names_atfork_child)
 * frees the word of a thread that is not its own, emptying the entry that
 * thread left half-written. The forking thread's own note (a handler that
 * forked while it wrote) is left to finish, in both processes. */
#include "policy/names.h"

#include <arpa/inet.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <sys/socket.h>

#include "util/atomics.h"
#include "util/zmap.h"

#define WAYS 4u
#define SETS (RL_NAMES_SLOTS / WAYS)
#define NAME_WORDS RL_NAMES_NAME_WORDS
#define READ_TRIES 4

_Static_assert((RL_NAMES_SLOTS & (RL_NAMES_SLOTS - 1)) == 0 &&
                   RL_NAMES_SLOTS % WAYS == 0,
               "a power of two, in whole sets");

static bool name_byte(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '.' || c == '_';
}

size_t rl_name_canon(const char *name, size_t n, char *out)
{
    if (n > 0 && name[n - 1] == '.')
        n--;
    if (n == 0 || n > RL_NAME_MAX)
        return 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)name[i];
        if (c >= 'A' && c <= 'Z')
            c = (unsigned char)(c - 'A' + 'a');
        if (!name_byte(c))
            return 0;
        out[i] = (char)c;
    }
    out[n] = '\0';
    return n;
}

bool rl_name_is_literal(const char *s, size_t n)
{
    char buf[64];
    unsigned char a[16];
    struct in_addr in;

    if (n == 0 || n >= sizeof buf)
        return false;
    memcpy(buf, s, n);
    buf[n] = '\0';
    if (buf[n - 1] == '.')
        buf[n - 1] = '\0';
    /* fe80::1%eth0: the zone names an interface, not a host. */
    char *zone = strchr(buf, '%');
    if (zone != NULL && strchr(buf, ':') != NULL)
        *zone = '\0';
    if (inet_pton(AF_INET, buf, a) == 1 || inet_pton(AF_INET6, buf, a) == 1)
        return true;
    /* The other forms getaddrinfo reads as an IPv4 address (127.1,
     * 0x7f000001, 2130706433); inet_aton stops at a blank, so only a
     * string of nothing else is asked. */
    return buf[strspn(buf, "0123456789abcdefABCDEFxX.")] == '\0' &&
           inet_aton(buf, &in) == 1;
}

/* The key words of an address; false for other families. */
static bool make_key(int family, const void *addr, uint64_t key[3])
{
    static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    uint8_t a[16] = {0};

    if (family == AF_INET6 && memcmp(addr, mapped, sizeof mapped) == 0) {
        family = AF_INET;
        addr = (const uint8_t *)addr + 12;
    }
    if (family == AF_INET)
        memcpy(a, addr, 4);
    else if (family == AF_INET6)
        memcpy(a, addr, 16);
    else
        return false;
    key[0] = (uint64_t)family;
    memcpy(&key[1], a, 8);
    memcpy(&key[2], a + 8, 8);
    return true;
}

#define TABLE_BYTES (RL_NAMES_SLOTS * sizeof(struct rl_names_entry))

/* The entries, or NULL before the first note. Pairs with the release CAS
 * in table_make: a reader that sees the pointer sees zeroed entries. */
static struct rl_names_entry *table_of(struct rl_names *t)
{
    return atomic_load_explicit(&t->table, memory_order_acquire);
}

/* The entries, mapped now if they were not (zeroed: empty). Two first
 * notes race with a CAS; the loser unmaps its copy. NULL when the mapping
 * fails (the note is dropped: a name missing, nothing wrong). */
static struct rl_names_entry *table_make(struct rl_names *t)
{
    struct rl_names_entry *tab = table_of(t);
    if (tab != NULL)
        return tab;
    struct rl_names_entry *m = rl_zmap(TABLE_BYTES);
    if (m == NULL)
        return NULL;
    if (atomic_compare_exchange_strong_explicit(&t->table, &tab, m,
                                                memory_order_acq_rel,
                                                memory_order_acquire))
        return m;
    rl_zunmap(m, TABLE_BYTES);
    return tab;
}

void rl_names_unmap(struct rl_names *t)
{
    struct rl_names_entry *tab = atomic_exchange(&t->table, NULL);
    if (tab != NULL)
        rl_zunmap(tab, TABLE_BYTES);
    rl_store_relaxed_u64(&t->noted, 0);
}

static struct rl_names_entry *set_of(struct rl_names_entry *tab,
                                     const uint64_t key[3])
{
    uint64_t h = (key[1] ^ (key[2] * 0x9e3779b97f4a7c15ull) ^ key[0]) *
                 0xff51afd7ed558ccdull;
    return &tab[((h >> 32) % SETS) * WAYS];
}

static bool same_key(struct rl_names_entry *e, const uint64_t key[3])
{
    return rl_load_relaxed_u64(&e->key[0]) == key[0] &&
           rl_load_relaxed_u64(&e->key[1]) == key[1] &&
           rl_load_relaxed_u64(&e->key[2]) == key[2];
}

static uint64_t self(void)
{
    return (uint64_t)pthread_self();
}

/* Take the writer word; false when this very thread holds it (a signal
 * handler that resolved while its thread was noting: the outer note goes
 * on, this one is dropped rather than wait on itself). */
static bool lock(struct rl_names *t)
{
    uint64_t me = self();
    for (;;) {
        uint64_t w = 0;
        if (rl_cas_acq_rel_u64(&t->writer, &w, me))
            return true;
        if (w == me)
            return false;
        sched_yield(); /* another writer: a few hundred ns at most */
    }
}

static void unlock(struct rl_names *t)
{
    rl_store_release_u64(&t->writer, 0);
}

/* Start writing e: its seq made odd (whatever it was: an entry a fork left
 * odd heals at its next write), `busy` naming it first. The old seq's
 * even base is returned. */
static uint64_t begin_write(struct rl_names *t, struct rl_names_entry *e)
{
    uint64_t base = rl_load_relaxed_u64(&e->seq) & ~(uint64_t)1;
    rl_store_relaxed_u64(&t->busy, (uint64_t)(e - table_of(t)) + 1);
    /* busy before the odd seq: a child that sees the one sees the other. */
    rl_store_release_u64(&e->seq, base + 1);
    /* Orders the odd seq before the data (pairs with the reader's fence). */
    atomic_thread_fence(memory_order_release);
    return base;
}

static void empty(struct rl_names_entry *e)
{
    for (unsigned k = 0; k < 3; k++)
        rl_store_relaxed_u64(&e->key[k], 0);
    rl_store_relaxed_u64(&e->stamp, 0);
}

static void end_write(struct rl_names *t, struct rl_names_entry *e,
                      uint64_t base)
{
    /* Pairs with the reader's acquire load of seq. */
    rl_store_release_u64(&e->seq, base + 2);
    rl_store_relaxed_u64(&t->busy, 0);
}

void rl_names_note(struct rl_names *t, int family, const void *addr,
                   const char *name, size_t n)
{
    uint64_t key[3], words[NAME_WORDS] = {0};
    struct rl_names_entry *set, *e = NULL;

    if (n == 0 || n > RL_NAME_MAX || !make_key(family, addr, key))
        return;
    struct rl_names_entry *tab = table_make(t);
    if (tab == NULL)
        return;
    memcpy(words, name, n);
    set = set_of(tab, key);
    if (!lock(t))
        return;
    for (unsigned i = 0; i < WAYS && e == NULL; i++)
        if (same_key(&set[i], key))
            e = &set[i];
    for (unsigned i = 0; i < WAYS && e == NULL; i++)
        if (rl_load_relaxed_u64(&set[i].key[0]) == 0)
            e = &set[i];
    if (e == NULL) {
        e = &set[0];
        for (unsigned i = 1; i < WAYS; i++)
            if (rl_load_relaxed_u64(&set[i].stamp) <
                rl_load_relaxed_u64(&e->stamp))
                e = &set[i];
    }
    uint64_t base = begin_write(t, e);
    for (unsigned i = 0; i < 3; i++)
        rl_store_relaxed_u64(&e->key[i], key[i]);
    rl_store_relaxed_u64(&e->len, n);
    for (unsigned i = 0; i < NAME_WORDS; i++)
        rl_store_relaxed_u64(&e->name[i], words[i]);
    rl_store_relaxed_u64(&e->stamp, rl_add_relaxed_u64(&t->noted, 1) + 1);
    end_write(t, e, base);
    unlock(t);
}

void rl_names_forget(struct rl_names *t, int family, const void *addr)
{
    uint64_t key[3];
    struct rl_names_entry *set;
    bool held = false;

    struct rl_names_entry *tab = table_of(t);
    if (tab == NULL || rl_load_relaxed_u64(&t->noted) == 0 ||
        !make_key(family, addr, key))
        return;
    set = set_of(tab, key);
    /* Most literals were never noted: no turn is taken for them. */
    for (unsigned i = 0; i < WAYS && !held; i++)
        held = same_key(&set[i], key);
    if (!held || !lock(t))
        return;
    for (unsigned i = 0; i < WAYS; i++)
        if (same_key(&set[i], key)) {
            uint64_t base = begin_write(t, &set[i]);
            empty(&set[i]);
            end_write(t, &set[i], base);
        }
    unlock(t);
}

/* Copy entry e's name when it holds `key`: its length, 0 when it does not
 * hold key, -1 when a writer was at work. */
static int read_entry(struct rl_names_entry *e, const uint64_t key[3],
                      char *buf)
{
    uint64_t words[NAME_WORDS];
    /* Pairs with the writer's release store of the even seq. */
    uint64_t s1 = rl_load_acquire_u64(&e->seq);
    if (s1 & 1)
        return -1;
    if (!same_key(e, key))
        return 0; /* (a torn key matches no real one: 0 is right) */
    uint64_t n = rl_load_relaxed_u64(&e->len);
    unsigned nw = n <= RL_NAME_MAX ? (unsigned)((n + 7) / 8) : 0;
    for (unsigned i = 0; i < nw; i++)
        words[i] = rl_load_relaxed_u64(&e->name[i]);
    /* Keeps the copy above from moving below the second seq load. */
    atomic_thread_fence(memory_order_acquire);
    if (rl_load_relaxed_u64(&e->seq) != s1 || nw == 0)
        return -1;
    memcpy(buf, words, (size_t)n);
    buf[n] = '\0';
    return (int)n;
}

size_t rl_names_find(struct rl_names *t, int family, const uint8_t *addr,
                     char *buf)
{
    uint64_t key[3];

    buf[0] = '\0';
    struct rl_names_entry *tab = t == NULL ? NULL : table_of(t);
    if (tab == NULL || rl_load_relaxed_u64(&t->noted) == 0 ||
        !make_key(family, addr, key))
        return 0;
    struct rl_names_entry *set = set_of(tab, key);
    for (unsigned i = 0; i < WAYS; i++) {
        for (int t = 0; t < READ_TRIES; t++) {
            int r = read_entry(&set[i], key, buf);
            if (r > 0)
                return (size_t)r;
            if (r == 0)
                break;
        }
    }
    buf[0] = '\0';
    return 0;
}

void rl_names_clear(struct rl_names *t)
{
    struct rl_names_entry *tab = table_of(t);
    if (tab == NULL || !lock(t))
        return;
    for (unsigned i = 0; i < RL_NAMES_SLOTS; i++) {
        struct rl_names_entry *e = &tab[i];
        uint64_t base = begin_write(t, e);
        empty(e);
        end_write(t, e, base);
    }
    unlock(t);
}

void rl_names_atfork_child(struct rl_names *t)
{
    uint64_t w = rl_load_relaxed_u64(&t->writer);
    if (w == 0 || w == self())
        return;
    /* The writer was another thread, gone with the fork. */
    uint64_t b = rl_load_relaxed_u64(&t->busy);
    struct rl_names_entry *tab = table_of(t);
    if (tab != NULL && b != 0 && b <= RL_NAMES_SLOTS) {
        struct rl_names_entry *e = &tab[b - 1];
        uint64_t seq = rl_load_relaxed_u64(&e->seq);
        if (seq & 1) {
            empty(e);
            rl_store_release_u64(&e->seq, seq + 1);
        }
    }
    rl_store_relaxed_u64(&t->busy, 0);
    unlock(t);
}
