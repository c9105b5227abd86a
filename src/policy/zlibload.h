/* zlibload.h — zlib's inflate for a gzip or deflate robots.txt body (SPEC
 * §14), from a libz.so.1 loaded with dlopen the first time one comes, as
 * libpsl is (regdomain.h): librlshim.so neither embeds zlib nor adds a
 * DT_NEEDED to every program it is preloaded into, and a program that
 * never reads a compressed robots.txt never loads it.
 *
 * A process that cannot load it says so once on stderr; each compressed
 * robots.txt is then unreadable, like one in a coding not read: it
 * changes no Crawl-delay (robotsread.h). */
#ifndef RL_POLICY_ZLIBLOAD_H
#define RL_POLICY_ZLIBLOAD_H

#include "http/robots_body.h"

/* The library's soname, as Debian's zlib1g ships it. */
#define RL_ZLIBLOAD_LIB "libz.so.1"

/* zlib as one loader loaded it. All zero: not loaded. */
struct rl_zlibload {
    void *lib; /* dlopen's handle */
    struct rl_robots_zlib fns;
    char about[224]; /* why it could not be loaded */
};

/* Load zlib from `lib` (RL_ZLIBLOAD_LIB but in tests) and resolve its
 * functions. Returns 0, or -ENOENT with z->about saying what failed. Not
 * thread-safe: rl_zlibload_process is the shim's way in. */
int rl_zlibload_load(struct rl_zlibload *z, const char *lib);

/* The process's zlib, loaded by the first call in any thread (the others
 * wait for it), or NULL when it could not be: that first failure writes
 * one stderr line. Never unloaded: a read may be going in another thread.
 * A call that interrupts the load in the loading thread (a signal
 * handler's) gets NULL rather than wait for itself. */
const struct rl_robots_zlib *rl_zlibload_process(void);

#endif
