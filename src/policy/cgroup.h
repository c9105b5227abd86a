/* cgroup.h — a process's cgroup v2 path, as `key = cgroup` keys it (SPEC
 * §16), and the `[user:cgroup:...]` sections that name one.
 *
 * The path comes from /proc/self/cgroup's unified line, `0::PATH`: the
 * only line on a cgroup v2 host, one line among the v1 hierarchies' on a
 * hybrid host, absent on a v1-only host. The parser is a pure function of
 * the file's text, so every shape of the file is tested without a host in
 * that mode. */
#ifndef RL_POLICY_CGROUP_H
#define RL_POLICY_CGROUP_H

#include <stdbool.h>
#include <stddef.h>

/* The longest path taken (bytes, without the NUL). Paths a host makes
 * (systemd's nested slices, a container's) are far shorter; a longer line
 * is treated as no line rather than cut, since two cut paths would share
 * a budget. */
#define RL_CGROUP_PATH_MAX 1023

/* What a parse found. */
enum rl_cgroup_found {
    RL_CGROUP_FOUND = 0,
    RL_CGROUP_NO_UNIFIED, /* no `0::` line: a cgroup v1-only host */
    RL_CGROUP_BAD,        /* a `0::` line that is no absolute path, too
                             long, or holds a NUL or control byte */
};

/* The unified path in text[0..n) (the file as read: no NUL needed, none
 * trusted, the last line may lack its newline) into out (at least
 * RL_CGROUP_PATH_MAX + 1 bytes). */
enum rl_cgroup_found rl_cgroup_parse(const char *text, size_t n, char *out);

/* Read /proc/self/cgroup and parse it; RL_CGROUP_BAD also when the file
 * cannot be read (no /proc). */
enum rl_cgroup_found rl_cgroup_read_self(char *out);

/* Does a section's user name `pattern` cover the key `key` ("cgroup:PATH")?
 * Exact: the same string. A pattern ending in a slash and a star covers
 * every cgroup strictly below the path before it, not that path itself:
 * an operator who writes `/system.slice/` and a star means the services
 * in the slice, and a
 * process sitting in the slice itself is no service (it can be named
 * exactly when meant). Returns the length of the pattern's fixed part
 * when it covers (longer: more specific), 0 when not. */
size_t rl_cgroup_covers(const char *pattern, const char *key);

/* Is `name` a cgroup wildcard section user ("cgroup:/PATH/" and a star)? */
bool rl_cgroup_is_wildcard(const char *name);

#endif
