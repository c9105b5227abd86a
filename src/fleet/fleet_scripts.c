/* fleet_scripts.c — the scripts' text (see fleet_scripts.h). Numbers in
 * Lua are doubles: every value here stays below 2^53 (µs since 1970 are
 * 1.8e15; count * period_us is at most 1e6 * 3.6e9). */
#include "fleet/fleet_scripts.h"

#define PRELUDE                                                                \
    "local t = redis.call('TIME')\n"                                           \
    "local now = tonumber(t[1]) * 1000000 + tonumber(t[2])\n"                  \
    "local want = tonumber(ARGV[1])\n"                                         \
    "local min = tonumber(ARGV[2])\n"                                          \
    "local maxw = tonumber(ARGV[3])\n"                                         \
    "local debt = tonumber(ARGV[4])\n"                                         \
    "local lease = tonumber(ARGV[7])\n"                                        \
    "local ret = tonumber(ARGV[8])\n"                                          \
    "local capped = tonumber(ARGV[9])\n"                                       \
    "local n = (#ARGV - 9) / 3\n"                                              \
    "local hk = KEYS[n + 1]\n"                                                 \
    "local pk, pk2 = KEYS[n + 2], KEYS[n + 3]\n"                                \
    "redis.call('ZADD', hk, tonumber(t[1]), ARGV[5])\n"                        \
    "redis.call('ZREMRANGEBYSCORE', hk, '-inf', tonumber(t[1]) - 60)\n"        \
    "redis.call('EXPIRE', hk, 60)\n"                                           \
    "local hosts = redis.call('ZCARD', hk)\n"                                  \
    PAUSE

/* A request budget's pauses (SPEC §12), when the pause keys are given
 * (its destination's, and the untold destinations'): the call's turn is
 * no earlier than the later end (t0; off µs from now), and `why` says
 * whose it is (1 the backoff, 2 a Retry-After; 0 none). */
#define PAUSE                                                                  \
    "local t0, why = now, 0\n"                                                 \
    "for _, k in ipairs({pk, pk2}) do\n"                                       \
    "  local v = redis.call('HMGET', k, 'u', 'b')\n"                           \
    "  local pu = tonumber(v[1]) or 0\n"                                       \
    "  if pu > t0 then t0 = pu why = tonumber(v[2]) or 2 end\n"                \
    "end\n"                                                                    \
    "local off = t0 - now\n"

const char rl_fleet_lua_bucket[] =
    PRELUDE
    "local L = {}\n"
    "local avail = want\n"
    "for i = 1, n do\n"
    "  local c = tonumber(ARGV[7 + 3 * i])\n"
    "  local p = tonumber(ARGV[8 + 3 * i])\n"
    "  local b = tonumber(ARGV[9 + 3 * i])\n"
    "  local v = redis.call('HMGET', KEYS[i], 'u', 'f')\n"
    "  local u = tonumber(v[1]) or 0\n"
    "  local f = tonumber(v[2]) or 0\n"
    /* used: units of 1/count µs the bucket is short of full, at the
     * turn t0 (now, unless a pause ends later). */
    "  local used = 0\n"
    "  if u > t0 or (u == t0 and f > 0) then used = (u - t0) * c + f end\n"
    /* A lease's unspent units come back before anything is charged. */
    "  if ret > 0 then\n"
    "    used = used - ret * p\n"
    "    if used < 0 then used = 0 end\n"
    "  end\n"
    /* What a host spent while Redis was away, charged on its return: in
     * full (a host's share: what the shares admitted together is what
     * the bucket refilled meanwhile), or (capped: a fallback that
     * admitted more than a share, `local` or `allow`) down to one burst
     * below empty, as far as the budget can hold it — hosts come back
     * one by one, and a debt capped at empty would leave the bucket's
     * regained burst to the first one back (a burst on return). */
    "  if debt > 0 then\n"
    "    used = used + debt * p\n"
    "    if capped > 0 and used > 2 * b * p then used = 2 * b * p end\n"
    "  end\n"
    "  local a = math.floor((b * p - used) / p)\n"
    "  if a < 0 then a = 0 end\n"
    "  if a < avail then avail = a end\n"
    "  L[i] = {c, p, b, used}\n"
    "end\n"
    "local grant, wait = 0, 0\n"
    "if avail >= min and avail > 0 and off <= maxw then\n"
    "  grant = avail\n"
    "  wait = off\n"
    "else\n"
    "  local w = want\n"
    "  local need = 0\n"
    "  for i = 1, n do\n"
    "    local c, p, b, used = L[i][1], L[i][2], L[i][3], L[i][4]\n"
    "    if w > b then w = b end\n"
    "    if min > b then need = -1 break end\n"
    "  end\n"
    "  if need == 0 then\n"
    "    for i = 1, n do\n"
    "      local c, p, b, used = L[i][1], L[i][2], L[i][3], L[i][4]\n"
    "      local x = used + w * p - b * p\n"
    "      local ws = 0\n"
    "      if x > 0 then ws = math.floor((x + c - 1) / c) end\n"
    "      if ws > need then need = ws end\n"
    "    end\n"
    "    if maxw > 0 and need + off <= maxw then grant = w end\n"
    "  end\n"
    "  wait = need\n"
    "  if need >= 0 then wait = need + off end\n"
    "end\n"
    /* A lease only from a bucket that keeps half its burst after it. */
    "local leased = 0\n"
    "if lease > 0 and grant > 0 and wait == 0 then\n"
    "  leased = lease\n"
    "  for i = 1, n do\n"
    "    local c, p, b, used = L[i][1], L[i][2], L[i][3], L[i][4]\n"
    "    local free = math.floor((b * p - used) / p) - grant - math.ceil(b / 2)\n"
    "    if free < leased then leased = free end\n"
    "  end\n"
    "  if leased < 0 then leased = 0 end\n"
    "end\n"
    "for i = 1, n do\n"
    "  local c, p, b, used = L[i][1], L[i][2], L[i][3], L[i][4]\n"
    "  used = used + (grant + leased) * p\n"
    "  if used > 0 then\n"
    "    local f = math.fmod(used, c)\n"
    "    local us = (used - f) / c\n"
    "    redis.call('HSET', KEYS[i], 'u', t0 + us, 'f', f)\n"
    "    redis.call('PEXPIRE', KEYS[i], math.floor((off + us) / 1000) + 2)\n"
    "  else\n"
    "    redis.call('DEL', KEYS[i])\n"
    "  end\n"
    "end\n"
    "return {grant, wait, hosts, leased, off, why}\n";

const char rl_fleet_lua_window[] =
    PRELUDE
    "local id = ARGV[6]\n"
    "local avail = want\n"
    "local L = {}\n"
    "for i = 1, n do\n"
    "  local c = tonumber(ARGV[7 + 3 * i])\n"
    "  local p = tonumber(ARGV[8 + 3 * i])\n"
    /* A stamp s counts while s > now - p: the window is (now - p, now];
     * at the turn t0, (t0 - p, t0] and the stamps reserved after it
     * (integer µs: > t0 - p is >= t0 - p + 1). */
    "  redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', now - p)\n"
    "  local cnt = redis.call('ZCOUNT', KEYS[i], t0 - p + 1, '+inf')\n"
    "  if debt > 0 then\n"
    "    local d = debt\n"
    "    if d > 2 * c - cnt then d = 2 * c - cnt end\n"
    "    for j = 1, d do\n"
    "      redis.call('ZADD', KEYS[i], now, id .. ':d' .. j)\n"
    "    end\n"
    "    if d > 0 then cnt = cnt + d end\n"
    "  end\n"
    "  local a = c - cnt\n"
    "  if a < avail then avail = a end\n"
    "  L[i] = {c, p, cnt}\n"
    "end\n"
    "local grant, wait, at = 0, 0, t0\n"
    "if avail >= min and avail > 0 and off <= maxw then\n"
    "  grant = avail\n"
    "  wait = off\n"
    "else\n"
    "  local need = off\n"
    "  for i = 1, n do\n"
    "    local c, p, cnt = L[i][1], L[i][2], L[i][3]\n"
    "    if min > c then need = -1 break end\n"
    "    local k = cnt + min - c\n"
    "    if k > 0 then\n"
    "      local s = redis.call('ZRANGEBYSCORE', KEYS[i], t0 - p + 1, '+inf',\n"
    "                           'WITHSCORES', 'LIMIT', k - 1, 1)\n"
    "      local ws = tonumber(s[2]) + p - now\n"
    "      if ws > need then need = ws end\n"
    "    end\n"
    "  end\n"
    "  if need >= 0 and maxw > 0 and need <= maxw then\n"
    "    grant = min\n"
    "    at = now + need\n"
    "  end\n"
    "  wait = need\n"
    "end\n"
    "for i = 1, n do\n"
    "  for j = 1, grant do\n"
    "    redis.call('ZADD', KEYS[i], at, id .. ':' .. j)\n"
    "  end\n"
    "  redis.call('PEXPIRE', KEYS[i], math.floor((at - now + L[i][2]) / 1000) + 2)\n"
    "end\n"
    "return {grant, wait, hosts, 0, off, why}\n";

const char rl_fleet_lua_pause[] =
    "local t = redis.call('TIME')\n"
    "local now = tonumber(t[1]) * 1000000 + tonumber(t[2])\n"
    "local u = now + tonumber(ARGV[1])\n"
    "local v = tonumber(redis.call('HGET', KEYS[1], 'u')) or 0\n"
    "if u > v then\n"
    "  redis.call('HSET', KEYS[1], 'u', u, 'b', ARGV[2])\n"
    "  redis.call('PEXPIRE', KEYS[1], math.floor(tonumber(ARGV[1]) / 1000) + 2)\n"
    "  return 1\n"
    "end\n"
    "return 0\n";
