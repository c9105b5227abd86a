/* config.h — the quota table: the ini file, validated, made immutable.
 *
 * rl_config_load parses one file with the system inih and returns a table
 * that is never changed after: the shim reads it from every thread without
 * a lock. Every error names file:line and what is wrong; all errors of a
 * file are reported, not only the first. Nothing here touches the network,
 * the shared state or the clock.
 *
 * Loading sets inih's options, which are process globals in Debian's inih
 * 55: do not load from two threads at once (the shim loads once, at start;
 * the CLI has one thread). */
#ifndef RL_POLICY_CONFIG_H
#define RL_POLICY_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model/config.h"
#include "policy/dest.h"

/* Error messages, each "file:line: what is wrong" (no newline). Start it
 * zeroed; rl_diag_free empties it. */
struct rl_diag {
    char **msgs;
    size_t n;
};

void rl_diag_free(struct rl_diag *d);

/* The one stderr line a host program gets for a broken config (SPEC §4),
 * newline included: "rlshim: FIRST ERROR (and N more: run 'rlshim check');
 * nothing is throttled" or, when `strict` (RLSHIM_STRICT=1), "...; exiting
 * with status 78 (RLSHIM_STRICT=1)". Truncated to fit `len`; returns the
 * length written (without the NUL). */
size_t rl_config_error_line(const struct rl_diag *d, bool strict, char *buf,
                            size_t len);

/* Parse `path`. Returns 0 and *out, or -EINVAL with every problem in
 * `diag` (or another -errno when the file cannot be read, also with a
 * message in diag). */
int rl_config_load(const char *path, struct rl_config **out,
                   struct rl_diag *diag);

/* The same from a string; `name` is what messages call the file. */
int rl_config_load_string(const char *text, const char *name,
                          struct rl_config **out, struct rl_diag *diag);

void rl_config_free(struct rl_config *cfg);

/* The file the shim reads: $RLSHIM_CONFIG (secure_getenv; empty counts as
 * unset) else RL_SYSCONFDIR "/rlshim.ini". */
const char *rl_config_path_from_env(void);

/* What the shim calls at load: parse rl_config_path_from_env(). Returns 0
 * with *out NULL when there is no config at all (RLSHIM_CONFIG unset and
 * the sysconfdir file missing: nothing is throttled), 0 with *out set, or
 * -errno with every problem in `diag` (RLSHIM_CONFIG naming a file that
 * cannot be read is an error). */
int rl_config_load_env(struct rl_config **out, struct rl_diag *diag);

/* The rule for a caller (SPEC §3): the first of [user:KEY], for a cgroup
 * key the longest [user:cgroup:/PATH/...] that covers it (SPEC §16),
 * [user:UID], [user:LOGIN], [default]. key and login may be NULL. NULL
 * when none matches. */
const struct rl_rule *rl_config_find_rule(const struct rl_config *cfg,
                                          const char *key, uint32_t uid,
                                          const char *login);

/* Of the [user:cgroup:/PATH/...] sections that cover `key`, the longest;
 * NULL when none (cgroup.h says what a wildcard covers). */
const struct rl_rule *rl_config_find_cgroup_wildcard(const struct rl_config *cfg,
                                                     const char *key);

/* The site section that a call to `sa` is charged to besides the user's
 * rule (SPEC §3): the first [site:LABEL] in file order whose `to` covers
 * it (a site without `to` covers every destination; a name entry looks
 * the address's name up in `names`, policy/names.h, NULL: none). NULL
 * when none. */
const struct rl_rule *rl_config_find_site(struct rl_names *names,
                                          const struct rl_config *cfg,
                                          const void *sa, unsigned salen);

/* The same for a peer taken apart already (dest.h); `name` (RL_NAME_MAX
 * + 1 bytes) receives its name when a `to` needs it (kept in p). */
const struct rl_rule *rl_config_find_site_peer(const struct rl_config *cfg,
                                               struct rl_peer *p, char *name);

/* Does the file hold a site section at all? */
bool rl_config_has_sites(const struct rl_config *cfg);

/* Does `rule` cover this destination? `sa` is a struct sockaddr of family
 * AF_INET or AF_INET6 (IPv4-mapped IPv6 is matched as IPv4); other
 * families never match. A rule with no `to` list covers every inet
 * destination. Name entries look the name up in `names` (NULL: none). */
static inline bool rl_rule_covers(struct rl_names *names,
                                  const struct rl_rule *rule, const void *sa,
                                  unsigned salen)
{
    return rl_dests_cover(names, rule->to, rule->nto, sa, salen);
}

/* Names for messages and for `rlshim check`/`stat` (a kind's:
 * model/kinds.h). */
const char *rl_errno_name(int err); /* "EAGAIN", ...; "?" for others */

/* A limit as the file would spell it ("5/s", "1MiB/s", "250/100ms" never:
 * the period is always one unit). Returns what snprintf returns. */
int rl_config_format_rate(int kind, const struct rl_limit *lim, char *buf,
                          size_t len);

/* A `to` entry as the file would spell it ("10.0.0.0/8", "[::1]:443"). */
static inline int rl_config_format_dest(const struct rl_dest *d, char *buf,
                                        size_t len)
{
    return rl_dest_format(d, buf, len);
}

/* The keys the file may hold, in the parser's table: i from 0 to
 * rl_config_key_count() - 1 (for tests that keep the docs honest). */
size_t rl_config_key_count(void);
const char *rl_config_key_name(size_t i);

#endif
