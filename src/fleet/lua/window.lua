-- window.lua — a sliding window, after prelude.lua (the build joins
-- them; fleet_scripts.h has the KEYS, ARGV and reply): a sorted set of
-- stamps (µs) per limit, members unique per call; at most count in any
-- window of period_us. Leases nothing: ARGV's lease and ret are ignored.
local id = ARGV[6]
local avail = want
local L = {}
for i = 1, n do
  local c = tonumber(ARGV[9 + 3 * i])
  local p = tonumber(ARGV[10 + 3 * i])
  -- A stamp s counts while s > now - p: the window is (now - p, now]; at
  -- the turn t0, (t0 - p, t0] and the stamps reserved after it (integer
  -- µs: > t0 - p is >= t0 - p + 1).
  redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', now - p)
  local cnt = redis.call('ZCOUNT', KEYS[i], t0 - p + 1, '+inf')
  -- What this host admitted while Redis was away: a window holds at most
  -- two windows' worth.
  if debt > 0 then
    local d = debt
    if d > 2 * c - cnt then d = 2 * c - cnt end
    for j = 1, d do
      redis.call('ZADD', KEYS[i], now, id .. ':d' .. j)
    end
    if d > 0 then cnt = cnt + d end
  end
  local a = c - cnt
  if a < avail then avail = a end
  L[i] = {c, p, cnt}
end
local grant, wait, at = 0, 0, t0
if avail >= min and avail > 0 and off <= maxw then
  grant = avail
  wait = off
else
  local need = off
  for i = 1, n do
    local c, p, cnt = L[i][1], L[i][2], L[i][3]
    if min > c then need = -1 break end
    local k = cnt + min - c
    if k > 0 then
      local s = redis.call('ZRANGEBYSCORE', KEYS[i], t0 - p + 1, '+inf',
                           'WITHSCORES', 'LIMIT', k - 1, 1)
      local ws = tonumber(s[2]) + p - now
      if ws > need then need = ws end
    end
  end
  if need >= 0 and maxw > 0 and need <= maxw then
    grant = min
    at = now + need
  end
  wait = need
end
if grant > 0 and jit > 0 then
  wait = jittered(wait)
  at = now + wait
end
for i = 1, n do
  for j = 1, grant do
    redis.call('ZADD', KEYS[i], at, id .. ':' .. j)
  end
  redis.call('PEXPIRE', KEYS[i], math.floor((at - now + L[i][2]) / 1000) + 2)
end
-- A paced destination's turn, which spaces the next (prelude.lua).
if grant > 0 and sp > 0 then redis.call('HSET', pk, 'l', now + wait) end
return {grant, wait, hosts, 0, off, why}
