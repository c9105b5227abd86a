-- prelude.lua — the start of bucket.lua's and window.lua's scripts: the
-- build puts it before each (fleet_scripts.h has the KEYS and ARGV both
-- take). Comment lines are dropped at build time: the text is sent in
-- every EVAL, and the handshake's one buffer holds both scripts.
--
-- Numbers in Lua are doubles: every value here stays below 2^53 (µs since
-- 1970 are 1.8e15; count * period_us is at most 1e6 * 3.6e9). Time is
-- Redis's (TIME), never the hosts'.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local want = tonumber(ARGV[1])
local min = tonumber(ARGV[2])
local maxw = tonumber(ARGV[3])
local debt = tonumber(ARGV[4])
local lease = tonumber(ARGV[7])
local ret = tonumber(ARGV[8])
local capped = tonumber(ARGV[9])
local nb = tonumber(ARGV[10])
local jit = tonumber(ARGV[11])
local n = (#ARGV - 11) / 3
local hk = KEYS[n + 1]
local pk, pk2 = KEYS[n + 2], KEYS[n + 3]
-- This host is active: the hosts key's size is what `share` divides by.
redis.call('ZADD', hk, tonumber(t[1]), ARGV[5])
redis.call('ZREMRANGEBYSCORE', hk, '-inf', tonumber(t[1]) - 60)
redis.call('EXPIRE', hk, 60)
local hosts = redis.call('ZCARD', hk)
-- A request budget's pauses (SPEC §12), when the pause keys are given
-- (its destination's, and the untold destinations'): the call's turn is
-- no earlier than the later end (t0; off µs from now), and `why` says
-- whose it is (1 the backoff, 2 a Retry-After; 0 none).
local t0, why = now, 0
for _, k in ipairs({pk, pk2}) do
  local v = redis.call('HMGET', k, 'u', 'b')
  local pu = tonumber(v[1]) or 0
  if pu > t0 then t0 = pu why = tonumber(v[2]) or 2 end
end
-- The destination's pace (SPEC §14; pace.lua): the larger of the
-- latency's interval and a Crawl-delay in force (sp µs) spaces its turn
-- from the last one granted ('l', written at a grant while sp > 0); why
-- 3 the latency, 4 the Crawl-delay.
local sp = 0
if pk then
  local v = redis.call('HMGET', pk, 'a', 'c', 'ce', 'l')
  local a, c = tonumber(v[1]) or 0, tonumber(v[2]) or 0
  if (tonumber(v[3]) or 0) <= now then c = 0 end
  local sw = 3
  sp = a
  if c > sp then sp = c sw = 4 end
  local pt = (tonumber(v[4]) or 0) + sp
  if sp > 0 and pt > t0 then t0 = pt why = sw end
end
-- The calling host's own hold (nb µs from now: a pause or pace it knows
-- of and Redis may not yet, its jitter): the turn is counted no earlier,
-- so that the next host's turn is spaced from when this one goes. why 5:
-- no pause, no pace of Redis's.
if now + nb > t0 then t0 = now + nb why = 5 end
-- The calling host's jitter (jit µs; SPEC §14): a turn granted goes that
-- much later, within max_wait, and is counted then (bucket.lua,
-- window.lua), never earlier than the budget allows.
local function jittered(wait)
  if jit <= 0 then return wait end
  if wait + jit > maxw then return math.max(wait, maxw) end
  return wait + jit
end
local off = t0 - now
