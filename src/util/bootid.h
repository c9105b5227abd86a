/* bootid.h — which boot of the host this is
 * (/proc/sys/kernel/random/boot_id), read through rl_sys (never a hooked
 * libc name). CLOCK_MONOTONIC readings mean nothing across boots, so the
 * state segment records the boot it was made in; the fleet tells hosts
 * apart by it. */
#ifndef RL_UTIL_BOOTID_H
#define RL_UTIL_BOOTID_H

#include <stddef.h>
#include <stdint.h>

/* The file's text as read (a NUL-terminated prefix of at most len - 1
 * bytes, its newline included); "" when it cannot be read. Returns the
 * length. Reads the file on every call. */
size_t rl_bootid_text(char *buf, size_t len);

/* The boot id's 32 hex digits as two words; both 0 when it cannot be read
 * or is not a boot id. Read once per process (thread-safe: racing first
 * callers compute the same words). */
void rl_bootid(uint64_t out[2]);

#endif
