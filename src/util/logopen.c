/* logopen.c — see logopen.h. */
#include "util/logopen.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/sys.h"

/* O_NONBLOCK: a FIFO without a reader fails at once (ENXIO) instead of
 * holding the program in open() for ever. O_NOFOLLOW: a link at the path
 * fails (ELOOP). Both are harmless on the regular file that is kept. */
#define LOG_FLAGS                                                            \
    (O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW |     \
     O_NONBLOCK)

__attribute__((format(printf, 3, 4))) static void say(char *why, size_t len,
                                                      const char *fmt, ...)
{
    if (why == NULL || len == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, len, fmt, ap);
    va_end(ap);
}

static const char *kind(mode_t m)
{
    if (S_ISLNK(m))
        return "a symbolic link";
    if (S_ISFIFO(m))
        return "a FIFO";
    if (S_ISCHR(m))
        return "a character device";
    if (S_ISBLK(m))
        return "a block device";
    if (S_ISSOCK(m))
        return "a socket";
    if (S_ISDIR(m))
        return "a directory";
    return "not a regular file";
}

/* Can a user other than root and the effective uid write this directory
 * (or make it writable: its owner can)? */
static bool others_write(const struct stat *st)
{
    return (st->st_mode & (S_IWGRP | S_IWOTH)) != 0 ||
           (st->st_uid != 0 && st->st_uid != geteuid());
}

/* A privileged program: the directory of `path`, reached from / one
 * component at a time without following a link, each directory checked
 * as logopen.h says. Returns its fd (O_PATH) and the last component in
 * *base, or -errno with `why` said. */
static int safe_dir(const char *path, const char **base, char *why,
                    size_t whylen)
{
    /* Relative, it would be found from a working directory the caller
     * chose. */
    if (path[0] != '/') {
        say(why, whylen, "not an absolute path");
        return -EINVAL;
    }
    int dfd = rl_sys.openat(AT_FDCWD, "/", O_PATH | O_DIRECTORY | O_CLOEXEC,
                            0);
    if (dfd < 0) {
        int e = errno;
        say(why, whylen, "%s", strerror(e));
        return -e;
    }
    const char *p = path;
    for (;;) {
        while (*p == '/')
            p++;
        size_t len = strcspn(p, "/");
        const char *next = p + len;
        while (*next == '/')
            next++;
        bool last = *next == '\0';
        struct stat st;
        int r = 0;
        if (fstat(dfd, &st) != 0) {
            r = -errno;
            say(why, whylen, "%s", strerror(errno));
        } else if (!S_ISDIR(st.st_mode)) {
            r = -ELOOP;
            say(why, whylen, "a symbolic link on its path (a privileged "
                             "program follows none)");
        } else if (others_write(&st) && (last || !(st.st_mode & S_ISVTX))) {
            /* A sticky directory above keeps its entries of root's or ours
             * where they are; the file's own directory must be ours. */
            r = -EPERM;
            say(why, whylen, "in a directory another user can write (a "
                             "privileged program writes no log there)");
        } else if (len == 0) {
            r = -EISDIR;
            say(why, whylen, "a directory, not a regular file");
        } else if (len > NAME_MAX) {
            r = -ENAMETOOLONG;
            say(why, whylen, "%s", strerror(ENAMETOOLONG));
        }
        if (r < 0 || last) {
            if (r < 0) {
                rl_sys.close(dfd);
                return r;
            }
            *base = p;
            return dfd;
        }
        char comp[NAME_MAX + 1];
        memcpy(comp, p, len);
        comp[len] = '\0';
        /* O_PATH with O_NOFOLLOW opens a link itself, not where it
         * points: the fstat above then refuses it. */
        int nfd = rl_sys.openat(dfd, comp,
                                O_PATH | O_NOFOLLOW | O_CLOEXEC, 0);
        int e = errno;
        rl_sys.close(dfd);
        if (nfd < 0) {
            say(why, whylen, "%s", strerror(e));
            return -e;
        }
        dfd = nfd;
        p = next;
    }
}

int rl_logopen(const char *path, char *why, size_t whylen)
{
    return rl_logopen_as(path, getauxval(AT_SECURE) != 0, why, whylen);
}

int rl_logopen_as(const char *path, bool privileged, char *why,
                  size_t whylen)
{
    say(why, whylen, "%s", "");
    int dfd = AT_FDCWD;
    const char *base = path;
    if (privileged) {
        dfd = safe_dir(path, &base, why, whylen);
        if (dfd < 0)
            return dfd;
    }
    struct stat st;
    int r = rl_sys.openat(dfd, base, LOG_FLAGS, 0600);
    if (r < 0) {
        r = -errno;
        /* Name what is there when it is what made the open fail (a link:
         * ELOOP; a FIFO without a reader: ENXIO). */
        if (fstatat(dfd, base, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
            !S_ISREG(st.st_mode))
            say(why, whylen, "%s, not a regular file", kind(st.st_mode));
        else
            say(why, whylen, "%s", strerror(-r));
    } else if (fstat(r, &st) != 0) {
        int e = errno;
        say(why, whylen, "%s", strerror(e));
        rl_sys.close(r);
        r = -e;
    } else if (!S_ISREG(st.st_mode)) {
        /* Opened (a FIFO with a reader, a device): refused all the same. */
        say(why, whylen, "%s, not a regular file", kind(st.st_mode));
        rl_sys.close(r);
        r = -EINVAL;
    }
    if (dfd != AT_FDCWD)
        rl_sys.close(dfd);
    return r;
}
