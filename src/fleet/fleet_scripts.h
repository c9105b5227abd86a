/* fleet_scripts.h — the Lua scripts (src/fleet/lua/) that decide fleet
 * budgets inside Redis, atomically, on Redis's clock (TIME): never the
 * hosts' clocks.
 *
 * The bucket and the window take KEYS = one key per limit of the kind, then the
 * budget's hosts key, all with the same hash tag ({SECTION|USER}) so a Redis
 * Cluster runs them on one node; and ARGV = want, min, max_wait_us, debt, host,
 * call id, lease, ret, capped, not_before_us (the turn no earlier: the
 * calling host's own hold), jitter_us (a granted turn that much later,
 * within max_wait_us, and counted then), then per limit: count,
 * period_us, burst.
 * They reply {granted, wait_us, hosts, leased}: granted 0 is a denial and
 * wait_us then how long until `min` could be granted (-1: never). A grant
 * with wait_us > 0 is a reservation (on_deny = delay). `lease` asks for
 * that many units more, taken ahead for the host's pool (fleet_lease.h):
 * granted (`leased`, maybe fewer) only with a grant that needs no wait,
 * and only as far as every bucket keeps half its burst after it. `ret`
 * is a lease's unspent units given back, before anything is taken. The
 * window script leases nothing and ignores both. `debt` is what this
 * process admitted while Redis was away: charged first, in full (a
 * share's), or with `capped` (a fallback beyond a share: local, allow)
 * down to one burst below empty; a window holds at most two windows'
 * worth. Each call marks `host` active in the hosts key
 * (a sorted set by time, 60 s), whose size is what `share` divides by.
 *
 * A request kind's call also gives its budget's pause key last (SPEC
 * §12; written by rl_fleet_lua_pause): no unit is granted for a turn
 * before the pause ends, and the reply says {..., off_us, why}: how far
 * the pause moved the turn, and whose pause it was (1 the backoff, 2 a
 * Retry-After, 0 none). The same key holds the destination's pace
 * (SPEC §14; written by rl_fleet_lua_pace): a turn is no earlier than the
 * last one granted there plus the larger of the latency's interval and a
 * Crawl-delay in force (why 3 the latency, 4 the Crawl-delay), and a
 * grant while one is in force records its turn.
 *
 * Each script is its .lua file, linked in by the Makefile (ld -r -b
 * binary): not a C string, so no NUL ends it. Redis's SCRIPT LOAD answers
 * its SHA1 at each connection (the pipe keeps it for EVALSHA): no SHA is
 * computed or written down here.
 * tests/unit/test_fleet_lua.c runs each with redis-cli --eval. */
#ifndef RL_FLEET_SCRIPTS_H
#define RL_FLEET_SCRIPTS_H

/* A script's text: the bytes from text up to end. */
struct rl_fleet_lua {
    const char *text, *end;
};

/* Token bucket as GCRA (prelude.lua, bucket.lua). */
extern const struct rl_fleet_lua rl_fleet_lua_bucket;

/* Sliding window (prelude.lua, window.lua). */
extern const struct rl_fleet_lua rl_fleet_lua_window;

/* A request budget's pause (pause.lua): KEYS = its pause key; ARGV = the
 * wait (µs) and why (1 the backoff, 2 a Retry-After); replies 1 when the
 * pause moved. Sent with EVAL (a 429 is rare: no SHA to keep). */
extern const struct rl_fleet_lua rl_fleet_lua_pause;

/* A destination's pace (pace.lua): KEYS = its pause key; ARGV = the field
 * ('a' the latency's interval, 'c' a Crawl-delay), its value in µs (0:
 * none) and how long it holds, ms. Replies 1. Sent with EVAL: written
 * only when the pace moved. */
extern const struct rl_fleet_lua rl_fleet_lua_pace;

#endif
