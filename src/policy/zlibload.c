/* zlibload.c — zlib through a lazily loaded libz.so.1 (see zlibload.h).
 * <zlib.h> is included for its types and prototypes only: every function
 * is reached through dlsym, into pointers typed by the header. */
#include "policy/zlibload.h"

#include <dlfcn.h>
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "util/atomics.h"
#include "util/log.h"

static int failed(struct rl_zlibload *z, const char *what)
{
    const char *e = dlerror();
    snprintf(z->about, sizeof z->about, "%s%s%s", what, e != NULL ? ": " : "",
             e != NULL ? e : "");
    if (z->lib != NULL)
        dlclose(z->lib);
    z->lib = NULL;
    memset(&z->fns, 0, sizeof z->fns);
    return -ENOENT;
}

int rl_zlibload_load(struct rl_zlibload *z, const char *lib)
{
    memset(z, 0, sizeof *z);
    /* RTLD_LOCAL: the program's own zlib, if it has one, keeps its
     * symbols; both copies are the same soname, so this one is it. */
    z->lib = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (z->lib == NULL)
        return failed(z, "cannot load zlib");
    z->fns.init2 = (__typeof__(&inflateInit2_))dlsym(z->lib, "inflateInit2_");
    z->fns.inflate = (__typeof__(&inflate))dlsym(z->lib, "inflate");
    if (z->fns.init2 == NULL || z->fns.inflate == NULL)
        return failed(z, "zlib lacks a function");
    return 0;
}

/* The process's load: UNTRIED until a thread claims it (LOADING, with
 * that thread's process and thread ids), READY or FAILED once it is
 * done. */
#define UNTRIED 0u
#define LOADING (1ull << 62)
#define READY (2ull << 62)
#define FAILED (3ull << 62)
#define STAGE(w) ((w) & (3ull << 62))

static struct rl_zlibload process_zlib;
static rl_atomic_u64 process_state;

/* A claim by this thread: pid_max is at most 2^22, a tid one of them. */
static uint64_t claim(void)
{
    return LOADING | (uint64_t)(uint32_t)getpid() << 31 |
           (uint32_t)gettid();
}

const struct rl_robots_zlib *rl_zlibload_process(void)
{
    uint64_t me = claim();
    uint64_t w = UNTRIED;
    /* acq_rel: the winner's claim; a loser's read of READY acquires the
     * release below, and with it process_zlib. */
    if (rl_cas_strong_acq_rel_u64(&process_state, &w, me)) {
        bool ok = rl_zlibload_load(&process_zlib, RL_ZLIBLOAD_LIB) == 0;
        if (!ok)
            rl_log_stderr("%s: a gzip or deflate robots.txt is not read, "
                          "and changes no Crawl-delay",
                          process_zlib.about);
        rl_store_release_u64(&process_state, ok ? READY : FAILED);
        return ok ? &process_zlib.fns : NULL;
    }
    /* Another thread is loading it: wait (a dlopen is short), unless the
     * loader is this thread, interrupted by a signal handler, or a thread
     * of the parent this process was forked from: neither ever ends. */
    while (STAGE(w) == LOADING) {
        if (w == me || (w >> 31 & 0x7fffffffu) != (uint32_t)getpid())
            return NULL;
        sched_yield();
        w = rl_load_acquire_u64(&process_state); /* pairs: the release above */
    }
    return w == READY ? &process_zlib.fns : NULL;
}
