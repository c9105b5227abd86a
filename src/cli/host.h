/* host.h — `rlshim check --host`: is this host preloading the shim for
 * everyone (SPEC §13), and what does that mean for its users? */
#ifndef RL_CLI_HOST_H
#define RL_CLI_HOST_H

struct rl_config;

/* Print what /etc/ld.so.preload names, whether that library is there and
 * loads, and whom `cfg` (NULL: no config at `path`) throttles. 0 when the
 * host is consistent (not preloading, or preloading a library that
 * loads), 1 when the preload names a library that is missing or broken. */
int rl_cli_host(const struct rl_config *cfg, const char *path);

#endif
