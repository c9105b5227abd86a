/* logopen.h — opening a file the shim writes its own lines to (the
 * decision log, `log = /path`; SPEC §3), so that no one who can plant
 * something at the path makes the shim hang or write where they choose.
 *
 * The file is opened O_NOFOLLOW|O_NONBLOCK|O_CLOEXEC|O_APPEND, created
 * 0600, and kept only when fstat says it is a regular file: a symbolic
 * link, a FIFO (with or without a reader), a device or a socket at the
 * path is refused, never waited on and never written. In a privileged
 * program (AT_SECURE) the path must also be absolute and safe from other
 * users: every directory on it is walked without following a link, the
 * file's own directory must be writable by no other user (owned by root
 * or the effective uid, neither group- nor world-writable, sticky or not),
 * and a directory above it must be too unless it is sticky (whose entries
 * of root's or ours no one else can move).
 *
 * Through rl_sys: never a hooked name. No state. */
#ifndef RL_UTIL_LOGOPEN_H
#define RL_UTIL_LOGOPEN_H

#include <stdbool.h>
#include <stddef.h>

/* The fd of `path` opened for appending, or -errno; on refusal or error,
 * `why` (may be NULL) says what is at the path or what went wrong, in a
 * few words ("a FIFO, not a regular file", strerror's text, …). */
int rl_logopen(const char *path, char *why, size_t whylen);

/* The same, as a privileged program (true) or not, whatever this one is:
 * the tests' seam. */
int rl_logopen_as(const char *path, bool privileged, char *why,
                  size_t whylen);

#endif
