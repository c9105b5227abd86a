/* hook_resolve.c — getaddrinfo and gethostbyname*: note which name each
 * returned address was resolved from (policy/names.h), so that a `to` of
 * names and per-destination budgets see the name the program asked for.
 *
 * The real call runs first and untouched; then every AF_INET/AF_INET6
 * address of its answer is noted under the name as the program spelled it
 * (canonical form: lower case, no trailing dot; never the resolver's
 * canonical name, which a CDN makes something else). A lookup of an
 * address literal is a resolution too (SPEC §1): its addresses are named
 * by their literal again, whatever name they were resolved from before
 * (python looks up every host, literals included, before it connects).
 * Nothing is noted while the shim itself is
 * at work (re-entry guard), and this file never fails a lookup: a name it
 * cannot keep is simply not kept. Noting does not depend on the set-up
 * having run: a program resolves before its first connect. */
#include <dlfcn.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>

#include "policy/names.h"
#include "shim/hooks.h"
#include "shim/self.h"
#include "shim/shim.h"

typedef int (*gai_fn)(const char *, const char *, const struct addrinfo *,
                      struct addrinfo **);
typedef struct hostent *(*ghbn_fn)(const char *);
typedef struct hostent *(*ghbn2_fn)(const char *, int);
typedef int (*ghbn_r_fn)(const char *, struct hostent *, char *, size_t,
                         struct hostent **, int *);
typedef int (*ghbn2_r_fn)(const char *, int, struct hostent *, char *, size_t,
                          struct hostent **, int *);

/* The next definition of `name` in the chain, never our own `self`.
 * Every thread that races here stores the same value. */
static void *next(void **slot, const char *name, void *self)
{
    void *f = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if (f != NULL)
        return f;
    int saved = errno;
    f = dlsym(RTLD_NEXT, name);
    errno = saved;
    if (f == self)
        f = NULL;
    if (f != NULL)
        __atomic_store_n(slot, f, __ATOMIC_RELEASE);
    return f;
}

static void *p_gai, *p_ghbn, *p_ghbn2, *p_ghbn_r, *p_ghbn2_r;

/* Note gethostbyname*'s answer under the name the program asked for. */
static void note_host(const char *node, const struct hostent *h)
{
    if (h == NULL || node == NULL || rl_shim_busy)
        return;
    struct rl_name_answer a = {.node = node, .h = h};
    rl_names_resolved(&rl_shim_proc()->names, &a);
}

RL_EXPORT int getaddrinfo(const char *node, const char *service,
                          const struct addrinfo *hints, struct addrinfo **res)
{
    gai_fn f = (gai_fn)next(&p_gai, "getaddrinfo", (void *)getaddrinfo);
    if (f == NULL)
        return EAI_SYSTEM;
    int r = f(node, service, hints, res);
    if (r != 0 || node == NULL || res == NULL || rl_shim_busy)
        return r;
    struct rl_name_answer a = {
        .node = node,
        .numeric = hints != NULL && (hints->ai_flags & AI_NUMERICHOST),
        .ai = *res,
    };
    int saved = errno;
    rl_names_resolved(&rl_shim_proc()->names, &a);
    errno = saved;
    return r;
}

RL_EXPORT struct hostent *gethostbyname(const char *name)
{
    ghbn_fn f = (ghbn_fn)next(&p_ghbn, "gethostbyname", (void *)gethostbyname);
    if (f == NULL) {
        h_errno = NO_RECOVERY;
        return NULL;
    }
    struct hostent *h = f(name);
    int saved = errno;
    note_host(name, h);
    errno = saved;
    return h;
}

RL_EXPORT struct hostent *gethostbyname2(const char *name, int af)
{
    ghbn2_fn f =
        (ghbn2_fn)next(&p_ghbn2, "gethostbyname2", (void *)gethostbyname2);
    if (f == NULL) {
        h_errno = NO_RECOVERY;
        return NULL;
    }
    struct hostent *h = f(name, af);
    int saved = errno;
    note_host(name, h);
    errno = saved;
    return h;
}

RL_EXPORT int gethostbyname_r(const char *name, struct hostent *ret, char *buf,
                              size_t buflen, struct hostent **result,
                              int *h_errnop)
{
    ghbn_r_fn f = (ghbn_r_fn)next(&p_ghbn_r, "gethostbyname_r",
                                  (void *)gethostbyname_r);
    if (f == NULL) {
        if (h_errnop != NULL)
            *h_errnop = NO_RECOVERY;
        return ENOSYS;
    }
    int r = f(name, ret, buf, buflen, result, h_errnop);
    if (r == 0 && result != NULL) {
        int saved = errno;
        note_host(name, *result);
        errno = saved;
    }
    return r;
}

RL_EXPORT int gethostbyname2_r(const char *name, int af, struct hostent *ret,
                               char *buf, size_t buflen,
                               struct hostent **result, int *h_errnop)
{
    ghbn2_r_fn f = (ghbn2_r_fn)next(&p_ghbn2_r, "gethostbyname2_r",
                                    (void *)gethostbyname2_r);
    if (f == NULL) {
        if (h_errnop != NULL)
            *h_errnop = NO_RECOVERY;
        return ENOSYS;
    }
    int r = f(name, af, ret, buf, buflen, result, h_errnop);
    if (r == 0 && result != NULL) {
        int saved = errno;
        note_host(name, *result);
        errno = saved;
    }
    return r;
}
