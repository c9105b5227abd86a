/* bootid.c — the boot id (see bootid.h). */
#include "util/bootid.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>

#include "util/atomics.h"
#include "util/sys.h"

#define BOOT_ID_PATH "/proc/sys/kernel/random/boot_id"

size_t rl_bootid_text(char *buf, size_t len)
{
    ssize_t n = -1;

    if (len == 0)
        return 0;
    int fd = rl_sys.openat(AT_FDCWD, BOOT_ID_PATH, O_RDONLY | O_CLOEXEC, 0);
    if (fd >= 0) {
        do
            n = rl_sys.read(fd, buf, len - 1);
        while (n < 0 && errno == EINTR);
        rl_sys.close(fd);
    }
    buf[n > 0 ? n : 0] = '\0';
    return n > 0 ? (size_t)n : 0;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* The 32 hex digits of a boot id ("8-4-4-4-12") as two words; false when
 * the text is not one. */
static bool parse(const char *t, uint64_t out[2])
{
    unsigned digits = 0;

    out[0] = out[1] = 0;
    for (; *t && *t != '\n'; t++) {
        int v = hexval(*t);
        if (*t == '-')
            continue;
        if (v < 0 || digits == 32)
            return false;
        out[digits / 16] = out[digits / 16] << 4 | (uint64_t)v;
        digits++;
    }
    return digits == 32;
}

void rl_bootid(uint64_t out[2])
{
    /* Word 2 says the other two are set (release, paired with the acquire
     * below). */
    static rl_atomic_u64 cached[3];
    char buf[64];
    uint64_t id[2];

    if (rl_load_acquire_u64(&cached[2])) {
        out[0] = rl_load_relaxed_u64(&cached[0]);
        out[1] = rl_load_relaxed_u64(&cached[1]);
        return;
    }
    rl_bootid_text(buf, sizeof buf);
    if (!parse(buf, id))
        id[0] = id[1] = 0;
    rl_store_relaxed_u64(&cached[0], id[0]);
    rl_store_relaxed_u64(&cached[1], id[1]);
    rl_store_release_u64(&cached[2], 1);
    out[0] = id[0];
    out[1] = id[1];
}
