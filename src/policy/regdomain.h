/* regdomain.h — a name's registrable domain, by the Public Suffix List
 * (`per = domain`, SPEC §3): `a.example.co.uk` -> `example.co.uk`.
 *
 * The list is libpsl's, which is loaded with dlopen only by a process
 * whose config keys a section by domain, so that librlshim.so adds no
 * DT_NEEDED to every program it is preloaded into. The context is
 * psl_latest(NULL): the newer of the distribution's compiled list
 * (/usr/share/publicsuffix, the publicsuffix package, updated on its own)
 * and libpsl's built-in copy; psl_builtin() when the file cannot be read.
 * Once loaded the context is only read: a look-up of an ASCII name takes
 * no lock and allocates nothing (what a signal handler may do). A process
 * that cannot load libpsl keys such sections by the name, as `per =
 * destination` does, and its caller says so once. */
#ifndef RL_POLICY_REGDOMAIN_H
#define RL_POLICY_REGDOMAIN_H

#include <stdbool.h>
#include <stddef.h>

struct psl_ctx_st; /* libpsl's psl_ctx_t */

/* libpsl as one process loaded it (a member of struct rl_dests). All
 * zero: not loaded. */
struct rl_regdomain {
    void *lib; /* dlopen's handle */
    const struct psl_ctx_st *ctx;
    struct psl_ctx_st *owned; /* ctx when psl_latest made it: psl_free'd */
    const char *(*registrable)(const struct psl_ctx_st *ctx,
                               const char *name);
    void (*free_ctx)(struct psl_ctx_st *ctx);
    char about[224]; /* what the list is, or why it could not be had */
};

/* The library's soname, as Debian's libpsl5 ships it. */
#define RL_REGDOMAIN_LIB "libpsl.so.5"

/* Load libpsl (`lib`: its file name, RL_REGDOMAIN_LIB but in tests) and
 * its list. Returns 0, or -ENOENT with r->about saying what failed. */
int rl_regdomain_load(struct rl_regdomain *r, const char *lib);

/* Is the list loaded? Was it tried (loaded or not)? */
bool rl_regdomain_ready(const struct rl_regdomain *r);
bool rl_regdomain_tried(const struct rl_regdomain *r);

/* What the list is, or why it could not be loaded (for `rlshim check`
 * and the line that says so). */
const char *rl_regdomain_source(const struct rl_regdomain *r);

/* The registrable domain of `name` (n bytes, any case, perhaps one
 * trailing dot) into `out` (RL_NAME_MAX + 1 bytes; may not overlap
 * name): lower case, no trailing dot. An address literal is its own
 * domain, and so is a name that is itself a public suffix or a single
 * label (`co.uk`, `localhost`); a name with bytes a DNS name does not
 * have, or any name when the list is not loaded, is copied as it is.
 * Returns the length written. */
size_t rl_regdomain_of(const struct rl_regdomain *r, const char *name,
                       size_t n, char *out);

/* Unload what rl_regdomain_load loaded (the CLI at its end, tests; the
 * shim never: another thread may be looking a name up). */
void rl_regdomain_close(struct rl_regdomain *r);

#endif
