-- bucket.lua — a token bucket as GCRA, after prelude.lua (the build
-- joins them; fleet_scripts.h has the KEYS, ARGV and reply). Time is
-- integer microseconds; a limit's state is its theoretical arrival time
-- as (u µs, f in 1/count µs), so that any count/period is exact: one unit
-- costs `period_us` in units of 1/count µs. The key expires when the
-- bucket would be full again.
local L = {}
local avail = want
for i = 1, n do
  local c = tonumber(ARGV[9 + 3 * i])
  local p = tonumber(ARGV[10 + 3 * i])
  local b = tonumber(ARGV[11 + 3 * i])
  local v = redis.call('HMGET', KEYS[i], 'u', 'f')
  local u = tonumber(v[1]) or 0
  local f = tonumber(v[2]) or 0
  -- used: units of 1/count µs the bucket is short of full, at the turn
  -- t0 (now, unless a pause ends later).
  local used = 0
  if u > t0 or (u == t0 and f > 0) then used = (u - t0) * c + f end
  -- A lease's unspent units come back before anything is charged.
  if ret > 0 then
    used = used - ret * p
    if used < 0 then used = 0 end
  end
  -- What a host spent while Redis was away, charged on its return: in
  -- full (a host's share: what the shares admitted together is what the
  -- bucket refilled meanwhile), or (capped: a fallback that admitted more
  -- than a share, `local` or `allow`) down to one burst below empty, as
  -- far as the budget can hold it — hosts come back one by one, and a
  -- debt capped at empty would leave the bucket's regained burst to the
  -- first one back (a burst on return).
  if debt > 0 then
    used = used + debt * p
    if capped > 0 and used > 2 * b * p then used = 2 * b * p end
  end
  local a = math.floor((b * p - used) / p)
  if a < 0 then a = 0 end
  if a < avail then avail = a end
  L[i] = {c, p, b, used}
end
local grant, wait = 0, 0
if avail >= min and avail > 0 and off <= maxw then
  grant = avail
  wait = off
else
  local w = want
  local need = 0
  for i = 1, n do
    local c, p, b, used = L[i][1], L[i][2], L[i][3], L[i][4]
    if w > b then w = b end
    if min > b then need = -1 break end
  end
  if need == 0 then
    for i = 1, n do
      local c, p, b, used = L[i][1], L[i][2], L[i][3], L[i][4]
      local x = used + w * p - b * p
      local ws = 0
      if x > 0 then ws = math.floor((x + c - 1) / c) end
      if ws > need then need = ws end
    end
    if maxw > 0 and need + off <= maxw then grant = w end
  end
  wait = need
  if need >= 0 then wait = need + off end
end
-- A lease only from a bucket that keeps half its burst after it.
local leased = 0
if lease > 0 and grant > 0 and wait == 0 then
  leased = lease
  for i = 1, n do
    local c, p, b, used = L[i][1], L[i][2], L[i][3], L[i][4]
    local free = math.floor((b * p - used) / p) - grant - math.ceil(b / 2)
    if free < leased then leased = free end
  end
  if leased < 0 then leased = 0 end
end
if grant > 0 then wait = jittered(wait) end
for i = 1, n do
  local c, p, b, used = L[i][1], L[i][2], L[i][3], L[i][4]
  -- A jittered turn is the bucket's from when it goes.
  if grant > 0 and jit > 0 and used < (wait - off) * c then
    used = (wait - off) * c
  end
  used = used + (grant + leased) * p
  if used > 0 then
    local f = math.fmod(used, c)
    local us = (used - f) / c
    redis.call('HSET', KEYS[i], 'u', t0 + us, 'f', f)
    redis.call('PEXPIRE', KEYS[i], math.floor((off + us) / 1000) + 2)
  else
    redis.call('DEL', KEYS[i])
  end
end
-- A paced destination's turn, which spaces the next (prelude.lua).
if grant > 0 and sp > 0 then redis.call('HSET', pk, 'l', now + wait) end
return {grant, wait, hosts, leased, off, why}
