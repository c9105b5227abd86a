/* cgroup.c — the unified cgroup path and the sections that name it (see
 * cgroup.h). */
#include "policy/cgroup.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "util/sys.h"

/* The file is a dozen short lines on a hybrid host; this bounds what a
 * hostile or broken /proc could make the process read. */
#define CGROUP_FILE_MAX (64 * 1024)

static const char unified[] = "0::";

/* The line [p, end) is `0::PATH`: check PATH and copy it out. */
static enum rl_cgroup_found take_path(const char *p, const char *end,
                                      char *out)
{
    size_t n = (size_t)(end - p);
    if (n == 0 || p[0] != '/' || n > RL_CGROUP_PATH_MAX)
        return RL_CGROUP_BAD;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        if (c < ' ' || c == 0x7f) /* a NUL, a control byte: no path */
            return RL_CGROUP_BAD;
    }
    memcpy(out, p, n);
    out[n] = '\0';
    return RL_CGROUP_FOUND;
}

enum rl_cgroup_found rl_cgroup_parse(const char *text, size_t n, char *out)
{
    const char *p = text, *end = text + n;
    size_t ul = sizeof unified - 1;

    out[0] = '\0';
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *eol = nl != NULL ? nl : end;
        if ((size_t)(eol - p) >= ul && memcmp(p, unified, ul) == 0)
            return take_path(p + ul, eol, out);
        p = nl != NULL ? nl + 1 : end;
    }
    return RL_CGROUP_NO_UNIFIED;
}

enum rl_cgroup_found rl_cgroup_read_self(char *out)
{
    out[0] = '\0';
    char *buf = malloc(CGROUP_FILE_MAX);
    if (buf == NULL)
        return RL_CGROUP_BAD;
    size_t have = 0;
    int fd = rl_sys.openat(AT_FDCWD, "/proc/self/cgroup", O_RDONLY | O_CLOEXEC,
                           0);
    bool whole = false;
    if (fd >= 0) {
        while (have < CGROUP_FILE_MAX) {
            ssize_t r = rl_sys.read(fd, buf + have, CGROUP_FILE_MAX - have);
            if (r < 0 && errno == EINTR)
                continue;
            if (r <= 0) {
                whole = r == 0;
                break;
            }
            have += (size_t)r;
        }
        rl_sys.close(fd);
    }
    enum rl_cgroup_found f =
        whole ? rl_cgroup_parse(buf, have, out) : RL_CGROUP_BAD;
    free(buf);
    return f;
}

bool rl_cgroup_is_wildcard(const char *name)
{
    size_t n = strlen(name);
    return strncmp(name, "cgroup:/", 8) == 0 && n >= 9 &&
           strcmp(name + n - 2, "/*") == 0;
}

size_t rl_cgroup_covers(const char *pattern, const char *key)
{
    if (strncmp(key, "cgroup:", 7) != 0)
        return 0;
    if (strcmp(pattern, key) == 0)
        return strlen(pattern);
    if (!rl_cgroup_is_wildcard(pattern))
        return 0;
    /* "cgroup:/parent/" and a star covers "cgroup:/parent/x": the fixed
     * part with its slash, and at least one byte more. */
    size_t fixed = strlen(pattern) - 1;
    return strncmp(pattern, key, fixed) == 0 && key[fixed] != '\0' ? fixed
                                                                   : 0;
}
