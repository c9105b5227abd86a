/* identity.h — who the calling process is (SPEC §3), worked out once per
 * process (again after exec), never per call.
 *
 * key: RLSHIM_KEY from the environment (secure_getenv: ignored in setuid
 * processes), else with key = exe the program's name, with key = cgroup
 * "cgroup:" and the process's cgroup v2 path; uid: the real uid;
 * login: the uid's login name when it has a passwd entry. The login lookup
 * goes through NSS, so call this only where the shim's re-entry guard is
 * held (at load), never from a hook. */
#ifndef RL_POLICY_IDENTITY_H
#define RL_POLICY_IDENTITY_H

#include <stdbool.h>
#include <stdint.h>

/* Long enough for a systemd user service's cgroup ("cgroup:/user.slice/
 * user-1000.slice/user@1000.service/app.slice/NAME.service"). */
#define RL_IDENTITY_MAX 192

struct rl_identity {
    bool has_key;
    char key[RL_IDENTITY_MAX];
    /* key = cgroup without RLSHIM_KEY: what /proc/self/cgroup gave
     * (enum rl_cgroup_found); anything but found leaves the uid. */
    int cgroup;
    uint32_t uid;
    bool has_login;
    char login[RL_IDENTITY_MAX];
};

/* Fill `id` for this process; key_mode is enum rl_key_mode. Returns 0. */
int rl_identity_resolve(struct rl_identity *id, int key_mode);

/* The same, with the login looked up only when `want_login` (NSS costs a
 * process tens of microseconds and files, sockets of its own: skip it when
 * no section could be named by a login). */
int rl_identity_resolve_login(struct rl_identity *id, int key_mode,
                              bool want_login);

/* key = cgroup: the key of the unified cgroup `path` into key[] (at
 * least RL_IDENTITY_MAX bytes). A path too long to fit keeps its head and
 * ends in '#' and a hash of the whole path, so two long paths never share
 * a budget and a section's wildcard still matches the head. */
void rl_identity_cgroup_key(const char *path, char *key);

/* The stderr line for a key = cgroup process whose cgroup was not found
 * (id->cgroup not found): what was missing, and that the uid is used.
 * "" when there is nothing to say. */
const char *rl_identity_cgroup_problem(const struct rl_identity *id);

/* The user string a [default] budget is keyed by: the key, else the uid in
 * decimal. */
const char *rl_identity_user(const struct rl_identity *id, char *buf,
                             unsigned len);

#endif
