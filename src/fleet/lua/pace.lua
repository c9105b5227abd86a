-- pace.lua — a destination's pace (SPEC §14; fleet_scripts.h), in its
-- pause key beside the pause: KEYS = that key; ARGV = the field ('a' the
-- latency's interval, 'c' a Crawl-delay), its value (µs; 0: none) and how
-- long it holds (ms). A Crawl-delay's end is kept ('ce', Redis's clock):
-- the key lives as long as its longest field, never shorter.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local ttl = tonumber(ARGV[3])
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
if ARGV[1] == 'c' then
  redis.call('HSET', KEYS[1], 'ce', now + ttl * 1000)
end
if redis.call('PTTL', KEYS[1]) < ttl then
  redis.call('PEXPIRE', KEYS[1], ttl)
end
return 1
