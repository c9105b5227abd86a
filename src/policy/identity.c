/* identity.c — who the calling process is (see identity.h). */
#include "policy/identity.h"

#include <errno.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "policy/config.h"

static void copy(char *dst, const char *src)
{
    size_t n = strlen(src);
    if (n >= RL_IDENTITY_MAX)
        n = RL_IDENTITY_MAX - 1; /* same cut as [user:NAME] allows */
    memcpy(dst, src, n);
    dst[n] = '\0';
}

/* The program's name: the file the kernel executed (argv[0] can say
 * anything), else what glibc took from argv[0]. */
static void program_name(char *out)
{
    char path[4096];
    ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
    const char *base;

    if (n > 0) {
        path[n] = '\0';
        /* An executable replaced since exec reads "NAME (deleted)". */
        static const char deleted[] = " (deleted)";
        size_t dl = sizeof deleted - 1;
        if ((size_t)n > dl && strcmp(path + n - dl, deleted) == 0)
            path[n - dl] = '\0';
        base = strrchr(path, '/');
        base = base != NULL ? base + 1 : path;
        if (*base != '\0') {
            copy(out, base);
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
    const char *key = secure_getenv("RLSHIM_KEY");

    memset(id, 0, sizeof *id);
    if (key != NULL && *key != '\0') {
        copy(id->key, key);
        id->has_key = true;
    } else if (key_mode == RL_KEY_EXE) {
        program_name(id->key);
        id->has_key = id->key[0] != '\0';
    }
    id->uid = (uint32_t)getuid();
    id->has_login = login_name((uid_t)id->uid, id->login);
    return 0;
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
