-- pause.lua — a request budget's pause (SPEC §12; fleet_scripts.h):
-- KEYS = its pause key; ARGV = the wait (µs) and why (1 the backoff, 2 a
-- Retry-After). The pause ends at Redis's now + wait, unless it already
-- ends later; replies 1 when it moved. The key also keeps the pace
-- (pace.lua): its life is only ever made longer here.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local u = now + tonumber(ARGV[1])
local v = tonumber(redis.call('HGET', KEYS[1], 'u')) or 0
if u > v then
  redis.call('HSET', KEYS[1], 'u', u, 'b', ARGV[2])
  local ttl = math.floor(tonumber(ARGV[1]) / 1000) + 2
  if redis.call('PTTL', KEYS[1]) < ttl then
    redis.call('PEXPIRE', KEYS[1], ttl)
  end
  return 1
end
return 0
