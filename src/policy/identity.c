/* identity.c — who the calling process is (see identity.h). */
#include "policy/identity.h"

#include <errno.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>

#include "policy/cgroup.h"
#include "policy/config.h"
#include "util/hash.h"

static void copy(char *dst, const char *src)
{
    size_t n = strlen(src);
    if (n >= RL_IDENTITY_MAX)
        n = RL_IDENTITY_MAX - 1; /* same cut as [user:NAME] allows */
    memcpy(dst, src, n);
    dst[n] = '\0';
}

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash != NULL ? slash + 1 : path;
}

/* The program's name: the base name of the file given to execve
 * (AT_EXECFN: "python3" when started as python3, not the "python3.11" a
 * symlink leads to, and not whatever argv[0] claims); else the file the
 * kernel runs; else what glibc took from argv[0]. */
static void program_name(char *out)
{
    const char *execfn = (const char *)getauxval(AT_EXECFN);
    char path[4096];
    ssize_t n;

    if (execfn != NULL && *base_name(execfn) != '\0') {
        copy(out, base_name(execfn));
        return;
    }
    n = readlink("/proc/self/exe", path, sizeof path - 1);
    if (n > 0) {
        path[n] = '\0';
        /* An executable replaced since exec reads "NAME (deleted)". */
        static const char deleted[] = " (deleted)";
        size_t dl = sizeof deleted - 1;
        if ((size_t)n > dl && strcmp(path + n - dl, deleted) == 0)
            path[n - dl] = '\0';
        if (*base_name(path) != '\0') {
            copy(out, base_name(path));
            return;
        }
    }
    copy(out, program_invocation_short_name);
}

/* The login name of uid, through NSS (getpwuid_r: no static buffer that
 * the host program might be using at the same time). */
static bool login_name(uid_t uid, char *out)
{
    char stackbuf[1024];
    char *buf = stackbuf, *heap = NULL;
    size_t len = sizeof stackbuf;
    struct passwd pw, *res = NULL;
    bool ok = false;
    int rc;

    for (;;) {
        rc = getpwuid_r(uid, &pw, buf, len, &res);
        if (rc != ERANGE || len >= 1u << 20)
            break;
        len *= 4;
        free(heap);
        heap = malloc(len);
        if (heap == NULL)
            break;
        buf = heap;
    }
    if (rc == 0 && res != NULL && res->pw_name != NULL &&
        res->pw_name[0] != '\0') {
        copy(out, res->pw_name);
        ok = true;
    }
    free(heap);
    return ok;
}

int rl_identity_resolve(struct rl_identity *id, int key_mode)
{
    return rl_identity_resolve_login(id, key_mode, true);
}

int rl_identity_resolve_login(struct rl_identity *id, int key_mode,
                              bool want_login)
{
    const char *key = secure_getenv("RLSHIM_KEY");

    memset(id, 0, sizeof *id);
    if (key != NULL && *key != '\0') {
        copy(id->key, key);
        id->has_key = true;
    } else if (key_mode == RL_KEY_EXE) {
        program_name(id->key);
        id->has_key = id->key[0] != '\0';
    } else if (key_mode == RL_KEY_CGROUP) {
        char path[RL_CGROUP_PATH_MAX + 1];
        id->cgroup = (int)rl_cgroup_read_self(path);
        if (id->cgroup == RL_CGROUP_FOUND) {
            rl_identity_cgroup_key(path, id->key);
            id->has_key = true;
        }
    }
    id->uid = (uint32_t)getuid();
    id->has_login = want_login && login_name((uid_t)id->uid, id->login);
    return 0;
}

void rl_identity_cgroup_key(const char *path, char *key)
{
    static const char prefix[] = "cgroup:";
    size_t pl = sizeof prefix - 1, n = strlen(path);
    memcpy(key, prefix, pl);
    if (pl + n < RL_IDENTITY_MAX) {
        memcpy(key + pl, path, n + 1);
        return;
    }
    /* head '#' 16 hex digits NUL */
    size_t head = RL_IDENTITY_MAX - pl - 18;
    memcpy(key + pl, path, head);
    snprintf(key + pl + head, 18, "#%016llx",
             (unsigned long long)rl_hash_bytes(RL_HASH_INIT, path, n));
}

const char *rl_identity_cgroup_problem(const struct rl_identity *id)
{
    if (id->has_key || id->cgroup == RL_CGROUP_FOUND)
        return "";
    if (id->cgroup == RL_CGROUP_NO_UNIFIED)
        return "key = cgroup: /proc/self/cgroup has no cgroup v2 line "
               "('0::'; a cgroup v1-only host): the uid is the key";
    return "key = cgroup: no cgroup v2 path in /proc/self/cgroup (unreadable, "
           "or not a path): the uid is the key";
}

const char *rl_identity_user(const struct rl_identity *id, char *buf,
                             unsigned len)
{
    if (len == 0)
        return "";
    if (id->has_key)
        snprintf(buf, len, "%s", id->key);
    else
        snprintf(buf, len, "%u", id->uid);
    return buf;
}
