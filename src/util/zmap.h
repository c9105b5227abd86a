/* zmap.h — zeroed private memory mapped when first needed.
 *
 * The process tables that most processes never use (the names, the held
 * sockets, the fd table's pages, the wait buffers) are mapped at their
 * first use rather than kept in the library's .bss, which every process
 * of a host maps at load (SPEC §13). A failed mapping is NULL (the caller
 * goes on without the table), and errno is what it was: the callers run
 * inside the program's own calls. */
#ifndef RL_UTIL_ZMAP_H
#define RL_UTIL_ZMAP_H

#include <errno.h>
#include <stddef.h>
#include <sys/mman.h>

static inline void *rl_zmap(size_t bytes)
{
    int saved = errno;
    void *m = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    errno = saved;
    return m == MAP_FAILED ? NULL : m;
}

static inline void rl_zunmap(void *m, size_t bytes)
{
    int saved = errno;
    munmap(m, bytes);
    errno = saved;
}

#endif
