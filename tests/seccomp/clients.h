/* clients.h — build the clients the preload cannot reach (a static C
 * client with `cc -static`, a Go HTTP client with the standard library
 * only, offline) into BUILD/tests/seccomp, once, for the seccomp tests and
 * `make bench`. Header-only: both include it. */
#ifndef RL_TESTS_SECCOMP_CLIENTS_H
#define RL_TESTS_SECCOMP_CLIENTS_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct sc_clients {
    char static_bin[512]; /* tests/seccomp/static_client.c, static */
    char go_bin[512];     /* tests/seccomp/goclient/main.go, CGO_ENABLED=0 */
    char rlshim[512];
};

static inline bool sc_newer(const char *a, const char *b)
{
    struct stat sa, sb;
    return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_mtime >= sb.st_mtime;
}

static inline bool sc_have_go(void)
{
    return system("command -v go >/dev/null 2>&1") == 0;
}

/* Fill `c` and build what is missing or stale. Returns NULL, or why the
 * clients cannot be had (a test skips with it). Several processes may
 * build at once: each writes a file of its own and renames it. */
static inline const char *sc_build_clients(const char *build, const char *src,
                                           struct sc_clients *c)
{
    char dir[300], cmd[4096], csrc[300], gsrc[300];
    int me = (int)getpid();
    snprintf(dir, sizeof dir, "%s/tests/seccomp", build);
    snprintf(csrc, sizeof csrc, "%s/tests/seccomp/static_client.c", src);
    snprintf(gsrc, sizeof gsrc, "%s/tests/seccomp/goclient/main.go", src);
    snprintf(c->static_bin, sizeof c->static_bin, "%s/static_client", dir);
    snprintf(c->go_bin, sizeof c->go_bin, "%s/goclient", dir);
    snprintf(c->rlshim, sizeof c->rlshim, "%s/rlshim", build);
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", dir);
    if (system(cmd) != 0)
        return "cannot make the clients' directory";
    if (!sc_newer(c->static_bin, csrc)) {
        snprintf(cmd, sizeof cmd,
                 "cc -static -O2 -Wall -o '%s.%d' '%s' && mv '%s.%d' '%s'",
                 c->static_bin, me, csrc, c->static_bin, me, c->static_bin);
        if (system(cmd) != 0)
            return "cannot build a static C client (libc6-dev's libc.a?)";
    }
    if (!sc_newer(c->go_bin, gsrc)) {
        if (!sc_have_go())
            return "no go compiler (Debian package golang-go)";
        /* Standard library only: no module, no network. */
        snprintf(cmd, sizeof cmd,
                 "cd '%s/tests/seccomp/goclient' && CGO_ENABLED=0 "
                 "GO111MODULE=off GOFLAGS= GOPROXY=off GOENV=off "
                 "GOCACHE='%s/gocache' "
                 "GOPATH='%s/gopath' go build -o '%s.%d' main.go && "
                 "mv '%s.%d' '%s'",
                 src, dir, dir, c->go_bin, me, c->go_bin, me, c->go_bin);
        if (system(cmd) != 0)
            return "go build of tests/seccomp/goclient failed";
    }
    return NULL;
}

/* Why this kernel cannot run them under --seccomp, or NULL. */
static inline const char *sc_kernel_lacks(void)
{
    char buf[256] = "";
    FILE *f = fopen("/proc/sys/kernel/seccomp/actions_avail", "r");
    if (f == NULL)
        return "no /proc/sys/kernel/seccomp/actions_avail (no seccomp)";
    if (fgets(buf, sizeof buf, f) == NULL)
        buf[0] = '\0';
    fclose(f);
    return strstr(buf, "user_notif") != NULL
               ? NULL
               : "the kernel has no seccomp user_notif";
}

#endif
