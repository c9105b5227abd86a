/* proc_new.h — a struct rl_proc of a test's own, on the heap. */
#ifndef RL_TEST_PROC_NEW_H
#define RL_TEST_PROC_NEW_H

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "policy/proc.h"

/* All zero, as the shim's is before start-up; megabytes, so never on the
 * stack; aligned as the type asks (members of it are cache-line aligned:
 * calloc's 16 bytes are not enough, and UBSan says so). Free with free(). */
static inline struct rl_proc *proc_new(void)
{
    struct rl_proc *p = aligned_alloc(_Alignof(struct rl_proc), sizeof *p);
    cr_assert_not_null(p);
    memset(p, 0, sizeof *p);
    return p;
}

#endif
