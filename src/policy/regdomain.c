/* regdomain.c — registrable domains through a lazily loaded libpsl (see
 * regdomain.h). libpsl.h is included for its prototypes only: every
 * function is reached through dlsym, and the pointers are declared with
 * the header's own types so that a changed prototype fails the build. */
#include "policy/regdomain.h"

#include <dlfcn.h>
#include <errno.h>
#include <libpsl.h>
#include <stdio.h>
#include <string.h>

#include "policy/names.h"

static int failed(struct rl_regdomain *r, const char *what)
{
    const char *e = dlerror();
    snprintf(r->about, sizeof r->about, "%s%s%s", what, e != NULL ? ": " : "",
             e != NULL ? e : "");
    if (r->lib != NULL)
        dlclose(r->lib);
    r->lib = NULL;
    r->ctx = NULL;
    r->owned = NULL;
    r->registrable = NULL;
    return -ENOENT;
}

int rl_regdomain_load(struct rl_regdomain *r, const char *lib)
{
    memset(r, 0, sizeof *r);
    /* RTLD_LOCAL: the program's own libpsl (curl's), if it has one, keeps
     * its symbols; both copies are the same soname, so this one is it. */
    r->lib = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (r->lib == NULL)
        return failed(r, "cannot load libpsl");
    __typeof__(&psl_latest) latest =
        (__typeof__(&psl_latest))dlsym(r->lib, "psl_latest");
    __typeof__(&psl_builtin) builtin =
        (__typeof__(&psl_builtin))dlsym(r->lib, "psl_builtin");
    __typeof__(&psl_dist_filename) dist =
        (__typeof__(&psl_dist_filename))dlsym(r->lib, "psl_dist_filename");
    r->registrable = (__typeof__(&psl_registrable_domain))dlsym(
        r->lib, "psl_registrable_domain");
    r->free_ctx = (__typeof__(&psl_free))dlsym(r->lib, "psl_free");
    if (r->registrable == NULL || r->free_ctx == NULL ||
        (latest == NULL && builtin == NULL))
        return failed(r, "libpsl lacks a function");
    /* The distribution's list when it is the newer (the publicsuffix
     * package is updated apart from libpsl), else the built-in one. */
    if (latest != NULL)
        r->owned = latest(NULL);
    if (r->owned != NULL) {
        r->ctx = r->owned;
        const char *f = dist != NULL ? dist() : NULL;
        snprintf(r->about, sizeof r->about, "libpsl's psl_latest: the newer "
                 "of %s and its built-in list",
                 f != NULL && f[0] != '\0' ? f : "the distribution's list");
    } else if (builtin != NULL && builtin() != NULL) {
        r->ctx = builtin();
        snprintf(r->about, sizeof r->about, "libpsl's built-in list");
    } else {
        return failed(r, "libpsl has no list");
    }
    return 0;
}

bool rl_regdomain_ready(const struct rl_regdomain *r)
{
    return r->ctx != NULL;
}

bool rl_regdomain_tried(const struct rl_regdomain *r)
{
    return r->about[0] != '\0';
}

const char *rl_regdomain_source(const struct rl_regdomain *r)
{
    return r->about;
}

size_t rl_regdomain_of(const struct rl_regdomain *r, const char *name,
                       size_t n, char *out)
{
    char canon[RL_NAME_MAX + 1];
    size_t cn = 0;
    if (n > RL_NAME_MAX)
        n = RL_NAME_MAX;
    if (r->ctx != NULL && !rl_name_is_literal(name, n))
        cn = rl_name_canon(name, n, canon);
    if (cn == 0) {
        memcpy(out, name, n);
        out[n] = '\0';
        return n;
    }
    const char *d = r->registrable(r->ctx, canon);
    if (d == NULL)
        d = canon; /* a public suffix itself, or a single label */
    size_t dn = cn - (size_t)(d - canon);
    memcpy(out, d, dn + 1);
    return dn;
}

void rl_regdomain_close(struct rl_regdomain *r)
{
    if (r->owned != NULL && r->free_ctx != NULL)
        r->free_ctx(r->owned);
    if (r->lib != NULL)
        dlclose(r->lib);
    memset(r, 0, sizeof *r);
}
