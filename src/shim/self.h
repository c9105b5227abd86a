/* self.h — the shim's one owner of state: struct rl_shim.
 *
 * It holds the process's struct rl_proc (policy/proc.h: config, gate,
 * budgets, tables of the policy) and the shim's own tables beside it.
 * shim/init.c holds the only instance and the only global pointer to it,
 * rl_shim_self, fixed at link time: a hook reaches any member through one
 * load of that pointer. */
#ifndef RL_SHIM_SELF_H
#define RL_SHIM_SELF_H

#include "policy/proc.h"

struct rl_shim {
    struct rl_proc proc;
};

extern struct rl_shim *const rl_shim_self;

/* The process's state, for the calls into policy/. */
static inline struct rl_proc *rl_shim_proc(void)
{
    return &rl_shim_self->proc;
}

#endif
