-- pace.lua — a destination's pace (SPEC §14; fleet_scripts.h), in its
-- pause key beside the pause: KEYS = that key; ARGV = the field ('a' the
-- latency's interval, 'c' a Crawl-delay), its value (µs; 0: none) and how
-- long it holds (ms). A latency interval falls by halves of the one held;
-- a Crawl-delay replaces it. A Crawl-delay's end is kept ('ce', Redis's clock):
-- the key lives as long as its longest field, never shorter.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local ttl = tonumber(ARGV[3])
local value = tonumber(ARGV[2])
if ARGV[1] == 'a' then
  -- Hosts learn apart: one that saw only fast answers must not undo at
  -- once what another learned of a slow server. Up at once; down by
  -- halves of what Redis holds (a host's own fall is by halves too, so
  -- the fleet's falls no faster than one host's, and may fall slower).
  local held = tonumber(redis.call('HGET', KEYS[1], 'a') or '0')
  if value < held then
    value = math.max(value, math.floor((held + value) / 2))
  end
end
redis.call('HSET', KEYS[1], ARGV[1], value)
if ARGV[1] == 'c' then
  redis.call('HSET', KEYS[1], 'ce', now + ttl * 1000)
end
if redis.call('PTTL', KEYS[1]) < ttl then
  redis.call('PEXPIRE', KEYS[1], ttl)
end
return 1
